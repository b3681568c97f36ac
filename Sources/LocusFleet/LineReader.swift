import LocusDevices

/// The lines of a file, read in chunks, each at most `maximumLineBytes` long in memory: a longer
/// line is returned cut to `keptBytes` with its whole length, so one huge line cannot exhaust
/// memory. The newline is not part of a line; a last line without one is still a line.
final class LineReader {
    struct Line {
        /// 1 for the first line.
        var number: Int
        var bytes: [UInt8]
        /// The line's length in the file; more than `bytes.count` for a line cut short.
        var totalBytes: Int
        var isCut: Bool { totalBytes > bytes.count }
    }

    static let chunkBytes = 1 << 16
    let maximumLineBytes: Int
    let keptBytes: Int
    private let file: ReadableFile
    private var chunk: [UInt8]
    private var chunkStart = 0
    private var chunkEnd = 0
    private var lineNumber = 0
    private var atEnd = false

    /// Throws errno's message for a file that cannot be opened.
    init(path: String, maximumLineBytes: Int, keptBytes: Int) throws(LineReaderError) {
        precondition(keptBytes <= maximumLineBytes)
        do { file = try ReadableFile(path: path) } catch { throw LineReaderError(path: path, reason: error.description) }
        self.maximumLineBytes = maximumLineBytes
        self.keptBytes = keptBytes
        chunk = [UInt8](repeating: 0, count: Self.chunkBytes)
        self.path = path
    }

    let path: String

    /// The next line, nil at the end of the file.
    func next() throws(LineReaderError) -> Line? {
        var bytes: [UInt8] = []
        var total = 0
        var sawAny = false
        while true {
            if chunkStart == chunkEnd {
                if atEnd { break }
                try fill()
                if chunkStart == chunkEnd { break }
            }
            sawAny = true
            let available = chunk[chunkStart..<chunkEnd]
            let newline = available.firstIndex(of: 0x0A)
            let end = newline ?? chunkEnd
            let piece = chunk[chunkStart..<end]
            total += piece.count
            let limit = total > maximumLineBytes ? keptBytes : maximumLineBytes
            if bytes.count < limit { bytes.append(contentsOf: piece.prefix(limit - bytes.count)) }
            if bytes.count > limit { bytes.removeLast(bytes.count - limit) }
            chunkStart = newline.map { $0 + 1 } ?? chunkEnd
            if newline != nil { break }
        }
        guard sawAny else { return nil }
        lineNumber += 1
        return Line(number: lineNumber, bytes: bytes, totalBytes: total)
    }

    /// Reads the next chunk (EINTR is retried, bounded, in LocusDevices' shim).
    private func fill() throws(LineReaderError) {
        chunkStart = 0
        chunkEnd = 0
        let read = chunk.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try file.read(into: buffer) } }
        switch read {
        case .success(0): atEnd = true
        case .success(let count): chunkEnd = count
        case .failure(let error): throw LineReaderError(path: path, reason: error.description)
        }
    }
}

struct LineReaderError: Error, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "\(path): \(reason)" }
}
