import AllocCounter
import Testing

@Suite struct AllocCounterTests {
    @Test func countsAllocationsAndSeesNoneWhenThereAreNone() {
        // The counter must see allocations it is meant to catch...
        let grown = allocations {
            var array: [Int] = []
            for index in 0..<100 { array.append(index) }
            #expect(array.count == 100)
        }
        #expect(grown > 0)
        // ...and none in code that only does arithmetic on the stack.
        var sum = 0
        let none = allocations {
            for index in 0..<1000 { sum &+= index }
        }
        #expect(sum == 499_500)
        #expect(none == 0)
    }
}
