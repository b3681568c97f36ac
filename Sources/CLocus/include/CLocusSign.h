// Signatures of the fleet's messages (docs/remote.md): ECDSA on P-256 with SHA-256, keys in PEM,
// through Debian's mbedTLS 2.28 (which has no Ed25519). Thin functions without policy: the
// fleet signs with them, and either side can verify.
#ifndef CLOCUS_SIGN_H
#define CLOCUS_SIGN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Room for a PEM key of either kind, and for a DER ECDSA P-256 signature (at most 72 bytes).
enum { LOCUS_SIGN_PEM_BYTES = 1024, LOCUS_SIGN_SIGNATURE_BYTES = 80 };

/// A new P-256 key pair: the private key as SEC1 PEM (`BEGIN EC PRIVATE KEY`), the public one as
/// `BEGIN PUBLIC KEY`, each NUL-terminated. 0 on success, else -1 with a sentence in `message`.
int locus_sign_generate(char *private_pem, size_t private_size, char *public_pem, size_t public_size,
                        char *message, size_t message_size);

/// The public key (PEM) of a private P-256 key (PEM, SEC1 or PKCS#8, `private_length` bytes
/// without a NUL). 0 on success, else -1 with a sentence in `message`.
int locus_sign_public_key(const char *private_pem, size_t private_length, char *public_pem, size_t public_size,
                          char *message, size_t message_size);

/// The DER ECDSA signature of SHA-256(`data`) with a private P-256 key (PEM, `private_length`
/// bytes without a NUL), checked against the key before it is returned. Its length, or -1 with
/// a sentence in `message`. `signature_size` is at least LOCUS_SIGN_SIGNATURE_BYTES.
long locus_sign(const char *private_pem, size_t private_length, const void *data, size_t length,
                uint8_t *signature, size_t signature_size, char *message, size_t message_size);

/// 1: `signature` (DER) is a valid ECDSA P-256 SHA-256 signature of `data` under the public key
/// (PEM, `public_length` bytes without a NUL); 0: it is not; -1: the key cannot be read
/// (a sentence in `message`).
int locus_sign_verify(const char *public_pem, size_t public_length, const void *data, size_t length,
                      const uint8_t *signature, size_t signature_length, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif

#endif
