import LocusDevices
import LocusFleet

Process.exit(FleetCommandLine.main(Array(CommandLine.arguments.dropFirst())))
