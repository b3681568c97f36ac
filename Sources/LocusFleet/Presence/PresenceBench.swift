import Foundation

/// The presence bench (`locus-fleet presence bench`, Scripts/bench-presence): ESPresense's
/// set-up in its own one-reading mode beside its published figures, then every floor plan
/// through the whole pipeline with calibration on and off.
public enum PresenceBench {
    public struct Size: Sendable {
        /// Independent walks of each ESPresense track.
        public var repetitions: Int
        /// Length of each pipeline run, and its tags.
        public var durationMs: Int64
        public var walkers: Int
        public var standers: Int

        /// Under a minute of CPU in a release build.
        public static let ci = Size(repetitions: 100, durationMs: 1_800_000, walkers: 3, standers: 6)

        public static func hours(_ hours: Double) -> Size {
            Size(repetitions: 1_000, durationMs: Int64(hours * 3_600_000), walkers: 4, standers: 8)
        }
    }

    public struct Report: Sendable, Codable {
        public var seed: UInt64
        public var comparisons: [PresenceSimulation.ComparisonResult]
        public var pipelines: [PresenceSimulation.PipelineResult]
    }

    /// The pipeline set-ups: ESPresense's floor walked along diagonal_walk with its noise and
    /// nothing hidden, then the house and the warehouse with every impairment.
    public static func setups(_ size: Size, model: PresenceModel = PresenceModel()) -> [PresenceSimulation.PipelineSetup] {
        var espresense = PresenceSimulation.PipelineSetup(name: "espresense (walked)", toml: PresenceSimulation.Plans.espresense)
        espresense.hiddenOffsetDB = 0
        espresense.hiddenTagPowerDB = 0
        espresense.impairments = .none
        espresense.track = .diagonalWalk
        var setups = [espresense,
                      PresenceSimulation.PipelineSetup(name: "house", toml: PresenceSimulation.Plans.house),
                      PresenceSimulation.PipelineSetup(name: "warehouse", toml: PresenceSimulation.Plans.warehouse)]
        for index in setups.indices {
            setups[index].durationMs = size.durationMs
            setups[index].walkers = size.walkers
            setups[index].standers = size.standers
            setups[index].model = model
        }
        return setups
    }

    public static func run(seed: UInt64, size: Size, model: PresenceModel = PresenceModel()) -> Report {
        var random = PresenceRandom(seed: seed)
        let comparisons = [PresenceSimulation.Track.diagonalWalk, .livingToBedroom].map {
            PresenceSimulation.compare(track: $0, repetitions: size.repetitions, seed: random.next(), model: model)
        }
        let pipelines = setups(size, model: model).map { PresenceSimulation.pipeline($0, seed: random.next()) }
        return Report(seed: seed, comparisons: comparisons, pipelines: pipelines)
    }
}

extension PresenceBench.Report {
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }

    public var text: String {
        var lines = ["presence bench, seed \(seed)", "",
                     "ESPresense set-up, one reading per station per sample, no memory (published: ESPresense-companion docs/accuracy.md)",
                     "| track | samples | median m | p95 m | mean m | max m | wrong area | published median / p95 / wrong area |",
                     "|---|---:|---:|---:|---:|---:|---:|---|"]
        for row in comparisons {
            let published = row.published.map { "\(f($0.medianM)) / \(f($0.p95M)) / \(percent($0.wrongAreaShare))" } ?? "-"
            lines.append("| \(row.track) | \(row.samples) | \(f(row.errors.medianM)) | \(f(row.errors.p95M)) | \(f(row.errors.meanM)) | "
                         + "\(f(row.errors.maximumM)) | \(percent(row.wrongAreaShare)) | \(published) |")
        }
        lines += ["", "Pipeline: 10 Hz advertisements -> PresenceSummary per gateway (1 s periods) -> estimator -> tracker",
                  "| plan | calibration | median m | p95 m | wrong area | standing changes/h (tag-hours) | near a boundary | moves (missed) "
                  + "| to right area after arrival median / max s | after crossing median / max s |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in pipelines {
            for (label, score) in [("on", row.calibrated), ("off", row.uncalibrated)] {
                lines.append("| \(row.plan) | \(label) | \(f(score.errors.medianM)) | \(f(score.errors.p95M)) | \(percent(score.wrongAreaShare)) | "
                             + "\(f(score.standingChangesPerHour)) (\(f(score.standingHours, digits: 1))) | "
                             + "\(f(score.boundaryChangesPerHour)) (\(f(score.boundaryHours, digits: 1))) | \(score.moves) (\(score.movesMissed)) | "
                             + "\(f(score.fromArrivalMedianS, digits: 1)) / \(f(score.fromArrivalMaxS, digits: 1)) | "
                             + "\(f(score.fromCrossingMedianS, digits: 1)) / \(f(score.fromCrossingMaxS, digits: 1)) |")
            }
        }
        lines += ["", "Calibration: largest receive-offset error / tag-power error (dB): "
                  + pipelines.map { "\($0.plan) \(f($0.calibrationOffsetErrorMaxDB, digits: 2)) / \(f($0.tagPowerErrorMaxDB, digits: 2))" }.joined(separator: ", ")]
        return lines.joined(separator: "\n") + "\n"
    }

    private func f(_ value: Double, digits: Int = 2) -> String { value.isNaN ? "-" : String(format: "%.\(digits)f", value) }
    private func percent(_ share: Double) -> String { String(format: "%.1f %%", share * 100) }
}
