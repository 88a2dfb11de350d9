#if canImport(Glibc)
import Glibc
#endif
import Logging

/// Why the spool failed: what it was doing, on which file, with errno when the system refused.
public struct SpoolError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The spool directory cannot be created, read or written.
        public static let io = Code(rawValue: "spool_io")
        /// A batch larger than the whole spool may hold.
        public static let tooLarge = Code(rawValue: "spool_batch_too_large")
        /// A batch whose sequence is not the next one.
        public static let outOfOrder = Code(rawValue: "spool_out_of_order")
    }

    public var code: Code
    public var path: String
    public var errno: Int32?
    public var message: String

    public init(_ code: Code, path: String, errno: Int32? = nil, _ message: String) {
        self.code = code
        self.path = path
        self.errno = errno
        self.message = message
    }

    public var description: String {
        let reason = errno.map { ": " + String(cString: strerror($0)) + " (errno \($0))" } ?? ""
        return "\(code) at \(path): \(message)\(reason)"
    }
}

/// The agent's durable queue of batches: append-only, checksummed segment files in one directory.
///
/// A batch is written (and, with `FsyncPolicy.always`, on disk) before it is published, and removed only when
/// the ingest's acknowledgement covers its sequence. The acknowledged sequence is kept in the file
/// `acknowledged`, written before any segment is deleted. After a crash, records are read back and checked; a
/// torn record at the end of the newest segment (the write that was interrupted) is cut off. When the spool
/// would exceed `maximumBytes`, whole segments are dropped oldest first, and the batches lost are counted.
///
/// Segment file `<first sequence, 20 digits>.seg`: the 8 bytes `BFSPOOL1`, then records of
/// `u32 LE payload length, u32 LE CRC-32C over (sequence, payload), u64 LE sequence, payload`.
///
/// Not thread-safe: one owner calls it, off Swift's cooperative pool (file writes and fsync block).
public final class Spool {
    public enum FsyncPolicy: Hashable, Sendable {
        /// fsync after every batch: nothing acknowledged by `append` is lost to a power cut.
        case always
        /// fsync when `sync()` is called (the agent calls it every few seconds).
        case periodic
        /// Leave it to the kernel: survives a process crash, not a power cut.
        case never
    }

    public struct Configuration: Sendable {
        public var directory: String
        public var maximumBytes: Int = 256 << 20
        public var segmentBytes: Int = 4 << 20
        public var fsync: FsyncPolicy = .always

        public init(directory: String) { self.directory = directory }
    }

    struct Record {
        var sequence: UInt64
        /// Offset of the payload in its segment.
        var offset: Int
        var length: Int
    }

    final class Segment {
        let firstSequence: UInt64
        let path: String
        let descriptor: Int32
        var size: Int
        var records: [Record] = []

        init(firstSequence: UInt64, path: String, descriptor: Int32, size: Int) {
            self.firstSequence = firstSequence
            self.path = path
            self.descriptor = descriptor
            self.size = size
        }

        var lastSequence: UInt64? { records.last?.sequence }

        deinit { close(descriptor) }
    }

    static let magic: [UInt8] = Array("BFSPOOL1".utf8)
    static let recordHeaderBytes = 16

    public let configuration: Configuration
    private let logger: Logger
    private var segments: [Segment] = []
    private var needsSync = false

    /// The sequence the next batch must carry.
    public private(set) var nextSequence: UInt64 = 1
    /// Every batch up to this sequence is committed by the ingest.
    public private(set) var acknowledgedThrough: UInt64 = 0
    /// Batches dropped because the spool was full, since it was opened.
    public private(set) var droppedBatches = 0
    /// Records found damaged when the spool was opened (besides a torn last record), and dropped.
    public private(set) var corruptRecords = 0
    /// Bytes on disk, headers included.
    public var byteCount: Int { segments.reduce(0) { $0 + $1.size } }

    public init(_ configuration: Configuration, logger: Logger) throws(SpoolError) {
        self.configuration = configuration
        self.logger = logger
        try makeDirectory(configuration.directory)
        acknowledgedThrough = try readAcknowledged()
        try recover()
        try removeAcknowledgedSegments()
    }

    /// Batches not yet acknowledged, oldest first.
    public var pendingCount: Int {
        segments.reduce(0) { total, segment in
            total + segment.records.reduce(0) { $0 + ($1.sequence > acknowledgedThrough ? 1 : 0) }
        }
    }

    /// The oldest sequence still waiting for its acknowledgement (or the next one when none waits): every
    /// sequence below it was acknowledged or dropped.
    public var firstUnacknowledgedSequence: UInt64 {
        for segment in segments {
            if let record = segment.records.first(where: { $0.sequence > acknowledgedThrough }) { return record.sequence }
        }
        return nextSequence
    }

    /// Up to `limit` unacknowledged batches with a sequence above `after`, oldest first.
    public func pending(after: UInt64, limit: Int) throws(SpoolError) -> [(sequence: UInt64, payload: [UInt8])] {
        var result: [(UInt64, [UInt8])] = []
        let floor = max(after, acknowledgedThrough)
        for segment in segments where (segment.lastSequence ?? 0) > floor {
            for record in segment.records where record.sequence > floor {
                if result.count == limit { return result }
                result.append((record.sequence, try read(record, in: segment)))
            }
        }
        return result
    }

    /// Writes a batch. `sequence` must be `nextSequence`.
    public func append(sequence: UInt64, payload: [UInt8]) throws(SpoolError) {
        guard sequence == nextSequence else {
            throw SpoolError(
                .outOfOrder, path: configuration.directory, "batch \(sequence) offered, \(nextSequence) expected")
        }
        let recordBytes = Self.recordHeaderBytes + payload.count
        guard recordBytes + Self.magic.count <= configuration.maximumBytes else {
            throw SpoolError(
                .tooLarge, path: configuration.directory,
                "a \(payload.count)-byte batch does not fit a spool of \(configuration.maximumBytes) bytes")
        }
        if let last = segments.last, last.size + recordBytes > configuration.segmentBytes, !last.records.isEmpty {
            try sync(last)
            try openSegment(firstSequence: sequence)
        } else if segments.isEmpty {
            try openSegment(firstSequence: sequence)
        }
        dropOldestSegments(toFit: recordBytes)
        let segment = segments[segments.count - 1]

        var record = [UInt8]()
        record.reserveCapacity(recordBytes)
        appendLittleEndian(UInt32(payload.count), to: &record)
        var sequenceBytes = [UInt8]()
        appendLittleEndian(sequence, to: &sequenceBytes)
        appendLittleEndian(CRC32C.checksum(payload, continuing: CRC32C.checksum(sequenceBytes)), to: &record)
        record += sequenceBytes
        record += payload
        let offset = segment.size
        do {
            try writeAll(record, to: segment, at: offset)
        } catch {
            // Leave no partial record behind for the next append to follow.
            _ = ftruncate(segment.descriptor, off_t(offset))
            throw error
        }
        segment.size += record.count
        segment.records.append(Record(sequence: sequence, offset: offset + Self.recordHeaderBytes, length: payload.count))
        nextSequence = sequence + 1
        switch configuration.fsync {
        case .always: try sync(segment)
        case .periodic: needsSync = true
        case .never: break
        }
    }

    /// Flushes written batches to disk (for `FsyncPolicy.periodic`).
    public func sync() throws(SpoolError) {
        guard needsSync, let segment = segments.last else { return }
        try sync(segment)
        needsSync = false
    }

    /// Records the ingest's acknowledgement and deletes the segments it fully covers. An acknowledgement beyond
    /// the last batch written (a retained ack from before this spool existed) moves `nextSequence` past it, so
    /// that new batches never reuse an acknowledged sequence.
    public func acknowledge(through sequence: UInt64) throws(SpoolError) {
        guard sequence > acknowledgedThrough else { return }
        acknowledgedThrough = sequence
        try writeAcknowledged(sequence)
        if nextSequence <= sequence { nextSequence = sequence + 1 }
        try removeAcknowledgedSegments()
    }

    /// Handles an acknowledgement beyond every sequence this spool ever wrote: it is about an earlier life of
    /// the same agent (a reinstall, a wiped state directory) that the broker still retains. The pending batches
    /// are written again after it, each renumbered by `renumber(newSequence, firstUnacknowledged, payload)`, then
    /// the old copies are acknowledged away: nothing is deleted before its new copy is on disk, and no batch
    /// keeps a sequence the ingest already committed. Returns how many batches moved.
    @discardableResult
    public func adoptAcknowledgement(
        beyondWritten sequence: UInt64, renumber: (UInt64, UInt64, [UInt8]) -> [UInt8]?
    ) throws(SpoolError) -> Int {
        guard sequence >= nextSequence else {
            try acknowledge(through: sequence)
            return 0
        }
        let moving = try pending(after: 0, limit: .max)
        nextSequence = sequence + 1
        let first = sequence + 1
        // A segment of their own: inside a segment, sequences run on by one.
        if !moving.isEmpty {
            if let last = segments.last { try sync(last) }
            try openSegment(firstSequence: first)
        }
        var moved = 0
        for (_, payload) in moving {
            guard let rewritten = renumber(nextSequence, first, payload) else {
                corruptRecords += 1
                continue
            }
            try append(sequence: nextSequence, payload: rewritten)
            moved += 1
        }
        if !moving.isEmpty {
            logger.warning(
                "Acknowledgement from an earlier life of this agent; pending batches renumbered after it",
                metadata: ["acknowledged": .stringConvertible(sequence), "renumbered": .stringConvertible(moved)])
        }
        try acknowledge(through: sequence)
        return moved
    }

    // MARK: Recovery

    private func recover() throws(SpoolError) {
        let names = try listDirectory(configuration.directory).filter { $0.hasSuffix(".seg") }
        let ordered = names.compactMap { name -> (UInt64, String)? in
            UInt64(name.dropLast(4)).map { ($0, name) }
        }.sorted { $0.0 < $1.0 }
        var previousSequence: UInt64 = 0
        for (position, (first, name)) in ordered.enumerated() {
            let path = configuration.directory + "/" + name
            let isNewest = position == ordered.count - 1
            let descriptor = open(path, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else { throw SpoolError(.io, path: path, errno: errno, "cannot open spool segment") }
            let bytes = try readWhole(descriptor, path: path)
            let segment = Segment(firstSequence: first, path: path, descriptor: descriptor, size: bytes.count)
            var offset = Self.magic.count
            var damaged = bytes.count < Self.magic.count || Array(bytes[0..<Self.magic.count]) != Self.magic
            while !damaged, offset < bytes.count {
                // Sequences run on by one inside a segment, from the one in its name, and rise across segments.
                let expected = segment.records.last.map { $0.sequence + 1 } ?? first
                guard let record = Self.parseRecord(bytes, at: offset), record.sequence == expected,
                    record.sequence > previousSequence
                else {
                    damaged = true
                    break
                }
                segment.records.append(record)
                previousSequence = record.sequence
                offset = record.offset + record.length
            }
            if damaged {
                let kept = max(offset, Self.magic.count)
                if isNewest {
                    // The write a crash interrupted: cut it off and append after the last good record.
                    logger.warning(
                        "Spool segment ends in a torn record; truncating",
                        metadata: ["path": "\(path)", "kept_bytes": .stringConvertible(kept), "file_bytes": .stringConvertible(bytes.count)])
                } else {
                    corruptRecords += 1
                    logger.error(
                        "Spool segment is damaged; keeping the records before the damage",
                        metadata: ["path": "\(path)", "kept_bytes": .stringConvertible(kept)])
                }
                if bytes.count < Self.magic.count || Array(bytes[0..<Self.magic.count]) != Self.magic {
                    try writeAll(Self.magic, to: segment, at: 0)
                }
                guard ftruncate(descriptor, off_t(kept)) == 0 else {
                    throw SpoolError(.io, path: path, errno: errno, "cannot truncate a damaged spool segment")
                }
                segment.size = kept
            }
            segments.append(segment)
        }
        let lastWritten = segments.last(where: { $0.lastSequence != nil })?.lastSequence ?? 0
        nextSequence = max(lastWritten, acknowledgedThrough) + 1
        if !segments.isEmpty {
            logger.info(
                "Spool recovered",
                metadata: [
                    "segments": .stringConvertible(segments.count), "pending": .stringConvertible(pendingCount),
                    "next_sequence": .stringConvertible(nextSequence), "acknowledged_through": .stringConvertible(acknowledgedThrough),
                ])
        }
    }

    static func parseRecord(_ bytes: [UInt8], at offset: Int) -> Record? {
        guard bytes.count - offset >= recordHeaderBytes else { return nil }
        let length = Int(readLittleEndian(bytes, offset, as: UInt32.self))
        let checksum = readLittleEndian(bytes, offset + 4, as: UInt32.self)
        let sequence = readLittleEndian(bytes, offset + 8, as: UInt64.self)
        let payload = offset + recordHeaderBytes
        guard length <= bytes.count - payload else { return nil }
        let computed = bytes.withUnsafeBytes { raw in
            CRC32C.checksum(
                UnsafeRawBufferPointer(rebasing: raw[payload..<(payload + length)]),
                continuing: CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[(offset + 8)..<(offset + 16)])))
        }
        guard computed == checksum, sequence > 0 else { return nil }
        return Record(sequence: sequence, offset: payload, length: length)
    }

    // MARK: Segments

    private func openSegment(firstSequence: UInt64) throws(SpoolError) {
        let digits = String(firstSequence)
        let path = configuration.directory + "/" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits
            + ".seg"
        let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw SpoolError(.io, path: path, errno: errno, "cannot create a spool segment") }
        let segment = Segment(firstSequence: firstSequence, path: path, descriptor: descriptor, size: 0)
        try writeAll(Self.magic, to: segment, at: 0)
        segment.size = Self.magic.count
        segments.append(segment)
        try syncDirectory()
    }

    private func dropOldestSegments(toFit recordBytes: Int) {
        while segments.count > 1, byteCount + recordBytes > configuration.maximumBytes {
            let oldest = segments.removeFirst()
            let lost = oldest.records.filter { $0.sequence > acknowledgedThrough }.count
            droppedBatches += lost
            unlink(oldest.path)
            logger.warning(
                "Spool full; dropped its oldest batches",
                metadata: [
                    "dropped_batches": .stringConvertible(lost), "first_sequence": .stringConvertible(oldest.firstSequence),
                    "maximum_bytes": .stringConvertible(configuration.maximumBytes),
                ])
        }
    }

    private func removeAcknowledgedSegments() throws(SpoolError) {
        var removed = false
        while let oldest = segments.first, (oldest.lastSequence ?? 0) <= acknowledgedThrough {
            segments.removeFirst()
            unlink(oldest.path)
            removed = true
        }
        if removed { try syncDirectory() }
    }

    private func read(_ record: Record, in segment: Segment) throws(SpoolError) -> [UInt8] {
        var payload = [UInt8](repeating: 0, count: record.length)
        var done = 0
        while done < record.length {
            let count = payload.withUnsafeMutableBytes { raw in
                pread(segment.descriptor, raw.baseAddress! + done, record.length - done, off_t(record.offset + done))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw SpoolError(.io, path: segment.path, errno: count < 0 ? errno : nil, "cannot read a spooled batch")
            }
            done += count
        }
        return payload
    }

    private func writeAll(_ bytes: [UInt8], to segment: Segment, at offset: Int) throws(SpoolError) {
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                pwrite(segment.descriptor, raw.baseAddress! + done, bytes.count - done, off_t(offset + done))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw SpoolError(.io, path: segment.path, errno: errno, "cannot write to the spool") }
            done += count
        }
    }

    private func sync(_ segment: Segment) throws(SpoolError) {
        guard fsync(segment.descriptor) == 0 else {
            throw SpoolError(.io, path: segment.path, errno: errno, "cannot flush the spool to disk")
        }
    }

    private func syncDirectory() throws(SpoolError) {
        guard configuration.fsync != .never else { return }
        let descriptor = open(configuration.directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw SpoolError(.io, path: configuration.directory, errno: errno, "cannot open the spool directory")
        }
        defer { close(descriptor) }
        _ = fsync(descriptor)
    }

    // MARK: The acknowledged sequence

    private var acknowledgedPath: String { configuration.directory + "/acknowledged" }

    private func readAcknowledged() throws(SpoolError) -> UInt64 {
        let descriptor = open(acknowledgedPath, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return 0 }
            throw SpoolError(.io, path: acknowledgedPath, errno: errno, "cannot read the acknowledged sequence")
        }
        defer { close(descriptor) }
        let text = String(decoding: try readWhole(descriptor, path: acknowledgedPath), as: UTF8.self)
        guard let value = UInt64(text.trimmingWhitespace()) else {
            logger.error("Spool acknowledged-sequence file is unreadable; starting from 0", metadata: ["path": "\(acknowledgedPath)"])
            return 0
        }
        return value
    }

    private func writeAcknowledged(_ sequence: UInt64) throws(SpoolError) {
        let temporary = acknowledgedPath + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else {
            throw SpoolError(.io, path: temporary, errno: errno, "cannot write the acknowledged sequence")
        }
        let bytes = Array("\(sequence)\n".utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = configuration.fsync == .never || fsync(descriptor) == 0
        let failure = errno
        close(descriptor)
        guard written == bytes.count, synced else {
            throw SpoolError(.io, path: temporary, errno: failure, "cannot write the acknowledged sequence")
        }
        guard rename(temporary, acknowledgedPath) == 0 else {
            throw SpoolError(.io, path: acknowledgedPath, errno: errno, "cannot replace the acknowledged sequence")
        }
        try syncDirectory()
    }
}

// MARK: Small POSIX helpers

func makeDirectory(_ path: String) throws(SpoolError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        prefix += "/" + component
        if mkdir(prefix, 0o750) != 0, errno != EEXIST {
            throw SpoolError(.io, path: prefix, errno: errno, "cannot create the spool directory")
        }
    }
    guard access(path, R_OK | W_OK | X_OK) == 0 else {
        throw SpoolError(.io, path: path, errno: errno, "the spool directory is not readable and writable")
    }
}

func listDirectory(_ path: String) throws(SpoolError) -> [String] {
    guard let directory = opendir(path) else {
        throw SpoolError(.io, path: path, errno: errno, "cannot list the spool directory")
    }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

func readWhole(_ descriptor: Int32, path: String) throws(SpoolError) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count >= 0 else { throw SpoolError(.io, path: path, errno: errno, "cannot read") }
        if count == 0 { return bytes }
        bytes += chunk[0..<count]
    }
}

func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    for index in 0..<(T.bitWidth / 8) { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
}

func readLittleEndian<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, as: T.Type) -> T {
    var value: T = 0
    for index in 0..<(T.bitWidth / 8) { value |= T(bytes[offset + index]) << (8 * index) }
    return value
}

extension String {
    func trimmingWhitespace() -> Substring {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return Substring(scalars[first...last])
    }
}
