/// A Bluetooth device address and whether it is public or random.
public struct DeviceAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable {
        case `public`
        case random
    }

    /// The 48-bit address, most significant byte first as printed (`AA:BB:..` is 0xAABB…).
    public var value: UInt64
    public var kind: Kind

    public init(value: UInt64, kind: Kind) {
        self.value = value & 0xFFFF_FFFF_FFFF
        self.kind = kind
    }

    /// Parses `AA:BB:CC:DD:EE:FF`.
    public init?(_ text: String, kind: Kind = .public) {
        let parts = text.split(separator: ":")
        guard parts.count == 6 else { return nil }
        var value: UInt64 = 0
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            value = value << 8 | UInt64(byte)
        }
        self.init(value: value, kind: kind)
    }

    /// Reads the 6 little-endian address bytes of an HCI event.
    static func readHCI(_ reader: inout ByteReader, type: UInt8) throws(DecodeError) -> DeviceAddress {
        let value = try reader.uintLE(6, "device address")
        // 0x00 public, 0x01 random, 0x02 public identity, 0x03 random static identity (Core Vol 4, Part E, §7.7.65).
        return DeviceAddress(value: value, kind: type & 0x01 == 0 ? .public : .random)
    }

    /// The 6 address bytes, most significant first.
    public var bytes: [UInt8] { (0..<6).map { UInt8((value >> UInt64(40 - 8 * $0)) & 0xFF) } }

    /// The 6 address bytes as HCI sends them, least significant first.
    public var hciBytes: [UInt8] { bytes.reversed() }

    public var description: String { Self.format(bytes) }

    /// `AA:BB:CC:DD:EE:FF`, uppercase, as BlueZ prints addresses.
    static func format(_ bytes: [UInt8]) -> String {
        bytes.map { hexString(UInt64($0), digits: 2).uppercased() }.joined(separator: ":")
    }
}
