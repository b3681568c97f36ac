import LocusCore

extension PresenceSimulation {
    /// Where a tag is over time: legs of standing (from == to) and walking, back to back.
    struct Itinerary {
        struct Leg {
            var from: PresenceFloorPlan.Point
            var to: PresenceFloorPlan.Point
            var startMs: Int64
            var endMs: Int64
        }

        var legs: [Leg] = []
        private var cursor = 0

        var endMs: Int64 { legs.last?.endMs ?? 0 }
        var isStanding: Bool { legs.allSatisfy { $0.from == $0.to } }

        mutating func stand(at point: PresenceFloorPlan.Point, forMs durationMs: Int64) {
            let start = endMs
            legs.append(Leg(from: point, to: point, startMs: start, endMs: start + durationMs))
        }

        mutating func walk(to point: PresenceFloorPlan.Point, speedMPerS: Double) {
            let from = legs.last!.to
            let start = endMs
            let durationMs = max(Int64(from.distance(to: point) / speedMPerS * 1000), 1)
            legs.append(Leg(from: from, to: point, startMs: start, endMs: start + durationMs))
        }

        /// When the leg under way at the last `position(atMs:)` ends.
        var currentLegEndMs: Int64 { legs[cursor].endMs }

        /// The position at `timeMs`; time only goes forward, so the current leg is remembered.
        mutating func position(atMs timeMs: Int64) -> PresenceFloorPlan.Point {
            while cursor + 1 < legs.count && legs[cursor].endMs <= timeMs { cursor += 1 }
            let leg = legs[cursor]
            let share = min(max(Double(timeMs - leg.startMs) / Double(max(leg.endMs - leg.startMs, 1)), 0), 1)
            return .init(leg.from.x + (leg.to.x - leg.from.x) * share, leg.from.y + (leg.to.y - leg.from.y) * share)
        }

        /// Stands in a random area, walks at about 1 m/s to a random point of another area at
        /// least `destinationMarginM` inside it, stands there 20 to 90 s, and so on until
        /// `untilMs`. The margin keeps "the right area after a move" meaningful: a tag that stops
        /// on a boundary is in both areas as far as any radio can tell.
        static let destinationMarginM = 1.0

        static func randomWalk(plan: PresenceFloorPlan, startMs: Int64, untilMs: Int64, random: inout PresenceRandom) -> Itinerary {
            var itinerary = Itinerary()
            var area = random.below(plan.areas.count)
            itinerary.legs.append(Leg(from: plan.randomPoint(in: area, random: &random), to: plan.randomPoint(in: area, random: &random),
                                      startMs: startMs, endMs: startMs))
            itinerary.legs[0].to = itinerary.legs[0].from
            // Bounded: every pass adds at least 20 s.
            while itinerary.endMs < untilMs {
                itinerary.stand(at: itinerary.legs.last!.to, forMs: Int64(random.uniform(20_000, 90_000)))
                let next = (area + 1 + random.below(plan.areas.count - 1)) % plan.areas.count
                itinerary.walk(to: plan.randomPoint(in: next, marginM: destinationMarginM, random: &random), speedMPerS: random.uniform(0.8, 1.2))
                area = next
            }
            return itinerary
        }

        /// Walks `track` at 1 m/s, back and forth, standing 20 s at either end, until `untilMs`.
        static func backAndForth(_ track: Track, startMs: Int64, untilMs: Int64) -> Itinerary {
            var itinerary = Itinerary()
            itinerary.legs.append(Leg(from: track.waypoints[0], to: track.waypoints[0], startMs: startMs, endMs: startMs))
            var forward = true
            // Bounded: every pass adds at least 20 s.
            while itinerary.endMs < untilMs {
                itinerary.stand(at: itinerary.legs.last!.to, forMs: 20_000)
                for point in forward ? Array(track.waypoints.dropFirst()) : Array(track.waypoints.reversed().dropFirst()) {
                    itinerary.walk(to: point, speedMPerS: 1.0)
                }
                forward.toggle()
            }
            return itinerary
        }
    }

    /// One gateway: its presence summary (the code the gateway runs) and its outages.
    final class Receiver {
        var summary = PresenceSummary(tagsMax: 64, summariesPerPeriodMax: 48)
        var downUntilMs: Int64 = 0

        func isUp(atMs timeMs: Int64) -> Bool { timeMs >= downUntilMs }
    }

    /// A tag in the world: its identity, its true power and where it goes.
    struct Tag {
        var key: UInt64
        /// The true RSSI at 1 m, dBm; the tag advertises -59.
        var powerDBm: Double
        var itinerary: Itinerary
        /// Per gateway: until when a multipath fade lasts, and how deep it is.
        var fadeUntilMs: [Int64]
        var fadeDepthDB: [Double]

        static let advertisedPowerDBm: Int8 = -59
    }

    /// The noise in the pipeline beyond single readings: lost packets, fades that last seconds,
    /// gateways that go away for a while.
    struct Impairments {
        var packetLossShare = 0.1
        /// Mean time between long fades on one tag-gateway pair, ms (0: none).
        var fadeEveryMs = 90_000.0
        /// Mean time between outages of one gateway, ms (0: none).
        var outageEveryMs = 900_000.0

        static let none = Impairments(packetLossShare: 0, fadeEveryMs: 0, outageEveryMs: 0)
    }
}
