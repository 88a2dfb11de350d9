/// A JSON value whose objects keep their keys in insertion order, so output is stable and reads in the order of the
/// contract (`beaconflow decode`).
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([JSONField])

    public static func number<T: BinaryInteger>(_ value: T) -> JSONValue { .int(Int64(value)) }

    public static func optional<T: BinaryInteger>(_ value: T?) -> JSONValue { value.map { .int(Int64($0)) } ?? .null }

    public static func optional(_ value: Double?) -> JSONValue { value.map { .double($0) } ?? .null }

    public static func optional(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    /// The member `key` of an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let fields) = self else { return nil }
        return fields.first { $0.key == key }?.value
    }

    /// Compact JSON text.
    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value):
            // JSON has no NaN or infinity; decoders turn those into null before they get here.
            if value.isFinite {
                if value == value.rounded(), abs(value) < 1e15 {
                    out += String(Int64(value))
                } else {
                    out += String(value)
                }
            } else {
                out += "null"
            }
        case .string(let value): writeString(value, to: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (index, field) in fields.enumerated() {
                if index > 0 { out += "," }
                writeString(field.key, to: &out)
                out += ":"
                field.value.write(to: &out)
            }
            out += "}"
        }
    }

    private func writeString(_ value: String, to out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u00" + hexString(UInt64(scalar.value), digits: 2)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

public struct JSONField: Hashable, Sendable {
    public var key: String
    public var value: JSONValue

    public init(_ key: String, _ value: JSONValue) {
        self.key = key
        self.value = value
    }
}
