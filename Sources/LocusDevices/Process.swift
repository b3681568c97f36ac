import CLocus
import LocusCore

/// The running process: arguments, environment, exit. Both build modes read arguments from the
/// C shim (Embedded Swift has no `CommandLine`).
public enum Process {
    /// Arguments after the program name.
    public static var arguments: [String] {
        var result: [String] = []
        let count = Int(locus_argc())
        var index = 1
        while index < count {
            if let pointer = locus_argv(Int32(index)) { result.append(String(cString: pointer)) }
            index += 1
        }
        return result
    }

    public static func environment(_ name: String) -> String? {
        guard let value = locus_getenv(name) else { return nil }
        return String(cString: value)
    }

    public static var id: Int32 { locus_getpid() }

    /// Gives the heap pages start-up freed back to the kernel, so the resident size is what the
    /// agent keeps, not what parsing the config once needed.
    public static func releaseFreeMemory() { locus_release_free_memory() }

    /// Fixed-capacity tables are large blocks of which only the used part is ever touched:
    /// mapped on their own, the untouched rest costs no memory.
    public static func mapLargeBlocks() { locus_map_large_blocks() }

    /// Heap bytes in use (including large mapped blocks) and free within the heap.
    public static var heapUsage: (inUse: Int64, free: Int64) {
        var inUse: Int64 = 0
        var free: Int64 = 0
        locus_heap_usage(&inUse, &free)
        return (inUse, free)
    }

    public static func exit(_ status: Int32) -> Never {
        locus_exit(status)
    }
}
