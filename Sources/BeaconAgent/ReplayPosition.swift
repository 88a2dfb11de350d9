import Foundation
import LibCrypto

/// How far a replay got, kept in the spool directory so that running the same replay again adds nothing: the
/// agent resumes after the last report that went into a spooled batch (the spool delivers those itself).
///
/// The record is written before each batch of the replay is appended to the spool, naming that batch's sequence,
/// the position after it and the position before it. A position is the number of reports consumed, and the
/// numbers of earlier ones not in any batch yet (frames waiting for their beacon's identity, `IdentityHold`),
/// which a resumed replay reads again. On start, if the spool's sequence counter shows the batch
/// was appended, the replay resumes at the position after it, otherwise at the one before: a kill between the
/// two writes neither loses a report nor sends one twice.
public struct ReplayPosition: Codable, Sendable, Equatable {
    /// What identifies the input (`CaptureReplaySource.identity`).
    public var input: String
    public var sequence: UInt64
    /// Reports of the input consumed through batch `sequence`, and before it.
    public var reports: Int64
    public var unbatched: [Int64]
    public var reportsBefore: Int64
    public var unbatchedBefore: [Int64]

    public init(input: String, sequence: UInt64, reports: Int64, unbatched: [Int64] = [], reportsBefore: Int64, unbatchedBefore: [Int64] = []) {
        self.input = input
        self.sequence = sequence
        self.reports = reports
        self.unbatched = unbatched
        self.reportsBefore = reportsBefore
        self.unbatchedBefore = unbatchedBefore
    }

    enum CodingKeys: String, CodingKey {
        case input, sequence, reports, unbatched
        case reportsBefore = "reports_before"
        case unbatchedBefore = "unbatched_before"
    }

    static let fileName = "replay-position.json"

    /// Where to resume `input`, given the spool's next sequence: the reports consumed and the earlier ones to read
    /// again; nothing for another input or none recorded.
    public static func resume(input: String, directory: String, nextSequence: UInt64) -> (reports: Int64, unbatched: [Int64]) {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
            let position = try? JSONDecoder().decode(ReplayPosition.self, from: data), position.input == input
        else { return (0, []) }
        return nextSequence > position.sequence
            ? (position.reports, position.unbatched) : (position.reportsBefore, position.unbatchedBefore)
    }

    /// Writes the record (a new file renamed over the old, flushed to disk when `durable`).
    func write(directory: String, durable: Bool) throws(SpoolError) {
        let path = directory + "/" + Self.fileName
        let temporary = path + ".new"
        let data = (try? JSONEncoder().encode(self)) ?? Data()
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SpoolError(.io, path: temporary, errno: errno, "cannot write the replay position") }
        let written = data.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let failure = written == data.count ? 0 : errno
        let synced = failure == 0 && (!durable || fsync(descriptor) == 0)
        let syncFailure = synced ? 0 : errno
        close(descriptor)
        guard failure == 0, synced else {
            throw SpoolError(.io, path: temporary, errno: failure != 0 ? failure : syncFailure, "cannot write the replay position")
        }
        guard rename(temporary, path) == 0 else {
            throw SpoolError(.io, path: path, errno: errno, "cannot replace the replay position")
        }
        guard durable else { return }
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else { throw SpoolError(.io, path: directory, errno: errno, "cannot open the spool directory") }
        defer { close(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            throw SpoolError(.io, path: directory, errno: errno, "cannot flush the spool directory")
        }
    }
}

extension CaptureReplaySource {
    /// The capture's identity: its size and the SHA-256 of its first MiB (the same file wherever it lies; a
    /// capture still growing is another input).
    public static func identity(of path: String, _ what: String = "capture file") throws -> String {
        let handle = try openReplayInput(path, what)
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: 0)
        let head: Data
        do {
            head = try handle.read(upToCount: 1 << 20) ?? Data()
        } catch {
            throw SourceError(source: path, "cannot read the capture file (\(error.localizedDescription))")
        }
        let digest = head.withUnsafeBytes { LibCrypto.sha256($0) }.map { String(format: "%02x", $0) }.joined()
        return "capture:\(size):\(digest.prefix(32))"
    }
}

/// Opens a replay's input (`what`: a capture file, a recording) for reading; a directory, which opens but cannot be
/// read, is refused.
func openReplayInput(_ path: String, _ what: String) throws(SourceError) -> FileHandle {
    guard let handle = FileHandle(forReadingAtPath: path) else {
        throw SourceError(source: path, "cannot open the \(what) (\(String(cString: strerror(errno))))")
    }
    var status = stat()
    guard fstat(handle.fileDescriptor, &status) == 0 else {
        let error = SourceError(source: path, "cannot examine the \(what) (\(String(cString: strerror(errno))))")
        try? handle.close()
        throw error
    }
    guard status.st_mode & S_IFMT != S_IFDIR else {
        try? handle.close()
        throw SourceError(source: path, "is a directory: give a \(what)")
    }
    return handle
}

/// A replay the engine records as it goes: its input, the reports consumed, and the position of the last batch
/// that reached the spool.
struct ReplayProgress: Sendable {
    var input: String
    var consumed: Int64
    var spooled: Int64
    var spooledUnbatched: [Int64]
}
