/// One decoded frame of an advertisement.
public enum BeaconFrame: Hashable, Sendable {
    case eddystoneUID(EddystoneUID)
    case eddystoneURL(EddystoneURL)
    case eddystoneTLM(EddystoneTLM)
    case eddystoneETLM(EddystoneETLM)
    case eddystoneEID(EddystoneEID)
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)
    case ruuvi(RuuviMeasurement)
    case bthome(BTHomePacket)
    case gatt(GATTServiceValue)
    case thermometer(ThermometerReading)

    /// The identity this frame carries (the beacon-id contract), if it carries one: UID, iBeacon, AltBeacon, and resolved EID.
    public var beaconID: String? {
        switch self {
        case .eddystoneUID(let uid): return uid.beaconID
        case .eddystoneEID(let eid): return eid.beaconID
        case .iBeacon(let beacon): return beacon.beaconID
        case .altBeacon(let beacon): return beacon.beaconID
        default: return nil
        }
    }
}

/// Turns `AdvertisingData` into frames. It holds the keys for encrypted formats and remembers, per address, the
/// last resolved EID, so that an eTLM frame pairs with the EID its beacon sent (Eddystone's intended association).
public struct FrameDecoder: Sendable {
    /// EIDs and eTLM frames, with the keys of the beacons that send them.
    public var eids: EIDResolver
    /// BTHome bindkeys by device address.
    public var bindkeys: [UInt64: [UInt8]]

    public init(keyring: EddystoneKeyring = EddystoneKeyring(), bindkeys: [UInt64: [UInt8]] = [:]) {
        eids = EIDResolver(keyring: keyring)
        self.bindkeys = bindkeys
    }

    /// Decodes every frame of `data`, as `FrameClassifier` sorts them. `unixSeconds` is when it was received (for
    /// EID resolution).
    public mutating func frames(
        in data: AdvertisingData, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> [BeaconFrame] {
        var frames: [BeaconFrame] = []
        for service in data.serviceData {
            guard case .uuid16(let uuid) = service.uuid else { continue }
            let structure = try service.data[...].withDecodeErrors { (body) throws(DecodeError) in
                try FrameClassifier.classify(serviceData: uuid, body, base: service.offset)
            }
            if let frame = try frame(of: structure, base: service.offset, address: address, unixSeconds: unixSeconds) {
                frames.append(frame)
            }
        }
        for manufacturer in data.manufacturerData {
            let structure = try manufacturer.data[...].withDecodeErrors { (body) throws(DecodeError) in
                try FrameClassifier.classify(manufacturerData: manufacturer.companyID, body, base: manufacturer.offset)
            }
            if let frame = try frame(
                of: structure, base: manufacturer.offset, address: address, unixSeconds: unixSeconds)
            {
                frames.append(frame)
            }
        }
        return frames
    }

    private mutating func frame(
        of structure: ClassifiedStructure, base: Int, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> BeaconFrame? {
        switch structure {
        case .identity(let frame): return decryptOrResolve(frame.frame, address: address, unixSeconds: unixSeconds)
        case .data(let content): return try frame(of: content, base: base, address: address, unixSeconds: unixSeconds)
        case .ignore: return nil
        }
    }

    /// Decodes one data frame as a batch carries it (service or manufacturer data of a sighting; `base` is its
    /// offset in the advertisement, for errors). Nil when the content is of no format this decoder reads.
    public mutating func frame(
        of content: DataFrameContent, base: Int = 0, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> BeaconFrame? {
        switch content {
        case .eddystone(let bytes):
            return try serviceFrame(
                uuid: Eddystone.serviceUUID,
                ServiceData(uuid: .uuid16(Eddystone.serviceUUID), data: Array(bytes), offset: base),
                address: address, unixSeconds: unixSeconds)
        case .serviceData(let uuid, let bytes):
            return try serviceFrame(
                uuid: uuid, ServiceData(uuid: .uuid16(uuid), data: Array(bytes), offset: base), address: address,
                unixSeconds: unixSeconds)
        case .manufacturerData(let company, let bytes):
            guard FrameClassifier.carriesData(companyID: company) else { return nil }
            return .ruuvi(try RuuviMeasurement.decode(Array(bytes)[...], base: base))
        }
    }

    private mutating func serviceFrame(
        uuid: UInt16, _ service: ServiceData, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> BeaconFrame? {
        let body = service.data[...]
        switch uuid {
        case Eddystone.serviceUUID:
            return try decryptOrResolve(
                Eddystone.decode(body, base: service.offset), address: address, unixSeconds: unixSeconds)
        case BTHomePacket.serviceUUID:
            let key = address.flatMap { bindkeys[$0.value] }
            return .bthome(try BTHomePacket.decode(body, base: service.offset, address: address, bindkey: key))
        case 0x181A:
            return try ThermometerReading.decode(body, base: service.offset).map { .thermometer($0) }
        case 0x1809 where body.count == 4:
            // Many thermometers send the bare FLOAT, without the Temperature Measurement flags byte.
            var reader = ByteReader(body, base: service.offset)
            let number = MedicalFloat(float: try reader.u32le("temperature"))
            var value = CharacteristicValue(
                characteristic: GATTCharacteristic.temperatureMeasurement, value: .optional(number.value))
            value.unit = "celsius"
            return .gatt(GATTServiceValue(serviceUUID: uuid, value: value))
        default:
            if let characteristic = GATTServiceValue.characteristicOfService[uuid] {
                let value = try GATTCharacteristic.decode(characteristic, body, base: service.offset)
                return .gatt(GATTServiceValue(serviceUUID: uuid, value: value))
            }
            if GATTCharacteristic.isKnown(uuid) {
                let value = try GATTCharacteristic.decode(uuid, body, base: service.offset)
                return .gatt(GATTServiceValue(serviceUUID: uuid, value: value))
            }
            return nil
        }
    }

    private mutating func decryptOrResolve(
        _ frame: BeaconFrame, address: DeviceAddress?, unixSeconds: Int64
    ) -> BeaconFrame {
        guard !eids.isEmpty else { return frame }
        switch frame {
        case .eddystoneEID(var eid):
            if let resolution = eids.resolve(eid: eid.eid, unixSeconds: unixSeconds, address: address) {
                eid.beaconID = resolution.identity.beaconID
                eid.beaconTime = resolution.beaconTime
            }
            return .eddystoneEID(eid)
        case .eddystoneETLM(var etlm):
            if let (tlm, identity) = eids.decrypt(etlm, address: address, unixSeconds: unixSeconds) {
                etlm.decrypted = tlm
                etlm.beaconID = identity.beaconID
            }
            return .eddystoneETLM(etlm)
        default:
            return frame
        }
    }
}

extension FrameClassifier {
    /// Services whose data the ingest decodes (`FrameDecoder.frame(of:)`, above): BTHome, the environmental,
    /// thermometer and battery services, and service data named by a GATT characteristic. Kept beside the decoder
    /// so that a new format is added in one place.
    public static func carriesData(serviceUUID uuid: UInt16) -> Bool {
        uuid == BTHomePacket.serviceUUID || uuid == 0x181A || uuid == 0x1809 || uuid == 0x180F
            || GATTServiceValue.characteristicOfService[uuid] != nil || GATTCharacteristic.isKnown(uuid)
    }

    /// Companies whose manufacturer data (other than iBeacon and AltBeacon identities) the ingest decodes: Ruuvi.
    public static func carriesData(companyID company: UInt16) -> Bool {
        company == RuuviMeasurement.companyID
    }
}
