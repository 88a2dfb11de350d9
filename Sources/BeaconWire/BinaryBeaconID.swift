/// The binary form of a beacon id in a batch's dictionary (`Beacon.identity`): a kind byte, then the identity's
/// bytes, about a third of the text. Only ids in their canonical text form have one, and `text(of:)` gives back
/// exactly that text, so a reader cannot tell which form the agent sent.
public enum BinaryBeaconID {
    enum Kind: UInt8 {
        case eddystone = 1, iBeacon, altBeacon, eid, mac, anon

        var prefix: String {
            switch self {
            case .eddystone: "eddystone:"
            case .iBeacon: "ibeacon:"
            case .altBeacon: "altbeacon:"
            case .eid: "eid:"
            case .mac: "mac:"
            case .anon: "anon:"
            }
        }
    }

    /// The longest binary identity a reader takes (an AltBeacon id1 is 16 bytes; the kind byte and id2, id3 add 5).
    public static let maximumBytes = 64

    /// The binary form of `beaconID`, or nil when it has none (another scheme, or not the canonical text).
    public static func encode(_ beaconID: String) -> [UInt8]? {
        guard let kind = [Kind.eddystone, .iBeacon, .altBeacon, .eid, .mac, .anon].first(where: { beaconID.hasPrefix($0.prefix) })
        else { return nil }
        let fields = beaconID.dropFirst(kind.prefix.count).split(separator: ":", omittingEmptySubsequences: false)
        var bytes: [UInt8] = [kind.rawValue]
        switch kind {
        case .eddystone, .eid, .mac, .anon:
            guard let identity = try? [UInt8](hex: fields.joined()) else { return nil }
            bytes += identity
        case .iBeacon, .altBeacon:
            guard fields.count == 3, let id = try? [UInt8](hex: fields[0]), let first = UInt16(fields[1]),
                let second = UInt16(fields[2])
            else { return nil }
            bytes += id + [UInt8(first >> 8), UInt8(first & 0xFF), UInt8(second >> 8), UInt8(second & 0xFF)]
        }
        guard bytes.count <= maximumBytes, text(of: bytes) == beaconID else { return nil }
        return bytes
    }

    /// The text a binary identity stands for, or nil when it is not a valid one.
    public static func text(of bytes: [UInt8]) -> String? {
        guard let first = bytes.first, let kind = Kind(rawValue: first), bytes.count <= maximumBytes else { return nil }
        let body = Array(bytes.dropFirst())
        func number(_ offset: Int) -> UInt16 { UInt16(body[offset]) << 8 | UInt16(body[offset + 1]) }
        switch kind {
        case .eddystone:
            guard body.count == 16 else { return nil }
            return kind.prefix + body[..<10].hexString + ":" + body[10...].hexString
        case .iBeacon:
            guard body.count == 20 else { return nil }
            let high = body[..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = body[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return kind.prefix + dashedUUID(high: high, low: low) + ":\(number(16)):\(number(18))"
        case .altBeacon:
            guard body.count > 4 else { return nil }
            return kind.prefix + body[..<(body.count - 4)].hexString + ":\(number(body.count - 4)):\(number(body.count - 2))"
        case .eid, .anon:
            guard body.count == 8 else { return nil }
            return kind.prefix + body.hexString
        case .mac:
            guard body.count == 6 else { return nil }
            return kind.prefix + DeviceAddress.format(body)
        }
    }
}
