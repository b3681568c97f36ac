// TLS for the uplink: thin functions over Debian's mbedTLS (2.28, linked statically into the
// device binary). A session runs over a connected non-blocking socket the caller owns; the
// functions never block and never decide policy (verification is always required: there is no
// switch to turn it off).
#ifndef CLOCUS_TLS_H
#define CLOCUS_TLS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The session wants the socket readable (or writable) before the call is repeated.
enum { LOCUS_TLS_WANT_READ = -1000001, LOCUS_TLS_WANT_WRITE = -1000002 };

/// The trust anchors and the client's own certificate, shared by every connection of an uplink.
typedef struct locus_tls_config locus_tls_config;
/// One TLS session over one socket.
typedef struct locus_tls locus_tls;

/// Reads the CA file (PEM) and, optionally, the client certificate and key (mutual TLS); NULL on
/// failure with a sentence in `message`.
locus_tls_config *locus_tls_config_new(const char *ca_file, const char *cert_file, const char *key_file, char *message, size_t message_size);
void locus_tls_config_free(locus_tls_config *config);

/// A client session on connected socket `fd`, verifying the server's certificate against the CA
/// and `host_name` (RFC 6125: the subjectAltName DNS or IP entries, else the CN). NULL on failure.
locus_tls *locus_tls_new(locus_tls_config *config, int fd, const char *host_name, char *message, size_t message_size);
void locus_tls_free(locus_tls *session);

/// 0 when the handshake is done; LOCUS_TLS_WANT_*; or an mbedTLS error (negative).
int locus_tls_handshake(locus_tls *session);
/// Bytes written (> 0); LOCUS_TLS_WANT_*; or an mbedTLS error.
long locus_tls_write(locus_tls *session, const void *buffer, size_t count);
/// Bytes read (> 0); 0 when the peer closed the session; LOCUS_TLS_WANT_*; or an mbedTLS error.
long locus_tls_read(locus_tls *session, void *buffer, size_t count);
/// Bytes already decrypted and waiting (read them before polling the socket again).
size_t locus_tls_pending(const locus_tls *session);
/// Sends close_notify (best effort, non-blocking).
void locus_tls_close_notify(locus_tls *session);
/// The protocol and cipher suite agreed, e.g. "TLSv1.2 TLS-ECDHE-RSA-WITH-AES-256-GCM-SHA384".
void locus_tls_describe_session(const locus_tls *session, char *out, size_t size);

/// What went wrong, for a technician: the certificate verification flags when the handshake
/// failed on them, else the library's own description of `error`.
void locus_tls_explain(const locus_tls *session, int error, char *out, size_t size);

// MARK: the fleet's signatures (docs/remote.md)

/// SHA-256 of `length` bytes into `digest` (32 bytes).
void locus_sha256(const void *data, size_t length, unsigned char *digest);
/// (Signing and checking signatures: CLocusSign.h.)

#ifdef __cplusplus
}
#endif
#endif
