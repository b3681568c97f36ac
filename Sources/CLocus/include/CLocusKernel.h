// The kernel seam: the few system calls through which the agent's loop meets time and its
// devices can be answered by a simulated kernel instead of Linux (`locus replay`, the
// simulator, tests). Nothing is hooked unless `locus_kernel_install` was called; the device
// binary running `locus run` pays one load and one branch per hooked call.
//
// Descriptors at or above LOCUS_SIM_FD_BASE are the simulated kernel's; calls on them go to the
// hooks. Calls on other descriptors go to Linux, except poll, which the hooks take whole (a set
// can mix both kinds) and answer with `locus_kernel_poll` for the real part.
#ifndef CLOCUS_KERNEL_H
#define CLOCUS_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { LOCUS_SIM_FD_BASE = 1 << 24 };
/// What a path hook returns for a path that is not the simulation's: Linux opens it.
enum { LOCUS_KERNEL_PASS = -0x7fffffff };

typedef struct locus_kernel_hooks {
    int64_t (*monotonic_ns)(void);
    int64_t (*realtime_ns)(void);
    int (*poll)(const int *fds, const short *events, short *revents, int count, int timeout_ms);
    int (*timerfd_create)(void);
    int (*timerfd_arm)(int fd, int64_t delay_ns);
    /// A path the simulation owns opens as a simulated port; any other returns LOCUS_KERNEL_PASS.
    int (*uart_open)(const char *path, int baud);
    long (*read)(int fd, void *buffer, size_t count);
    long (*write)(int fd, const void *buffer, size_t count);
    int (*close)(int fd);
    /// A write, or a data sync (fsync and fdatasync alike), on one of Linux's descriptors: the
    /// simulation may fail it (a negative errno), do it itself, or let Linux do it
    /// (LOCUS_KERNEL_PASS). NULL: Linux does them all. This is the simulated disk: a full one,
    /// a failing sync, and what a power cut keeps.
    long (*disk_write)(int fd, const void *buffer, size_t count);
    int (*disk_sync)(int fd);
    /// 64 random bits, so that a seed decides everything a simulated run does. NULL: getrandom.
    uint64_t (*random64)(void);
} locus_kernel_hooks;

/// Installs `hooks` (copied), or Linux again with NULL. Not thread-safe: called before the loop
/// starts and after it ends, from the thread that runs it.
void locus_kernel_install(const locus_kernel_hooks *hooks);
/// poll(2) itself, for a simulated kernel's real descriptors (simulated ones must be negative).
int locus_kernel_poll(const int *fds, const short *events, short *revents, int count, int timeout_ms);
/// fdatasync(2) itself, for a simulated disk that lets a sync through.
int locus_kernel_fdatasync(int fd);
/// CLOCK_MONOTONIC itself, for a simulation paced by the wall clock.
int64_t locus_kernel_monotonic_ns(void);

#ifdef __cplusplus
}
#endif

#endif
