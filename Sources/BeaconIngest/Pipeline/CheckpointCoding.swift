/// The byte layout of zone checkpoints: little-endian integers, doubles by their bit pattern (so a restored state
/// is the exact state saved), strings and arrays prefixed by their length.
struct CheckpointWriter {
    private(set) var bytes: [UInt8] = []

    mutating func int(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func int(_ value: Int) { int(Int64(value)) }

    mutating func double(_ value: Double) { int(Int64(bitPattern: value.bitPattern)) }

    /// Four bytes, for values kept in single precision or 32 bits.
    mutating func int32(_ value: Int32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func float(_ value: Float) { int32(Int32(bitPattern: value.bitPattern)) }

    /// One byte, 0 or 1: whether what follows is there.
    mutating func flag(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func optional(_ value: Int64?) {
        bytes.append(value == nil ? 0 : 1)
        if let value { int(value) }
    }

    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        int(utf8.count)
        bytes += utf8
    }

    mutating func strings(_ values: [String]) {
        int(values.count)
        for value in values { string(value) }
    }
}

/// Why a zone checkpoint cannot be restored.
public struct CheckpointError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable {
        /// The bytes end early or hold an impossible value.
        case damaged
        /// Written by a version of the tracker this one does not read.
        case unknownVersion
        /// The site's zones or agents changed since (the sites file was edited).
        case otherLayout
        /// Taken under another `zone_history` (the sites file was edited, or the default changed): its beacons'
        /// state is not the one this history keeps.
        case otherHistory
    }

    public var code: Code
    /// Where reading stopped.
    public var offset: Int

    public var description: String {
        switch code {
        case .damaged: "zone checkpoint damaged at byte \(offset)"
        case .unknownVersion: "zone checkpoint of an unknown version"
        case .otherLayout: "zone checkpoint of other zones or agents than the sites file's"
        case .otherHistory: "zone checkpoint taken under another zone_history than the sites file's"
        }
    }
}

/// Reads what `CheckpointWriter` wrote; every read is bounds-checked, so a damaged checkpoint is an error.
struct CheckpointReader {
    typealias Damaged = CheckpointError

    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func int() throws(Damaged) -> Int64 {
        guard bytes.count - offset >= 8 else { throw Damaged(code: .damaged, offset: offset) }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * index) }
        offset += 8
        return Int64(bitPattern: value)
    }

    /// A count of items, each taking at least `minimumBytes`, that fits in what is left.
    mutating func count(minimumBytes: Int = 1) throws(Damaged) -> Int {
        let at = offset
        let value = try int()
        guard value >= 0, value <= (bytes.count - offset) / max(minimumBytes, 1) else { throw Damaged(code: .damaged, offset: at) }
        return Int(value)
    }

    /// A small non-negative number below `limit` (a zone or agent number).
    mutating func index(below limit: Int) throws(Damaged) -> Int {
        let at = offset
        let value = try int()
        guard value >= 0, value < limit else { throw Damaged(code: .damaged, offset: at) }
        return Int(value)
    }

    mutating func double() throws(Damaged) -> Double { Double(bitPattern: UInt64(bitPattern: try int())) }

    mutating func int32() throws(Damaged) -> Int32 {
        guard bytes.count - offset >= 4 else { throw Damaged(code: .damaged, offset: offset) }
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << (8 * index) }
        offset += 4
        return Int32(bitPattern: value)
    }

    mutating func float() throws(Damaged) -> Float { Float(bitPattern: UInt32(bitPattern: try int32())) }

    /// Unix microseconds from 2000 to 2200 (what the tracker holds of sightings and arrivals), or one of `also`
    /// (a field's initial value): anything else would overflow the tracker's arithmetic, so it is damage.
    mutating func time(also allowed: [Int64] = []) throws(Damaged) -> Int64 {
        let at = offset
        let value = try int()
        guard Self.times.contains(value) || allowed.contains(value) else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    /// A time that starts a whole minute.
    mutating func minute() throws(Damaged) -> Int64 {
        let at = offset
        let value = try time()
        guard value % 60_000_000 == 0 else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    mutating func optionalTime() throws(Damaged) -> Int64? {
        let at = offset
        guard let value = try optional() else { return nil }
        guard Self.times.contains(value) else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    /// An optional `index(below:)`.
    mutating func optionalIndex(below limit: Int) throws(Damaged) -> Int? {
        let at = offset
        guard let value = try optional() else { return nil }
        guard value >= 0, value < limit else { throw Damaged(code: .damaged, offset: at) }
        return Int(value)
    }

    mutating func optionalMinute() throws(Damaged) -> Int64? {
        let at = offset
        guard let value = try optionalTime() else { return nil }
        guard value % 60_000_000 == 0 else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    /// A whole number in `range`.
    mutating func int(in range: ClosedRange<Int64>) throws(Damaged) -> Int64 {
        let at = offset
        let value = try int()
        guard range.contains(value) else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    /// A finite double in `range` (never NaN or infinite).
    mutating func double(in range: ClosedRange<Double>) throws(Damaged) -> Double {
        let at = offset
        let value = try double()
        guard range.contains(value) else { throw Damaged(code: .damaged, offset: at) }
        return value
    }

    /// The times a checkpoint may hold: 2000-01-01 to 2200-01-01 UTC.
    static let maximumStringBytes = 1024
    static let times: ClosedRange<Int64> = 946_684_800_000_000...7_258_118_400_000_000
    /// Signal levels and their statistics in dB, with room for offsets and smoothing.
    static let decibels: ClosedRange<Double> = -1_000...1_000

    mutating func flag() throws(Damaged) -> Bool {
        guard offset < bytes.count, bytes[offset] <= 1 else { throw Damaged(code: .damaged, offset: offset) }
        offset += 1
        return bytes[offset - 1] == 1
    }

    mutating func optional() throws(Damaged) -> Int64? {
        guard offset < bytes.count, bytes[offset] <= 1 else { throw Damaged(code: .damaged, offset: offset) }
        offset += 1
        return bytes[offset - 1] == 1 ? try int() : nil
    }

    /// At most `maximumStringBytes` (a beacon, zone or agent id).
    mutating func string() throws(Damaged) -> String {
        let at = offset
        let length = try count()
        guard length <= Self.maximumStringBytes else { throw Damaged(code: .damaged, offset: at) }
        defer { offset += length }
        return String(decoding: bytes[offset..<offset + length], as: UTF8.self)
    }

    mutating func strings() throws(Damaged) -> [String] {
        var values: [String] = []
        for _ in 0..<(try count(minimumBytes: 8)) { values.append(try string()) }
        return values
    }
}
