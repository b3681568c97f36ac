import Testing
@testable import LocusCore

/// `[uplink]` in the site file and the broker address: defaults, and every mistake reported
/// where it is, in words.
@Suite struct UplinkConfigTests {
    static func parse(_ uplink: String) -> (SiteConfig?, [String]) {
        let text = "board = \"sim\"\n[uplink]\n" + uplink
        do {
            return (try SiteConfig.parse(Array(text.utf8), file: "site.toml"), [])
        } catch {
            return (nil, error.diagnostics.map { $0.description })
        }
    }

    @Test func theBrokerAloneGivesTheDocumentedDefaults() throws {
        let (site, errors) = Self.parse("broker = \"mqtts://broker.example\"\n")
        #expect(errors.isEmpty, "\(errors)")
        let uplink = try #require(site?.uplink)
        #expect(uplink.broker == BrokerAddress(tls: true, host: "broker.example", address: nil, port: 8883))
        #expect(uplink.gateway == nil && uplink.clientID == nil && uplink.topicPrefix == nil && uplink.caFile == nil)
        #expect(uplink.content == [.events, .gpio, .visits])
        #expect(uplink.keepAliveMs == 60_000 && uplink.maxInflight == 16 && !uplink.homeAssistant)
        #expect(uplink.fixIntervalMs == 10_000 && uplink.sightingIntervalMs == 10_000)
        let (none, _) = Self.parse("")
        #expect(none == nil, "[uplink] without a broker is an error")
    }

    @Test func everyKeyIsRead() throws {
        let (site, errors) = Self.parse("""
            broker = "mqtts://[2001:db8::1]:9883"
            gateway = "gw-07.harbour"
            client_id = "locus-gw-07"
            topic_prefix = "fleet/harbour/gw-07"
            keepalive = "30s"
            ca_file = "/etc/locus/ca.crt"
            cert_file = "/etc/locus/gw.crt"
            key_file = "/etc/locus/gw.key"
            username = "gw-07"
            password_file = "/etc/locus/mqtt-password"
            what = ["events", "fixes", "sightings"]
            max_inflight = 32
            fix_interval = "5s"
            sighting_interval = "1min"
            home_assistant = true

            """)
        #expect(errors.isEmpty, "\(errors)")
        let uplink = try #require(site?.uplink)
        #expect(uplink.broker.description == "mqtts://[2001:db8::1]:9883")
        #expect(uplink.broker.address == IPAddress("2001:db8::1"))
        #expect(uplink.gateway == "gw-07.harbour" && uplink.clientID == "locus-gw-07" && uplink.topicPrefix == "fleet/harbour/gw-07")
        #expect(uplink.keepAliveMs == 30_000 && uplink.maxInflight == 32 && uplink.homeAssistant)
        #expect(uplink.caFile == "/etc/locus/ca.crt" && uplink.certFile == "/etc/locus/gw.crt" && uplink.keyFile == "/etc/locus/gw.key")
        #expect(uplink.username == "gw-07" && uplink.passwordFile == "/etc/locus/mqtt-password")
        #expect(uplink.content == [.events, .fixes, .sightings])
        #expect(uplink.fixIntervalMs == 5_000 && uplink.sightingIntervalMs == 60_000)
    }

    @Test(arguments: [
        ("broker = \"tcp://broker:1883\"\n", "site.toml:3:10: 'uplink.broker' = \"tcp://broker:1883\" starts with mqtts:// (TLS) or mqtt:// (plain)"),
        ("broker = \"mqtt://user:pw@broker\"\n", "'uplink.broker' = \"mqtt://user:pw@broker\" is mqtt[s]://HOST[:PORT] only"),
        ("broker = \"mqtts://broker:0\"\n", "has port '0', not 1...65535"),
        ("broker = \"mqtts://bro ker\"\n", "which is neither an address nor a DNS name"),
        ("broker = \"mqtts://[broker]\"\n", "in brackets, which is not an IPv6 address"),
        ("broker = \"mqtt://broker\"\nca_file = \"/etc/ca.crt\"\n", "site.toml:4:11: 'uplink.ca_file' is for TLS: the broker is mqtt:// (plain); write mqtts://"),
        ("broker = \"mqtts://broker\"\ncert_file = \"/etc/gw.crt\"\n", "'uplink.cert_file' needs 'uplink.key_file' too"),
        ("broker = \"mqtts://broker\"\npassword_file = \"/etc/pw\"\n", "'uplink.password_file' needs 'uplink.username'"),
        ("broker = \"mqtts://broker\"\nusername = \"u\"\npassword = \"secret\"\n", "the password does not go in the site file"),
        ("broker = \"mqtts://broker\"\nwhat = [\"events\", \"sighting\"]\n", "site.toml:4:19: 'uplink.what' has \"sighting\", which is not one of: events | gpio | visits | fixes | sightings | presence (did you mean \"sightings\"?)"),
        ("broker = \"mqtts://broker\"\ntopic_prefix = \"locus/#\"\n", "has '+', '#' or NUL"),
        ("broker = \"mqtts://broker\"\ntopic_prefix = \"$SYS/locus\"\n", "starts with '$'"),
        ("broker = \"mqtts://broker\"\ntopic_prefix = \"locus/\"\n", "ends with '/'"),
        ("broker = \"mqtts://broker\"\ngateway = \"gw 7\"\n", "a gateway id is 1...64 letters"),
        ("broker = \"mqtts://broker\"\nclient_id = \"\"\n", "'uplink.client_id' must be 1...128 printable ASCII"),
        ("broker = \"mqtts://broker\"\nkeepalive = \"1s\"\n", "uplink.keepalive"),
        ("broker = \"mqtts://broker\"\nmax_inflight = 0\n", "uplink.max_inflight"),
        ("broker = \"mqtts://broker\"\nmax_inflight = 1\n", "uplink.max_inflight"),
        ("brokr = \"mqtts://broker\"\n", "unknown key 'uplink.brokr' (did you mean 'broker'?)"),
        ("broker = []\n", "site.toml:3:10: 'uplink.broker' is an empty array: name at least one"),
        ("broker = [\"mqtts://a\", \"mqtt://b\"]\n", "site.toml:3:24: 'uplink.broker' mixes mqtts:// and mqtt://"),
        ("broker = [\"mqtts://a\", \"mqtts://a:8883\"]\n", "site.toml:3:24: 'uplink.broker' names \"mqtts://a:8883\" twice"),
        ("broker = [\"mqtts://a\", \"tcp://b\"]\n", "site.toml:3:24: 'uplink.broker' = \"tcp://b\" starts with mqtts://"),
        ("broker = [\"mqtts://a\", 7]\n", "'uplink.broker' must hold strings, not"),
        ("broker = 7\n", "'uplink.broker' must be a string or an array of strings, not"),
        ("broker = [" + (0..<17).map { "\"mqtt://n\($0)\"" }.joined(separator: ", ") + "]\n", "'uplink.broker' names 17 nodes; at most 16"),
    ] as [(String, String)])
    func mistakesAreReportedWhereTheyAre(text: String, expected: String) {
        let (site, errors) = Self.parse(text)
        #expect(site == nil)
        #expect(errors.contains { $0.contains(expected) }, "\(errors)")
    }

    /// A clustered broker: its nodes in the order written, the first the one tried first.
    @Test func aClustersNodesAreReadInOrder() throws {
        let (site, errors) = Self.parse("broker = [\"mqtt://10.0.0.1:1883\", \"mqtt://node-2\", \"mqtt://[::1]:1884\"]\n")
        #expect(errors.isEmpty, "\(errors)")
        let uplink = try #require(site?.uplink)
        #expect(uplink.brokers.map(\.description) == ["mqtt://10.0.0.1:1883", "mqtt://node-2:1883", "mqtt://[::1]:1884"])
        #expect(uplink.broker == uplink.brokers[0])
        let (one, _) = Self.parse("broker = [\"mqtts://only\"]\n")
        #expect(one?.uplink?.brokers.map(\.description) == ["mqtts://only:8883"])
    }

    @Test(arguments: [
        ("mqtt://127.0.0.1", "mqtt://127.0.0.1:1883"), ("mqtts://broker.example.", "mqtts://broker.example.:8883"),
        ("mqtt://[::1]:1884/", "mqtt://[::1]:1884"), ("mqtts://Broker-1.EXAMPLE:443", "mqtts://Broker-1.EXAMPLE:443"),
    ])
    func brokerAddressesRoundTrip(text: String, shown: String) throws {
        let address = try BrokerAddress.parse(text).get()
        #expect(address.description == shown)
    }
}
