/// IEEE 11073-20601 medical device numbers, as GATT uses them (Bluetooth GATT Specification Supplement §2.2):
/// SFLOAT (16 bit: 4-bit exponent, 12-bit mantissa) and FLOAT (32 bit: 8-bit exponent, 24-bit mantissa), both
/// two's complement, value = mantissa × 10^exponent.
public struct MedicalFloat: Hashable, Sendable {
    public enum Special: String, Hashable, Sendable {
        case nan
        case nres
        case positiveInfinity = "+inf"
        case negativeInfinity = "-inf"
        case reserved
    }

    public enum Format: String, Hashable, Sendable {
        case sfloat
        case float
    }

    public var format: Format
    public var mantissa: Int32
    public var exponent: Int8
    /// Set for the reserved special values; `value` is nil then.
    public var special: Special?

    public var value: Double? {
        guard special == nil else { return nil }
        // Decimal text conversion rounds correctly: 364e-1 is exactly the double nearest 36.4, for every exponent.
        return Double("\(mantissa)e\(exponent)")
    }

    public init(sfloat raw: UInt16) {
        format = .sfloat
        switch raw {
        case 0x07FF: special = .nan
        case 0x0800: special = .nres
        case 0x07FE: special = .positiveInfinity
        case 0x0802: special = .negativeInfinity
        case 0x0801: special = .reserved
        default: special = nil
        }
        mantissa = Int32(Int16(bitPattern: raw << 4) >> 4)
        exponent = Int8(Int16(bitPattern: raw) >> 12)
    }

    public init(float raw: UInt32) {
        format = .float
        switch raw {
        case 0x007F_FFFF: special = .nan
        case 0x0080_0000: special = .nres
        case 0x007F_FFFE: special = .positiveInfinity
        case 0x0080_0002: special = .negativeInfinity
        case 0x0080_0001: special = .reserved
        default: special = nil
        }
        mantissa = Int32(bitPattern: raw << 8) >> 8
        exponent = Int8(truncatingIfNeeded: Int32(bitPattern: raw) >> 24)
    }

    public var json: JSONValue {
        var fields = [
            JSONField("format", .string(format.rawValue)),
            JSONField("value", .optional(value)),
            JSONField("mantissa", .number(mantissa)),
            JSONField("exponent", .number(exponent)),
        ]
        if let special { fields.append(JSONField("special", .string(special.rawValue))) }
        return .object(fields)
    }
}

/// A decoded GATT characteristic value: the value, its unit, and any fields of its own (the decoded-JSON contract).
public struct CharacteristicValue: Hashable, Sendable {
    public var characteristic: UInt16
    public var value: JSONValue
    public var unit: String?
    /// The characteristic said "value is not known" (e.g. Temperature 0x8000).
    public var unknown = false
    /// Fields beyond value and unit, in output order.
    public var fields: [JSONField] = []

    public var json: JSONValue {
        var out = [JSONField("characteristic", .string(hexString(UInt64(characteristic), digits: 4))), JSONField("value", value)]
        if let unit { out.append(JSONField("unit", .string(unit))) }
        if unknown { out.append(JSONField("unknown", .bool(true))) }
        return .object(out + fields)
    }
}

/// Decoders for the GATT characteristics the product reads (GATT Specification Supplement; all little-endian).
public enum GATTCharacteristic {
    public static let systemID: UInt16 = 0x2A23
    public static let batteryLevel: UInt16 = 0x2A19
    public static let txPowerLevel: UInt16 = 0x2A07
    public static let dateTime: UInt16 = 0x2A08
    public static let temperatureMeasurement: UInt16 = 0x2A1C
    public static let elevation: UInt16 = 0x2A6C
    public static let pressure: UInt16 = 0x2A6D
    public static let temperature: UInt16 = 0x2A6E
    public static let humidity: UInt16 = 0x2A6F

    /// Device Information Service strings, by characteristic.
    static let stringNames: [UInt16: String] = [
        0x2A24: "model_number", 0x2A25: "serial_number", 0x2A26: "firmware_revision",
        0x2A27: "hardware_revision", 0x2A28: "software_revision", 0x2A29: "manufacturer_name",
    ]

    public static func isKnown(_ uuid: UInt16) -> Bool {
        stringNames[uuid] != nil
            || [systemID, batteryLevel, txPowerLevel, dateTime, temperatureMeasurement, elevation, pressure,
                temperature, humidity].contains(uuid)
    }

    public static func decode(_ uuid: UInt16, _ data: [UInt8]) throws(DecodeError) -> CharacteristicValue {
        try decode(uuid, data[...], base: 0)
    }

    public static func decode(_ uuid: UInt16, _ data: ArraySlice<UInt8>, base: Int) throws(DecodeError) -> CharacteristicValue {
        var reader = ByteReader(data, base: base)
        func size(_ allowed: Int, _ name: StaticString) throws(DecodeError) {
            if data.count != allowed {
                throw DecodeError(.invalidLength, at: base, "\(name) is \(data.count) bytes, expected \(allowed)")
            }
        }
        var result = CharacteristicValue(characteristic: uuid, value: .null)
        switch uuid {
        case batteryLevel:
            try size(1, "Battery Level")
            let level = try reader.u8("battery level")
            guard level <= 100 else {
                throw DecodeError(.invalidValue, at: base, "Battery Level \(level) is above 100 %")
            }
            result.value = .number(level)
            result.unit = "percent"
        case txPowerLevel:
            try size(1, "Tx Power Level")
            result.value = .number(try reader.i8("tx power level"))
            result.unit = "dbm"
        case temperature:
            try size(2, "Temperature")
            let raw = Int16(bitPattern: try reader.u16le("temperature"))
            result.unit = "celsius"
            if raw == Int16.min { result.unknown = true } else { result.value = .double(Double(raw) / 100) }
        case humidity:
            try size(2, "Humidity")
            let raw = try reader.u16le("humidity")
            result.unit = "percent"
            if raw == 0xFFFF { result.unknown = true } else { result.value = .double(Double(raw) / 100) }
        case pressure:
            try size(4, "Pressure")
            result.value = .double(Double(try reader.u32le("pressure")) / 10)
            result.unit = "pascal"
        case elevation:
            try size(3, "Elevation")
            let raw = try reader.u24le("elevation")
            // Sign-extend the 24-bit value.
            result.value = .double(Double(Int32(bitPattern: raw << 8) >> 8) / 100)
            result.unit = "metre"
        case dateTime:
            try size(7, "Date Time")
            let (value, fields) = try readDateTime(&reader)
            result.value = value
            result.fields = fields
        case temperatureMeasurement:
            let flags = try reader.u8("Temperature Measurement flags")
            let number = MedicalFloat(float: try reader.u32le("Temperature Measurement value"))
            result.value = .optional(number.value)
            result.unit = flags & 0x01 != 0 ? "fahrenheit" : "celsius"
            if let special = number.special { result.fields.append(JSONField("special", .string(special.rawValue))) }
            if flags & 0x02 != 0 {
                let (stamp, fields) = try readDateTime(&reader)
                result.fields.append(JSONField("timestamp", .object([JSONField("value", stamp)] + fields)))
            }
            if flags & 0x04 != 0 {
                result.fields.append(JSONField("temperature_type", .number(try reader.u8("temperature type"))))
            }
            if !reader.isAtEnd {
                throw DecodeError(
                    .invalidLength, at: reader.offset,
                    "Temperature Measurement has \(reader.remaining) bytes after the fields its flags announce")
            }
        case systemID:
            try size(8, "System ID")
            let manufacturer = try reader.uintLE(5, "System ID manufacturer identifier")
            let oui = try reader.uintLE(3, "System ID organizationally unique identifier")
            result.value = .string(data.hexString)
            result.fields = [
                JSONField("manufacturer_identifier", .int(Int64(manufacturer))),
                JSONField("organizationally_unique_identifier", .string(hexString(oui, digits: 6))),
            ]
        default:
            guard let name = stringNames[uuid] else {
                throw DecodeError(
                    .unknownType, at: base,
                    "characteristic 0x\(hexString(UInt64(uuid), digits: 4)) has no decoder")
            }
            result.value = .string(String(decoding: data, as: UTF8.self))
            result.fields = [JSONField("name", .string(name))]
        }
        return result
    }

    /// Date Time (0x2A08): year (0 = not known, else 1582–9999), month, day, hours, minutes, seconds.
    static func readDateTime(_ reader: inout ByteReader) throws(DecodeError) -> (JSONValue, [JSONField]) {
        let start = reader.offset
        let year = try reader.u16le("year")
        let month = try reader.u8("month")
        let day = try reader.u8("day")
        let hours = try reader.u8("hours")
        let minutes = try reader.u8("minutes")
        let seconds = try reader.u8("seconds")
        let valid =
            (year == 0 || (1582...9999).contains(year)) && month <= 12 && day <= 31 && hours <= 23 && minutes <= 59
            && seconds <= 59
        guard valid else {
            throw DecodeError(
                .invalidValue, at: start,
                "date time \(year)-\(month)-\(day) \(hours):\(minutes):\(seconds) is out of range")
        }
        let fields = [
            JSONField("year", .number(year)), JSONField("month", .number(month)), JSONField("day", .number(day)),
            JSONField("hours", .number(hours)), JSONField("minutes", .number(minutes)),
            JSONField("seconds", .number(seconds)),
        ]
        // A calendar date is given only when year, month and day are all known.
        guard year != 0, month != 0, day != 0 else { return (.null, fields) }
        func two(_ v: UInt8) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let text = "\(year)-\(two(month))-\(two(day))T\(two(hours)):\(two(minutes)):\(two(seconds))"
        return (.string(text), fields)
    }
}
