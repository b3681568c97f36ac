import LocusCore

/// What `LiveUpdates` decided for the radios and the loop has yet to take: the receiver's orders
/// in the order they were given (`ReceiverOrder`: a pause's sleep or wake, a sample's sleep, a
/// new plan), and the BLE scan's timing for a new radio tier.
///
/// The queue is bounded: the loop takes every order after each call into `LiveUpdates`, so one
/// call can queue at most `capacity`; more is a programmer error (the loop did not take them).
struct RadioOrders {
    /// Receiver orders one call can queue (a pause's wake and a sample's sleep, a plan).
    static let capacity = 8

    private var orders: [ReceiverOrder] = []
    /// Orders the loop has taken from `orders` (emptied once all are).
    private var taken = 0
    /// The BLE scan's timing for a new radio tier, until the loop takes it.
    private var scanSettings: ScanSettings? = nil

    init() { orders.reserveCapacity(RadioOrders.capacity) }

    mutating func queue(_ order: ReceiverOrder) {
        precondition(orders.count < RadioOrders.capacity, "receiver orders not taken by the loop")
        orders.append(order)
    }

    /// The next order, in the order they were queued; nil once all are taken (the queue then
    /// starts over, keeping its storage).
    mutating func next() -> ReceiverOrder? {
        guard taken < orders.count else {
            if taken > 0 {
                orders.removeAll(keepingCapacity: true)
                taken = 0
            }
            return nil
        }
        taken += 1
        precondition(taken <= orders.count, "an order is taken once")
        return orders[taken - 1]
    }

    /// The scan's timing for a new tier (the latest replaces one not yet taken).
    mutating func scan(_ settings: ScanSettings) { scanSettings = settings }

    /// The scan's timing for a new tier, once.
    mutating func takeScanSettings() -> ScanSettings? {
        defer { scanSettings = nil }
        return scanSettings
    }
}
