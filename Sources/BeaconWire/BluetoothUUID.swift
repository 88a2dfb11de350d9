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
    hexString(high >> 32, digits: 8) + "-" + hexString((high >> 16) & 0xFFFF, digits: 4) + "-"
        + hexString(high & 0xFFFF, digits: 4) + "-" + hexString(low >> 48, digits: 4) + "-"
        + hexString(low & 0xFFFF_FFFF_FFFF, digits: 12)
}
