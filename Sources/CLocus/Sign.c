// See include/CLocusSign.h.
#define _GNU_SOURCE
#include "Entropy.h"
#include "CLocusSign.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>   // MBEDTLS_ERR_ENTROPY_SOURCE_FAILED
#include <mbedtls/error.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>

static void say(char *out, size_t size, const char *what, int error) {
    char reason[160];
    mbedtls_strerror(error, reason, sizeof reason);
    snprintf(out, size, "%s: %s", what, reason);
}

static int seed(mbedtls_ctr_drbg_context *random, char *message, size_t message_size) {
    static const unsigned char personal[] = "locus-sign";
    int result = mbedtls_ctr_drbg_seed(random, locus_kernel_entropy, NULL, personal, sizeof personal - 1);
    if (result != 0) say(message, message_size, "cannot seed the random generator (getrandom)", result);
    return result;
}

/// mbedTLS reads PEM only NUL-terminated, its length counting the NUL.
static unsigned char *terminated(const char *pem, size_t length) {
    unsigned char *copy = malloc(length + 1);
    if (copy == NULL) return NULL;
    memcpy(copy, pem, length);
    copy[length] = 0;
    return copy;
}

/// 0 when `key` is an EC key on P-256, else -1 with a sentence.
static int require_p256(mbedtls_pk_context *key, const char *what, char *message, size_t message_size) {
    if (!mbedtls_pk_can_do(key, MBEDTLS_PK_ECKEY) || mbedtls_pk_ec(*key)->grp.id != MBEDTLS_ECP_DP_SECP256R1) {
        snprintf(message, message_size, "%s is not an EC key on the P-256 curve (prime256v1)", what);
        return -1;
    }
    return 0;
}

static int load_private(mbedtls_pk_context *key, const char *pem, size_t length, char *message, size_t message_size) {
    unsigned char *text = terminated(pem, length);
    if (text == NULL) {
        snprintf(message, message_size, "out of memory");
        return -1;
    }
    int result = mbedtls_pk_parse_key(key, text, length + 1, NULL, 0);
    mbedtls_platform_zeroize(text, length);
    free(text);
    if (result != 0) {
        say(message, message_size, "the private key is not a PEM EC private key (SEC1 or PKCS#8, unencrypted)", result);
        return -1;
    }
    return require_p256(key, "the private key", message, message_size);
}

int locus_sign_generate(char *private_pem, size_t private_size, char *public_pem, size_t public_size,
                        char *message, size_t message_size) {
    mbedtls_ctr_drbg_context random;
    mbedtls_pk_context key;
    mbedtls_ctr_drbg_init(&random);
    mbedtls_pk_init(&key);
    int status = -1;
    int result = seed(&random, message, message_size);
    if (result == 0) {
        result = mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
        if (result == 0) result = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key), mbedtls_ctr_drbg_random, &random);
        if (result == 0) result = mbedtls_pk_write_key_pem(&key, (unsigned char *)private_pem, private_size);
        if (result == 0) result = mbedtls_pk_write_pubkey_pem(&key, (unsigned char *)public_pem, public_size);
        if (result == 0) status = 0;
        else say(message, message_size, "cannot make the key pair", result);
    }
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&random);
    return status;
}

int locus_sign_public_key(const char *private_pem, size_t private_length, char *public_pem, size_t public_size,
                          char *message, size_t message_size) {
    mbedtls_pk_context key;
    mbedtls_pk_init(&key);
    int status = load_private(&key, private_pem, private_length, message, message_size);
    if (status == 0) {
        int result = mbedtls_pk_write_pubkey_pem(&key, (unsigned char *)public_pem, public_size);
        if (result != 0) {
            say(message, message_size, "cannot write the public key", result);
            status = -1;
        }
    }
    mbedtls_pk_free(&key);
    return status;
}

long locus_sign(const char *private_pem, size_t private_length, const void *data, size_t length,
                uint8_t *signature, size_t signature_size, char *message, size_t message_size) {
    if (signature_size < LOCUS_SIGN_SIGNATURE_BYTES) {
        snprintf(message, message_size, "the signature's buffer is too small");
        return -1;
    }
    mbedtls_ctr_drbg_context random;
    mbedtls_pk_context key;
    mbedtls_ctr_drbg_init(&random);
    mbedtls_pk_init(&key);
    long signed_length = -1;
    unsigned char hash[32];
    if (load_private(&key, private_pem, private_length, message, message_size) == 0 && seed(&random, message, message_size) == 0) {
        size_t written = 0;
        int result = mbedtls_sha256_ret(data, length, hash, 0);
        if (result == 0) {
            result = mbedtls_pk_sign(&key, MBEDTLS_MD_SHA256, hash, sizeof hash, signature, &written,
                                     mbedtls_ctr_drbg_random, &random);
        }
        if (result == 0) result = mbedtls_pk_verify(&key, MBEDTLS_MD_SHA256, hash, sizeof hash, signature, written);
        if (result == 0) signed_length = (long)written;
        else say(message, message_size, "cannot sign", result);
    }
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&random);
    return signed_length;
}

int locus_sign_verify(const char *public_pem, size_t public_length, const void *data, size_t length,
                      const uint8_t *signature, size_t signature_length, char *message, size_t message_size) {
    mbedtls_pk_context key;
    mbedtls_pk_init(&key);
    unsigned char *text = terminated(public_pem, public_length);
    int status = -1;
    int result = text == NULL ? MBEDTLS_ERR_PK_ALLOC_FAILED : mbedtls_pk_parse_public_key(&key, text, public_length + 1);
    free(text);
    if (result != 0) {
        say(message, message_size, "the public key is not a PEM public key (BEGIN PUBLIC KEY)", result);
    } else if (require_p256(&key, "the public key", message, message_size) == 0) {
        unsigned char hash[32];
        result = mbedtls_sha256_ret(data, length, hash, 0);
        if (result != 0) say(message, message_size, "cannot hash", result);
        else status = mbedtls_pk_verify(&key, MBEDTLS_MD_SHA256, hash, sizeof hash, signature, signature_length) == 0 ? 1 : 0;
    }
    mbedtls_pk_free(&key);
    return status;
}
