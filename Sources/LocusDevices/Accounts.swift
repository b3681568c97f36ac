import CLocus

/// Who is at the other end of a Unix socket connection, as the kernel says (SO_PEERCRED, and
/// SO_PEERGROUPS for the supplementary groups): the only input of the access decision.
public struct PeerCredentials: Equatable, Sendable {
    /// Supplementary groups kept per connection; a peer in more is judged on these (the kernel
    /// lists them in ascending order).
    public static let maximumGroups = 32

    public var pid: Int32
    public var user: UInt32
    public var group: UInt32
    public var groups: [UInt32]

    public init(pid: Int32, user: UInt32, group: UInt32, groups: [UInt32]) {
        self.pid = pid
        self.user = user
        self.group = group
        self.groups = groups
    }

    /// Nobody: a connection whose credentials could not be read has no grants beyond its socket's.
    public static let unknown = PeerCredentials(pid: 0, user: UInt32.max, group: UInt32.max, groups: [])

    /// The credentials of connected socket `descriptor`; `.unknown` when the kernel cannot say.
    public static func of(_ descriptor: Int32) -> PeerCredentials {
        var pid: Int32 = 0
        var user: UInt32 = 0
        var group: UInt32 = 0
        guard locus_peer_credentials(descriptor, &pid, &user, &group) == 0 else { return .unknown }
        var groups = [UInt32](repeating: 0, count: maximumGroups)
        let count = groups.withUnsafeMutableBufferPointer { locus_peer_groups(descriptor, $0.baseAddress, Int32(maximumGroups)) }
        // Older kernels (no SO_PEERGROUPS) or more groups than kept: the primary group still counts.
        groups.removeSubrange(Int(max(0, count))...)
        return PeerCredentials(pid: pid, user: user, group: group, groups: groups)
    }
}

/// The system's user and group names (NSS: /etc/passwd and /etc/group on a gateway).
public enum Accounts {
    /// The id of group `name`: nil when there is no such group.
    public static func groupID(_ name: String) throws(SystemError) -> UInt32? {
        var gid: UInt32 = 0
        let found = locus_group_id(name, &gid)
        if found < 0 { throw SystemError(code: -found) }
        return found == 1 ? gid : nil
    }

    public static func userName(_ uid: UInt32) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard buffer.withUnsafeMutableBufferPointer({ locus_user_name(uid, $0.baseAddress, $0.count) }) == 1 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    public static func groupName(_ gid: UInt32) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard buffer.withUnsafeMutableBufferPointer({ locus_group_name(gid, $0.baseAddress, $0.count) }) == 1 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// This process's user.
    public static var currentUser: UInt32 { locus_getuid() }
}
