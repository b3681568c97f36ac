import CLocus
import LocusCore

/// The monotonic clock, nanoseconds. Everything that schedules (backoff, timers) takes `now` from
/// here once per loop turn and passes it down.
public enum MonotonicClock {
    public static func now() -> Int64 { locus_monotonic_ns() }

    /// The monotonic clock as a typed instant (deadlines, retries, the loop's `now`).
    public static var instant: MonotonicInstant { MonotonicInstant(nanoseconds: locus_monotonic_ns()) }
}

/// Random bits for spreading retries and naming queries (the kernel's, or a simulation's seeded
/// ones: a seed decides the whole of a simulated run).
public enum Randomness {
    public static func next() -> UInt64 { locus_random64() }
}

/// Wall-clock time and sleeping without a busy wait (replay at a chosen speed).
public enum Clock {
    /// CLOCK_REALTIME, nanoseconds since 1970 (the time stamped on records).
    public static func realtimeNs() -> Int64 { locus_realtime_ns() }

    public static func sleep(nanoseconds: Int64) {
        guard nanoseconds > 0 else { return }
        var remaining = nanoseconds
        // poll(2) with no descriptors is a millisecond sleep; bounded by the requested time.
        while remaining > 0 {
            let step = min(remaining, 1_000_000_000)
            _ = locus_poll(nil, nil, nil, 0, Int32(max(1, step / 1_000_000)))
            remaining -= step
        }
    }
}
