import LocusCore
import LocusDevices

/// `locus` commands: a small table-driven parser (swift-argument-parser does not build for
/// Embedded Swift). Exit status: 0 success, 1 the command failed, 2 the command line is wrong.
public enum CommandLineInterface {
    struct Command: Sendable {
        let name: String
        let summary: String
        let usage: String
        let details: String
        let run: @Sendable ([String]) -> Int32
    }

    static let commands: [Command] = [
        Command(
            name: "run", summary: "run the agent: GNSS, Bluetooth, monitors, GPIO actions, the log",
            usage: "locus run [--config SITE.toml] [--state DIR]",
            details: """
            Reads the site file (default /etc/locus/site.toml) and the board file it names, rebuilds
            every monitor's records from the log in the state directory, sets the GPIO outputs to the
            levels the log's last handled events give them, and runs: one poll loop over the GNSS
            port, the Bluetooth adapter (or the simulated board's HCI feed), the control socket
            (STATE/control.sock) and a timer. Every event is logged before a GPIO line moves.
            SIGTERM or SIGINT: stop scanning, put the outputs in their safe state, write a stop
            record, exit 0. SIGHUP: reload the site file (conditions added, replaced, removed;
            capacities and the board stay until restart). Diagnostics go to standard error, with
            syslog priority prefixes (<3>...<7>) unless it is a terminal. Under systemd it speaks
            sd_notify (READY, WATCHDOG, RELOADING, STOPPING). --state DIR overrides state_dir.
            """,
            run: RunCommand.run),
        Command(
            name: "check-config", summary: "check a site file (and the board file it names) or a board file",
            usage: "locus check-config FILE",
            details: """
            Reads FILE as a site file (it has a top-level 'board' key) or a board file (it has a [board]
            table) and checks every key and value. A site file's board file is checked too, and so are
            the actions against the board's GPIO outputs.
            Prints one summary line and exits 0, or prints one 'file:line:col: message' line per
            problem on standard error and exits 1.
            """,
            run: CheckConfigCommand.run),
        Command(
            name: "doctor", summary: "check this gateway against the site and board files, one line per finding",
            usage: "locus doctor [--config SITE.toml]",
            details: """
            Reads the site file (default /etc/locus/site.toml, as 'locus run') and its board file,
            then checks: the GNSS port (exists, not a kernel console, no login prompt, no other
            program), the state directory (writable, room for [log] retain), the GPIO chip and
            lines, the Bluetooth adapter (present, rfkill, up, bluetoothd), CAP_NET_RAW and
            CAP_NET_ADMIN, the clock, a Raspberry Pi's header UART, and the receiver's bytes at the
            configured baud (other rates are tried when they are not NMEA; skipped while the agent
            runs). One line per finding: ok, warn or FAIL, and what to do. Exit 0 without a FAIL,
            1 with one. docs/doctor.md explains every finding.
            """,
            run: DoctorCommand.run),
        Command(
            name: "decode", summary: "decode recorded receiver data to JSON lines",
            usage: "locus decode nmea [--allow-missing-checksum] [FILE|-]\n       locus decode adv --hex HEX\n       locus decode hci (--hex HEX | FILE)",
            details: """
            nmea: reads NMEA 0183 (a file, or standard input for '-' or no FILE) and writes one
            gpsd-style TPV object per receiver cycle ("class", "mode", "time", "lat", "lon", "altMSL",
            "speed" in m/s, "track" in degrees, "eph" in metres), then one summary object on standard
            error: sentences read, parsed, ignored, and rejected by reason. Sentences without a
            checksum are rejected unless --allow-missing-checksum is given.
            adv: decodes advertising data (AD structures) given as hex: flags, name, TX power,
            services, solicited services, service data, manufacturer data, and the beacon frame
            (iBeacon, AltBeacon, Eddystone UID/URL/TLM/eTLM/EID, UriBeacon). UUIDs are printed in
            canonical form (128-bit ones are sent byte-reversed). A name that is not valid UTF-8 is
            cut before its first invalid byte and flagged with "name_truncated": true.
            hci: decodes HCI LE Advertising Report events (legacy and extended; the H4 type byte
            0x04 is optional) given as hex, or read from FILE: a btsnoop capture (`btmon -w`) or
            lines of hex, one event per line. One JSON object per advertising report; a malformed
            item gives {"error": ...}. Exit 0 if any item decoded, 1 if none did.
            """,
            run: DecodeCommand.run),
        Command(
            name: "log", summary: "verify the event log, or show what it holds",
            usage: "locus log verify [--state DIR]\n       locus log stat [--state DIR]\n       locus log export [--state DIR] [--config SITE] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]",
            details: """
            Reads the log segments in the state directory (default /var/lib/locus) and checks every
            record's checksums and sequence numbers, without changing anything (safe while the agent
            runs; the record it is writing at that instant may show as torn).
            verify: prints one summary line and exits 0, or prints one line per bad region (segment
            file, byte offset, length, reason) on standard error and exits 1.
            stat: segments, bytes, records per type, first and last sequence number and time, and the
            newest complete checkpoint.
            export: every record after sequence number N (default 0) as JSON lines with a "seq"
            field, or CSV; --follow keeps printing records as they are appended. --ssh is for the
            forced command of a key limited to log export (authorized_keys:
            restrict,command="locus log export --ssh --state DIR"): it takes --after-seq, --format
            and --follow from SSH_ORIGINAL_COMMAND and refuses anything else.
            """,
            run: LogCommand.run),
        Command(
            name: "geo", summary: "geodesy on the WGS84 ellipsoid, and offline places",
            usage: "locus geo distance LAT1,LON1 LAT2,LON2\n       locus geo index SRC... -o places.idx\n"
                + "       locus geo reverse LAT LON | forward NAME | info [--index FILE | --config SITE] (docs/geocoding.md)",
            details: """
            distance: prints the geodesic (shortest path) distance in metres between two points given
            in decimal degrees, with 4 decimals: the s12 that GeographicLib's 'GeodSolve -i' prints,
            to within a few nanometres. Latitudes must be within -90...90; longitudes may be any
            value (370 is 10). Example: locus geo distance 37.33467,-122.00898 37.3349,-122.0090
            index, reverse, forward, info: the place index (docs/geocoding.md). --config SITE reads
            the site's [geocoding] (its index, max_distance and scope).
            """,
            run: GeoCommand.run),
        Command(
            name: "shapes", summary: "import polygons and corridors drawn in a GIS (GeoJSON, WKT) as site-file conditions",
            usage: ShapesCommand.usage,
            details: """
            import: reads GeoJSON (Polygon, MultiPolygon, LineString, MultiLineString, Point with a
            "radius" property; Features and FeatureCollections) or WKT (one geometry a line:
            POLYGON, MULTIPOLYGON, LINESTRING, MULTILINESTRING, Traccar's CIRCLE (lat lon, radius))
            and prints [[monitor.NAME.condition]] entries (NAME: --monitor, default "imported") to
            paste into the site file. Coordinates are longitude first, as GeoJSON and WKT write them;
            --lat-lon reads WKT written latitude first (Traccar). A line becomes a corridor: its
            width is the feature's "width" property, else --width. Ids come from a feature's "id",
            "name" or "title". Every shape is checked as the site file checks it (simple ring, no
            hole, edges under 10000 km); each one refused is named on standard error with the
            reason. Exit 0 when everything was imported, 1 otherwise. docs/shapes.md.
            """,
            run: ShapesCommand.run),
        Command(
            name: "replay", summary: "run the monitor engine on NMEA and BLE recordings",
            usage: "locus replay --config SITE.toml [--nmea FILE] [--hci FILE] [--state DIR] [--speed max|N] [--format jsonl|text] [--updates | --power-report [--locate-every S [--locate-accuracy TIER] [--locate-max-age S]]]",
            details: """
            Runs the site's monitors on recordings with a virtual clock: fixes take their time from
            the NMEA (RMC/ZDA dates), sightings from the capture (btsnoop timestamps, or lines of
            "UNIX_SECONDS HEX" with one HCI event each); both are merged by time. Events are written
            as JSON lines: monitor, identifier, state, date, seq, refinement, diagnostics, explain.
            --speed N replays N times faster than recorded (default: as fast as possible).
            --format text prints aligned lines for people instead of JSON. --state DIR persists
            as the agent does (log, locks), so a second replay continues from the saved records.
            --updates prints the live-update stream instead of events, per the site's [updates]:
            TPV lines (gpsd fields plus isStationary, diagnostics, batch, flush) and VISIT lines.
            --power-report prints, per accuracy tier, the fixes boundary-aware sampling would
            take, GNSS on-time, estimated mAh per day (typical currents of the board's receiver
            family), BLE scan duty, wake-ups per hour, and TRANSITION lines saying how late each
            geofence transition is seen compared with using every recorded fix. With
            --locate-every S it adds a program's location request every S seconds (at
            --locate-accuracy TIER, default the site's; answered at once from a fix at most
            --locate-max-age seconds old, default 30) and counts them and the receiver on-time they
            cost (locateOnTimeS).
            """,
            run: ReplayCommand.run),
        Command(
            name: "monitor", summary: "add, remove and read a monitor's conditions and records",
            usage: "locus monitor NAME [--state DIR] (add ID (--circle LAT,LON,RADIUS | --beacon UUID[,MAJOR[,MINOR]] | --phone NAME | --polygon 'LAT,LON ...' | --corridor 'WIDTH LAT,LON ...') [--assuming satisfied|unsatisfied] | remove ID | records | record ID | identifiers)",
            details: """
            CLMonitor's calls on the monitor NAME: add (an existing ID is replaced and its record
            starts over), remove, records (one JSON object per record with its condition and
            lastEvent), record ID, identifiers. While an agent runs with the state directory
            (default /var/lib/locus) they go through its sockets and take effect at once (records,
            record and identifiers read through read.sock, add and remove change through
            control.sock; docs/access.md); otherwise they are applied to the state directory under
            the monitor's lock. Either way changes are logged.
            """,
            run: MonitorCommand.run),
        Command(
            name: "events", summary: "the events in the log, as JSON lines",
            usage: "locus events [--state DIR] [--config SITE] [--monitor NAME] [--after-seq N] [--follow]",
            details: """
            Every event the log holds (all monitors, or one), with its log sequence number, in the
            replay's format. --after-seq N starts after a sequence number; --follow keeps printing
            new events as they happen (through a running agent's control socket, else by watching
            the log) until interrupted. --config SITE: the site's state directory, and with its
            [geocoding] annotate = true each event with a position names the place nearest it.
            """,
            run: EventsCommand.run),
        Command(
            name: "status", summary: "what a running agent is doing: sources, engine, log, GPIO",
            usage: "locus status [--state DIR]",
            details: """
            Asks the agent running with state directory DIR (default /var/lib/locus) over its control
            socket and prints one JSON object: the GNSS port (open, bytes, fixes, last fix, rejected
            sentences), the Bluetooth source (scanning, sightings, rejected events), the engine
            (conditions, capacity, pending events, deferred detections), the log (last sequence
            number, whether appends are failing) and every GPIO output's value; `control.clients`
            lists the connected clients (user, pid, socket, access grants, what each is doing) and
            `start_sockets` each monitor's start socket (pending event, starts, failures).
            """,
            run: AgentCommands.status),
        Command(
            name: "uplink", summary: "the MQTT uplink: test the site's broker settings, or the running agent's uplink",
            usage: "locus uplink (test [--config SITE.toml] | status [--state DIR])",
            details: """
            test connects once with the site file's [uplink] settings (default
            /etc/locus/site.toml) and reports each step: the broker's name looked up (/etc/hosts,
            then DNS), TCP, the TLS handshake with the broker's certificate checked against
            ca_file and the host name, CONNECT, and a QoS 1 test message to <prefix>/test with
            its PUBACK. It uses its own client id (<client id>-test) and a clean session, so a
            running agent's session is left alone. Exit 0 when every step worked, else the step
            that failed and why.
            status asks the running agent (state directory DIR) and prints one line: connected or
            not, the delivered cursor, the backlog (records, bytes, age of the oldest), records
            retention deleted before delivery, messages published and acknowledged, the last error.
            """,
            run: UplinkCommand.run),
        Command(
            name: "updates", summary: "live location updates from a running agent, as JSON lines",
            usage: "locus updates [--state DIR] [--config PRESET] [--accuracy TIER] [--significant-change[=M]] [--follow]",
            details: """
            CLLocationUpdate.liveUpdates through the agent's control socket: one JSON line per
            update, gpsd's TPV fields plus isStationary, diagnostics (stationary,
            locationUnavailable, accuracyLimited), the batch it came in and why the batch was
            delivered (count, age, event); VISIT lines for stays longer than [updates]
            visit_minimum. PRESET is default, automotiveNavigation, otherNavigation, fitness or
            airborne; TIER is best, nearestTenMeters, hundredMeters, kilometer or threeKilometers
            (both default to the site's [updates]). A finer tier than the site's raises the
            radios' duty cycle while this runs. Without --follow it prints the first update and
            exits; with it, every update until interrupted. --significant-change delivers an
            update only after a move of 1,000 m (=M: M metres, 50...100000), whatever the site's
            significant_change, and runs the radios no finer than the coarse tier that distance
            implies (kilometer from 1 km, threeKilometers from 3 km, else hundredMeters).
            """,
            run: AgentCommands.updates),
        Command(
            name: "gpio", summary: "clear a latched GPIO output of a running agent",
            usage: "locus gpio clear NAME [--state DIR]",
            details: """
            An output driven by a mode = "latch" action stays on until cleared; this clears it (the
            agent logs the clear, so the latch stays cleared across restarts).
            """,
            run: AgentCommands.gpio),
        Command(
            name: "feed", summary: "play NMEA and HCI recordings into pseudo-terminals (the simulated board)",
            usage: "locus feed [--nmea FILE --gnss PATH] [--hci FILE --ble PATH] [--speed N|max] [--wait SECONDS] [--linger SECONDS]",
            details: """
            Creates a pseudo-terminal per recording and links it at PATH (the simulated board reads
            STATE/sim/gnss and STATE/sim/ble), waits until a reader has opened each (--wait, default
            30 s), then writes NMEA lines at the times their sentences carry and HCI events (H4
            framing) at their capture times, N times faster with --speed. Recordings with dates play
            on one time line. Like a UART, it never waits for a slow reader: what does not fit is
            dropped and counted. --linger keeps the ports open, silent, after the end.
            """,
            run: FeedCommand.run),
        // MARK: beacon ranging
        Command(
            name: "range", summary: "beacon ranging from a running agent: the beacons in range, nearest first, every second",
            usage: RangeCommand.usage,
            details: """
            Core Location's beacon ranging through the agent's read socket (STATE/read.sock): once a
            second, every beacon matching UUID (and MAJOR, and MINOR, when given) with its filtered
            RSSI (dBm), estimated distance (metres, the log-distance model with the beacon's own
            measured power), proximity (immediate < 0.5 m, near < 3 m, far; unknown when it was not
            heard in the last 2 s) and when it was last heard, nearest first. A beacon silent for
            30 s drops out. Prints a table per second, or with --json the agent's lines as they
            come. --count N stops after N seconds (default: until interrupted). --phone NAME ranges
            one phone of the site's phones file (docs/phones.md) instead.
            """,
            run: RangeCommand.run),
        // MARK: single location request and visits
        Command(
            name: "locate", summary: "one location from a running agent (requestLocation)",
            usage: "locus locate [--state DIR] [--accuracy TIER] [--max-age S] [--timeout S]",
            details: """
            Prints {"fix":{TPV},"age_s":A,"accuracy_limited":B}. The agent answers at once with its
            last fix when that fix is at most --max-age seconds old (default 30) and within the
            tier's accuracy (TIER: best 5 m, nearestTenMeters 10 m, hundredMeters 100 m, kilometer
            1 km, threeKilometers 3 km; default the site's [updates] accuracy). Otherwise it wakes
            the receiver (out of the stationary pause or a coarse tier, through the receiver's
            plan), prints the first fix within the accuracy, or at --timeout (default 30 s) the most
            accurate fix it saw with accuracy_limited true; with no fix at all it exits 1
            (location_unavailable). The receiver then goes back to the plan it was on.
            """,
            run: AgentCommands.locate),
        Command(
            name: "visits", summary: "the visits in a running agent's log, as JSON lines",
            usage: "locus visits [--state DIR] [--since UNIX_SECONDS] [--limit N]",
            details: """
            Each visit is reported twice, as Core Location's CLVisit: at arrival (departure null),
            once the stay has lasted [updates] visit_minimum, and at departure. Prints the log's
            visit records oldest first with their log sequence number (seq): those at or after
            --since (arrival reports by their arrival, departures by their departure), the newest
            --limit (default and at most 200).
            """,
            run: AgentCommands.visits),
        Command(
            name: "help", summary: "show the commands, or the details of one",
            usage: "locus help [COMMAND]", details: "", run: { arguments in help(arguments) }),
    ]

    public static func main() {
        Process.exit(run(Process.arguments))
    }

    public static func run(_ arguments: [String]) -> Int32 {
        guard let first = arguments.first else {
            Console.out(overview())
            return 0
        }
        switch first {
        case "--version", "-V", "version":
            Console.out("locus \(LocusVersion.string)\n")
            return 0
        case "--help", "-h":
            return help(Array(arguments.dropFirst()))
        default:
            break
        }
        if first.hasPrefix("-") {
            return usageError("unknown option '\(first)'", hint: "run 'locus help' for the commands")
        }
        guard let command = commands.first(where: { $0.name == first }) else {
            var hint = "run 'locus help' for the commands"
            if let suggestion = Spelling.closest(to: first, among: commands.map { $0.name }) { hint = "did you mean 'locus \(suggestion)'?" }
            return usageError("unknown command '\(first)'", hint: hint)
        }
        return command.run(Array(arguments.dropFirst()))
    }

    /// One line on standard error, the form every command uses: `locus: <what>: <why>`.
    static func usageError(_ message: String, hint: String) -> Int32 {
        Console.error("locus: \(message); \(hint)\n")
        return 2
    }

    static func failure(_ what: String, _ why: String) -> Int32 {
        Console.error("locus: \(what): \(why)\n")
        return 1
    }

    static func help(_ arguments: [String]) -> Int32 {
        guard let name = arguments.first else {
            Console.out(overview())
            return 0
        }
        if arguments.count > 1 { return usageError("help takes at most one command", hint: "run 'locus help'") }
        guard let command = commands.first(where: { $0.name == name }) else {
            return usageError("unknown command '\(name)'", hint: "run 'locus help' for the commands")
        }
        var text = "usage: \(command.usage)\n\n\(command.summary)\n"
        if !command.details.isEmpty { text += "\n\(command.details)\n" }
        Console.out(text)
        return 0
    }

    static func overview() -> String {
        var text = "locus \(LocusVersion.string): location and beacon monitoring for Linux gateways\n\nusage: locus COMMAND [ARGUMENTS]\n\ncommands:\n"
        let width = commands.reduce(0) { max($0, $1.name.utf8.count) }
        for command in commands {
            text += "  \(command.name)\(String(repeating: " ", count: width - command.name.utf8.count + 2))\(command.summary)\n"
        }
        text += "\noptions:\n  --version\(String(repeating: " ", count: max(2, width - 7)))print the version\n"
        text += "\nRun 'locus help COMMAND' for a command's details.\n"
        return text
    }
}
