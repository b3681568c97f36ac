import Foundation
@testable import LocusFleet
import TestSupport
import Testing

/// The fleet's presence from the gateways' messages: `PresenceService` on messages made from the
/// floor plan's own model, and `locus-fleet presence run` on mosquitto.
@Suite(.serialized) struct PresenceServiceTests {
    static let plan = PresenceSimulation.Plans.plan(PresenceSimulation.Plans.house)

    /// What `gateway` publishes for tags at `points` (name -> position), as the uplink renders it.
    static func message(gateway: Int, _ tags: [(name: String, at: PresenceFloorPlan.Point)]) -> [UInt8] {
        let rendered = tags.map { tag in
            let rssi = -59 - plan.pathLossDB(gateway: gateway, to: tag.at)
            let identity = tag.name.hasPrefix("phone:") ? "\"phone\":\"\(tag.name.dropFirst(6))\"" : "\"uuid\":\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\",\"major\":1,\"minor\":2"
            return "{\(identity),\"rssi\":\(String(format: "%.1f", rssi)),\"count\":10,\"min\":-90,\"max\":-40,\"power\":-59,\"distance_m\":null}"
        }
        return Array("{\"gateway\":\"\(plan.gateways[gateway].id)\",\"time\":\"2026-11-29T10:00:00.000Z\",\"period_ms\":2000,\"tags\":[\(rendered.joined(separator: ","))],\"more\":0,\"dropped\":0}".utf8)
    }

    @Test func aTagIsPlacedFollowedToAnotherRoomAndGoesAway() {
        var service = PresenceService(plan: Self.plan)
        let kitchen = PresenceFloorPlan.Point(7.5, 2), bedroom = PresenceFloorPlan.Point(2, 6)
        var changes: [String] = []
        var nowMs: Int64 = 0
        for round in 0..<12 {
            let at = round < 4 ? kitchen : bedroom
            for gateway in Self.plan.gateways.indices { service.take(Self.message(gateway: gateway, [("phone:alice", at), ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2", kitchen)])) }
            nowMs += 1_000
            changes += service.decide(nowMs: nowMs).map(\.text)
        }
        let alice = changes.filter { $0.hasPrefix("phone:alice") }
        #expect(alice.count == 2, "\(changes)")
        #expect(alice.first?.hasPrefix("phone:alice: - -> kitchen (") == true && alice.last?.hasPrefix("phone:alice: kitchen -> bedroom (") == true, "\(alice)")
        #expect(service.area(of: "phone:alice") == "bedroom" && service.area(of: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2") == "kitchen")
        // Silent past the away timeout (15 s): both go away, each once.
        nowMs += 16_000
        #expect(service.decide(nowMs: nowMs).map(\.text).sorted() == ["E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2: kitchen -> away", "phone:alice: bedroom -> away"])
        #expect(service.decide(nowMs: nowMs + 1_000).isEmpty)
        service.take(Array("{\"gateway\":\"garage\",\"tags\":[]}".utf8))
        service.take(Array("not json".utf8))
        #expect(service.counts.unknownGateways == 1 && service.counts.unreadable == 1 && service.counts.tagsHeard == 2)
    }

    /// `locus-fleet presence run ARGUMENTS` while alice stands in the study: three rounds of the
    /// five gateways' messages, as their uplinks publish them; its exit status and output.
    static func presenceRun(_ arguments: [String], port: UInt16) throws -> (Int32, String) {
        let run = Process()
        run.executableURL = URL(fileURLWithPath: try Fleet.binary("locus-fleet"))
        run.arguments = ["presence", "run"] + arguments
        let output = Pipe()
        run.standardOutput = output
        try run.run()
        usleep(1_000_000)
        for _ in 0..<3 {
            for gateway in plan.gateways.indices {
                let payload = String(decoding: message(gateway: gateway, [("phone:alice", PresenceFloorPlan.Point(8, 6))]), as: UTF8.self)
                let sent = try Fleet.run("/usr/bin/mosquitto_pub", ["-p", "\(port)", "-t", "locus/\(plan.gateways[gateway].id)/presence", "-m", payload])
                #expect(sent.status == 0, "\(sent.error)")
            }
            usleep(700_000)
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        return (run.terminationStatus, text)
    }

    @Test func presenceRunDecidesFromTheBrokersMessagesAndPublishesTheArea() throws {
        let broker = try TestBroker(listeners: [[]])
        let work = try Fleet.temporaryDirectory("presence-run")
        try PresenceSimulation.Plans.house.write(toFile: work + "/plan.toml", atomically: true, encoding: .utf8)
        let collector = try TestCollector(port: broker.ports[0], filters: ["site/presence/#", "homeassistant/#"])
        let database = try Fleet.migratedDatabase("presence")
        let (status, text) = try Self.presenceRun(["--broker", "mqtt://127.0.0.1:\(broker.ports[0])", "--plan", work + "/plan.toml",
                                                   "--publish", "site/presence", "--home-assistant", "--database", database, "--seconds", "12"],
                                                  port: broker.ports[0])
        #expect(status == 0)
        #expect(text.contains("  phone:alice: - -> study ("), "\(text)")
        #expect(text.contains("presence: 15 messages (0 unreadable, 0 from gateways not in the plan), 1 tags"), "\(text)")
        #expect(collector.wait(seconds: 5) { $0.contains { $0.topic == "site/presence/phone-alice" } })
        let published = collector.messages.first { $0.topic == "site/presence/phone-alice" }?.json
        #expect(published?["area"] as? String == "study" && published?["away"] as? Bool == false, "\(String(describing: published))")
        // Home Assistant: a device tracker for the tag, its location the area.
        let config = collector.messages.first { $0.topic == "homeassistant/device_tracker/locus_presence_phone-alice/config" }?.json
        #expect(config?["state_topic"] as? String == "site/presence/phone-alice/state" && config?["name"] as? String == "phone:alice", "\(String(describing: config))")
        #expect(collector.messages.contains { $0.topic == "site/presence/phone-alice/state" && String(decoding: $0.payload, as: UTF8.self) == "study" })
        // The change and the tag's area now, in the fleet's database.
        let cluster = try Fleet.cluster.get()
        let name = String(database.split(separator: "/").last!.split(separator: "?").first!)
        #expect(try cluster.psql("select tag || ' ' || coalesce(from_area, '-') || ' ' || to_area from presence_changes", database: name) == "phone:alice - study")
        #expect(try cluster.psql("select area || ' ' || away::text from presence_current where tag = 'phone:alice'", database: name) == "study false")
    }

    /// Two rooms, four gateways each advertising its own beacon, hidden receive offsets.
    static let calibrationPlan = """
        path_loss_exponent = 2.5
        [[area]]
        name = "east"
        rectangle = [0, 0, 6, 6]
        [[area]]
        name = "west"
        rectangle = [6, 0, 12, 6]
        [[gateway]]
        id = "a"
        x = 0.5
        y = 0.5
        beacon = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/9/1"
        [[gateway]]
        id = "b"
        x = 11.5
        y = 0.5
        beacon = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/9/2"
        [[gateway]]
        id = "c"
        x = 0.5
        y = 5.5
        beacon = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/9/3"
        [[gateway]]
        id = "d"
        x = 11.5
        y = 5.5
        beacon = "e2c56db5-dffb-48d2-b060-d0f5a71096e0/9/4"
        """
    static let hiddenOffsetsDB = [4.0, -3.0, 1.5, -2.5]

    /// Gateway `listener`'s message: every other gateway's beacon (-59 dBm at 1 m) and a phone
    /// at `spot` (-63 dBm at 1 m), through the listener's hidden offset.
    static func calibrationMessage(_ plan: PresenceFloorPlan, listener: Int, spot: PresenceFloorPlan.Point) -> [UInt8] {
        var tags: [String] = []
        for sender in plan.gateways.indices where sender != listener {
            let rssi = -59 + hiddenOffsetsDB[listener] - PresenceCalibration.gatewayPathLossDB(plan, from: sender, to: listener)
            tags.append("{\"uuid\":\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\",\"major\":9,\"minor\":\(sender + 1),\"rssi\":\(rssi),\"count\":10,\"power\":-59}")
        }
        let phone = -63 + hiddenOffsetsDB[listener] - plan.pathLossDB(gateway: listener, to: spot)
        tags.append("{\"phone\":\"alice\",\"rssi\":\(phone),\"count\":10,\"power\":-59}")
        return Array("{\"gateway\":\"\(plan.gateways[listener].id)\",\"tags\":[\(tags.joined(separator: ","))]}".utf8)
    }

    @Test func calibrationLearnsTheHiddenOffsetsAndAPhonesPowerAndSaysWhatItChanges() throws {
        let plan = try PresenceFloorPlan.parse(toml: Self.calibrationPlan)
        #expect(plan.gateways[3].beacon == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/9/4", "beacons are named in upper case, as messages name them")
        var recording = PresenceRecording(plan: plan)
        // The phone lies at (6.8, 3), in the west room near its edge, for 20 s: the uncalibrated
        // offsets (the east gateways read louder) pull it east.
        let spot = PresenceFloorPlan.Point(6.8, 3)
        for second in 0..<20 {
            for listener in plan.gateways.indices {
                recording.take(Self.calibrationMessage(plan, listener: listener, spot: spot), timeMs: Int64(second) * 1_000 + Int64(listener))
            }
        }
        let (result, powers) = recording.calibrate(spots: ["phone:alice": spot])
        let mean = Self.hiddenOffsetsDB.reduce(0, +) / 4
        for index in 0..<4 {
            #expect(abs(result.gatewayOffsetsDB[index] - (Self.hiddenOffsetsDB[index] - mean)) < 0.05, "\(result.gatewayOffsetsDB)")
        }
        // The gauge: powers are seen through the mean offset.
        #expect(abs((powers["phone:alice"] ?? 0) - (-63 + mean)) < 0.05, "\(powers)")
        let changed = recording.decisionsChanged(offsetsDB: result.gatewayOffsetsDB, tagPowersDBm: powers)
        #expect(changed.decided > 0 && changed.differing > 0, "a phone near the edge moves across it once calibrated: \(changed)")
        let file = PresenceCalibrationFile.text(plan: plan, offsetsDB: result.gatewayOffsetsDB, solved: result.gatewaySolved, tagPowersDBm: powers, note: "test")
        let read = try PresenceCalibrationFile.read(file, plan: plan, file: "calibration.toml")
        #expect(zip(read.offsetsDB, result.gatewayOffsetsDB).allSatisfy { abs($0 - $1) < 0.006 } && read.tagPowersDBm.count == 1)
        do {
            _ = try PresenceCalibrationFile.read("[gateway_offsets_db]\n\"z\" = 1.0\n", plan: plan, file: "calibration.toml")
            Issue.record("a gateway not in the plan is refused")
        } catch {
            #expect(error.description == "calibration.toml:2:1: gateway 'z' is not in the floor plan", "\(error)")
        }
    }

    @Test func calibrateListensSolvesAndWritesWhatPresenceRunReads() throws {
        let broker = try TestBroker(listeners: [[]])
        let work = try Fleet.temporaryDirectory("presence-calibrate")
        try Self.calibrationPlan.write(toFile: work + "/plan.toml", atomically: true, encoding: .utf8)
        let plan = try PresenceFloorPlan.parse(toml: Self.calibrationPlan)
        let run = Process()
        run.executableURL = URL(fileURLWithPath: try Fleet.binary("locus-fleet"))
        run.arguments = ["presence", "calibrate", "--broker", "mqtt://127.0.0.1:\(broker.ports[0])", "--plan", work + "/plan.toml",
                         "--seconds", "8", "--out", work + "/calibration.toml", "phone:alice=6.8,3"]
        let output = Pipe()
        run.standardOutput = output
        try run.run()
        usleep(1_000_000)
        for _ in 0..<2 {
            for listener in plan.gateways.indices {
                let payload = String(decoding: Self.calibrationMessage(plan, listener: listener, spot: PresenceFloorPlan.Point(6.8, 3)), as: UTF8.self)
                let sent = try Fleet.run("/usr/bin/mosquitto_pub", ["-p", "\(broker.ports[0])", "-t", "locus/\(plan.gateways[listener].id)/presence", "-m", payload])
                #expect(sent.status == 0, "\(sent.error)")
            }
            usleep(600_000)
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        #expect(run.terminationStatus == 0, "\(text)")
        // The hidden offsets less their mean (0): +4, -3, +1.5, -2.5.
        for (id, offset) in [("a", "+4.00"), ("b", "-3.00"), ("c", "+1.50"), ("d", "-2.50")] {
            #expect(text.contains("  gateway \(id): receive offset \(offset) dB\n"), "\(text)")
        }
        #expect(text.contains("  tag phone:alice: -63.0 dBm at 1 m\n") && text.contains("calibration: 8 messages, 24 hearings"), "\(text)")
        let written = try String(contentsOfFile: work + "/calibration.toml", encoding: .utf8)
        let read = try PresenceCalibrationFile.read(written, plan: plan, file: "calibration.toml")
        #expect(read.offsetsDB == [4, -3, 1.5, -2.5] && read.tagPowersDBm == ["phone:alice": -63], "\(written)")
    }
}
