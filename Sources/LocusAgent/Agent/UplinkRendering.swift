import LocusCore

/// What the uplink's messages are rendered with: the topics (a buffer per topic kind, built once
/// from the prefix and the gateway id), the payload writer (reset per message), the agent's
/// version for Home Assistant's device, and the place labels (`[geocoding] annotate`: events,
/// visits and fixes carry the place nearest them). Each method renders one payload into
/// `payload`, replacing what it held; nothing here allocates after `init`.
struct UplinkRendering: ~Copyable {
    var topics: UplinkTopics
    private(set) var payload = JSONWriter(capacity: max(UplinkJSON.maximumDiscoveryBytes, UplinkJSON.maximumEventBytes, UplinkJSON.maximumRemoteBytes))
    /// The agent's version, for Home Assistant's device.
    private let version: UnsafeMutableRawBufferPointer
    private let places: PlaceLabels?

    init(topics: consuming UplinkTopics, places: PlaceLabels?) {
        self.topics = topics
        self.places = places
        let versionBytes = Array(LocusVersion.string.utf8.prefix(UplinkJSON.maximumVersionBytes))
        version = .allocate(byteCount: versionBytes.count, alignment: 1)
        version.copyBytes(from: versionBytes)
    }

    deinit { version.deallocate() }

    mutating func event(_ event: MonitorEvent, sequence: UInt64, previous: UInt64?) {
        payload.reset()
        UplinkJSON.event(event, sequence: sequence, previous: previous, gateway: topics.gateway, places: places, into: &payload)
    }

    mutating func state(_ event: MonitorEvent, sequence: UInt64) {
        payload.reset()
        UplinkJSON.state(event, sequence: sequence, gateway: topics.gateway, into: &payload)
    }

    mutating func gpio(_ change: LogPayload.GPIOChange, timeNs: Int64, sequence: UInt64, previous: UInt64?) {
        payload.reset()
        UplinkJSON.gpio(change, time: UTCTime(nanoseconds: timeNs), sequence: sequence, previous: previous, gateway: topics.gateway,
                        into: &payload)
    }

    mutating func remote(_ remote: LogPayload.RemoteResult, timeNs: Int64, sequence: UInt64, previous: UInt64?) {
        payload.reset()
        UplinkJSON.remote(remote, time: UTCTime(nanoseconds: timeNs), sequence: sequence, previous: previous, gateway: topics.gateway,
                          into: &payload)
    }

    mutating func visit(_ visit: Visit, sequence: UInt64, previous: UInt64?) {
        payload.reset()
        UplinkJSON.visit(visit, sequence: sequence, previous: previous, gateway: topics.gateway, places: places, into: &payload)
    }

    mutating func fix(_ fix: LogPayload.LoggedFix, sequence: UInt64) {
        payload.reset()
        UplinkJSON.fix(fix, sequence: sequence, gateway: topics.gateway, places: places, into: &payload)
    }

    mutating func sighting(_ sighting: Sighting) {
        payload.reset()
        UplinkJSON.sighting(sighting, gateway: topics.gateway, into: &payload)
    }

    mutating func discoveryCondition(monitor: FixedName, identifier: FixedName, kind: UplinkJSON.ConditionKind) {
        payload.reset()
        UplinkJSON.discoveryCondition(monitor: monitor, identifier: identifier, kind: kind, gateway: topics.gateway, prefix: topics.prefix,
                                      version: UnsafeRawBufferPointer(version), into: &payload)
    }

    mutating func discoveryOutput(output: FixedName) {
        payload.reset()
        UplinkJSON.discoveryOutput(output: output, gateway: topics.gateway, prefix: topics.prefix, version: UnsafeRawBufferPointer(version),
                                   into: &payload)
    }
}
