/// Apple iBeacon: manufacturer data of company 0x004C starting 0x02 0x15, then a UUID, big-endian major and minor,
/// and the measured power at 1 m.
public struct IBeacon: Hashable, Sendable {
    public static let companyID: UInt16 = 0x004C
    public var uuidHigh: UInt64
    public var uuidLow: UInt64
    public var major: UInt16
    public var minor: UInt16
    /// RSSI at 1 m, in dBm.
    public var measuredPower: Int8

    public init(uuidHigh: UInt64, uuidLow: UInt64, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.uuidHigh = uuidHigh
        self.uuidLow = uuidLow
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// Decodes the bytes after the company id; nil when they are not an iBeacon (other Apple formats).
    public static func decode(_ data: ArraySlice<UInt8>, base: Int = 0) throws(DecodeError) -> IBeacon? {
        guard data.count >= 2, data[data.startIndex] == 0x02, data[data.startIndex + 1] == 0x15 else { return nil }
        try requireLength(data.count, [23], "iBeacon", at: base)
        var reader = ByteReader(data, base: base)
        try reader.skip(2, "iBeacon type")
        return IBeacon(
            uuidHigh: try reader.uintBE(8, "iBeacon UUID"), uuidLow: try reader.uintBE(8, "iBeacon UUID"),
            major: try reader.u16be("iBeacon major"), minor: try reader.u16be("iBeacon minor"),
            measuredPower: try reader.i8("iBeacon measured power"))
    }

    /// Lowercase and dashed.
    public var uuid: String { dashedUUID(high: uuidHigh, low: uuidLow) }

    public var identity: BeaconIdentity {
        BeaconIdentity(
            kind: .iBeacon,
            bytes: bigEndianBytes(uuidHigh, count: 8) + bigEndianBytes(uuidLow, count: 8)
                + bigEndianBytes(UInt64(major), count: 2) + bigEndianBytes(UInt64(minor), count: 2))!
    }

    /// `ibeacon:<uuid>:<major>:<minor>` (the beacon-id contract).
    public var beaconID: String { identity.description }

    /// The manufacturer data after the company id.
    public var payload: [UInt8] {
        var out: [UInt8] = [0x02, 0x15]
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((uuidHigh >> UInt64(shift)) & 0xFF)) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((uuidLow >> UInt64(shift)) & 0xFF)) }
        out += [UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF)]
        out.append(UInt8(bitPattern: measuredPower))
        return out
    }
}

/// AltBeacon (github.com/AltBeacon/spec): beacon code 0xBEAC, a 20-byte beacon id split by convention into
/// id1 (16 bytes), id2 and id3 (2 bytes each, big-endian), the reference RSSI at 1 m and one reserved byte.
public struct AltBeacon: Hashable, Sendable {
    public var manufacturerID: UInt16
    public var id1: [UInt8]
    public var id2: UInt16
    public var id3: UInt16
    public var referenceRSSI: Int8
    public var manufacturerReserved: UInt8

    public init(
        manufacturerID: UInt16, id1: [UInt8], id2: UInt16, id3: UInt16, referenceRSSI: Int8,
        manufacturerReserved: UInt8
    ) {
        self.manufacturerID = manufacturerID
        self.id1 = id1
        self.id2 = id2
        self.id3 = id3
        self.referenceRSSI = referenceRSSI
        self.manufacturerReserved = manufacturerReserved
    }

    public static func decode(companyID: UInt16, _ data: ArraySlice<UInt8>, base: Int = 0) throws(DecodeError) -> AltBeacon? {
        guard data.count >= 2, data[data.startIndex] == 0xBE, data[data.startIndex + 1] == 0xAC else { return nil }
        try requireLength(data.count, [24], "AltBeacon", at: base)
        var reader = ByteReader(data, base: base)
        try reader.skip(2, "AltBeacon code")
        return AltBeacon(
            manufacturerID: companyID, id1: Array(try reader.slice(16, "AltBeacon id1")),
            id2: try reader.u16be("AltBeacon id2"), id3: try reader.u16be("AltBeacon id3"),
            referenceRSSI: try reader.i8("AltBeacon reference RSSI"),
            manufacturerReserved: try reader.u8("AltBeacon reserved"))
    }

    /// `altbeacon:<id1>:<id2>:<id3>` (the beacon-id contract).
    /// Nil for an id1 too long for the binary form (the text form is the id then).
    public var identity: BeaconIdentity? {
        BeaconIdentity(kind: .altBeacon, bytes: id1 + bigEndianBytes(UInt64(id2), count: 2) + bigEndianBytes(UInt64(id3), count: 2))
    }

    public var beaconID: String { "altbeacon:\(id1.hexString):\(id2):\(id3)" }

    /// The manufacturer data after the company id.
    public var payload: [UInt8] {
        [0xBE, 0xAC] + id1 + [UInt8(id2 >> 8), UInt8(id2 & 0xFF), UInt8(id3 >> 8), UInt8(id3 & 0xFF)]
            + [UInt8(bitPattern: referenceRSSI), manufacturerReserved]
    }
}
