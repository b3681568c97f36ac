/// What a control connection may do: Core Location's authorization, decided on a gateway from the
/// connecting process's credentials (see docs/access.md). Three grants, each a word in the site
/// file, in refusals and in `locus status`:
/// - `read`: records, identifiers, status, events (subscriptions that do not consume);
/// - `positions`: where the gateway is (live updates, and the position operations added beside
///   them); never given while `[privacy] fixes = "none"`;
/// - `change`: add, remove, open a monitor as its consumer (its cursor is logged), GPIO.
public struct AccessGrants: OptionSet, Equatable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = AccessGrants(rawValue: 1)
    public static let positions = AccessGrants(rawValue: 2)
    public static let change = AccessGrants(rawValue: 4)
    public static let all: AccessGrants = [.read, .positions, .change]

    /// The words, in order, for the site file and messages.
    public static let names: [(String, AccessGrants)] = [("read", .read), ("positions", .positions), ("change", .change)]

    /// The grant's word (a static string, for writers that must not allocate); "none" when empty.
    public var name: StaticString {
        switch self {
        case .read: return "read"
        case .positions: return "positions"
        case .change: return "change"
        default: return "none"
        }
    }

    /// "read, positions" ("none" when empty).
    public var description: String {
        var text = ""
        for (name, grant) in AccessGrants.names where contains(grant) { text += (text.isEmpty ? "" : ", ") + name }
        return text.isEmpty ? "none" : text
    }
}

// MARK: access levels

extension ControlRequest {
    /// The grant a request needs: the one place that says which operation is reading records,
    /// reading positions, or changing something. `hello` needs none (a client learns its grants
    /// from it). A new operation adds its arm here.
    public var requiredGrant: AccessGrants {
        switch self {
        case .hello: return []
        case .status, .identifiers, .record, .records: return .read
        case .subscribe(_, _, let consumer): return consumer ? .change : .read
        case .updates, .updatesStop: return .positions
        case .range, .rangePhone, .rangeStop, .locate, .visits: return .positions
        // Like locate: a geocode's answer is ranked by distance from the gateway's last fix.
        case .reverseGeocode, .geocode: return .positions
        case .add, .addAtPlace, .remove, .gpioClear, .open, .ack: return .change
        }
    }
}

/// Which socket a client came through: its file mode decides who can connect at all.
public enum ControlSocket: Equatable, Sendable {
    /// STATE/control.sock (0660, group locus): whoever reaches it has every grant, as before
    /// access levels.
    case control
    /// STATE/read.sock (0666 in a 0750 or 0751 directory): `[access] read_socket` for anyone,
    /// plus what their groups are granted.
    case readOnly

    public var fileName: StaticString { self == .control ? "control.sock" : "read.sock" }
}

/// The site's `[access]` with its group names resolved to ids (at start and on SIGHUP), and the
/// decision for one peer. Pure: the caller reads the credentials and resolves the names.
public struct AccessPolicy: Equatable, Sendable {
    /// Group ids granted each level (names that did not resolve are left out, and were reported).
    public var readGroups: [UInt32] = []
    public var positionsGroups: [UInt32] = []
    public var changeGroups: [UInt32] = []
    /// What any client of read.sock has, whoever it is.
    public var readSocket: AccessGrants = [.read, .positions]
    /// The agent's own user: like root, it has every grant.
    public var agentUser: UInt32
    public var privacy: SiteConfig.FixPrivacy

    public init(agentUser: UInt32, privacy: SiteConfig.FixPrivacy) {
        self.agentUser = agentUser
        self.privacy = privacy
    }

    /// The grants of a peer (`user`, its primary `group` and supplementary `groups`) on `socket`.
    public func grants(user: UInt32, group: UInt32, groups: [UInt32], socket: ControlSocket) -> AccessGrants {
        var grants: AccessGrants
        if user == 0 || user == agentUser || socket == .control {
            grants = .all
        } else {
            grants = readSocket
            func member(_ list: [UInt32]) -> Bool { list.contains(group) || list.contains { groups.contains($0) } }
            if member(readGroups) { grants.insert(.read) }
            if member(positionsGroups) { grants.insert(.positions) }
            if member(changeGroups) { grants.insert(.change) }
        }
        if privacy == .none { grants.remove(.positions) }
        return grants
    }

    /// Why a request needing `required` is refused to a client holding `held` on `socket`, and
    /// how to get the grant: the `permission_denied` message.
    public func refusal(_ required: AccessGrants, held: AccessGrants, socket: ControlSocket) -> String {
        let missing = AccessGrants(rawValue: required.rawValue & ~held.rawValue)
        if missing.contains(.positions) && privacy == .none {
            return "this needs the 'positions' grant, and this site gives out no positions to anyone ([privacy] fixes = \"none\")"
        }
        var message = "this needs the '\(missing)' grant; this connection (\(socket.fileName)) has: \(held)"
        switch missing {
        case .change:
            message += ". Changes go through control.sock (the locus user, root and group locus), or through read.sock for members of a group in the site's [access] change"
        default:
            message += ". Ask for a group in the site's [access] \(missing) list, or connect through control.sock (group locus)"
        }
        return message
    }
}
