// See include/CLocusHost.h.
#define _GNU_SOURCE
#include "CLocusHost.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int locus_sleep_ms(int ms) {
    if (ms <= 0) return 0;
    struct timespec left = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    // Bounded: a handler that runs 8 times during one pause ends it early.
    for (int try = 0; try < 8; try++) {
        if (nanosleep(&left, &left) == 0) return 0;
        if (errno != EINTR) return -errno;
        if (locus_stop_requested()) return -EINTR;
    }
    return -EINTR;
}

static volatile sig_atomic_t stop_requested = 0;

static void stop_handler(int signal) {
    (void)signal;
    stop_requested = 1;
}

void locus_stop_signals_install(void) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, stop_handler);
    signal(SIGINT, stop_handler);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigprocmask(SIG_UNBLOCK, &stop_signals, NULL);
}

int locus_stop_requested(void) { return stop_requested ? 1 : 0; }

int locus_realpath(const char *path, char *out, size_t capacity) {
    char *resolved = realpath(path, NULL);
    if (resolved == NULL) return -errno;
    size_t length = strlen(resolved);
    if (length + 1 > capacity) {
        free(resolved);
        return -ERANGE;
    }
    memcpy(out, resolved, length + 1);
    free(resolved);
    return 0;
}

#ifndef LOCUS_EMBEDDED
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

int locus_resolve(const char *host, uint8_t *addresses, uint8_t *sizes, int capacity) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *list = NULL;
    int status = getaddrinfo(host, NULL, &hints, &list);
    if (status != 0) return status < 0 ? status : -status;
    int count = 0;
    for (struct addrinfo *entry = list; entry != NULL && count < capacity; entry = entry->ai_next) {
        if (entry->ai_addr == NULL) continue;
        uint8_t slot[LOCUS_RESOLVE_ADDRESS_BYTES];
        uint8_t size;
        if (entry->ai_family == AF_INET) {
            memcpy(slot, &((struct sockaddr_in *)entry->ai_addr)->sin_addr, 4);
            size = 4;
        } else if (entry->ai_family == AF_INET6) {
            memcpy(slot, &((struct sockaddr_in6 *)entry->ai_addr)->sin6_addr, 16);
            size = 16;
        } else {
            continue;
        }
        int seen = 0;
        for (int i = 0; i < count && !seen; i++) {
            seen = sizes[i] == size && memcmp(addresses + i * LOCUS_RESOLVE_ADDRESS_BYTES, slot, size) == 0;
        }
        if (seen) continue;
        memcpy(addresses + count * LOCUS_RESOLVE_ADDRESS_BYTES, slot, size);
        sizes[count] = size;
        count++;
    }
    freeaddrinfo(list);
    return count;
}

const char *locus_resolve_error(int code) { return gai_strerror(code); }
#endif
