// PostgreSQL's own client library (Debian's libpq-dev), for the host-only locus-fleet.
// Never part of the device binary: only the LocusFleet target depends on this module.
// pkg-config's flags (-I/usr/include/postgresql) make the first form work; without them,
// Debian's path is the second.
#if __has_include(<libpq-fe.h>)
#include <libpq-fe.h>
#else
#include <postgresql/libpq-fe.h>
#endif
