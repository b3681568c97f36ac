import LocusCore
import LocusDevices

/// Where `config` and `command` publish: the broker the ingest reads (the same options), one
/// connection per run with a clean session of its own (a client id unlike any ingest's, so that
/// neither takes the other's session), each message at QoS 1 and its PUBACK awaited before
/// the next goes.
public final class FleetPublisher {
    let broker: FleetBroker
    /// The gateways' topic prefix, with `+` where the gateway id stands.
    let prefix: String

    init(_ settings: FleetBroker.Settings, prefix: String) throws(FleetError) {
        guard prefix.split(separator: "/", omittingEmptySubsequences: false).filter({ $0 == "+" }).count == 1 else {
            throw FleetError("--prefix '\(prefix)' needs one '+' where the gateway id stands (like locus/+) to name each gateway's topics")
        }
        _ = try IngestTopics(prefix: prefix, share: nil)
        self.prefix = prefix
        var settings = settings
        settings.outputBytes = RemoteMessage.maximumBytes + 4096
        broker = try FleetBroker(settings)
    }

    /// `<prefix>/remote/<what>` for the gateway.
    public func topic(_ gateway: String, _ what: String) -> String {
        prefix.split(separator: "/", omittingEmptySubsequences: false)
            .map { $0 == "+" ? gateway : String($0) }.joined(separator: "/") + "/remote/" + what
    }

    /// Publishes at QoS 1 and returns once the broker acknowledged it.
    public func publish(_ topic: String, _ message: String, retain: Bool) throws(FleetError) {
        try broker.publish(topic: topic, payload: Array(message.utf8), retain: retain)
    }

    public func close() { broker.disconnect() }

    /// A client id for one run: `locus-fleet-publish-` and 8 random hex digits.
    static func clientID() -> String {
        "locus-fleet-publish-" + String(String(Randomness.next(), radix: 16).suffix(8))
    }
}
