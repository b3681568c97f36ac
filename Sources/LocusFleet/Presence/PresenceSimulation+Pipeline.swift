import LocusCore

extension PresenceSimulation {
    /// One pipeline run: tags advertise every 100 ms, gateways summarise each second with
    /// `PresenceSummary`, and two trackers (calibrated, and with calibration off) decide areas.
    public struct PipelineSetup: Sendable {
        public var name: String
        public var toml: String
        public var hiddenOffsetDB = 6.0
        public var hiddenTagPowerDB = 2.0
        var impairments = Impairments()
        /// Walkers follow this track back and forth; nil: random walks between areas.
        public var track: Track? = nil
        public var walkers = 3
        public var standers = 6
        public var durationMs: Int64 = 1_800_000
        public var model = PresenceModel()
    }

    static let advertisingIntervalMs: Int64 = 100
    static let periodMs: Int64 = 1_000
    static let beaconKeyBase: UInt64 = 1 << 31

    /// The state of a run, advanced by `step` every advertising interval.
    struct PipelineRun {
        let plan: PresenceFloorPlan
        let radio: Radio
        let setup: PipelineSetup
        var random: PresenceRandom
        var receivers: [Receiver]
        var tags: [Tag]
        /// Per tag: the positions of the current period, for the period's mean position.
        var periodPositions: [[PresenceFloorPlan.Point]]

        init(setup: PipelineSetup, seed: UInt64) {
            self.setup = setup
            plan = Plans.plan(setup.toml)
            var random = PresenceRandom(seed: seed)
            var world = random.split()
            radio = setup.hiddenOffsetDB > 0 ? Radio(plan: plan, hiddenOffsetDB: setup.hiddenOffsetDB, random: &world) : Radio(plan: plan)
            receivers = plan.gateways.map { _ in Receiver() }
            tags = []
            periodPositions = []
            self.random = random
            makeTags(startMs: 0)
        }

        mutating func makeTags(startMs: Int64) {
            let endMs = startMs + setup.durationMs
            for index in 0..<(setup.walkers + setup.standers) {
                var itinerary: Itinerary
                if index >= setup.walkers {
                    itinerary = Itinerary()
                    let area = random.below(plan.areas.count)
                    itinerary.legs.append(.init(from: .init(0, 0), to: .init(0, 0), startMs: startMs, endMs: startMs))
                    itinerary.legs[0].to = plan.randomPoint(in: area, random: &random)
                    itinerary.legs[0].from = itinerary.legs[0].to
                    itinerary.stand(at: itinerary.legs[0].to, forMs: setup.durationMs)
                } else if let track = setup.track {
                    itinerary = .backAndForth(track, startMs: startMs, untilMs: endMs)
                } else {
                    itinerary = .randomWalk(plan: plan, startMs: startMs, untilMs: endMs, random: &random)
                }
                let power = Double(Tag.advertisedPowerDBm) + random.uniform(-setup.hiddenTagPowerDB, setup.hiddenTagPowerDB)
                tags.append(Tag(key: UInt64(index + 1), powerDBm: power, itinerary: itinerary,
                                fadeUntilMs: Array(repeating: 0, count: plan.gateways.count),
                                fadeDepthDB: Array(repeating: 0, count: plan.gateways.count)))
            }
            periodPositions = Array(repeating: [], count: tags.count)
        }

        /// One advertisement from a transmitter at `point` to every gateway that is up; `tag` is
        /// the index of the tag (for its fades) or nil for a gateway's own beacon.
        mutating func advertise(key: UInt64, from point: PresenceFloorPlan.Point, powerDBm: Double, tag: Int?, sender: Int?, nowMs: Int64) {
            for gateway in receivers.indices where gateway != sender && receivers[gateway].isUp(atMs: nowMs) {
                if random.chance(setup.impairments.packetLossShare) { continue }
                let height = sender.flatMap { plan.gateways[$0].heightM }
                var mean = radio.meanRSSI(gateway: gateway, from: point, heightM: height, powerDBm: powerDBm)
                if let tag { mean -= fade(tag: tag, gateway: gateway, nowMs: nowMs) }
                let rssi = radio.reading(mean: mean, random: &random)
                guard rssi >= radio.sensitivityDBm else { continue }
                let quantised = Int8(clamping: Int(rssi.rounded()))
                receivers[gateway].summary.record(tag: PresenceSimulation.identity(key), rssiDBm: quantised, measuredPowerDBm: Tag.advertisedPowerDBm, timeMs: nowMs)
            }
        }

        /// The depth of the fade on this tag-gateway pair now, dB; starts new fades at random.
        mutating func fade(tag: Int, gateway: Int, nowMs: Int64) -> Double {
            if nowMs < tags[tag].fadeUntilMs[gateway] { return tags[tag].fadeDepthDB[gateway] }
            let every = setup.impairments.fadeEveryMs
            guard every > 0, random.chance(Double(advertisingIntervalMs) / every) else { return 0 }
            tags[tag].fadeUntilMs[gateway] = nowMs + Int64(random.uniform(2_000, 8_000))
            tags[tag].fadeDepthDB[gateway] = random.uniform(4, 10)
            return tags[tag].fadeDepthDB[gateway]
        }

        /// Starts gateway outages at random (checked once a period).
        mutating func outages(nowMs: Int64) {
            let every = setup.impairments.outageEveryMs
            guard every > 0 else { return }
            for receiver in receivers where receiver.isUp(atMs: nowMs) && random.chance(Double(periodMs) / every) {
                receiver.downUntilMs = nowMs + Int64(random.uniform(30_000, 120_000))
                receiver.summary.reset()
            }
        }

        /// Every gateway's summaries of the period, as observations per tag key.
        mutating func drain(periodEndMs: Int64) -> [UInt64: [PresenceObservation]] {
            var byTag: [UInt64: [PresenceObservation]] = [:]
            for (gateway, receiver) in receivers.enumerated() {
                guard receiver.isUp(atMs: periodEndMs) else {
                    receiver.summary.reset()
                    continue
                }
                receiver.summary.drain(periodEndMs: periodEndMs) { entry in
                    byTag[PresenceSimulation.key(entry.tag), default: []].append(PresenceObservation(gateway: gateway, rssiDBm: entry.rssiDBm, count: entry.count))
                }
            }
            return byTag
        }
    }
}

extension PresenceSimulation {
    /// The simulation's tags and gateway beacons as beacon identities (one UUID, the key as major
    /// and minor), as the gateways' summaries carry them.
    static let tagUUID = BeaconUUID(high: 0x5349_4D55_4C41_5445, low: 0x5441_4753_0000_0000)

    static func identity(_ key: UInt64) -> BeaconIdentity {
        precondition(key <= UInt64(UInt32.max), "a simulated tag's key fits major and minor")
        return BeaconIdentity(uuid: tagUUID, major: UInt16(truncatingIfNeeded: key >> 16), minor: UInt16(truncatingIfNeeded: key))
    }

    static func key(_ identity: BeaconIdentity) -> UInt64 { UInt64(identity.major) << 16 | UInt64(identity.minor) }
}
