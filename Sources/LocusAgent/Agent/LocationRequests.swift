import LocusCore

/// The single location requests (`locate`), owned by `LiveUpdates`: those waiting for a fix, one
/// per control slot; the last fix with a position, which answers a new request at once when it
/// is recent and accurate enough; and what the requests came to since start, for the status
/// (answered at once, located, accuracy-limited, unavailable; how long requests kept the receiver
/// awake: the total of the waits that ended, and since when requests have been waiting now).
///
/// What a request does to the receiver and the radios is `LiveUpdates`' to decide.
struct LocationRequests {
    /// Location requests waiting for a fix, one per control slot.
    let pending: LocateRequests
    /// The last fix with a position (any filter's verdict aside), for requests answered at once.
    var lastFix: Fix? = nil
    private(set) var atOnce = 0
    private(set) var located = 0
    private(set) var accuracyLimited = 0
    private(set) var unavailable = 0
    /// Since when requests have been waiting (the receiver kept awake for them), and the total.
    private var waitingSinceNs: Int64? = nil
    private(set) var waitingNs: Int64 = 0

    /// One request at a time for each of `slots` control connections.
    init(slots: Int) { pending = LocateRequests(capacity: slots) }

    mutating func answeredAtOnce() { atOnce += 1 }

    /// The first request started waiting (none was).
    mutating func startedWaiting(nowNs: Int64) { waitingSinceNs = nowNs }

    /// The last waiting request was answered or went away: its wait joins the total.
    mutating func stoppedWaiting(nowNs: Int64) {
        if let since = waitingSinceNs { waitingNs += max(0, nowNs - since) }
        waitingSinceNs = nil
    }

    /// A waiting request's reply without a fix to give.
    mutating func answeredUnavailable() { unavailable += 1 }

    /// A waiting request's reply with a fix: within the tier's accuracy (`located`), or the best
    /// seen when the deadline passed (accuracy-limited).
    mutating func answered(located isLocated: Bool) {
        if isLocated { located += 1 } else { accuracyLimited += 1 }
    }
}
