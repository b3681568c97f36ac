import Foundation
@testable import LocusFleet
import Testing

/// The ingest's writer thread: one piece of work at a time, its end seen by `take`, its results
/// visible to the caller after it.
@Suite struct BatchWriterTests {
    final class Box: @unchecked Sendable { var values: [Int] = [] }

    @Test func workRunsOnItsOwnThreadAndIsTakenOnceEnded() {
        let writer = BatchWriter()
        let box = Box()
        #expect(writer.take(waitMs: 0) == false, "nothing given")
        #expect(writer.take(waitMs: nil) == false, "nothing given: no wait")
        let started = Date()
        writer.start {
            usleep(200_000)
            box.values.append(1)
        }
        #expect(writer.take(waitMs: 0) == false, "still running")
        #expect(writer.take(waitMs: 20) == false, "still running after 20 ms")
        #expect(Date().timeIntervalSince(started) < 0.15, "start does not wait for the work")
        #expect(writer.take(waitMs: nil) == true)
        #expect(box.values == [1] && Date().timeIntervalSince(started) >= 0.2)
        #expect(writer.take(waitMs: 0) == false, "taken once")
        // The next piece, waited for with a deadline long enough.
        writer.start { box.values.append(2) }
        #expect(writer.take(waitMs: 5_000) == true)
        #expect(box.values == [1, 2])
        writer.stop()
    }

    @Test func stopWaitsForTheWorkGiven() {
        let writer = BatchWriter()
        let box = Box()
        writer.start {
            usleep(100_000)
            box.values.append(1)
        }
        writer.stop()
        #expect(box.values == [1])
    }
}
