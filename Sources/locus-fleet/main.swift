import LocusFleet
#if canImport(Glibc)
import Glibc
#endif

exit(FleetCommandLine.main(Array(CommandLine.arguments.dropFirst())))
