// Test-only allocation counter. Linked into test binaries, it replaces malloc and friends for the
// whole process and forwards to glibc's __libc_* entry points; while counting is switched on for
// the calling thread, every allocation on that thread (libswiftCore's included) is counted.
#ifndef CALLOCCOUNTER_H
#define CALLOCCOUNTER_H
#include <stdint.h>
void alloc_counter_begin(void);
/// Stops counting on this thread and returns the number of allocations since begin.
int64_t alloc_counter_end(void);
/// 1 when the interposer is the process's malloc (a self-check so a test cannot pass vacuously).
int alloc_counter_is_active(void);
#endif
