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

/// Finds the first identity or telemetry frame of an advertising payload without building `AdvertisingData`:
/// the allocation-free path for the common beacon formats (Eddystone UID/TLM/EID, iBeacon, AltBeacon).
public enum BeaconScanner {
    /// Returns the first Eddystone, iBeacon or AltBeacon frame, nil when there is none.
    ///
    /// Well-formed UID, TLM, EID and iBeacon frames are read straight from the bytes; everything else (URL, eTLM,
    /// AltBeacon, and every malformed payload) goes through the general decoders, so both paths give the same
    /// frames and the same errors.
    public static func firstFrame(in payload: ArraySlice<UInt8>) throws(DecodeError) -> BeaconFrame? {
        switch payload.withUnsafeBytes(fastScan) {
        case .frame(let frame): return frame
        case .noFrame: return nil
        case .general: return try generalFirstFrame(in: payload)
        }
    }

    /// The same, over bytes in a buffer the caller owns (an HCI read buffer, a corpus): no copy unless the
    /// payload needs the general decoders.
    public static func firstFrame(in payload: UnsafeRawBufferPointer) throws(DecodeError) -> BeaconFrame? {
        switch fastScan(payload) {
        case .frame(let frame): return frame
        case .noFrame: return nil
        case .general: return try generalFirstFrame(in: Array(payload)[...])
        }
    }

    private enum FastResult {
        case frame(BeaconFrame)
        case noFrame
        /// Not a common well-formed frame: let the general decoders decide.
        case general
    }

    @inline(__always)
    private static func load<T: FixedWidthInteger>(_ raw: UnsafeRawBufferPointer, _ offset: Int, as: T.Type) -> T {
        T(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    private static func fastScan(_ raw: UnsafeRawBufferPointer) -> FastResult {
        var index = 0
        let count = raw.count
        while index < count {
            let length = Int(raw[index])
            if length == 0 { return .noFrame }
            guard index + 1 + length <= count else { return .general }
            let type = raw[index + 1]
            let data = index + 2
            let dataLength = length - 1
            if type == ADType.serviceData16, dataLength >= 2, raw[data] == 0xAA, raw[data + 1] == 0xFE {
                guard dataLength >= 3 else { return .general }
                let frame = data + 2
                switch (raw[frame], dataLength - 2) {
                case (Eddystone.uidFrameType, 18), (Eddystone.uidFrameType, 20):
                    let instance = UInt64(load(raw, frame + 12, as: UInt16.self)) << 32
                        | UInt64(load(raw, frame + 14, as: UInt32.self))
                    return .frame(
                        .eddystoneUID(
                            EddystoneUID(
                                txPower: Int8(bitPattern: raw[frame + 1]), namespaceHigh: load(raw, frame + 2, as: UInt64.self),
                                namespaceLow: load(raw, frame + 10, as: UInt16.self), instance: instance)))
                case (Eddystone.tlmFrameType, 14) where raw[frame + 1] == 0:
                    let battery = load(raw, frame + 2, as: UInt16.self)
                    return .frame(
                        .eddystoneTLM(
                            EddystoneTLM(
                                batteryMillivolts: battery == 0 ? nil : battery,
                                temperatureRaw: load(raw, frame + 4, as: Int16.self),
                                advertisingCount: load(raw, frame + 6, as: UInt32.self),
                                uptimeTenths: load(raw, frame + 10, as: UInt32.self))))
                case (Eddystone.urlFrameType, 3...20) where raw[frame + 2] < 4:
                    let encoded = UnsafeRawBufferPointer(rebasing: raw[(frame + 3)..<(frame + dataLength - 2)])
                    guard encoded.allSatisfy(EddystoneURL.isValidEncodedByte) else { return .general }
                    return .frame(
                        .eddystoneURL(
                            EddystoneURL(
                                txPower: Int8(bitPattern: raw[frame + 1]), scheme: raw[frame + 2],
                                validatedEncoded: encoded)))
                case (Eddystone.eidFrameType, 10):
                    return .frame(
                        .eddystoneEID(
                            EddystoneEID(txPower: Int8(bitPattern: raw[frame + 1]), eid: load(raw, frame + 2, as: UInt64.self))))
                default:
                    return .general
                }
            }
            if type == ADType.manufacturerData, dataLength >= 4 {
                let code = load(raw, data + 2, as: UInt16.self)
                if raw[data] == 0x4C, raw[data + 1] == 0x00, code == 0x0215 {
                    guard dataLength == 25 else { return .general }
                    return .frame(
                        .iBeacon(
                            IBeacon(
                                uuidHigh: load(raw, data + 4, as: UInt64.self), uuidLow: load(raw, data + 12, as: UInt64.self),
                                major: load(raw, data + 20, as: UInt16.self), minor: load(raw, data + 22, as: UInt16.self),
                                measuredPower: Int8(bitPattern: raw[data + 24]))))
                }
                if code == 0xBEAC { return .general }
            }
            index += 1 + length
        }
        return .noFrame
    }

    /// The general path: every AD structure through the bounds-checked decoders.
    static func generalFirstFrame(in payload: ArraySlice<UInt8>) throws(DecodeError) -> BeaconFrame? {
        var iterator = ADIterator(payload)
        while let structure = try iterator.next() {
            let data = structure.data
            switch structure.type {
            case ADType.serviceData16:
                guard data.count >= 2 else { continue }
                let uuid = UInt16(data[data.startIndex]) | UInt16(data[data.startIndex + 1]) << 8
                if uuid == Eddystone.serviceUUID {
                    let body = data[(data.startIndex + 2)...]
                    return try Eddystone.decode(body, base: structure.dataOffset + 2)
                }
            case ADType.manufacturerData:
                guard data.count >= 2 else { continue }
                let company = UInt16(data[data.startIndex]) | UInt16(data[data.startIndex + 1]) << 8
                let body = data[(data.startIndex + 2)...]
                if company == IBeacon.companyID, let beacon = try IBeacon.decode(body, base: structure.dataOffset + 2) {
                    return .iBeacon(beacon)
                }
                if let beacon = try AltBeacon.decode(companyID: company, body, base: structure.dataOffset + 2) {
                    return .altBeacon(beacon)
                }
            default:
                continue
            }
        }
        return nil
    }
}

/// Turns `AdvertisingData` into frames. It holds the keys for encrypted formats and remembers, per address, the
/// last resolved EID, so that an eTLM frame pairs with the EID its beacon sent (Eddystone's intended association).
public struct FrameDecoder: Sendable {
    public var keyring: EddystoneKeyring
    /// BTHome bindkeys by device address.
    public var bindkeys: [UInt64: [UInt8]]
    /// How long an EID resolution stays usable for pairing eTLM frames from the same address, in seconds.
    public var pairingWindowSeconds: Int64 = 60

    private var lastResolution: [UInt64: (resolution: EIDResolution, unixSeconds: Int64)] = [:]

    public init(keyring: EddystoneKeyring = EddystoneKeyring(), bindkeys: [UInt64: [UInt8]] = [:]) {
        self.keyring = keyring
        self.bindkeys = bindkeys
    }

    /// Decodes every frame of `data`. `unixSeconds` is when it was received (for EID resolution).
    public mutating func frames(
        in data: AdvertisingData, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> [BeaconFrame] {
        var frames: [BeaconFrame] = []
        for service in data.serviceData {
            guard case .uuid16(let uuid) = service.uuid else { continue }
            if let frame = try serviceFrame(uuid: uuid, service, address: address, unixSeconds: unixSeconds) {
                frames.append(frame)
            }
        }
        for manufacturer in data.manufacturerData {
            let body = manufacturer.data[...]
            if manufacturer.companyID == IBeacon.companyID,
                let beacon = try IBeacon.decode(body, base: manufacturer.offset)
            {
                frames.append(.iBeacon(beacon))
            } else if let beacon = try AltBeacon.decode(
                companyID: manufacturer.companyID, body, base: manufacturer.offset)
            {
                frames.append(.altBeacon(beacon))
            } else if manufacturer.companyID == RuuviMeasurement.companyID {
                frames.append(.ruuvi(try RuuviMeasurement.decode(body, base: manufacturer.offset)))
            }
        }
        return frames
    }

    /// Decodes one data frame as a batch carries it (service or manufacturer data of a sighting). Nil when the
    /// content is of no format this decoder reads.
    public mutating func frame(
        of content: DataFrameContent, address: DeviceAddress?, unixSeconds: Int64
    ) throws(DecodeError) -> BeaconFrame? {
        switch content {
        case .eddystone(let bytes):
            return try serviceFrame(
                uuid: Eddystone.serviceUUID, ServiceData(uuid: .uuid16(Eddystone.serviceUUID), data: bytes),
                address: address, unixSeconds: unixSeconds)
        case .serviceData(let uuid, let bytes):
            return try serviceFrame(
                uuid: uuid, ServiceData(uuid: .uuid16(uuid), data: bytes), address: address, unixSeconds: unixSeconds)
        case .manufacturerData(let company, let bytes):
            guard company == RuuviMeasurement.companyID else { return nil }
            return .ruuvi(try RuuviMeasurement.decode(bytes[...], base: 0))
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
        guard !keyring.isEmpty else { return frame }
        switch frame {
        case .eddystoneEID(var eid):
            if let resolution = keyring.resolve(eid: eid.eid, unixSeconds: unixSeconds) {
                eid.beaconID = resolution.identity.beaconID
                eid.beaconTime = resolution.beaconTime
                if let address { lastResolution[address.value] = (resolution, unixSeconds) }
            }
            return .eddystoneEID(eid)
        case .eddystoneETLM(var etlm):
            if let address, let paired = lastResolution[address.value],
                unixSeconds - paired.unixSeconds <= pairingWindowSeconds,
                let tlm = keyring.decrypt(etlm, pairedWith: paired.resolution)
            {
                etlm.decrypted = tlm
                etlm.beaconID = paired.resolution.identity.beaconID
            } else if let (tlm, identity) = keyring.decrypt(etlm, unixSeconds: unixSeconds) {
                etlm.decrypted = tlm
                etlm.beaconID = identity.beaconID
            }
            return .eddystoneETLM(etlm)
        default:
            return frame
        }
    }
}
