import LocusAgent
CommandLineInterface.main()
