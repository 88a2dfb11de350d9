/// The decoded-JSON contract of `beaconflow decode`: field names in snake_case with units in the name.
extension BeaconFrame {
    public var json: JSONValue {
        switch self {
        case .eddystoneUID(let uid):
            return .object([
                JSONField("type", .string("eddystone-uid")), JSONField("tx_power", .number(uid.txPower)),
                JSONField("namespace", .string(uid.namespace)), JSONField("instance", .string(uid.instanceHex)),
                JSONField("beacon_id", .string(uid.beaconID)),
            ])
        case .eddystoneURL(let url):
            return .object([
                JSONField("type", .string("eddystone-url")), JSONField("tx_power", .number(url.txPower)),
                JSONField("url", .string(url.url)),
            ])
        case .eddystoneTLM(let tlm):
            return .object([JSONField("type", .string("eddystone-tlm")), JSONField("version", .int(0))] + tlm.jsonFields)
        case .eddystoneETLM(let etlm):
            var fields = [
                JSONField("type", .string("eddystone-etlm")), JSONField("version", .int(1)),
                JSONField("etlm", .string(etlm.ciphertext.hexString)),
                JSONField("salt", .string(hexString(UInt64(etlm.salt), digits: 4))),
                JSONField("mic", .string(hexString(UInt64(etlm.mic), digits: 4))),
            ]
            if let tlm = etlm.decrypted { fields += tlm.jsonFields }
            if let id = etlm.beaconID { fields.append(JSONField("beacon_id", .string(id))) }
            return .object(fields)
        case .eddystoneEID(let eid):
            var fields = [
                JSONField("type", .string("eddystone-eid")), JSONField("tx_power", .number(eid.txPower)),
                JSONField("eid", .string(eid.eidHex)),
            ]
            if let id = eid.beaconID { fields.append(JSONField("beacon_id", .string(id))) }
            return .object(fields)
        case .iBeacon(let beacon):
            return .object([
                JSONField("type", .string("ibeacon")), JSONField("uuid", .string(beacon.uuid)),
                JSONField("major", .number(beacon.major)), JSONField("minor", .number(beacon.minor)),
                JSONField("measured_power", .number(beacon.measuredPower)),
                JSONField("beacon_id", .string(beacon.beaconID)),
            ])
        case .altBeacon(let beacon):
            return .object([
                JSONField("type", .string("altbeacon")), JSONField("manufacturer_id", .number(beacon.manufacturerID)),
                JSONField("id1", .string(beacon.id1.hexString)), JSONField("id2", .number(beacon.id2)),
                JSONField("id3", .number(beacon.id3)), JSONField("reference_rssi", .number(beacon.referenceRSSI)),
                JSONField("mfg_reserved", .number(beacon.manufacturerReserved)),
                JSONField("beacon_id", .string(beacon.beaconID)),
            ])
        case .ruuvi(let m):
            return .object([
                JSONField("type", .string("ruuvi")), JSONField("data_format", .number(m.dataFormat)),
                JSONField("temperature_c", .optional(m.temperatureCelsius.map(roundedReading))),
                JSONField("humidity", .optional(m.humidity.map(roundedReading))),
                JSONField("pressure_pa", .optional(m.pressurePascal)),
                JSONField("acceleration_x_mg", .optional(m.accelerationX)),
                JSONField("acceleration_y_mg", .optional(m.accelerationY)),
                JSONField("acceleration_z_mg", .optional(m.accelerationZ)),
                JSONField("battery_mv", .optional(m.batteryMillivolts)), JSONField("tx_power", .optional(m.txPower)),
                JSONField("movement_counter", .optional(m.movementCounter)),
                JSONField("measurement_sequence", .optional(m.measurementSequence)),
                JSONField("mac", .optional(m.mac)),
            ])
        case .bthome(let packet):
            var fields = [
                JSONField("type", .string("bthome")), JSONField("bthome_version", .number(packet.version)),
                JSONField("encrypted", .bool(packet.encrypted)), JSONField("trigger_based", .bool(packet.triggerBased)),
                JSONField("packet_id", .optional(packet.packetID)), JSONField("values", .object(packet.values)),
            ]
            if !packet.binary.isEmpty { fields.append(JSONField("binary", .object(packet.binary))) }
            fields.append(JSONField("events", .array(packet.events)))
            if let counter = packet.counter { fields.append(JSONField("counter", .number(counter))) }
            if let ciphertext = packet.ciphertext { fields.append(JSONField("ciphertext", .string(ciphertext.hexString))) }
            if let unknown = packet.unknownObject {
                fields.append(
                    JSONField(
                        "stopped_at", .object([JSONField("object_id", .number(unknown.id)), JSONField("offset", .number(unknown.offset))])))
            }
            return .object(fields)
        case .gatt(let service):
            guard case .object(let valueFields) = service.value.json else { return .null }
            return .object(
                [JSONField("type", .string("gatt")),
                 JSONField("service_uuid", .string(hexString(UInt64(service.serviceUUID), digits: 4)))]
                    + valueFields)
        case .thermometer(let reading):
            var fields = [
                JSONField("type", .string(reading.layout.rawValue)), JSONField("mac", .string(reading.mac)),
                // Keyed as the other decoders of these firmwares key them (BTHome's and Home Assistant's names):
                // °C, %, %, volts.
                JSONField("temperature", .double(roundedReading(reading.temperatureCelsius))),
                JSONField("humidity", .double(roundedReading(reading.humidity))),
                JSONField("battery", .number(reading.batteryPercent)),
                JSONField("voltage", .double(Double(reading.batteryMillivolts) / 1000)),
                JSONField("counter", .number(reading.counter)),
            ]
            if let flags = reading.flags { fields.append(JSONField("flags", .number(flags))) }
            return .object(fields)
        }
    }
}

/// Sensor readings scaled by decimal factors, rounded to the 4 decimals no sensor here exceeds, so 0.005 × 4860
/// prints as 24.3 rather than 24.299999999999997.
func roundedReading(_ value: Double) -> Double {
    (value * 10_000).rounded() / 10_000
}

extension EddystoneTLM {
    var jsonFields: [JSONField] {
        [
            JSONField("battery_mv", .optional(batteryMillivolts)),
            JSONField("temperature_c", .optional(temperatureCelsius)),
            JSONField("adv_count", .number(advertisingCount)),
            JSONField("uptime_s", .double(uptimeSeconds)),
        ]
    }
}

extension AdvertisingData {
    /// The generic fields of one advertisement object, without address, RSSI, time or frames.
    public var jsonFields: [JSONField] {
        var fields: [JSONField] = []
        if let flags { fields.append(JSONField("flags", .number(flags))) }
        if let localName { fields.append(JSONField("local_name", .string(localName))) }
        if let txPowerLevel { fields.append(JSONField("tx_power_level", .number(txPowerLevel))) }
        if let appearance { fields.append(JSONField("appearance", .number(appearance))) }
        fields.append(JSONField("service_uuids", .array(serviceUUIDs.map { .string($0.description) })))
        fields.append(
            JSONField(
                "service_data",
                .array(
                    serviceData.map {
                        .object([JSONField("uuid", .string($0.uuid.description)), JSONField("data", .string($0.data.hexString))])
                    })))
        fields.append(
            JSONField(
                "manufacturer_data",
                .array(
                    manufacturerData.map {
                        .object([JSONField("company_id", .number($0.companyID)), JSONField("data", .string($0.data.hexString))])
                    })))
        return fields
    }
}

/// One advertisement as the `decode` command prints it.
public struct DecodedAdvertisement: Sendable {
    public var address: DeviceAddress?
    public var rssi: Int8?
    /// Unix microseconds, when known.
    public var timestamp: Int64?
    public var data: AdvertisingData
    public var frames: [BeaconFrame]

    public init(address: DeviceAddress?, rssi: Int8?, timestamp: Int64?, data: AdvertisingData, frames: [BeaconFrame]) {
        self.address = address
        self.rssi = rssi
        self.timestamp = timestamp
        self.data = data
        self.frames = frames
    }

    /// The identity of the advertiser (the beacon-id contract): the first identity frame, else `mac:<address>`.
    public var beaconID: String? {
        frames.lazy.compactMap(\.beaconID).first ?? address.map { BeaconIdentity.device($0).description }
    }

    public var json: JSONValue {
        var fields: [JSONField] = []
        if let address {
            fields.append(JSONField("address", .string(address.description)))
            fields.append(JSONField("address_type", .string(address.kind.rawValue)))
        }
        if let rssi { fields.append(JSONField("rssi", .number(rssi))) }
        if let timestamp { fields.append(JSONField("ts", .string(RFC3339.format(microseconds: timestamp)))) }
        if let beaconID { fields.append(JSONField("beacon_id", .string(beaconID))) }
        fields += data.jsonFields
        fields.append(JSONField("frames", .array(frames.map(\.json))))
        return .object(fields)
    }
}

extension DecodeError {
    /// `{"error": {"code": ..., "offset": ..., "message": ...}}` (the `decode` command's contract).
    public var json: JSONValue {
        .object([
            JSONField(
                "error",
                .object([
                    JSONField("code", .string(code.rawValue)), JSONField("offset", .number(offset)),
                    JSONField("message", .string(message)),
                ]))
        ])
    }
}

/// RFC 3339 timestamps in UTC with microseconds.
public enum RFC3339 {
    public static func format(microseconds: Int64) -> String {
        let (seconds, micros) = microseconds.quotientAndRemainder(dividingBy: 1_000_000)
        let (adjustedSeconds, adjustedMicros) = micros < 0 ? (seconds - 1, micros + 1_000_000) : (seconds, micros)
        let (days, secondOfDay) = floorDivide(adjustedSeconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(adjustedMicros, 6))Z"
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let (q, r) = a.quotientAndRemainder(dividingBy: b)
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    /// Proleptic Gregorian date of a day count from 1970-01-01, by 400-year eras.
    static func civilDate(daysSinceEpoch: Int64) -> (Int64, Int64, Int64) {
        let shifted = daysSinceEpoch + 719_468  // days from 0000-03-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // March = 0
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
