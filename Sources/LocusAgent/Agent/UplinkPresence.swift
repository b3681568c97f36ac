import LocusCore

/// The uplink's presence messages (`what = [..., "presence"]`, docs/presence.md): every sighting
/// of the period is summarised per tag (`PresenceSummary`: a beacon's or a phone's identity),
/// and once a `presence_interval` one message with the loudest `presence_tags` tags goes to
/// `<prefix>/presence` at QoS 0. Presence is about now: a period whose message cannot go (the
/// broker away, the output full) is counted and dropped, never kept for later; the log's events
/// are what the backlog keeps. Tables are allocated at start; the message is rendered into the
/// uplink's buffer for it (`lineBytes`).
struct UplinkPresence: ~Copyable {
    let isEnabled: Bool
    let periodNs: Int64
    private var summary: PresenceSummary
    /// What the message's buffer must hold.
    let lineBytes: Int
    /// When the period ends (monotonic ns); nil until the first sighting after a message.
    private(set) var dueNs: Int64? = nil
    private var periodStartNs: Int64 = 0
    /// The phones file's names, for tags that are phones.
    var phones: Unmanaged<PhoneResolution>? = nil
    private(set) var published = 0
    private(set) var skipped = 0

    init(_ settings: SiteConfig.Uplink) {
        isEnabled = settings.content.contains(.presence)
        periodNs = settings.presenceIntervalMs * 1_000_000
        let tags = isEnabled ? settings.presenceTags : 1
        // Room for four times the tags a message carries: the loudest are chosen from them.
        summary = PresenceSummary(tagsMax: 4 * tags, summariesPerPeriodMax: tags)
        lineBytes = isEnabled ? UplinkJSON.maximumPresenceFrameBytes + tags * UplinkJSON.maximumPresenceTagBytes : 16
    }

    /// A sighting into the period's summary; the first one opens the period.
    @inline(__always)
    mutating func observe(_ sighting: Sighting, nowNs: Int64) {
        guard isEnabled, let rssi = sighting.rssi else { return }
        summary.record(tag: sighting.identity, rssiDBm: rssi, measuredPowerDBm: sighting.measuredPower,
                       timeMs: sighting.time.totalNanoseconds / 1_000_000)
        if dueNs == nil {
            dueNs = nowNs + periodNs
            periodStartNs = nowNs
        }
    }

    /// The period's message, rendered into `line` and the summary emptied, when it is due.
    mutating func take(nowNs: Int64, time: UTCTime, gateway: UnsafeRawBufferPointer, into line: inout JSONWriter) -> Bool {
        guard let due = dueNs, nowNs >= due else { return false }
        dueNs = nil
        line.reset()
        UplinkJSON.presenceStart(gateway: gateway, time: time, periodMs: (nowNs - periodStartNs) / 1_000_000, into: &line)
        let phones = phones
        let report = summary.drain(periodEndMs: time.totalNanoseconds / 1_000_000) { entry in
            var phone: FixedName? = nil
            if entry.tag.uuid == PhoneCondition.uuid, let phones {
                phone = phones._withUnsafeGuaranteedRef { $0.name(engineNumber: Int(entry.tag.minor)) }
            }
            UplinkJSON.presenceTag(entry, phone: phone, into: &line)
        }
        UplinkJSON.presenceEnd(report, into: &line)
        precondition(!line.overflowed, "a presence message fits its buffer (presence_tags tags at most)")
        return true
    }

    mutating func counted(sent: Bool) {
        if sent { published += 1 } else { skipped += 1 }
    }
}
