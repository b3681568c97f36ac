import AllocCounter
import LocusCore
import Testing

/// Single location requests' rules (`LocateRequests`) and the pause's part in them
/// (`PauseController.requested`), with scripted fixes and times.
@Suite(.serialized) struct LocateRequestsTests {
    static let second: Int64 = 1_000_000_000
    static let start = Int64(1_710_496_800)

    /// A fix at `second` of the test's day with HDOP `hdop` (accuracy 5 m × HDOP).
    func fix(_ second: Int, hdop: Double) -> Fix { liveFix(second, 45.0, 7.0, hdop: hdop) }
    func ns(_ second: Int) -> Int64 { (Self.start + Int64(second)) * Self.second }

    @Test func theLastFixAnswersAtOnceWhenRecentAndAccurateEnough() {
        let last = fix(100, hdop: 1.6)   // 8 m
        #expect(LocateRequests.answersAtOnce(last, tier: .nearestTenMeters, maxAgeMs: 30_000, nowNs: ns(130)))
        #expect(!LocateRequests.answersAtOnce(last, tier: .nearestTenMeters, maxAgeMs: 30_000, nowNs: ns(131)), "31 s old")
        #expect(!LocateRequests.answersAtOnce(last, tier: .best, maxAgeMs: 30_000, nowNs: ns(101)), "8 m is not within best's 5 m")
        #expect(LocateRequests.answersAtOnce(last, tier: .hundredMeters, maxAgeMs: 0, nowNs: ns(100)))
        #expect(!LocateRequests.answersAtOnce(nil, tier: .threeKilometers, maxAgeMs: 600_000, nowNs: ns(100)))
        var noPosition = last
        noPosition.mode = .noFix
        #expect(!LocateRequests.answersAtOnce(noPosition, tier: .threeKilometers, maxAgeMs: 600_000, nowNs: ns(100)))
        // The tiers' metres are the live updates' `accuracyLimited` thresholds.
        for (tier, metres) in [(AccuracyTier.best, 5.0), (.nearestTenMeters, 10), (.hundredMeters, 100), (.kilometer, 1_000), (.threeKilometers, 3_000)] {
            #expect(LocateRequests.qualifies(fix(0, hdop: metres / 5), tier) && !LocateRequests.qualifies(fix(0, hdop: metres / 5 + 0.01), tier))
        }
    }

    @Test func aWaitingRequestIsAnsweredByTheFirstGoodFixAndOthersKeepWaiting() throws {
        let requests = LocateRequests(capacity: 4)
        requests.start(slot: 1, id: 7, tier: .nearestTenMeters, timeoutMs: 30_000, monotonicNs: ns(0))
        requests.start(slot: 3, id: 8, tier: .best, timeoutMs: 10_000, monotonicNs: ns(1))
        #expect(requests.waitingCount == 2 && requests.finestTier == .best)
        #expect(requests.earliestDeadlineNs == ns(11) && requests.latestDeadlineNs == ns(30))
        requests.observe(fix(2, hdop: 4), nowNs: ns(2))          // 20 m: neither
        #expect(requests.answeredCount == 0)
        requests.observe(fix(3, hdop: 1.8), nowNs: ns(3))        // 9 m: the ten-metre one
        #expect(requests.waitingCount == 1 && requests.answeredCount == 1 && requests.finestTier == .best)
        let takenfirst = requests.nextAnswered()
        let first = try #require(takenfirst)
        #expect(first.slot == 1 && first.request.id == 7 && first.request.outcome == .located)
        #expect(first.request.best?.time == UTCTime(seconds: Self.start + 3) && first.request.answeredNs == ns(3))
        let none = requests.nextAnswered()
        #expect(none == nil && !requests.isBusy(1) && requests.isBusy(3))

        // The best request's deadline: the most accurate fix it saw, accuracy limited.
        requests.observe(fix(5, hdop: 3), nowNs: ns(5))
        requests.tick(monotonicNs: ns(11) - 1, nowNs: ns(11) - 1)
        #expect(requests.waitingCount == 1)
        requests.tick(monotonicNs: ns(11), nowNs: ns(11))
        let takensecond = requests.nextAnswered()
        let second = try #require(takensecond)
        #expect(second.slot == 3 && second.request.outcome == .accuracyLimited)
        #expect(second.request.best?.hdop == 1.8, "the 9 m fix was the best seen: \(String(describing: second.request.best?.hdop))")
        #expect(requests.waitingCount == 0 && requests.finestTier == nil && requests.latestDeadlineNs == nil)
    }

    @Test func withoutAFixTheRequestEndsUnavailableAndACancelledOneIsGone() throws {
        let requests = LocateRequests(capacity: 2)
        requests.start(slot: 0, id: nil, tier: .hundredMeters, timeoutMs: 5_000, monotonicNs: ns(0))
        var noFix = fix(1, hdop: 1)
        noFix.mode = .noFix
        requests.observe(noFix, nowNs: ns(1))
        requests.tick(monotonicNs: ns(5), nowNs: ns(5))
        let takenanswered = requests.nextAnswered()
        let answered = try #require(takenanswered)
        #expect(answered.request.outcome == .unavailable && answered.request.best == nil && answered.request.timeoutMs == 5_000)

        requests.start(slot: 1, id: 2, tier: .hundredMeters, timeoutMs: 5_000, monotonicNs: ns(10))
        requests.cancel(slot: 1)
        #expect(requests.waitingCount == 0 && !requests.isBusy(1))
        requests.tick(monotonicNs: ns(20), nowNs: ns(20))
        #expect(requests.answeredCount == 0)
    }

    /// Eight requests through 100 fixes too poor for them, then their deadline: each call counted.
    @Test func observingAndTickingAllocateNothing() {
        let requests = LocateRequests(capacity: 8)
        let fixes = (0..<100).map { fix($0, hdop: 10) }
        var counted = 0
        counted += allocations { for slot in 0..<8 { requests.start(slot: slot, id: Int64(slot), tier: .best, timeoutMs: 50_000, monotonicNs: 0) } }
        for index in fixes.indices {
            let fix = fixes[index]
            let nowNs = Int64(index) * Self.second
            counted += allocations { requests.observe(fix, nowNs: nowNs) }
            counted += allocations { requests.tick(monotonicNs: nowNs, nowNs: nowNs) }
            counted += allocations { while requests.nextAnswered() != nil {} }
        }
        #expect(counted == 0)
        #expect(requests.waitingCount == 0 && requests.answeredCount == 0, "every request timed out and was taken")
    }

    // MARK: the pause

    @Test func aRequestWakesTheSleepingReceiverOnceAndTheNextTickPutsItBack() {
        var pause = PauseController(probeIntervalMs: 25_000, motionHoldMs: 10_000)
        #expect(pause.stationaryChanged(true, nowNs: 0) == .sleep(durationMs: 25_000))
        // Two requests while asleep: one wake.
        #expect(pause.requested(untilNs: 30 * Self.second, nowNs: 5 * Self.second) == .wake)
        #expect(pause.requested(untilNs: 20 * Self.second, nowNs: 6 * Self.second) == .none)
        #expect(pause.phase == .requested(untilNs: 30 * Self.second) && pause.requestWakes == 1)
        // Still stationary: a fix does not put it back to sleep while the request waits.
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, nowNs: 7 * Self.second) == .none)
        #expect(pause.tick(isStationary: true, nowNs: 8 * Self.second) == .none)
        // Answered at 9 s: the next tick puts it back to sleep.
        pause.requestsAnswered(nowNs: 9 * Self.second)
        #expect(pause.nextDeadlineNs == 9 * Self.second)
        #expect(pause.tick(isStationary: true, nowNs: 9 * Self.second) == .sleep(durationMs: 25_000))
        #expect(pause.phase == .asleep(untilNs: 34 * Self.second))

        // Moving when a request comes: nothing to wake, and back to active afterwards.
        var moving = PauseController(probeIntervalMs: 25_000, motionHoldMs: 10_000)
        #expect(moving.requested(untilNs: 30 * Self.second, nowNs: 0) == .none && moving.requestWakes == 0)
        moving.requestsAnswered(nowNs: Self.second)
        #expect(moving.tick(isStationary: false, nowNs: Self.second) == .none && moving.phase == .active)
    }
}
