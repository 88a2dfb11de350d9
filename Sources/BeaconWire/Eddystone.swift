/// Eddystone frames, the service data of UUID 0xFEAA (github.com/google/eddystone, protocol specification).
/// All multi-byte Eddystone fields are big-endian.
public enum Eddystone {
    public static let serviceUUID: UInt16 = 0xFEAA

    public static let uidFrameType: UInt8 = 0x00
    public static let urlFrameType: UInt8 = 0x10
    public static let tlmFrameType: UInt8 = 0x20
    public static let eidFrameType: UInt8 = 0x30

    /// Decodes the service data bytes that follow the 0xFEAA UUID.
    ///
    /// eTLM frames come back with their ciphertext only; `EddystoneKeyring` decrypts them when the beacon's identity
    /// key is registered.
    public static func decode(_ data: ArraySlice<UInt8>, base: Int = 0) throws(DecodeError) -> BeaconFrame {
        var reader = ByteReader(data, base: base)
        let frameType = try reader.u8("Eddystone frame type")
        switch frameType {
        case uidFrameType: return .eddystoneUID(try EddystoneUID(reader: &reader, frameLength: data.count))
        case urlFrameType: return .eddystoneURL(try EddystoneURL(reader: &reader, frameLength: data.count))
        case tlmFrameType:
            let versionOffset = reader.offset
            let version = try reader.u8("TLM version")
            switch version {
            case 0x00: return .eddystoneTLM(try EddystoneTLM(reader: &reader, frameLength: data.count))
            case 0x01: return .eddystoneETLM(try EddystoneETLM(reader: &reader, frameLength: data.count))
            default:
                throw DecodeError(
                    .unsupportedVersion, at: versionOffset,
                    "TLM version 0x\(hexString(UInt64(version), digits: 2)) is not 0x00 (plain) or 0x01 (encrypted)")
            }
        case eidFrameType: return .eddystoneEID(try EddystoneEID(reader: &reader, frameLength: data.count))
        default:
            throw DecodeError(
                .unknownType, at: base,
                "Eddystone frame type 0x\(hexString(UInt64(frameType), digits: 2)) is not UID, URL, TLM or EID")
        }
    }
}

func requireLength(
    _ actual: Int, _ allowed: [Int], _ name: StaticString, at offset: Int
) throws(DecodeError) {
    if !allowed.contains(actual) {
        let expected = allowed.map(String.init).joined(separator: " or ")
        throw DecodeError(.invalidLength, at: offset, "\(name) frame is \(actual) bytes, expected \(expected)")
    }
}

func requireMinimumLength(_ actual: Int, _ minimum: Int, _ name: StaticString, at offset: Int) throws(DecodeError) {
    if actual < minimum {
        throw DecodeError(.invalidLength, at: offset, "\(name) frame is \(actual) bytes, expected at least \(minimum)")
    }
}

/// Eddystone-UID: a 10-byte namespace and a 6-byte instance.
public struct EddystoneUID: Hashable, Sendable {
    /// Calibrated transmit power at 0 m, in dBm.
    public var txPower: Int8
    /// The namespace's first 8 bytes, big-endian.
    public var namespaceHigh: UInt64
    /// The namespace's last 2 bytes, big-endian.
    public var namespaceLow: UInt16
    /// The 6-byte instance, big-endian, in the low 48 bits.
    public var instance: UInt64

    public init(txPower: Int8, namespaceHigh: UInt64, namespaceLow: UInt16, instance: UInt64) {
        self.txPower = txPower
        self.namespaceHigh = namespaceHigh
        self.namespaceLow = namespaceLow
        self.instance = instance & 0xFFFF_FFFF_FFFF
    }

    public init(txPower: Int8, namespace: [UInt8], instance: [UInt8]) {
        precondition(namespace.count == 10 && instance.count == 6, "namespace is 10 bytes, instance 6")
        var reader = ByteReader(namespace[...])
        self.txPower = txPower
        self.namespaceHigh = (try? reader.uintBE(8, "namespace")) ?? 0
        self.namespaceLow = (try? reader.u16be("namespace")) ?? 0
        var instanceReader = ByteReader(instance[...])
        self.instance = (try? instanceReader.uintBE(6, "instance")) ?? 0
    }

    init(reader: inout ByteReader, frameLength: Int) throws(DecodeError) {
        // The spec's frame is 20 bytes; many beacons omit the two RFU bytes.
        try requireLength(frameLength, [18, 20], "Eddystone-UID", at: reader.offset - 1)
        txPower = try reader.i8("UID tx power")
        namespaceHigh = try reader.uintBE(8, "UID namespace")
        namespaceLow = try reader.u16be("UID namespace")
        instance = try reader.uintBE(6, "UID instance")
    }

    /// 20 lowercase hex digits.
    public var namespace: String {
        hexString(namespaceHigh, digits: 16) + hexString(UInt64(namespaceLow), digits: 4)
    }

    /// 12 lowercase hex digits.
    public var instanceHex: String { hexString(instance, digits: 12) }

    public var identity: BeaconIdentity {
        BeaconIdentity(
            kind: .eddystone,
            bytes: bigEndianBytes(namespaceHigh, count: 8) + bigEndianBytes(UInt64(namespaceLow), count: 2) + bigEndianBytes(instance, count: 6))!
    }

    /// `eddystone:<namespace>:<instance>` (the beacon-id contract).
    public var beaconID: String { identity.description }
}

/// Eddystone-URL, with the scheme prefix and expansion tables of the Eddystone-URL specification.
///
/// The frame keeps the bytes the beacon sent (scheme code and up to 17 encoded bytes, stored inline) and expands
/// them into text only when `url` is read, so decoding a URL frame allocates nothing. Two frames are equal when
/// their encoded bytes are: the spec allows one URL several encodings, and a frame is what was sent.
public struct EddystoneURL: Hashable, Sendable {
    public var txPower: Int8
    /// The scheme prefix code, 0x00–0x03.
    public let scheme: UInt8
    /// The encoded bytes after the scheme, packed big-endian: byte 0 is the top byte of `packedHigh`, byte 16 is
    /// `packedLast`; unused bytes are zero.
    private let packedHigh: UInt64
    private let packedLow: UInt64
    private let packedLast: UInt8
    /// How many encoded bytes there are (0–17).
    public let encodedCount: UInt8

    static let schemes = ["http://www.", "https://www.", "http://", "https://"]
    static let expansions = [
        ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
        ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
    ]
    /// The encoded URL (after the scheme byte) is at most 17 bytes: the frame is at most 20.
    static let maximumEncodedLength = 17

    /// A frame from its validated parts: `scheme` < 4, at most 17 bytes, each `isValidEncodedByte`.
    init(txPower: Int8, scheme: UInt8, validatedEncoded encoded: UnsafeRawBufferPointer) {
        self.txPower = txPower
        self.scheme = scheme
        var high: UInt64 = 0
        var low: UInt64 = 0
        var last: UInt8 = 0
        for (position, byte) in encoded.enumerated() {
            switch position {
            case 0..<8: high |= UInt64(byte) << (56 - 8 * position)
            case 8..<16: low |= UInt64(byte) << (56 - 8 * (position - 8))
            default: last = byte
            }
        }
        packedHigh = high
        packedLow = low
        packedLast = last
        encodedCount = UInt8(encoded.count)
    }

    /// The frame a beacon advertising `url` would send, with `encode`'s encoding; nil when `encode` refuses it.
    public init?(txPower: Int8, url: String) {
        guard let bytes = Self.encode(url) else { return nil }
        self = bytes.withUnsafeBytes { raw in
            EddystoneURL(txPower: txPower, scheme: raw[0], validatedEncoded: UnsafeRawBufferPointer(rebasing: raw[1...]))
        }
    }

    init(reader: inout ByteReader, frameLength: Int) throws(DecodeError) {
        let frameOffset = reader.offset - 1
        if frameLength < 3 {
            throw DecodeError(
                .invalidLength, at: frameOffset, "Eddystone-URL frame is \(frameLength) bytes, at least 3 are needed")
        }
        if frameLength > 3 + Self.maximumEncodedLength {
            throw DecodeError(
                .invalidLength, at: frameOffset,
                "Eddystone-URL frame is \(frameLength) bytes, at most \(3 + Self.maximumEncodedLength) are allowed")
        }
        let txPower = try reader.i8("URL tx power")
        let schemeOffset = reader.offset
        let scheme = try reader.u8("URL scheme")
        guard Int(scheme) < Self.schemes.count else {
            throw DecodeError(
                .invalidValue, at: schemeOffset,
                "URL scheme prefix 0x\(hexString(UInt64(scheme), digits: 2)) is not one of 0x00-0x03")
        }
        let encoded = reader.rest()
        for (position, byte) in zip(encoded.indices, encoded) where !Self.isValidEncodedByte(byte) {
            throw DecodeError(
                .invalidValue, at: schemeOffset + 1 + (position - encoded.startIndex),
                "URL byte 0x\(hexString(UInt64(byte), digits: 2)) is a reserved code, not a character or expansion")
        }
        self = encoded.withUnsafeBytes { EddystoneURL(txPower: txPower, scheme: scheme, validatedEncoded: $0) }
    }

    /// The encoded bytes after the scheme code, as sent.
    public var encoded: [UInt8] { (0..<Int(encodedCount)).map(encodedByte) }

    @inline(__always)
    private func encodedByte(at position: Int) -> UInt8 {
        switch position {
        case 0..<8: UInt8(truncatingIfNeeded: packedHigh >> (56 - 8 * position))
        case 8..<16: UInt8(truncatingIfNeeded: packedLow >> (56 - 8 * (position - 8)))
        default: packedLast
        }
    }

    /// The URL text, scheme and expansions applied: one `String`, built in a stack buffer.
    public var url: String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.maximumEncodedLength) { buffer in
            for position in 0..<Int(encodedCount) { buffer[position] = encodedByte(at: position) }
            return Self.expand(
                scheme: scheme, encoded: UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[..<Int(encodedCount)])))
        }
    }

    /// Printable ASCII or one of the 14 expansion codes; 0x0E–0x20 and 0x7F–0xFF are reserved.
    @inline(__always)
    static func isValidEncodedByte(_ byte: UInt8) -> Bool {
        byte <= 0x0D || (0x21...0x7E).contains(byte)
    }

    private static let schemeBytes = schemes.map { Array($0.utf8) }
    private static let expansionBytes = expansions.map { Array($0.utf8) }

    /// The URL text, built in one buffer: the longest URL is 12 + 17 × 6 bytes. The scheme and every byte must
    /// have been validated.
    static func expand(scheme: UInt8, encoded: UnsafeRawBufferPointer) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { buffer in
            var count = 0
            func append(_ bytes: [UInt8]) {
                for byte in bytes {
                    buffer[count] = byte
                    count += 1
                }
            }
            append(schemeBytes[Int(scheme)])
            for byte in encoded {
                if byte <= 0x0D {
                    append(expansionBytes[Int(byte)])
                } else {
                    buffer[count] = byte
                    count += 1
                }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
        }
    }

    /// Encodes `url` the way a beacon would: the longest scheme prefix, then expansion codes where they match.
    /// Returns nil when the URL has no known scheme, a character outside 0x21–0x7E, or is too long to send.
    public static func encode(_ url: String) -> [UInt8]? {
        let utf8 = Array(url.utf8)
        guard
            let (schemeCode, schemeLength) = schemes.enumerated()
                .filter({ utf8.starts(with: Array($0.element.utf8)) })
                .map({ (UInt8($0.offset), $0.element.utf8.count) })
                .max(by: { $0.1 < $1.1 })
        else { return nil }
        var out: [UInt8] = [schemeCode]
        var index = schemeLength
        while index < utf8.count {
            let rest = utf8[index...]
            if let (code, expansion) = expansions.enumerated()
                .filter({ rest.starts(with: Array($0.element.utf8)) })
                .max(by: { $0.element.utf8.count < $1.element.utf8.count })
            {
                out.append(UInt8(code))
                index += expansion.utf8.count
            } else {
                guard (0x21...0x7E).contains(utf8[index]) else { return nil }
                out.append(utf8[index])
                index += 1
            }
        }
        return out.count - 1 <= maximumEncodedLength ? out : nil
    }
}

/// Unencrypted Eddystone-TLM (version 0x00).
public struct EddystoneTLM: Hashable, Sendable {
    /// Battery voltage in mV; nil when the beacon reports 0 (not supported).
    public var batteryMillivolts: UInt16?
    /// Beacon temperature, signed 8.8 fixed point; 0x8000 means not supported.
    public var temperatureRaw: Int16
    /// Advertising PDUs sent since power-on or reboot.
    public var advertisingCount: UInt32
    /// Time since power-on or reboot, in 0.1 s.
    public var uptimeTenths: UInt32

    public static let temperatureNotSupported = Int16(bitPattern: 0x8000)

    public init(batteryMillivolts: UInt16?, temperatureRaw: Int16, advertisingCount: UInt32, uptimeTenths: UInt32) {
        self.batteryMillivolts = batteryMillivolts
        self.temperatureRaw = temperatureRaw
        self.advertisingCount = advertisingCount
        self.uptimeTenths = uptimeTenths
    }

    init(reader: inout ByteReader, frameLength: Int) throws(DecodeError) {
        try requireLength(frameLength, [14], "Eddystone-TLM", at: reader.offset - 2)
        try self.init(fields: &reader)
    }

    /// Reads the 12 bytes after the version byte (also the plaintext of an eTLM frame).
    init(fields reader: inout ByteReader) throws(DecodeError) {
        let battery = try reader.u16be("TLM battery voltage")
        batteryMillivolts = battery == 0 ? nil : battery
        temperatureRaw = Int16(bitPattern: try reader.u16be("TLM temperature"))
        advertisingCount = try reader.u32be("TLM advertising count")
        uptimeTenths = try reader.u32be("TLM uptime")
    }

    /// Degrees Celsius; nil when the beacon does not measure temperature.
    public var temperatureCelsius: Double? {
        temperatureRaw == Self.temperatureNotSupported ? nil : Double(temperatureRaw) / 256
    }

    public var uptimeSeconds: Double { Double(uptimeTenths) / 10 }

    /// The 12 TLM bytes after the version byte.
    public var fieldBytes: [UInt8] {
        let battery = batteryMillivolts ?? 0
        let temperature = UInt16(bitPattern: temperatureRaw)
        return [
            UInt8(battery >> 8), UInt8(battery & 0xFF), UInt8(temperature >> 8), UInt8(temperature & 0xFF),
            UInt8(advertisingCount >> 24), UInt8((advertisingCount >> 16) & 0xFF),
            UInt8((advertisingCount >> 8) & 0xFF), UInt8(advertisingCount & 0xFF),
            UInt8(uptimeTenths >> 24), UInt8((uptimeTenths >> 16) & 0xFF),
            UInt8((uptimeTenths >> 8) & 0xFF), UInt8(uptimeTenths & 0xFF),
        ]
    }
}

/// Encrypted Eddystone-TLM (version 0x01): 12 bytes of AES-EAX ciphertext, a 16-bit salt and a 16-bit MIC.
public struct EddystoneETLM: Hashable, Sendable {
    public var ciphertext: [UInt8]
    public var salt: UInt16
    public var mic: UInt16
    /// The plaintext TLM, when the beacon's identity key is known and the MIC checked.
    public var decrypted: EddystoneTLM?
    /// The beacon whose identity key decrypted this frame.
    public var beaconID: String?

    public init(ciphertext: [UInt8], salt: UInt16, mic: UInt16) {
        self.ciphertext = ciphertext
        self.salt = salt
        self.mic = mic
    }

    init(reader: inout ByteReader, frameLength: Int) throws(DecodeError) {
        try requireLength(frameLength, [18], "Eddystone-eTLM", at: reader.offset - 2)
        ciphertext = Array(try reader.slice(12, "eTLM ciphertext"))
        salt = try reader.u16be("eTLM salt")
        mic = try reader.u16be("eTLM MIC")
    }
}

/// Eddystone-EID: an 8-byte ephemeral identifier that rotates every 2^K seconds.
public struct EddystoneEID: Hashable, Sendable {
    public var txPower: Int8
    public var eid: UInt64
    /// The registered beacon this EID resolved to, when its identity key is known.
    public var beaconID: String?
    /// The beacon's time counter at the start of the EID's rotation period, once resolved.
    public var beaconTime: UInt32?

    public init(txPower: Int8, eid: UInt64) {
        self.txPower = txPower
        self.eid = eid
    }

    init(reader: inout ByteReader, frameLength: Int) throws(DecodeError) {
        try requireLength(frameLength, [10], "Eddystone-EID", at: reader.offset - 1)
        txPower = try reader.i8("EID tx power")
        eid = try reader.uintBE(8, "EID")
    }

    /// 16 lowercase hex digits.
    public var eidHex: String { hexString(eid, digits: 16) }
}
