/// BTHome v2 (bthome.io/format, bthome.io/encryption): service data of UUID 0xFCD2. The first byte is the device
/// information (bit 0 encrypted, bit 2 trigger based, bits 5–7 version), then objects of an id byte and a
/// little-endian value whose size and factor the id fixes.
public struct BTHomePacket: Hashable, Sendable {
    public static let serviceUUID: UInt16 = 0xFCD2

    public var version: UInt8
    public var encrypted: Bool
    public var triggerBased: Bool
    public var packetID: UInt8?
    /// Measurements, keyed by the BTHome object names; repeated names are numbered `_1`, `_2`, ….
    public var values: [JSONField] = []
    /// Binary sensors (`motion`, `opening`, …), numbered the same way.
    public var binary: [JSONField] = []
    /// Button and dimmer events, in order.
    public var events: [JSONValue] = []
    /// The measurements and binary sensors as `sensor_readings` rows (quantities numbered like `values`); events,
    /// text, raw and device information are not readings.
    public var readings: [SensorReading] = []
    /// Set when the packet is encrypted and no bindkey for its address is configured.
    public var ciphertext: [UInt8]?
    /// The encryption counter, for encrypted packets.
    public var counter: UInt32?
    /// An object id this decoder does not know, and the byte offset of it: its size is unknown, so the objects
    /// after it are not read (those before it are).
    public var unknownObject: UnknownObject?

    public struct UnknownObject: Hashable, Sendable {
        public var id: UInt8
        public var offset: Int
    }

    enum Kind {
        case value
        case binary
        case event
        case packetID
        case text
        case raw
        /// Device type and firmware: decoded as values, not stored as readings.
        case deviceInfo
    }

    struct Object {
        var name: String
        var size: Int
        var signed: Bool
        var factor: Double
        var kind: Kind
        /// The `sensor_readings` quantity and unit; the decoded value times `toUnit` is in that unit.
        var quantity: String
        var unit: String
        var toUnit: Double = 1
    }

    private static func v(
        _ name: String, _ size: Int, _ unit: String, _ factor: Double = 1, signed: Bool = false,
        as quantity: String? = nil, scale: Double = 1
    ) -> Object {
        Object(
            name: name, size: size, signed: signed, factor: factor, kind: .value,
            quantity: quantity ?? name, unit: unit, toUnit: scale)
    }

    private static func b(_ name: String, as quantity: String? = nil) -> Object {
        Object(
            name: name, size: 1, signed: false, factor: 1, kind: .binary, quantity: quantity ?? name,
            unit: SensorUnit.boolean)
    }

    private static func other(_ name: String, _ size: Int, _ kind: Kind) -> Object {
        Object(name: name, size: size, signed: false, factor: 1, kind: kind, quantity: name, unit: "")
    }

    /// The object table of bthome.io/format: id → size in bytes, signedness, factor; the name under the key Home
    /// Assistant's bthome-ble integration gives it (its device class: `pm25`, `carbon_dioxide`, `dew_point`,
    /// `mass`, `distance`, binary `generic`); and the sensor-reading quantity and unit it is stored as (one unit per
    /// quantity: pounds, millimetres and millilitres are converted, and binary sensors whose names are also
    /// measurements get a suffix: `battery_low`, `power_on`, `gas_detected`, `moisture_detected`).
    static let objects: [UInt8: Object] = [
        0x00: other("packet_id", 1, .packetID),
        0x01: v("battery", 1, SensorUnit.percent), 0x02: v("temperature", 2, SensorUnit.celsius, 0.01, signed: true),
        0x03: v("humidity", 2, SensorUnit.percent, 0.01), 0x04: v("pressure", 3, SensorUnit.hectopascal, 0.01),
        0x05: v("illuminance", 3, SensorUnit.lux, 0.01), 0x06: v("mass", 2, SensorUnit.kilogram, 0.01),
        0x07: v("mass", 2, SensorUnit.kilogram, 0.01, scale: 0.45359237),
        0x08: v("dew_point", 2, SensorUnit.celsius, 0.01, signed: true), 0x09: v("count", 1, SensorUnit.count),
        0x0A: v("energy", 3, SensorUnit.kilowattHour, 0.001), 0x0B: v("power", 3, SensorUnit.watt, 0.01),
        0x0C: v("voltage", 2, SensorUnit.volt, 0.001), 0x0D: v("pm25", 2, SensorUnit.microgramPerCubicMetre),
        0x0E: v("pm10", 2, SensorUnit.microgramPerCubicMetre),
        0x0F: b("generic"), 0x10: b("power", as: "power_on"), 0x11: b("opening"),
        0x12: v("carbon_dioxide", 2, SensorUnit.ppm),
        0x13: v("volatile_organic_compounds", 2, SensorUnit.microgramPerCubicMetre),
        0x14: v("moisture", 2, SensorUnit.percent, 0.01),
        0x15: b("battery", as: "battery_low"), 0x16: b("battery_charging"), 0x17: b("carbon_monoxide"),
        0x18: b("cold"), 0x19: b("connectivity"), 0x1A: b("door"), 0x1B: b("garage_door"),
        0x1C: b("gas", as: "gas_detected"), 0x1D: b("heat"), 0x1E: b("light"), 0x1F: b("lock"),
        0x20: b("moisture", as: "moisture_detected"), 0x21: b("motion"), 0x22: b("moving"), 0x23: b("occupancy"),
        0x24: b("plug"), 0x25: b("presence"), 0x26: b("problem"), 0x27: b("running"), 0x28: b("safety"),
        0x29: b("smoke"), 0x2A: b("sound"), 0x2B: b("tamper"), 0x2C: b("vibration"), 0x2D: b("window"),
        0x2E: v("humidity", 1, SensorUnit.percent), 0x2F: v("moisture", 1, SensorUnit.percent),
        0x3A: other("button", 1, .event), 0x3C: other("dimmer", 2, .event),
        0x3D: v("count", 2, SensorUnit.count), 0x3E: v("count", 4, SensorUnit.count),
        0x3F: v("rotation", 2, SensorUnit.degree, 0.1, signed: true),
        0x40: v("distance", 2, SensorUnit.metre, scale: 0.001),
        0x41: v("distance", 2, SensorUnit.metre, 0.1), 0x42: v("duration", 3, SensorUnit.second, 0.001),
        0x43: v("current", 2, SensorUnit.ampere, 0.001), 0x44: v("speed", 2, SensorUnit.metrePerSecond, 0.01),
        0x45: v("temperature", 2, SensorUnit.celsius, 0.1, signed: true), 0x46: v("uv_index", 1, SensorUnit.index, 0.1),
        0x47: v("volume", 2, SensorUnit.litre, 0.1), 0x48: v("volume", 2, SensorUnit.litre, scale: 0.001),
        0x49: v("volume_flow_rate", 2, SensorUnit.cubicMetrePerHour, 0.001), 0x4A: v("voltage", 2, SensorUnit.volt, 0.1),
        0x4B: v("gas", 3, SensorUnit.cubicMetre, 0.001), 0x4C: v("gas", 4, SensorUnit.cubicMetre, 0.001),
        0x4D: v("energy", 4, SensorUnit.kilowattHour, 0.001), 0x4E: v("volume", 4, SensorUnit.litre, 0.001),
        0x4F: v("water", 4, SensorUnit.litre, 0.001), 0x50: v("timestamp", 4, SensorUnit.unixSecond),
        0x51: v("acceleration", 2, SensorUnit.metrePerSecondSquared, 0.001),
        0x52: v("gyroscope", 2, SensorUnit.degreePerSecond, 0.001),
        0x53: other("text", 0, .text), 0x54: other("raw", 0, .raw),
        0x55: v("volume_storage", 4, SensorUnit.litre, 0.001), 0x56: v("conductivity", 2, SensorUnit.microsiemensPerCentimetre),
        0x57: v("temperature", 1, SensorUnit.celsius, signed: true),
        0x58: v("temperature", 1, SensorUnit.celsius, 0.35, signed: true), 0x59: v("count", 1, SensorUnit.count, signed: true),
        0x5A: v("count", 2, SensorUnit.count, signed: true), 0x5B: v("count", 4, SensorUnit.count, signed: true),
        0x5C: v("power", 4, SensorUnit.watt, 0.01, signed: true), 0x5D: v("current", 2, SensorUnit.ampere, 0.001, signed: true),
        0x5E: v("direction", 2, SensorUnit.degree, 0.01), 0x5F: v("precipitation", 2, SensorUnit.millimetre, 0.1),
        0x60: v("channel", 1, SensorUnit.count), 0x61: v("rotational_speed", 2, SensorUnit.revolutionsPerMinute),
        0x62: v("speed", 4, SensorUnit.metrePerSecond, 0.000001, signed: true),
        0x63: v("acceleration", 4, SensorUnit.metrePerSecondSquared, 0.000001, signed: true),
        0x64: v("light_level", 1, SensorUnit.index),
        0xF0: other("device_type_id", 2, .deviceInfo), 0xF1: other("firmware_version", 4, .deviceInfo),
        0xF2: other("firmware_version", 3, .deviceInfo),
    ]

    static let buttonEvents: [UInt8: String] = [
        0x00: "none", 0x01: "press", 0x02: "double_press", 0x03: "triple_press", 0x04: "long_press",
        0x05: "long_double_press", 0x06: "long_triple_press", 0x80: "hold_press",
    ]

    /// Decodes the service data after 0xFCD2. Encrypted packets are opened with `bindkey` (AES-CCM, a 13-byte nonce
    /// of the address, the UUID, the device information byte and the counter, a 4-byte MIC); without a key they
    /// come back with `ciphertext` set and no values.
    static func decode(
        _ data: ArraySlice<UInt8>, base: Int, address: DeviceAddress?, bindkey: [UInt8]?
    ) throws(DecodeError) -> BTHomePacket {
        var reader = ByteReader(data, base: base)
        let info = try reader.u8("BTHome device information")
        let version = info >> 5
        guard version == 2 else {
            throw DecodeError(.unsupportedVersion, at: base, "BTHome version \(version) is not 2")
        }
        var packet = BTHomePacket(version: version, encrypted: info & 0x01 != 0, triggerBased: info & 0x04 != 0)
        guard packet.encrypted else {
            try packet.readObjects(data[(data.startIndex + 1)...], base: base + 1)
            return packet
        }
        // Ciphertext, then a 4-byte little-endian counter and a 4-byte MIC.
        guard data.count >= 1 + 8 else {
            throw DecodeError(
                .truncated, at: base, "encrypted BTHome packet is \(data.count) bytes, shorter than its counter and MIC")
        }
        let ciphertext = Array(try reader.slice(data.count - 9, "BTHome ciphertext"))
        let counterBytes = Array(try reader.slice(4, "BTHome counter"))
        let mic = Array(try reader.slice(4, "BTHome MIC"))
        packet.counter = counterBytes.reversed().reduce(0) { $0 << 8 | UInt32($1) }
        guard let bindkey, let address else {
            packet.ciphertext = ciphertext
            return packet
        }
        let nonce = address.bytes + [UInt8(serviceUUID & 0xFF), UInt8(serviceUUID >> 8), info] + counterBytes
        guard let plaintext = CCM.open(key: bindkey, nonce: nonce, ciphertext: ciphertext, tag: mic) else {
            throw DecodeError(
                .authenticationFailed, at: base + data.count - 4,
                "BTHome MIC does not match: wrong bindkey for \(address), or altered data")
        }
        try packet.readObjects(plaintext[...], base: base + 1)
        return packet
    }

    /// Encrypts measurement objects as a BTHome v2 device would (for the simulator and tests).
    public static func encrypt(
        objects: [UInt8], bindkey: [UInt8], address: DeviceAddress, counter: UInt32, triggerBased: Bool = false
    ) -> [UInt8] {
        let info: UInt8 = 0x40 | 0x01 | (triggerBased ? 0x04 : 0)
        let counterBytes = (0..<4).map { UInt8((counter >> UInt32(8 * $0)) & 0xFF) }
        let nonce = address.bytes + [UInt8(serviceUUID & 0xFF), UInt8(serviceUUID >> 8), info] + counterBytes
        let sealed = CCM.seal(key: bindkey, nonce: nonce, plaintext: objects, tagLength: 4)
        return [info] + sealed.ciphertext + counterBytes + sealed.tag
    }

    private mutating func readObjects(_ data: ArraySlice<UInt8>, base: Int) throws(DecodeError) {
        var reader = ByteReader(data, base: base)
        var valueNames: [String] = []
        var valueList: [JSONValue] = []
        var binaryNames: [String] = []
        var binaryList: [JSONValue] = []
        var measured: [SensorReading] = []
        while !reader.isAtEnd {
            let idOffset = reader.offset
            let id = try reader.u8("BTHome object id")
            guard let object = Self.objects[id] else {
                unknownObject = UnknownObject(id: id, offset: idOffset)
                break
            }
            switch object.kind {
            case .text, .raw:
                let length = Int(try reader.u8("BTHome text or raw length"))
                let bytes = try reader.slice(length, "BTHome text or raw value")
                valueNames.append(object.name)
                valueList.append(object.kind == .text ? .string(String(decoding: bytes, as: UTF8.self)) : .string(bytes.hexString))
            case .packetID:
                packetID = try reader.u8("BTHome packet id")
            case .binary:
                let on = try reader.u8("BTHome binary sensor") != 0
                binaryNames.append(object.name)
                binaryList.append(.bool(on))
                measured.append(SensorReading(quantity: object.quantity, value: on ? 1 : 0, unit: object.unit))
            case .event:
                let eventType = try reader.u8("BTHome event")
                if object.name == "button" {
                    let name = Self.buttonEvents[eventType] ?? "unknown_\(eventType)"
                    events.append(.object([JSONField("event", .string("button")), JSONField("type", .string(name))]))
                } else {
                    let steps = try reader.u8("BTHome dimmer steps")
                    let direction = eventType == 1 ? "rotate_left" : eventType == 2 ? "rotate_right" : "none"
                    events.append(
                        .object([
                            JSONField("event", .string("dimmer")), JSONField("type", .string(direction)),
                            JSONField("steps", .number(steps)),
                        ]))
                }
            case .value, .deviceInfo:
                let raw = try reader.uintLE(object.size, "BTHome value")
                let shift = UInt64(64 - 8 * object.size)
                let integer = object.signed ? Int64(bitPattern: raw << shift) >> Int64(shift) : Int64(raw)
                valueNames.append(object.name)
                let value = object.factor == 1 ? Double(integer) : scaled(integer, object.factor)
                // Under one name each quantity has one unit: pounds, millimetres and millilitres are converted.
                if object.toUnit != 1 {
                    valueList.append(.double(scaled(integer, object.factor * object.toUnit)))
                } else {
                    valueList.append(object.factor == 1 ? .int(integer) : .double(value))
                }
                if object.kind == .value {
                    measured.append(SensorReading(quantity: object.quantity, value: value * object.toUnit, unit: object.unit))
                }
            }
        }
        values = Self.numbered(valueNames, valueList)
        binary = Self.numbered(binaryNames, binaryList)
        readings = zip(Self.numbered(measured.map(\.quantity), measured.map { _ in JSONValue.null }), measured).map {
            SensorReading(quantity: $0.0.key, value: $0.1.value, unit: $0.1.unit)
        }
    }

    /// Rounds away binary noise: 2178 × 0.01 is 21.78, not 21.780000000000001.
    private func scaled(_ value: Int64, _ factor: Double) -> Double {
        var scale = 1.0
        while scale < 1e6, abs(factor * scale - (factor * scale).rounded()) > 1e-9 { scale *= 10 }
        return (Double(value) * factor * scale).rounded() / scale
    }

    /// Names that occur more than once are all numbered from 1, in order of appearance.
    private static func numbered(_ names: [String], _ values: [JSONValue]) -> [JSONField] {
        var totals: [String: Int] = [:]
        for name in names { totals[name, default: 0] += 1 }
        var seen: [String: Int] = [:]
        return zip(names, values).map { name, value in
            guard totals[name, default: 0] > 1 else { return JSONField(name, value) }
            seen[name, default: 0] += 1
            return JSONField("\(name)_\(seen[name]!)", value)
        }
    }

    init(version: UInt8, encrypted: Bool, triggerBased: Bool) {
        self.version = version
        self.encrypted = encrypted
        self.triggerBased = triggerBased
    }
}
