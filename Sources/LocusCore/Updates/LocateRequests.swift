/// Single location requests (CLLocationManager.requestLocation, the `locate` operation): the
/// rules, and the requests waiting for a fix, one per control connection.
///
/// - The last fix answers at once when it is at most `maxAgeMs` old and its horizontal accuracy
///   is within the tier's (`TierPolicy.desiredAccuracyM`: best 5 m, nearestTenMeters 10 m,
///   hundredMeters 100 m, kilometer 1 km, threeKilometers 3 km).
/// - Otherwise the request waits: the first fix with a position within the tier's accuracy
///   answers it; at its deadline (the request's timeout) the most accurate fix it saw answers it
///   with `accuracyLimited`, or, with none, it ends as `locationUnavailable`.
/// - While any request waits, the receiver is kept awake at the finest tier they ask for (the
///   caller's business: `finestTier`, `latestDeadlineNs`); when the last is answered it goes back.
///
/// Pure bookkeeping, fixed capacity (one request per slot, allocated once in `init`): starting,
/// observing a fix and ticking allocate nothing. Deadlines are on the monotonic clock (a timeout
/// is a wait, and the UTC clock steps when it starts following GNSS time); fix ages and answer
/// times on the agent's UTC clock; both in nanoseconds.
public final class LocateRequests {
    /// When the caller gives none: a fix up to 30 s old is recent (the hundredMeters tier's
    /// longest interval between fixes), and a request waits up to 30 s (a hot start takes about
    /// 1 s, a warm one up to about 30 s).
    public static let defaultMaxAgeMs: Int64 = 30_000
    public static let defaultTimeoutMs: Int64 = 30_000
    /// The longest timeout accepted (10 minutes: the slowest tier's interval).
    public static let maximumTimeoutMs: Int64 = 600_000
    public static let maximumMaxAgeMs: Int64 = 86_400_000

    public enum Outcome: Equatable, Sendable {
        case waiting
        /// A fix within the tier's accuracy.
        case located
        /// The deadline passed: the best fix seen, less accurate than asked.
        case accuracyLimited
        /// The deadline passed without a fix with a position.
        case unavailable
    }

    public struct Request: Equatable, Sendable {
        /// The request's `id`, echoed in its reply.
        public var id: Int64?
        public var tier: AccuracyTier
        /// Monotonic.
        public var deadlineNs: Int64
        public var timeoutMs: Int64
        /// The most accurate fix seen since the request (the answer once it is `located`).
        public var best: Fix?
        public var outcome: Outcome
        /// When it was answered, UTC (for the fix's age in the reply).
        public var answeredNs: Int64
    }

    /// One entry per control slot, allocated once.
    private let slots: UnsafeMutableBufferPointer<Request?>
    /// Requests waiting for a fix (answered ones not yet taken are not counted).
    public private(set) var waitingCount = 0
    /// Answered requests the caller has not taken with `nextAnswered`.
    public private(set) var answeredCount = 0

    public init(capacity: Int) {
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil)
    }

    deinit {
        slots.deinitialize()
        slots.deallocate()
    }

    public var capacity: Int { slots.count }

    // MARK: the rules

    /// Whether `fix` answers a request for `tier` at once (`LocateRule.answersAtOnce`).
    public static func answersAtOnce(_ fix: Fix?, tier: AccuracyTier, maxAgeMs: Int64, nowNs: Int64) -> Bool {
        LocateRule.answersAtOnce(fix, tier: tier, maxAgeMs: maxAgeMs, nowNs: nowNs)
    }

    /// A fix with a position within the tier's accuracy (`LocateRule.qualifies`).
    public static func qualifies(_ fix: Fix, _ tier: AccuracyTier) -> Bool { LocateRule.qualifies(fix, tier) }

    // MARK: requests

    /// Whether `slot` has a request waiting or answered but not yet taken.
    public func isBusy(_ slot: Int) -> Bool { slots[slot] != nil }

    /// A request from `slot` that the last fix did not answer: it waits until `monotonicNs +
    /// timeoutMs`. The slot must not be busy.
    @_noAllocation
    public func start(slot: Int, id: Int64?, tier: AccuracyTier, timeoutMs: Int64, monotonicNs: Int64) {
        // A local, not `self`, in the autoclosure: capturing self would retain it.
        let free = slots[slot] == nil
        precondition(free, "one location request per connection")
        slots[slot] = Request(id: id, tier: tier, deadlineNs: monotonicNs + timeoutMs * 1_000_000, timeoutMs: timeoutMs, best: nil, outcome: .waiting, answeredNs: 0)
        waitingCount += 1
    }

    /// The connection went away: its request is dropped, answered or not.
    public func cancel(slot: Int) {
        guard slot < slots.count, let request = slots[slot] else { return }
        if request.outcome == .waiting { waitingCount -= 1 } else { answeredCount -= 1 }
        slots[slot] = nil
    }

    /// A fix at UTC `nowNs`: the best so far of every waiting request; the ones it satisfies
    /// are answered.
    @_noAllocation
    public func observe(_ fix: Fix, nowNs: Int64) {
        guard waitingCount > 0, fix.hasPosition else { return }
        for slot in slots.indices {
            guard var request = slots[slot], request.outcome == .waiting else { continue }
            if LocateRule.isBetter(fix, than: request.best) { request.best = fix }
            if LocateRule.qualifies(fix, request.tier) {
                request.best = fix
                answer(&request, .located, nowNs)
            }
            slots[slot] = request
        }
    }

    /// Time passing: requests past their (monotonic) deadline are answered with what they have,
    /// at UTC `nowNs`.
    @_noAllocation
    public func tick(monotonicNs: Int64, nowNs: Int64) {
        guard waitingCount > 0 else { return }
        for slot in slots.indices {
            guard var request = slots[slot], request.outcome == .waiting, monotonicNs >= request.deadlineNs else { continue }
            answer(&request, request.best == nil ? .unavailable : .accuracyLimited, nowNs)
            slots[slot] = request
        }
    }

    /// The next answered request and its slot, removed from the table; nil when none.
    @_noAllocation
    public func nextAnswered() -> (slot: Int, request: Request)? {
        guard answeredCount > 0 else { return nil }
        for slot in slots.indices {
            guard let request = slots[slot], request.outcome != .waiting else { continue }
            slots[slot] = nil
            answeredCount -= 1
            return (slot, request)
        }
        preconditionFailure("an answered location request without its slot")
    }

    /// The finest tier a waiting request asks for; nil when none waits.
    public var finestTier: AccuracyTier? {
        guard waitingCount > 0 else { return nil }
        var finest: AccuracyTier? = nil
        for request in slots { if let request, request.outcome == .waiting, finest.map({ request.tier < $0 }) ?? true { finest = request.tier } }
        return finest
    }

    /// The earliest and the latest deadline of the waiting requests (monotonic).
    public var earliestDeadlineNs: Int64? { deadline(earliest: true) }
    public var latestDeadlineNs: Int64? { deadline(earliest: false) }

    private func deadline(earliest: Bool) -> Int64? {
        guard waitingCount > 0 else { return nil }
        var found: Int64? = nil
        for request in slots {
            guard let request, request.outcome == .waiting else { continue }
            if let current = found { found = earliest ? min(current, request.deadlineNs) : max(current, request.deadlineNs) } else { found = request.deadlineNs }
        }
        return found
    }

    private func answer(_ request: inout Request, _ outcome: Outcome, _ nowNs: Int64) {
        request.outcome = outcome
        request.answeredNs = nowNs
        waitingCount -= 1
        answeredCount += 1
    }
}

/// The rules of a single location request, apart from the table (an enum: no metadata to look up
/// on the allocation-free paths).
public enum LocateRule {
    /// Whether `fix` answers a request for `tier` at once: a position, at most `maxAgeMs` old at
    /// `nowNs`, within the tier's accuracy.
    public static func answersAtOnce(_ fix: Fix?, tier: AccuracyTier, maxAgeMs: Int64, nowNs: Int64) -> Bool {
        guard let fix, let time = fix.time, qualifies(fix, tier) else { return false }
        return nowNs - time.totalNanoseconds <= maxAgeMs * 1_000_000
    }

    /// A fix with a position whose accuracy is known and within the tier's.
    @inline(__always)
    public static func qualifies(_ fix: Fix, _ tier: AccuracyTier) -> Bool {
        guard fix.hasPosition, let accuracyM = fix.horizontalAccuracyM else { return false }
        return accuracyM <= TierPolicy(tier: tier).desiredAccuracyM
    }

    /// More accurate than `best` (a fix without a stated accuracy counts as the least accurate).
    @inline(__always)
    static func isBetter(_ fix: Fix, than best: Fix?) -> Bool {
        guard fix.hasPosition else { return false }
        guard let best else { return true }
        return (fix.horizontalAccuracyM ?? .infinity) <= (best.horizontalAccuracyM ?? .infinity)
    }
}
