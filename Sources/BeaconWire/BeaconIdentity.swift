/// A beacon's identity, typed: its kind and its bytes. Its text form (`eddystone:<namespace>:<instance>`,
/// `ibeacon:<uuid>:<major>:<minor>`, `altbeacon:<id1>:<id2>:<id3>`, `eid:<hex>`, `mac:<address>`, `anon:<hex>`:
/// docs/wire-format.md) is the `beacon_id` of every row and view, and is printed and parsed here only. Its binary
/// form is a batch dictionary's `Beacon.identity`: the kind byte, then the bytes, about a third of the text.
public struct BeaconIdentity: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: UInt8, Sendable, CaseIterable {
        case eddystone = 1, iBeacon, altBeacon, eid, mac, anon

        public var prefix: String {
            switch self {
            case .eddystone: "eddystone:"
            case .iBeacon: "ibeacon:"
            case .altBeacon: "altbeacon:"
            case .eid: "eid:"
            case .mac: "mac:"
            case .anon: "anon:"
            }
        }

        /// Ids of a device rather than a beacon (its address, or a pseudonym of its data): the ingest attaches
        /// them to the identity last heard from the same address.
        public var namesADevice: Bool { self == .mac || self == .anon }

        /// The kind of a text id, from its prefix alone (nil: another scheme, such as a name from the registry).
        public init?(of text: some StringProtocol) {
            guard let kind = Kind.allCases.first(where: { text.hasPrefix($0.prefix) }) else { return nil }
            self = kind
        }
    }

    /// How long the identity last heard from a device address names that address's frames without one (an eTLM,
    /// URL or sensor frame, a `mac:` sighting): a minute, the association Eddystone intends. The agent and the
    /// ingest both associate within it.
    public static let associationWindowMicros: Int64 = 60_000_000

    /// How long a site takes a device address to stand for the identity any of its agents last heard from it, for
    /// frames without one: 15 minutes, the interval the Bluetooth Core Specification recommends between changes of
    /// a private address (TGAP(private_addr_int), Vol 3 Part C, Appendix A); public and static addresses do not
    /// change at all. A beacon out of one agent's range for minutes keeps its identity when it comes back with a
    /// URL or TLM frame first.
    public static let addressLifetimeMicros: Int64 = 15 * 60_000_000

    public let kind: Kind
    /// Eddystone: namespace and instance (16); iBeacon: UUID, major and minor big-endian (20); AltBeacon: id1 then
    /// id2 and id3 big-endian; EID and pseudonym: 8; device address: 6, most significant first.
    public let bytes: [UInt8]

    /// Nil when the bytes do not have the kind's length.
    public init?(kind: Kind, bytes: [UInt8]) {
        switch kind {
        case .eddystone: guard bytes.count == 16 else { return nil }
        case .iBeacon: guard bytes.count == 20 else { return nil }
        case .altBeacon: guard bytes.count > 4, bytes.count < Self.maximumBinaryBytes else { return nil }
        case .eid, .anon: guard bytes.count == 8 else { return nil }
        case .mac: guard bytes.count == 6 else { return nil }
        }
        self.kind = kind
        self.bytes = bytes
    }

    public static func eid(_ eid: UInt64) -> BeaconIdentity { BeaconIdentity(kind: .eid, unchecked: bigEndianBytes(eid, count: 8)) }

    public static func device(_ address: DeviceAddress) -> BeaconIdentity {
        BeaconIdentity(kind: .mac, unchecked: bigEndianBytes(address.value, count: 6))
    }

    /// The 48-bit address a `mac:` id names (big-endian in the low 48 bits); nil for other kinds.
    public var deviceAddress: UInt64? {
        kind == .mac ? bytes.reduce(0) { $0 << 8 | UInt64($1) } : nil
    }

    /// Whether a batch may leave this identity's address out as known from the agent's earlier batches (an
    /// address beside an identity that does not name it: not a device's own id, nor a pseudonym).
    public var addressMayBeLeftOut: Bool { kind != .mac && kind != .anon }

    /// A pseudonym: the first 8 bytes of a digest of what the device sends.
    public static func pseudonym(_ digest: some Sequence<UInt8>) -> BeaconIdentity {
        BeaconIdentity(kind: .anon, unchecked: Array(digest.prefix(8)))
    }

    private init(kind: Kind, unchecked bytes: [UInt8]) {
        self.kind = kind
        self.bytes = bytes
    }

    /// The text form.
    public var description: String {
        func number(_ offset: Int) -> UInt16 { UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1]) }
        switch kind {
        case .eddystone:
            return Self.joined(kind.prefix, bytes[..<10].hexString, ":", bytes[10...].hexString)
        case .iBeacon:
            let high = bytes[..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return Self.joined(kind.prefix, dashedUUID(high: high, low: low), ":\(number(16)):\(number(18))")
        case .altBeacon:
            return Self.joined(
                kind.prefix, bytes[..<(bytes.count - 4)].hexString, ":\(number(bytes.count - 4)):\(number(bytes.count - 2))")
        case .eid, .anon:
            return Self.joined(kind.prefix, bytes.hexString)
        case .mac:
            return Self.joined(kind.prefix, DeviceAddress.format(bytes))
        }
    }

    /// The pieces in one string of exactly their length: a string grown by `+` keeps the spare capacity of its
    /// growth, and the ingest holds a beacon id for each of up to 100,000 beacons.
    private static func joined(_ pieces: String...) -> String {
        String(unsafeUninitializedCapacity: pieces.reduce(0) { $0 + $1.utf8.count }) { buffer in
            var offset = 0
            for piece in pieces {
                for byte in piece.utf8 {
                    buffer[offset] = byte
                    offset += 1
                }
            }
            return offset
        }
    }

    /// Parses the text form; nil for another scheme or a text not in canonical form (which stays text).
    public init?(_ text: String) {
        guard let kind = Kind(of: text) else { return nil }
        let fields = text.dropFirst(kind.prefix.count).split(separator: ":", omittingEmptySubsequences: false)
        var bytes: [UInt8] = []
        switch kind {
        case .eddystone, .eid, .mac, .anon:
            guard let identity = try? [UInt8](hex: fields.joined()) else { return nil }
            bytes = identity
        case .iBeacon, .altBeacon:
            guard fields.count == 3, let id = try? [UInt8](hex: fields[0]), let first = UInt16(fields[1]),
                let second = UInt16(fields[2])
            else { return nil }
            bytes = id + bigEndianBytes(UInt64(first), count: 2) + bigEndianBytes(UInt64(second), count: 2)
        }
        // Canonical only: the text must come back the same (case, zero padding, separators).
        guard let identity = BeaconIdentity(kind: kind, bytes: bytes), identity.description == text else { return nil }
        self = identity
    }

    /// The longest binary identity a reader takes (an AltBeacon id1 is 16 bytes; the kind byte and id2, id3 add 5).
    public static let maximumBinaryBytes = 64

    /// The binary form.
    public var binary: [UInt8] { [kind.rawValue] + bytes }

    /// Reads the binary form; nil when it is not a valid one.
    public init?(binary: [UInt8]) {
        guard let first = binary.first, let kind = Kind(rawValue: first), binary.count <= Self.maximumBinaryBytes else { return nil }
        self.init(kind: kind, bytes: Array(binary.dropFirst()))
    }
}
