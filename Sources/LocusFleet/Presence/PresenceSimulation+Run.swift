import LocusCore

extension PresenceSimulation {
    /// What a tracker scored in a pipeline run.
    public struct PipelineScore: Sendable, Codable {
        public var errors: PresenceErrorStatistics
        /// Share of tag-periods whose decided area (away included) was not the true one.
        public var wrongAreaShare: Double
        /// Area changes of tags standing at least `Scorer.boundaryMarginM` inside their area.
        public var standingChangesPerHour: Double
        public var standingHours: Double
        /// The same for tags standing closer than that to another area (reported, no goal).
        public var boundaryChangesPerHour: Double
        public var boundaryHours: Double
        /// Moves into a new area (walks that end there), and those whose area was not decided
        /// within the stay (counted in the maxima with the whole stay).
        public var moves: Int
        public var movesMissed: Int
        /// Seconds from the end of the walk to deciding its area (0 when decided on the way).
        public var fromArrivalMedianS: Double
        public var fromArrivalMaxS: Double
        /// Seconds from crossing into the area to deciding it.
        public var fromCrossingMedianS: Double
        public var fromCrossingMaxS: Double
    }

    public struct PipelineResult: Sendable, Codable {
        public var plan: String
        public var calibrated: PipelineScore
        public var uncalibrated: PipelineScore
        /// The largest error of a learned receive offset against the hidden one (both with mean 0), dB.
        public var calibrationOffsetErrorMaxDB: Double
        public var tagPowerErrorMaxDB: Double
    }

    /// Time the calibration takes before the tags set off: 30 s of gateways hearing each other,
    /// 20 s of every tag at a known spot, a pause.
    static let mainStartMs: Int64 = 60_000

    public static func pipeline(_ setup: PipelineSetup, seed: UInt64) -> PipelineResult {
        var run = PipelineRun(setup: setup, seed: seed)
        let calibration = run.calibrate()
        let calibratedEstimator = PresenceEstimator(plan: run.plan, model: setup.model, gatewayOffsetsDB: calibration.gatewayOffsetsDB)
        let plainEstimator = PresenceEstimator(plan: run.plan, model: setup.model)
        var trackers = [PresenceTracker(estimator: calibratedEstimator), PresenceTracker(estimator: plainEstimator)]
        let advertised = Double(Tag.advertisedPowerDBm)
        let powers = [run.tags.map { calibration.tagPowersDBm[$0.key] ?? advertised }, run.tags.map { _ in advertised }]
        var scorers = [Scorer(tags: run.tags.count), Scorer(tags: run.tags.count)]
        run.walk(trackers: &trackers, tagPowersDBm: powers, scorers: &scorers)
        return PipelineResult(plan: setup.name, calibrated: scorers[0].score(), uncalibrated: scorers[1].score(),
                              calibrationOffsetErrorMaxDB: run.offsetErrorMaxDB(calibration),
                              tagPowerErrorMaxDB: run.tagPowerErrorMaxDB(calibration))
    }
}

extension PresenceSimulation.PipelineRun {
    typealias Simulation = PresenceSimulation

    /// Gateways hear each other's iBeacon for 30 s, then every tag lies at a known spot (the
    /// first area's first corner's neighbourhood, 1 m in) for 20 s; returns what was learned.
    mutating func calibrate() -> PresenceCalibration.Result {
        var hearings: [PresenceCalibration.Hearing] = []
        var spotObservations = Array(repeating: [PresenceObservation](), count: tags.count)
        let corner = plan.areas[0].shape.corners[0]
        let spot = PresenceFloorPlan.Point(corner.x + 1, corner.y + 1)
        var now: Int64 = 0
        while now < 50_000 {
            if now < 30_000 {
                for gateway in receivers.indices {
                    advertise(key: Simulation.beaconKeyBase + UInt64(gateway), from: plan.gateways[gateway].position,
                              powerDBm: radio.beaconPowersDBm[gateway], tag: nil, sender: gateway, nowMs: now)
                }
            } else {
                for tag in tags.indices { advertise(key: tags[tag].key, from: spot, powerDBm: tags[tag].powerDBm, tag: nil, sender: nil, nowMs: now) }
            }
            now += Simulation.advertisingIntervalMs
            guard now % Simulation.periodMs == 0 else { continue }
            for (key, observations) in drain(periodEndMs: now) {
                if key >= Simulation.beaconKeyBase {
                    let sender = Int(key - Simulation.beaconKeyBase)
                    hearings += observations.map { .init(listener: $0.gateway, sender: sender, rssiDBm: $0.rssiDBm) }
                } else if let tag = tags.firstIndex(where: { $0.key == key }) {
                    spotObservations[tag] += observations
                }
            }
        }
        let atSpot = tags.indices.map { PresenceCalibration.TagAtSpot(tag: tags[$0].key, spot: spot, observations: spotObservations[$0]) }
        return PresenceCalibration.solve(plan: plan, hearings: hearings, tags: atSpot)
    }

    /// The main run: every tag advertises every 100 ms along its itinerary; each second the
    /// gateways' summaries go to every tracker and the scorers compare with the truth.
    mutating func walk(trackers: inout [PresenceTracker], tagPowersDBm: [[Double]], scorers: inout [Simulation.Scorer]) {
        let start = Simulation.mainStartMs
        var now = start
        var truthAreas = tags.indices.map { plan.areaIndex(at: tags[$0].itinerary.position(atMs: start)) }
        while now < start + setup.durationMs {
            for tag in tags.indices {
                let point = tags[tag].itinerary.position(atMs: now)
                periodPositions[tag].append(point)
                let area = plan.areaIndex(at: point)
                if area != truthAreas[tag] {
                    truthAreas[tag] = area
                    if !tags[tag].itinerary.isStanding, let area {
                        let arrivalMs = tags[tag].itinerary.currentLegEndMs
                        for index in scorers.indices { scorers[index].crossed(tag: tag, into: area, atMs: now, arrivalMs: arrivalMs) }
                    }
                }
                advertise(key: tags[tag].key, from: point, powerDBm: tags[tag].powerDBm, tag: tag, sender: nil, nowMs: now)
            }
            now += Simulation.advertisingIntervalMs
            if now % Simulation.periodMs == 0 {
                period(endMs: now, trackers: &trackers, tagPowersDBm: tagPowersDBm, scorers: &scorers)
            }
        }
    }

    mutating func period(endMs: Int64, trackers: inout [PresenceTracker], tagPowersDBm: [[Double]], scorers: inout [Simulation.Scorer]) {
        outages(nowMs: endMs)
        let observations = drain(periodEndMs: endMs)
        let standing = tags.map { tag -> Simulation.Scorer.Standing in
            guard tag.itinerary.isStanding else { return .no }
            return plan.isInside(tag.itinerary.legs[0].to, byM: Simulation.Scorer.boundaryMarginM) ? .inside : .nearBoundary
        }
        for tag in tags.indices {
            let positions = periodPositions[tag]
            let meanPosition = PresenceFloorPlan.Point(positions.map(\.x).reduce(0, +) / Double(positions.count),
                                                       positions.map(\.y).reduce(0, +) / Double(positions.count))
            let truth = plan.areaIndex(at: tags[tag].itinerary.position(atMs: endMs))
            for index in trackers.indices {
                var fix: PresenceFix? = nil
                if let heard = observations[tags[tag].key] {
                    fix = trackers[index].update(tag: tags[tag].key, observations: heard, tagPowerDBm: tagPowersDBm[index][tag], nowMs: endMs)?.fix
                }
                trackers[index].expire(nowMs: endMs)
                scorers[index].period(tag: tag, decision: trackers[index].decision(tag: tags[tag].key), truth: truth,
                                      error: fix.map { $0.position.distance(to: meanPosition) }, standing: standing[tag], endMs: endMs)
            }
            periodPositions[tag].removeAll(keepingCapacity: true)
        }
    }

    func offsetErrorMaxDB(_ calibration: PresenceCalibration.Result) -> Double {
        let hiddenMean = radio.receiveOffsetsDB.reduce(0, +) / Double(radio.receiveOffsetsDB.count)
        return zip(radio.receiveOffsetsDB, calibration.gatewayOffsetsDB).map { abs(($0 - hiddenMean) - $1) }.max() ?? 0
    }

    /// Tag powers are learned in the calibration's gauge, so they are compared with the true
    /// power plus the mean hidden offset.
    func tagPowerErrorMaxDB(_ calibration: PresenceCalibration.Result) -> Double {
        let hiddenMean = radio.receiveOffsetsDB.reduce(0, +) / Double(radio.receiveOffsetsDB.count)
        return tags.map { tag in abs((calibration.tagPowersDBm[tag.key] ?? .nan) - (tag.powerDBm + hiddenMean)) }.max() ?? 0
    }
}
