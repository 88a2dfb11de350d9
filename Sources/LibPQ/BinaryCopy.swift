/// Builds a PostgreSQL binary COPY stream (`COPY ... FROM STDIN (FORMAT binary)`): the 19-byte header, rows of
/// length-prefixed big-endian fields, and the trailer. Pure; `PostgresConnection.copy` sends it.
public struct BinaryCopyWriter: Sendable {
    public private(set) var bytes: [UInt8]
    public private(set) var rows = 0

    public init(capacity: Int = 4096) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes += Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        bytes.appendBigEndian(Int32(0))  // flags
        bytes.appendBigEndian(Int32(0))  // header extension length
    }

    public mutating func startRow(fields: Int16) {
        bytes.appendBigEndian(fields)
        rows += 1
    }

    /// One field: its length, then the value in binary format; NULL for nil and for a float that is not finite.
    public mutating func field<Value: PostgresEncodable>(_ value: Value?) {
        guard let value, !value.isPostgresNull else { return null() }
        bytes.appendLengthPrefixed { value.encode(into: &$0) }
    }

    /// One array field (a one-dimensional array of `Element`).
    public mutating func field<Element: PostgresEncodable>(array: [Element]) {
        bytes.appendLengthPrefixed { array.encodeArray(into: &$0) }
    }

    public mutating func null() { bytes.appendBigEndian(Int32(-1)) }

    /// The stream with its trailer.
    public func finished() -> [UInt8] {
        var out = bytes
        out += [0xFF, 0xFF]
        return out
    }
}

/// A table (or temporary table) that rows are copied into: its name and columns, each column with how it is
/// read from a row. The column list of the COPY statement and the fields of each row come from this one list.
public struct CopyTable<Row>: Sendable {
    public struct Column: Sendable {
        public var name: String
        public var write: @Sendable (Row, inout BinaryCopyWriter) -> Void

        public init<Value: PostgresEncodable>(_ name: String, _ value: @escaping @Sendable (Row) -> Value?) {
            self.name = name
            self.write = { row, writer in writer.field(value(row)) }
        }

        public init<Element: PostgresEncodable>(_ name: String, array: @escaping @Sendable (Row) -> [Element]) {
            self.name = name
            self.write = { row, writer in writer.field(array: array(row)) }
        }
    }

    public var table: String
    public var columns: [Column]

    public init(_ table: String, _ columns: [Column]) {
        self.table = table
        self.columns = columns
    }

    public var statement: String {
        "COPY \(table) (\(columns.map(\.name).joined(separator: ", "))) FROM STDIN (FORMAT binary)"
    }

    /// The binary COPY stream of `rows`.
    public func data(_ rows: some Collection<Row>, bytesPerRow: Int = 128) -> [UInt8] {
        var writer = BinaryCopyWriter(capacity: 64 + rows.count * bytesPerRow)
        for row in rows {
            writer.startRow(fields: Int16(columns.count))
            for column in columns { column.write(row, &writer) }
        }
        return writer.finished()
    }
}

extension PostgresConnection {
    /// Copies `rows` into `table` in one COPY.
    public func copy<Row>(_ rows: some Collection<Row>, into table: CopyTable<Row>) throws(PostgresError) {
        try copy(table.statement, data: table.data(rows))
    }
}
