@testable import LocusCore
import Testing

@Test func probeSizes() {
    print("SIZE Slot", MemoryLayout<MonitorEngine.Slot>.stride, "BeaconState", MemoryLayout<MonitorEngine.BeaconState>.stride,
          "GeoPoint", MemoryLayout<GeoPoint>.stride, "Settings", MemoryLayout<ConditionSettings>.stride,
          "Explanation", MemoryLayout<Explanation>.stride,
          "BeaconIdentity?", MemoryLayout<BeaconIdentity?>.stride, "FixedName", MemoryLayout<FixedName>.stride,
          "PendingEvent", MemoryLayout<MonitorEngine.PendingEvent>.stride, "MonitorEvent", MemoryLayout<MonitorEvent>.stride,
          "RSSIFilter", MemoryLayout<RSSIFilter>.stride, "Circle", MemoryLayout<CircularGeographicCondition>.stride,
          "Beacon", MemoryLayout<BeaconIdentityCondition>.stride, "Diagnostics", MemoryLayout<EventDiagnostics>.stride)
}
