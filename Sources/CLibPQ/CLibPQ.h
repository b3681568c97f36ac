// PostgreSQL's own client library (Debian's libpq-dev), for the host-only locus-fleet.
// Never part of the device binary: only the LocusFleet target depends on this module.
#include <libpq-fe.h>
