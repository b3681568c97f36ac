/// `prev` for the published records of one exported log, read in order.
///
/// A log numbers every record (checkpoints, fixes, cursor records too) and the export writes
/// every one, so within a file the seqs follow each other; a seq that does not follow the last
/// record read means records are missing there (deleted by retention before they were fetched,
/// removed from the file, or quarantined as unreadable). Their kinds are unknown, so the next
/// published record takes as prev the last missing seq: a gap the database reports, from the
/// stored record before it. Otherwise prev is the previous published record read, 0 when the
/// file starts at the log's beginning (seq 1) and none came before, and nil (unknown) when the
/// file starts later.
struct PrevChain {
    /// The last record read successfully, of any type.
    private(set) var lastSeq: Int64? = nil
    private var lastPublished: Int64? = nil
    /// The last seq of a run of missing records since the last published one.
    private var missingTo: Int64? = nil
    /// The first record read was the log's first (seq 1).
    private var fromStart = false

    /// Why `seq` cannot come next (it does not follow the last record read), or nil.
    func orderProblem(_ seq: Int64) -> String? {
        guard let lastSeq, seq <= lastSeq else { return nil }
        return "seq \(seq) after seq \(lastSeq): out of order or repeated"
    }

    /// The prev of a published record `seq`, about to be read.
    func prev(of seq: Int64) -> Int64? {
        if let lastSeq, seq > lastSeq + 1 { return seq - 1 }
        if let missingTo { return missingTo }
        if let lastPublished { return lastPublished }
        if lastSeq == nil { return seq == 1 ? 0 : nil }
        return fromStart ? 0 : nil
    }

    /// A record read successfully (a published one only once it is mapped).
    mutating func read(_ seq: Int64, published: Bool) {
        precondition(orderProblem(seq) == nil, "records read out of order")
        if let lastSeq, seq > lastSeq + 1 { missingTo = seq - 1 }
        if lastSeq == nil { fromStart = seq == 1 }
        if published {
            lastPublished = seq
            missingTo = nil
        }
        lastSeq = seq
    }
}
