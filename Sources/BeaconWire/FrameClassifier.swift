/// A frame that names a beacon, decoded. Small and mostly trivially copied: the agent makes one per report.
public enum IdentityFrame: Hashable, Sendable {
    case eddystoneUID(EddystoneUID)
    /// An Eddystone EID as heard; resolving it to its beacon needs the beacon's key (`FrameDecoder`).
    case eddystoneEID(txPower: Int8, eid: UInt64)
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)

    /// The identity frame a decoded frame is, if it is one.
    public init?(_ frame: BeaconFrame) {
        switch frame {
        case .eddystoneUID(let uid): self = .eddystoneUID(uid)
        case .eddystoneEID(let eid): self = .eddystoneEID(txPower: eid.txPower, eid: eid.eid)
        case .iBeacon(let beacon): self = .iBeacon(beacon)
        case .altBeacon(let beacon): self = .altBeacon(beacon)
        default: return nil
        }
    }

    /// The identity it gives its beacon (an EID's as heard, unresolved; nil only for an AltBeacon id too long for
    /// a binary id).
    public var identity: BeaconIdentity? {
        switch self {
        case .eddystoneUID(let uid): uid.identity
        case .eddystoneEID(_, let eid): .eid(eid)
        case .iBeacon(let beacon): beacon.identity
        case .altBeacon(let beacon): beacon.identity
        }
    }

    public var frame: BeaconFrame {
        switch self {
        case .eddystoneUID(let uid): .eddystoneUID(uid)
        case .eddystoneEID(let txPower, let eid): .eddystoneEID(EddystoneEID(txPower: txPower, eid: eid))
        case .iBeacon(let beacon): .iBeacon(beacon)
        case .altBeacon(let beacon): .altBeacon(beacon)
        }
    }
}

/// What one AD structure of an advertisement is to the pipeline.
public enum ClassifiedStructure: Hashable, Sendable {
    /// A frame that names a beacon (Eddystone UID or EID, iBeacon, AltBeacon).
    case identity(IdentityFrame)
    /// A frame without identity, as a batch carries it (Eddystone URL, TLM and eTLM, BTHome, GATT-format service
    /// data, Ruuvi): the agent sends its bytes, the ingest decodes them.
    case data(DataFrameContent)
    /// Of no format the product reads.
    case ignore
}

/// An advertisement as the agent sends it: the beacon it names and the data frames it carries.
public struct ClassifiedAdvertisement: Hashable, Sendable {
    /// The identity frame; the last one when an advertisement holds several.
    public var identity: IdentityFrame?
    public var data = DataFrames()
    /// The first identity frame that did not decode (a truncated iBeacon, an Eddystone UID of the wrong length).
    /// The advertisement's other frames still count.
    public var malformed: DecodeError?

    public init(identity: IdentityFrame? = nil, data: DataFrames = DataFrames(), malformed: DecodeError? = nil) {
        self.identity = identity
        self.data = data
        self.malformed = malformed
    }

    mutating func removeAll() {
        identity = nil
        if !data.isEmpty { data.removeAll() }
        malformed = nil
    }

    mutating func add(_ structure: ClassifiedStructure) {
        switch structure {
        case .identity(let frame): identity = frame
        case .data(let content): data.append(content)
        case .ignore: break
        }
    }

    /// An identity frame that did not decode: it is left out, and the first such error kept.
    mutating func report(_ error: DecodeError) {
        if malformed == nil { malformed = error }
    }
}

/// The one place that decides which frames name a beacon, which carry data, and which are ignored. The agent
/// classifies every advertising report with it, `decode` and the ingest decode what it classifies as data.
///
/// Well-formed Eddystone UID and EID and iBeacon frames are read straight from the bytes, without allocating; every
/// other identity frame goes through the bounds-checked decoders, which give the same frames and the errors.
public enum FrameClassifier {
    /// Classifies every AD structure of an advertising payload. Throws when the AD structures themselves are
    /// malformed (a length past the end, service or manufacturer data too short for its UUID or company id).
    public static func classify(_ payload: ArraySlice<UInt8>) throws(DecodeError) -> ClassifiedAdvertisement {
        var result = ClassifiedAdvertisement()
        try classify(payload, into: &result)
        return result
    }

    /// Classifies into `result`, which it empties first: a caller that classifies advert after advert keeps one
    /// result instead of building, copying and destroying one for each (about 200 bytes). On a throw, `result`
    /// holds what came before the malformed structure.
    public static func classify(_ payload: ArraySlice<UInt8>, into result: inout ClassifiedAdvertisement) throws(DecodeError) {
        try payload.withDecodeErrors { (raw) throws(DecodeError) in try classify(raw, into: &result) }
    }

    /// The same over bytes the caller owns (an HCI read buffer, a corpus).
    public static func classify(_ payload: UnsafeRawBufferPointer, into result: inout ClassifiedAdvertisement) throws(DecodeError) {
        result.removeAll()
        var index = 0
        while index < payload.count {
            let length = Int(payload[index])
            if length == 0 { break }  // controllers pad legacy PDUs with zeros
            guard index + 1 + length <= payload.count else {
                throw DecodeError(
                    .lengthOverrun, at: index,
                    "AD structure length \(length) runs past the end of the payload (\(payload.count - index - 1) bytes left)")
            }
            let type = payload[index + 1]
            let data = UnsafeRawBufferPointer(rebasing: payload[(index + 2)..<(index + 1 + length)])
            switch type {
            case ADType.serviceData16:
                guard data.count >= 2 else {
                    throw DecodeError(
                        .invalidLength, at: index,
                        "service data AD structure has \(data.count) data bytes, too short for its 2-byte UUID")
                }
                let uuid = UInt16(data[0]) | UInt16(data[1]) << 8
                let body = UnsafeRawBufferPointer(rebasing: data[2...])
                if let frame = readIdentity(serviceData: uuid, body) {
                    result.identity = frame
                } else if isDataFrame(serviceData: uuid, body) {
                    result.data.append(serviceData: uuid, body)
                } else {
                    do {
                        result.add(try classify(serviceData: uuid, body, base: index + 4))
                    } catch {
                        result.report(error)
                    }
                }
            case ADType.manufacturerData:
                guard data.count >= 2 else {
                    throw DecodeError(
                        .invalidLength, at: index,
                        "manufacturer data AD structure has \(data.count) data bytes, too short for a company identifier")
                }
                let company = UInt16(data[0]) | UInt16(data[1]) << 8
                let body = UnsafeRawBufferPointer(rebasing: data[2...])
                if let frame = readIdentity(manufacturerData: company, body) {
                    result.identity = frame
                } else {
                    do {
                        result.add(try classify(manufacturerData: company, body, base: index + 4))
                    } catch {
                        result.report(error)
                    }
                }
            default:
                break
            }
            index += 1 + length
        }
    }

    /// Classifies 16-bit service data (`body` follows the UUID, at offset `base` of the payload). Throws for an
    /// identity frame that does not decode.
    public static func classify(
        serviceData uuid: UInt16, _ body: UnsafeRawBufferPointer, base: Int = 0
    ) throws(DecodeError) -> ClassifiedStructure {
        if let frame = readIdentity(serviceData: uuid, body) { return .identity(frame) }
        if let content = dataFrame(serviceData: uuid, body) { return .data(content) }
        // What is left of Eddystone is a UID or EID frame that did not read straight from the bytes.
        guard uuid == Eddystone.serviceUUID, !body.isEmpty else { return .ignore }
        return IdentityFrame(try Eddystone.decode(Array(body)[...], base: base)).map(ClassifiedStructure.identity) ?? .ignore
    }

    /// Classifies manufacturer data (`body` follows the company id, at offset `base` of the payload). Throws for
    /// an identity frame that does not decode.
    public static func classify(
        manufacturerData company: UInt16, _ body: UnsafeRawBufferPointer, base: Int = 0
    ) throws(DecodeError) -> ClassifiedStructure {
        guard body.count >= 2 else {
            return carriesData(companyID: company) ? .data(.manufacturerData(companyID: company, FrameBytes(body))) : .ignore
        }
        if let frame = readIdentity(manufacturerData: company, body) { return .identity(frame) }
        if company == IBeacon.companyID, let beacon = try IBeacon.decode(Array(body)[...], base: base) {
            return .identity(.iBeacon(beacon))
        }
        if body[0] == 0xBE, body[1] == 0xAC,
            let beacon = try AltBeacon.decode(companyID: company, Array(body)[...], base: base)
        {
            return .identity(.altBeacon(beacon))
        }
        return carriesData(companyID: company) ? .data(.manufacturerData(companyID: company, FrameBytes(body))) : .ignore
    }

    /// Whether service data is a data frame as it stands (an Eddystone URL, TLM or eTLM, or a frame type the ingest
    /// will name in its error; a listed service's data).
    @inline(__always)
    private static func isDataFrame(serviceData uuid: UInt16, _ body: UnsafeRawBufferPointer) -> Bool {
        if uuid == Eddystone.serviceUUID {
            guard let frameType = body.first else { return false }
            return frameType != Eddystone.uidFrameType && frameType != Eddystone.eidFrameType
        }
        return carriesData(serviceUUID: uuid)
    }

    /// Service data that is a data frame as it stands (see `isDataFrame`); nil for anything else.
    @inline(__always)
    private static func dataFrame(serviceData uuid: UInt16, _ body: UnsafeRawBufferPointer) -> DataFrameContent? {
        isDataFrame(serviceData: uuid, body) ? .serviceData(uuid, FrameBytes(body)) : nil
    }

    /// A well-formed Eddystone UID or EID frame, read straight from the bytes; nil for anything else.
    @inline(__always)
    private static func readIdentity(serviceData uuid: UInt16, _ body: UnsafeRawBufferPointer) -> IdentityFrame? {
        guard uuid == Eddystone.serviceUUID, let frameType = body.first else { return nil }
        switch (frameType, body.count) {
        case (Eddystone.uidFrameType, 18), (Eddystone.uidFrameType, 20):
            return .eddystoneUID(
                EddystoneUID(
                    txPower: Int8(bitPattern: body[1]), namespaceHigh: load(body, 2, as: UInt64.self),
                    namespaceLow: load(body, 10, as: UInt16.self),
                    instance: UInt64(load(body, 12, as: UInt16.self)) << 32 | UInt64(load(body, 14, as: UInt32.self))))
        case (Eddystone.eidFrameType, 10):
            return .eddystoneEID(txPower: Int8(bitPattern: body[1]), eid: load(body, 2, as: UInt64.self))
        default:
            return nil
        }
    }

    /// A well-formed iBeacon frame, read straight from the bytes; nil for anything else.
    @inline(__always)
    private static func readIdentity(manufacturerData company: UInt16, _ body: UnsafeRawBufferPointer) -> IdentityFrame? {
        guard company == IBeacon.companyID, body.count == 23, body[0] == 0x02, body[1] == 0x15 else { return nil }
        return .iBeacon(
            IBeacon(
                uuidHigh: load(body, 2, as: UInt64.self), uuidLow: load(body, 10, as: UInt64.self),
                major: load(body, 18, as: UInt16.self), minor: load(body, 20, as: UInt16.self),
                measuredPower: Int8(bitPattern: body[22])))
    }

    @inline(__always)
    private static func load<T: FixedWidthInteger>(_ raw: UnsafeRawBufferPointer, _ offset: Int, as: T.Type) -> T {
        T(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension ArraySlice<UInt8> {
    /// `withUnsafeBytes` for a body that throws only `DecodeError`.
    func withDecodeErrors<Result>(
        _ body: (UnsafeRawBufferPointer) throws(DecodeError) -> Result
    ) throws(DecodeError) -> Result {
        try withUnsafeBytes { raw in Swift.Result { () throws(DecodeError) in try body(raw) } }.get()
    }
}
