/// A Bluetooth UUID as it appeared on the air: 16-bit, 32-bit or 128-bit.
///
/// The short forms are aliases in the Bluetooth base UUID `0000xxxx-0000-1000-8000-00805F9B34FB`; they are kept
/// short so that they print as the operator knows them (`feaa`, `180f`).
public enum BluetoothUUID: Hashable, Sendable, CustomStringConvertible {
    case uuid16(UInt16)
    case uuid32(UInt32)
    case uuid128(high: UInt64, low: UInt64)

    /// `feaa` for 16-bit, `0000feaa` for 32-bit, and the dashed lowercase form for 128-bit UUIDs.
    public var description: String {
        switch self {
        case .uuid16(let value): return hexString(UInt64(value), digits: 4)
        case .uuid32(let value): return hexString(UInt64(value), digits: 8)
        case .uuid128(let high, let low): return dashedUUID(high: high, low: low)
        }
    }

    /// Reads a UUID stored little-endian, as in AD structures and ATT.
    static func readLittleEndian(_ reader: inout ByteReader, width: Int) throws(DecodeError) -> BluetoothUUID {
        switch width {
        case 2: return .uuid16(try reader.u16le("16-bit UUID"))
        case 4: return .uuid32(try reader.u32le("32-bit UUID"))
        default:
            let low = try reader.uintLE(8, "128-bit UUID")
            let high = try reader.uintLE(8, "128-bit UUID")
            return .uuid128(high: high, low: low)
        }
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase.
func dashedUUID(high: UInt64, low: UInt64) -> String {
    String(unsafeUninitializedCapacity: 36) { text in
        writeHex(high >> 32, digits: 8, into: text, at: 0)
        writeHex(high >> 16, digits: 4, into: text, at: 9)
        writeHex(high, digits: 4, into: text, at: 14)
        writeHex(low >> 48, digits: 4, into: text, at: 19)
        writeHex(low, digits: 12, into: text, at: 24)
        text[8] = UInt8(ascii: "-")
        text[13] = UInt8(ascii: "-")
        text[18] = UInt8(ascii: "-")
        text[23] = UInt8(ascii: "-")
        return 36
    }
}
