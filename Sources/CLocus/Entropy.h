// The kernel's random bytes for mbedTLS's generators (TLS.c defines it; Sign.c uses it too).
// Private to CLocus: not in include/, so Swift does not see it.
#ifndef CLOCUS_ENTROPY_H
#define CLOCUS_ENTROPY_H

#include <stddef.h>

/// mbedTLS's entropy callback: `length` bytes of getrandom(2); 0, or MBEDTLS_ERR_ENTROPY_SOURCE_FAILED.
int locus_kernel_entropy(void *unused, unsigned char *output, size_t length);

#endif
