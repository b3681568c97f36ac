extension LogPayload {
    /// What the gateway did with a configuration or a command from the fleet (docs/remote.md):
    /// the `remote` record, the fleet's acknowledgement once the uplink has published it.
    ///
    /// Payload: kind (1 configuration, 2 command), result (1 applied, 2 refused, 3 done,
    /// 4 failed), the version (u64), the command's id and action (a length byte, then bytes),
    /// the message's SHA-256 (32 bytes, zeros when unknown), the reason (u16 length, bytes), then
    /// what a command found (`detail`: JSON the gateway rendered, u16 length, bytes; a record
    /// written before detail existed ends after the reason).
    public struct RemoteResult: Equatable, Sendable {
        public enum Kind: UInt8, Sendable { case config = 1, command = 2 }
        public enum Result: UInt8, Sendable {
            case applied = 1, refused = 2, done = 3, failed = 4
            public var name: StaticString {
                switch self {
                case .applied: return "applied"
                case .refused: return "refused"
                case .done: return "done"
                case .failed: return "failed"
                }
            }
        }

        public static let maximumIDBytes = 64
        public static let maximumReasonBytes = 300
        /// A located fix, or a snapshot's nearest beacons (`FleetCommands.snapshotBeacons`).
        public static let maximumDetailBytes = 2_048

        public var kind: Kind
        public var result: Result
        /// A configuration's version (0: unknown, the message could not be read that far).
        public var version: UInt64 = 0
        /// A command's id and action ("" when unknown).
        public var id: [UInt8] = []
        public var action: [UInt8] = []
        public var digest: [UInt8] = []
        public var reason: [UInt8] = []
        /// One JSON object the gateway rendered: what a `locate` or `snapshot` found.
        public var detail: [UInt8] = []

        public init(kind: Kind, result: Result) {
            self.kind = kind
            self.result = result
        }

        public static let maximumSize = 2 + 8 + 1 + maximumIDBytes + 1 + 16 + 32 + 2 + maximumReasonBytes + 2 + maximumDetailBytes
    }

    public static func write(_ remote: RemoteResult, _ writer: inout ByteWriter) {
        precondition(remote.id.count <= RemoteResult.maximumIDBytes && remote.action.count <= 16, "a remote record's id and action fit their length bytes")
        precondition(remote.digest.isEmpty || remote.digest.count == 32, "a digest is SHA-256's 32 bytes")
        precondition(remote.detail.count <= RemoteResult.maximumDetailBytes, "a command's detail fits its record")
        writer.put(remote.kind.rawValue)
        writer.put(remote.result.rawValue)
        writer.put(remote.version)
        writer.put(UInt8(remote.id.count))
        for byte in remote.id { writer.put(byte) }
        writer.put(UInt8(remote.action.count))
        for byte in remote.action { writer.put(byte) }
        for index in 0..<32 { writer.put(remote.digest.isEmpty ? 0 : remote.digest[index]) }
        let reason = remote.reason.prefix(RemoteResult.maximumReasonBytes)
        writer.put(UInt16(reason.count))
        for byte in reason { writer.put(byte) }
        writer.put(UInt16(remote.detail.count))
        for byte in remote.detail { writer.put(byte) }
    }

    public static func readRemote(_ reader: inout ByteReader) -> RemoteResult? {
        guard let kind = RemoteResult.Kind(rawValue: reader.uint8()), let result = RemoteResult.Result(rawValue: reader.uint8()) else { return nil }
        var remote = RemoteResult(kind: kind, result: result)
        remote.version = reader.uint64()
        remote.id = reader.bytes(Int(reader.uint8()))
        remote.action = reader.bytes(Int(reader.uint8()))
        remote.digest = reader.bytes(32)
        if remote.digest.allSatisfy({ $0 == 0 }) { remote.digest = [] }
        remote.reason = reader.bytes(Int(reader.uint16()))
        if !reader.isAtEnd { remote.detail = reader.bytes(Int(reader.uint16())) }
        return reader.failed ? nil : remote
    }
}

extension ByteReader {
    /// The next `count` bytes (empty and `failed` when fewer are left).
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        for _ in 0..<count {
            let byte = uint8()
            if failed { return [] }
            result.append(byte)
        }
        return result
    }
}
