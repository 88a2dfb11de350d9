/// Builds a PostgreSQL binary COPY stream (COPY ... FROM STDIN (FORMAT binary)): the 19-byte header, rows of
/// length-prefixed big-endian fields, and the trailer. Pure; the caller sends `bytes` with one PQputCopyData.
public struct BinaryCopyWriter: Sendable {
    public private(set) var bytes: [UInt8]
    public private(set) var rows = 0

    /// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
    static let postgresEpochMicros: Int64 = 946_684_800_000_000

    public init(capacity: Int = 4096) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes += Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        append(Int32(0))  // flags
        append(Int32(0))  // header extension length
    }

    public mutating func startRow(fields: Int16) {
        append(fields)
        rows += 1
    }

    /// timestamptz from Unix microseconds.
    public mutating func timestamp(unixMicros: Int64) {
        field(Int64(unixMicros - Self.postgresEpochMicros))
    }

    public mutating func text(_ value: String?) {
        guard let value else { return null() }
        let utf8 = Array(value.utf8)
        append(Int32(utf8.count))
        bytes += utf8
    }

    public mutating func smallint(_ value: Int16?) {
        guard let value else { return null() }
        field(value)
    }

    public mutating func integer(_ value: Int32?) {
        guard let value else { return null() }
        field(value)
    }

    public mutating func bigint(_ value: Int64?) {
        guard let value else { return null() }
        field(value)
    }

    public mutating func real(_ value: Float?) {
        guard let value, value.isFinite else { return null() }
        field(value.bitPattern)
    }

    public mutating func double(_ value: Double?) {
        guard let value, value.isFinite else { return null() }
        field(value.bitPattern)
    }

    public mutating func null() { append(Int32(-1)) }

    /// The stream with its trailer.
    public func finished() -> [UInt8] {
        var out = bytes
        out += [0xFF, 0xFF]
        return out
    }

    private mutating func field<T: FixedWidthInteger>(_ value: T) {
        append(Int32(T.bitWidth / 8))
        append(value)
    }

    private mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
    }
}
