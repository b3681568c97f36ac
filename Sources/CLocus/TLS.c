// See include/CLocusTLS.h. mbedTLS over a socket the caller owns; no policy beyond "verify".
#define _GNU_SOURCE
#include "CLocusTLS.h"
#include "Entropy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>   // MBEDTLS_ERR_ENTROPY_SOURCE_FAILED
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

struct locus_tls_config {
    mbedtls_ctr_drbg_context random;
    mbedtls_x509_crt authorities;
    mbedtls_x509_crt certificate;
    mbedtls_pk_context key;
    mbedtls_ssl_config ssl;
};

struct locus_tls {
    mbedtls_ssl_context ssl;
    int fd;
    /// The errno of the last failed send or receive (0: none), for the explanation.
    int socket_error;
    /// The handshake has completed.
    int established;
};

static void say(char *out, size_t size, const char *what, const char *path, int error) {
    char reason[160];
    mbedtls_strerror(error, reason, sizeof reason);
    snprintf(out, size, "%s %s: %s", what, path, reason);
}

/// The random generator's seed straight from the kernel (getrandom(2), blocking only until the
/// pool is initialised at boot). mbedTLS's own platform source is not used: built against glibc
/// and linked with musl in the device binary, it fails there. Sign.c seeds its generator here too.
int locus_kernel_entropy(void *unused, unsigned char *output, size_t length) {
    (void)unused;
    size_t filled = 0;
    while (filled < length) {
        ssize_t got = getrandom(output + filled, length - filled, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return MBEDTLS_ERR_ENTROPY_SOURCE_FAILED;
        }
        filled += (size_t)got;
    }
    return 0;
}

locus_tls_config *locus_tls_config_new(const char *ca_file, const char *cert_file, const char *key_file, char *message, size_t message_size) {
    locus_tls_config *config = calloc(1, sizeof *config);
    if (!config) {
        snprintf(message, message_size, "out of memory for the TLS configuration");
        return NULL;
    }
    mbedtls_ctr_drbg_init(&config->random);
    mbedtls_x509_crt_init(&config->authorities);
    mbedtls_x509_crt_init(&config->certificate);
    mbedtls_pk_init(&config->key);
    mbedtls_ssl_config_init(&config->ssl);
    static const unsigned char personal[] = "locus uplink";
    int result = mbedtls_ctr_drbg_seed(&config->random, locus_kernel_entropy, NULL, personal, sizeof personal - 1);
    if (result != 0) {
        say(message, message_size, "cannot seed the random generator", "(getrandom)", result);
        goto failed;
    }
    result = mbedtls_x509_crt_parse_file(&config->authorities, ca_file);
    if (result < 0) {
        say(message, message_size, "cannot read the CA file", ca_file, result);
        goto failed;
    }
    if (result > 0 && config->authorities.version == 0) {
        snprintf(message, message_size, "the CA file %s holds no certificate this agent can read (PEM or DER X.509 expected)", ca_file);
        goto failed;
    }
    if ((cert_file == NULL) != (key_file == NULL)) {
        snprintf(message, message_size, "a client certificate needs both cert_file and key_file");
        goto failed;
    }
    if (cert_file) {
        result = mbedtls_x509_crt_parse_file(&config->certificate, cert_file);
        if (result != 0) {
            say(message, message_size, "cannot read the client certificate", cert_file, result < 0 ? result : MBEDTLS_ERR_X509_INVALID_FORMAT);
            goto failed;
        }
        result = mbedtls_pk_parse_keyfile(&config->key, key_file, NULL);
        if (result != 0) {
            say(message, message_size, "cannot read the client key", key_file, result);
            goto failed;
        }
        if (mbedtls_pk_check_pair(&config->certificate.pk, &config->key) != 0) {
            snprintf(message, message_size, "the client key %s does not belong to the certificate %s", key_file, cert_file);
            goto failed;
        }
    }
    result = mbedtls_ssl_config_defaults(&config->ssl, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (result != 0) {
        say(message, message_size, "cannot set up TLS", "defaults", result);
        goto failed;
    }
    // TLS 1.2 at least; the server's certificate is always verified.
    mbedtls_ssl_conf_min_version(&config->ssl, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_authmode(&config->ssl, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&config->ssl, &config->authorities, NULL);
    mbedtls_ssl_conf_rng(&config->ssl, mbedtls_ctr_drbg_random, &config->random);
    if (cert_file) {
        result = mbedtls_ssl_conf_own_cert(&config->ssl, &config->certificate, &config->key);
        if (result != 0) {
            say(message, message_size, "cannot use the client certificate", cert_file, result);
            goto failed;
        }
    }
    return config;
failed:
    locus_tls_config_free(config);
    return NULL;
}

void locus_tls_config_free(locus_tls_config *config) {
    if (!config) return;
    mbedtls_ssl_config_free(&config->ssl);
    mbedtls_pk_free(&config->key);
    mbedtls_x509_crt_free(&config->certificate);
    mbedtls_x509_crt_free(&config->authorities);
    mbedtls_ctr_drbg_free(&config->random);
    free(config);
}

static int send_bytes(void *context, const unsigned char *buffer, size_t count) {
    locus_tls *session = context;
    for (int attempt = 0; attempt < 8; attempt++) {
        ssize_t sent = send(session->fd, buffer, count, MSG_NOSIGNAL);
        if (sent >= 0) return (int)sent;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_WRITE;
        session->socket_error = errno;
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
    return MBEDTLS_ERR_SSL_WANT_WRITE;
}

static int receive_bytes(void *context, unsigned char *buffer, size_t count) {
    locus_tls *session = context;
    for (int attempt = 0; attempt < 8; attempt++) {
        ssize_t got = recv(session->fd, buffer, count, 0);
        if (got >= 0) return (int)got;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_READ;
        session->socket_error = errno;
        return MBEDTLS_ERR_NET_RECV_FAILED;
    }
    return MBEDTLS_ERR_SSL_WANT_READ;
}

locus_tls *locus_tls_new(locus_tls_config *config, int fd, const char *host_name, char *message, size_t message_size) {
    locus_tls *session = calloc(1, sizeof *session);
    if (!session) {
        snprintf(message, message_size, "out of memory for a TLS session");
        return NULL;
    }
    mbedtls_ssl_init(&session->ssl);
    session->fd = fd;
    int result = mbedtls_ssl_setup(&session->ssl, &config->ssl);
    if (result == 0) result = mbedtls_ssl_set_hostname(&session->ssl, host_name);
    if (result != 0) {
        say(message, message_size, "cannot start a TLS session with", host_name, result);
        locus_tls_free(session);
        return NULL;
    }
    mbedtls_ssl_set_bio(&session->ssl, session, send_bytes, receive_bytes, NULL);
    return session;
}

void locus_tls_free(locus_tls *session) {
    if (!session) return;
    mbedtls_ssl_free(&session->ssl);
    free(session);
}

static long mapped(int result) {
    if (result == MBEDTLS_ERR_SSL_WANT_READ) return LOCUS_TLS_WANT_READ;
    if (result == MBEDTLS_ERR_SSL_WANT_WRITE) return LOCUS_TLS_WANT_WRITE;
    return result;
}

int locus_tls_handshake(locus_tls *session) {
    int result = mbedtls_ssl_handshake(&session->ssl);
    if (result == 0) session->established = 1;
    return (int)mapped(result);
}

/// A fatal alert the server sent before it closed (TLS 1.2 record: 0x15 0x03 0x0N 0x00 0x02, level
/// 2, description), still in the socket's receive queue when our write failed; -1 when none.
static int pending_alert(const locus_tls *session) {
    unsigned char record[7];
    ssize_t got = recv(session->fd, record, sizeof record, MSG_PEEK | MSG_DONTWAIT);
    if (got == (ssize_t)sizeof record && record[0] == 0x15 && record[1] == 0x03 && record[3] == 0 && record[4] == 2 && record[5] == 2) {
        return record[6];
    }
    return -1;
}

static const char *alert_name(int description) {
    switch (description) {
    case 40: return "handshake_failure";
    case 42: return "bad_certificate";
    case 43: return "unsupported_certificate";
    case 45: return "certificate_expired";
    case 46: return "certificate_unknown";
    case 48: return "unknown_ca";
    case 116: return "certificate_required";
    default: return NULL;
    }
}

long locus_tls_write(locus_tls *session, const void *buffer, size_t count) {
    return mapped(mbedtls_ssl_write(&session->ssl, buffer, count));
}

long locus_tls_read(locus_tls *session, void *buffer, size_t count) {
    int result = mbedtls_ssl_read(&session->ssl, buffer, count);
    if (result == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) return 0;
    return mapped(result);
}

size_t locus_tls_pending(const locus_tls *session) { return mbedtls_ssl_get_bytes_avail(&session->ssl); }

void locus_tls_close_notify(locus_tls *session) { (void)mbedtls_ssl_close_notify(&session->ssl); }

void locus_tls_describe_session(const locus_tls *session, char *out, size_t size) {
    snprintf(out, size, "%s %s", mbedtls_ssl_get_version(&session->ssl), mbedtls_ssl_get_ciphersuite(&session->ssl));
}

void locus_tls_explain(const locus_tls *session, int error, char *out, size_t size) {
    uint32_t flags = session ? mbedtls_ssl_get_verify_result(&session->ssl) : 0;
    if (flags != 0 && flags != (uint32_t)-1) {
        // The first reason a technician can act on, most specific first.
        if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH) {
            snprintf(out, size, "wrong host name: the broker's certificate is not issued for the host name in [uplink] broker");
        } else if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) {
            snprintf(out, size, "unknown CA: the broker's certificate is not signed by a certificate authority in [uplink] ca_file");
        } else if (flags & MBEDTLS_X509_BADCERT_EXPIRED) {
            snprintf(out, size, "expired certificate: the broker's certificate (or its CA's) has expired, or this gateway's clock is wrong (see 'locus status': time)");
        } else if (flags & MBEDTLS_X509_BADCERT_FUTURE) {
            snprintf(out, size, "certificate not valid yet: the broker's certificate starts later than this gateway's clock says it is now (see 'locus status': time)");
        } else if (flags & MBEDTLS_X509_BADCERT_REVOKED) {
            snprintf(out, size, "revoked certificate: the broker's certificate is revoked");
        } else {
            char detail[256];
            int length = mbedtls_x509_crt_verify_info(detail, sizeof detail, "", flags);
            if (length > 0 && detail[length - 1] == '\n') detail[length - 1] = 0;
            snprintf(out, size, "the broker's certificate failed verification: %s", length > 0 ? detail : "unknown reason");
        }
        return;
    }
    int refused_during_handshake = session && !session->established
        && (error == MBEDTLS_ERR_SSL_CONN_EOF
            || ((error == MBEDTLS_ERR_NET_SEND_FAILED || error == MBEDTLS_ERR_NET_RECV_FAILED)
                && (session->socket_error == EPIPE || session->socket_error == ECONNRESET)));
    if (refused_during_handshake) {
        int alert = pending_alert(session);
        const char *name = alert >= 0 ? alert_name(alert) : NULL;
        if (name) {
            snprintf(out, size, "the broker refused the handshake (%s): it refused the client certificate, or needs one (set [uplink] cert_file and key_file, signed by a CA the broker trusts)", name);
        } else if (alert >= 0) {
            snprintf(out, size, "the broker refused the handshake (alert %d): check the client certificate ([uplink] cert_file, key_file) and the broker's TLS settings", alert);
        } else {
            snprintf(out, size, "the broker closed the connection during the handshake: it needs a client certificate or refused the one sent ([uplink] cert_file, key_file), or this port is not a TLS listener");
        }
        return;
    }
    if (error == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE) {
        snprintf(out, size, "the broker ended the handshake with a fatal alert: it refused the client certificate, or needs one (set [uplink] cert_file and key_file), or shares no protocol version or cipher with this agent");
        return;
    }
    if ((error == MBEDTLS_ERR_NET_SEND_FAILED || error == MBEDTLS_ERR_NET_RECV_FAILED) && session && session->socket_error) {
        snprintf(out, size, "the connection failed: %s", strerror(session->socket_error));
        return;
    }
    char reason[200];
    mbedtls_strerror(error, reason, sizeof reason);
    snprintf(out, size, "TLS failed: %s (-0x%04x)", reason, (unsigned)-error);
}

// MARK: the fleet's signatures

void locus_sha256(const void *data, size_t length, unsigned char *digest) {
    mbedtls_sha256_ret(data, length, digest, 0);
}

#ifdef LOCUS_MUSL
// MARK: musl: glibc's fortified entry points, as Debian's glibc-built mbedTLS archives call them

#include <signal.h>
#include <stdarg.h>

int __printf_chk(int flag, const char *format, ...) {
    (void)flag;
    va_list arguments;
    va_start(arguments, format);
    int result = vprintf(format, arguments);
    va_end(arguments);
    return result;
}

int __vsnprintf_chk(char *buffer, size_t size, int flag, size_t available, const char *format, va_list arguments) {
    (void)flag;
    if (size > available) abort();
    return vsnprintf(buffer, size, format, arguments);
}

void *__memcpy_chk(void *destination, const void *source, size_t count, size_t available) {
    if (count > available) abort();
    return memcpy(destination, source, count);
}

void *__memset_chk(void *destination, int value, size_t count, size_t available) {
    if (count > available) abort();
    return memset(destination, value, count);
}

long __fdelt_chk(long descriptor) {
    if (descriptor < 0 || descriptor >= 1024) abort();
    return descriptor / (long)(8 * sizeof(long));
}

void (*__sysv_signal(int number, void (*handler)(int)))(int) { return signal(number, handler); }
#endif
