/// A statement parameter as libpq sends it: a type OID and the value in PostgreSQL's binary format (nil is NULL).
/// Values are never formatted into SQL text or array literals.
public struct PostgresBind: Sendable, Hashable {
    public var type: UInt32
    public var bytes: [UInt8]?

    public init(type: UInt32, bytes: [UInt8]?) {
        self.type = type
        self.bytes = bytes
    }
}

/// What can be a statement parameter: a value, an optional value (nil is NULL), or an array of either.
public protocol PostgresBindable {
    var postgresBind: PostgresBind { get }
}

/// What can be an element of an array parameter.
public protocol PostgresArrayElement {
    static var postgresType: UInt32 { get }
    static var postgresArrayType: UInt32 { get }
    /// The element in binary format, nil for NULL.
    var postgresBytes: [UInt8]? { get }
}

/// A value with a PostgreSQL type and a binary encoding.
public protocol PostgresEncodable: PostgresBindable, PostgresArrayElement {
    func encode(into buffer: inout [UInt8])
    /// Sent as NULL: a float that is not finite (the product's tables hold none).
    var isPostgresNull: Bool { get }
}

extension PostgresEncodable {
    public var isPostgresNull: Bool { false }

    public var postgresBytes: [UInt8]? {
        guard !isPostgresNull else { return nil }
        var buffer: [UInt8] = []
        encode(into: &buffer)
        return buffer
    }

    public var postgresBind: PostgresBind { PostgresBind(type: Self.postgresType, bytes: postgresBytes) }
}

extension Optional: PostgresBindable, PostgresArrayElement where Wrapped: PostgresEncodable {
    public static var postgresType: UInt32 { Wrapped.postgresType }
    public static var postgresArrayType: UInt32 { Wrapped.postgresArrayType }
    public var postgresBytes: [UInt8]? { self?.postgresBytes }
    public var postgresBind: PostgresBind { PostgresBind(type: Wrapped.postgresType, bytes: postgresBytes) }
}

extension Array: PostgresBindable where Element: PostgresArrayElement {
    /// A one-dimensional array in binary format: dimensions, null flag, element type, length, lower bound 1, then
    /// each element length-prefixed (-1 for NULL).
    public var postgresBind: PostgresBind {
        var buffer: [UInt8] = []
        guard !isEmpty else {
            for header in [Int32(0), 0, Int32(bitPattern: Element.postgresType)] { buffer.appendBigEndian(header) }
            return PostgresBind(type: Element.postgresArrayType, bytes: buffer)
        }
        let elements = map(\.postgresBytes)
        let hasNull: Int32 = elements.contains { $0 == nil } ? 1 : 0
        for header in [Int32(1), hasNull, Int32(bitPattern: Element.postgresType), Int32(count), 1] {
            buffer.appendBigEndian(header)
        }
        for element in elements {
            if let element {
                buffer.appendBigEndian(Int32(element.count))
                buffer += element
            } else {
                buffer.appendBigEndian(Int32(-1))
            }
        }
        return PostgresBind(type: Element.postgresArrayType, bytes: buffer)
    }
}

extension Array where Element: PostgresEncodable {
    /// The array in binary format, each element encoded in place (a non-finite float as NULL): for COPY fields,
    /// where building each element's bytes apart would cost an allocation each.
    public func encodeArray(into buffer: inout [UInt8]) {
        let hasNull: Int32 = contains { $0.isPostgresNull } ? 1 : 0
        let headers: [Int32] =
            isEmpty ? [0, 0, Int32(bitPattern: Element.postgresType)]
            : [1, hasNull, Int32(bitPattern: Element.postgresType), Int32(count), 1]
        for header in headers { buffer.appendBigEndian(header) }
        for element in self {
            guard !element.isPostgresNull else {
                buffer.appendBigEndian(Int32(-1))
                continue
            }
            buffer.appendLengthPrefixed { element.encode(into: &$0) }
        }
    }
}

extension String: PostgresEncodable {
    public static var postgresType: UInt32 { 25 }  // text
    public static var postgresArrayType: UInt32 { 1009 }
    public func encode(into buffer: inout [UInt8]) { buffer += utf8 }
}

extension Bool: PostgresEncodable {
    public static var postgresType: UInt32 { 16 }
    public static var postgresArrayType: UInt32 { 1000 }
    public func encode(into buffer: inout [UInt8]) { buffer.append(self ? 1 : 0) }
}

extension Int16: PostgresEncodable {
    public static var postgresType: UInt32 { 21 }  // smallint
    public static var postgresArrayType: UInt32 { 1005 }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(self) }
}

extension Int32: PostgresEncodable {
    public static var postgresType: UInt32 { 23 }  // integer
    public static var postgresArrayType: UInt32 { 1007 }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(self) }
}

extension Int64: PostgresEncodable {
    public static var postgresType: UInt32 { 20 }  // bigint
    public static var postgresArrayType: UInt32 { 1016 }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(self) }
}

extension Int: PostgresEncodable {
    public static var postgresType: UInt32 { Int64.postgresType }
    public static var postgresArrayType: UInt32 { Int64.postgresArrayType }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(Int64(self)) }
}

extension Float: PostgresEncodable {
    public static var postgresType: UInt32 { 700 }  // real
    public static var postgresArrayType: UInt32 { 1021 }
    public var isPostgresNull: Bool { !isFinite }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(bitPattern) }
}

extension Double: PostgresEncodable {
    public static var postgresType: UInt32 { 701 }  // double precision
    public static var postgresArrayType: UInt32 { 1022 }
    public var isPostgresNull: Bool { !isFinite }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(bitPattern) }
}

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
let postgresEpochMicros: Int64 = 946_684_800_000_000

/// A `timestamptz`, as Unix microseconds.
public struct PostgresTimestamp: PostgresEncodable, Sendable, Hashable {
    public var unixMicros: Int64

    public init(unixMicros: Int64) { self.unixMicros = unixMicros }

    /// `-infinity`, before every timestamp.
    public static let distantPast = PostgresTimestamp(unixMicros: .min)

    public static var postgresType: UInt32 { 1184 }
    public static var postgresArrayType: UInt32 { 1185 }
    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(unixMicros == .min ? .min : unixMicros &- postgresEpochMicros)
    }
}

/// A `date`, as days since 1970-01-01.
public struct PostgresDate: PostgresEncodable, Sendable, Hashable {
    public var unixDay: Int64

    public init(unixDay: Int64) { self.unixDay = unixDay }

    public static var postgresType: UInt32 { 1082 }
    public static var postgresArrayType: UInt32 { 1182 }
    public func encode(into buffer: inout [UInt8]) { buffer.appendBigEndian(Int32(clamping: unixDay - 10_957)) }
}

/// A `bytea` value.
public struct PostgresBytes: PostgresEncodable, Sendable, Hashable {
    public var bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static var postgresType: UInt32 { 17 }
    public static var postgresArrayType: UInt32 { 1001 }
    public func encode(into buffer: inout [UInt8]) { buffer += bytes }
}

extension Array<UInt8> {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { self += $0 }
    }

    /// What `write` appends, after its length as a big-endian int32 (a field of the binary formats).
    mutating func appendLengthPrefixed(_ write: (inout [UInt8]) -> Void) {
        let start = count
        appendBigEndian(Int32(0))
        write(&self)
        let length = Int32(count - start - 4).bigEndian
        Swift.withUnsafeBytes(of: length) { length in
            for (offset, byte) in length.enumerated() { self[start + offset] = byte }
        }
    }
}

/// What a result column can be read as. Results come in PostgreSQL's text format; `init(postgresText:)` is nil when
/// the text is not a value of the type.
public protocol PostgresDecodable {
    init?(postgresText text: String)
}

extension String: PostgresDecodable {
    public init?(postgresText text: String) { self = text }
}

extension Bool: PostgresDecodable {
    public init?(postgresText text: String) {
        switch text {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

extension PostgresDecodable where Self: LosslessStringConvertible {
    public init?(postgresText text: String) { self.init(text) }
}

extension Int16: PostgresDecodable {}
extension Int32: PostgresDecodable {}
extension Int64: PostgresDecodable {}
extension Int: PostgresDecodable {}
extension UInt64: PostgresDecodable {}
extension Double: PostgresDecodable {}
extension Float: PostgresDecodable {}

extension PostgresBytes: PostgresDecodable {
    /// The `\x` hex form `bytea_output = hex` gives.
    public init?(postgresText text: String) {
        guard text.hasPrefix("\\x"), text.utf8.count % 2 == 0 else { return nil }
        func nibble(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2 - 1)
        var digits = text.utf8.dropFirst(2).makeIterator()
        while let high = digits.next(), let low = digits.next() {
            guard let high = nibble(high), let low = nibble(low) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.bytes = bytes
    }
}

/// One row of a result: its values as text (nil for NULL), read typed with `decode`.
public struct PostgresRow: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral {
    public let values: [String?]
    /// The result's column names, for errors.
    let columns: [String]

    init(values: [String?], columns: [String]) {
        self.values = values
        self.columns = columns
    }

    public init(arrayLiteral values: String?...) {
        self.init(values: values, columns: [])
    }

    public var startIndex: Int { values.startIndex }
    public var endIndex: Int { values.endIndex }
    public subscript(position: Int) -> String? { values[position] }

    public static func == (left: PostgresRow, right: PostgresRow) -> Bool { left.values == right.values }
    public func hash(into hasher: inout Hasher) { hasher.combine(values) }

    /// The value of a column that must not be NULL.
    public func decode<Value: PostgresDecodable>(_ column: Int, as type: Value.Type = Value.self) throws(PostgresError) -> Value {
        guard let value = try decode(column, as: Value?.self) else {
            throw PostgresError("read a result", "column \(name(column)) is NULL, where a \(Value.self) was expected")
        }
        return value
    }

    /// The value of a column, nil for NULL.
    public func decode<Value: PostgresDecodable>(_ column: Int, as type: Value?.Type) throws(PostgresError) -> Value? {
        guard values.indices.contains(column) else {
            throw PostgresError("read a result", "the result has \(values.count) columns, not \(column + 1)")
        }
        guard let text = values[column] else { return nil }
        guard let value = Value(postgresText: text) else {
            throw PostgresError("read a result", "column \(name(column)) holds no \(Value.self): \(text.prefix(40))")
        }
        return value
    }

    private func name(_ column: Int) -> String {
        columns.indices.contains(column) ? "\(column + 1) (\(columns[column]))" : "\(column + 1)"
    }
}
