// What host programs that block (locus-fleet: its import and ingest) need from the system and the
// agent's loop does not: a pause, stop signals as a flag, a canonical path, the host's resolver.
// Same rules as the rest of CLocus: one call each, results >= 0 or -errno.
#ifndef CLOCUS_HOST_H
#define CLOCUS_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Sleeps `ms` milliseconds (nanosleep(2), resumed after a signal handler unless a stop was
/// requested, at most 8 times); 0 or -errno.
int locus_sleep_ms(int ms);

/// SIGTERM and SIGINT set a flag (`locus_stop_requested`) instead of ending the process; SIGPIPE
/// is ignored; both stop signals are unblocked (a mask inherited from a test runner's threads or a
/// supervisor must not keep them from arriving).
void locus_stop_signals_install(void);
/// 1 once SIGTERM or SIGINT arrived after `locus_stop_signals_install`, else 0.
int locus_stop_requested(void);

/// realpath(3) into `out` (`capacity` bytes, NUL included); 0 or -errno (-ERANGE: too long).
int locus_realpath(const char *path, char *out, size_t capacity);

enum { LOCUS_RESOLVE_ADDRESS_BYTES = 16 };
/// The host's resolver (getaddrinfo(3): /etc/hosts, DNS, nsswitch) for stream sockets: up to
/// `capacity` distinct addresses, each in a 16-byte slot of `addresses` with its size (4 or 16) in
/// `sizes`, in the resolver's order. The count, or a negative EAI_* code (`locus_resolve_error`).
/// Host builds only: the device binary (LOCUS_EMBEDDED) does not link the resolver, the uplink
/// asks DNS itself.
int locus_resolve(const char *host, uint8_t *addresses, uint8_t *sizes, int capacity);
/// gai_strerror(3) of a `locus_resolve` result.
const char *locus_resolve_error(int code);

#ifdef __cplusplus
}
#endif
#endif
