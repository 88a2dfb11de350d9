/// Ruuvi sensor data formats 3 (RAWv1) and 5 (RAWv2), manufacturer data of company 0x0499
/// (docs.ruuvi.com, "Data formats"). Values the sensor marks "not available" are nil. A payload longer than its
/// format's (14 and 24 bytes) is read for those and the rest ignored, as the specification's readers do.
public struct RuuviMeasurement: Hashable, Sendable {
    public static let companyID: UInt16 = 0x0499

    public var dataFormat: UInt8
    public var temperatureCelsius: Double?
    /// Relative humidity, %.
    public var humidity: Double?
    public var pressurePascal: UInt32?
    public var accelerationX: Int16?
    public var accelerationY: Int16?
    public var accelerationZ: Int16?
    public var batteryMillivolts: UInt16?
    public var txPower: Int8?
    public var movementCounter: UInt8?
    public var measurementSequence: UInt16?
    /// Format 5 carries the sensor's MAC address.
    public var mac: String?

    static func decode(_ data: ArraySlice<UInt8>, base: Int) throws(DecodeError) -> RuuviMeasurement {
        var reader = ByteReader(data, base: base)
        let format = try reader.u8("Ruuvi data format")
        switch format {
        case 3:
            try requireMinimumLength(data.count, 14, "Ruuvi format 3", at: base)
            var m = RuuviMeasurement(dataFormat: 3)
            m.humidity = Double(try reader.u8("Ruuvi humidity")) / 2
            let whole = try reader.u8("Ruuvi temperature")
            let fraction = try reader.u8("Ruuvi temperature fraction")
            // Sign and magnitude: bit 7 of the whole degrees is the sign.
            let magnitude = Double(whole & 0x7F) + Double(fraction) / 100
            m.temperatureCelsius = whole & 0x80 != 0 ? -magnitude : magnitude
            m.pressurePascal = UInt32(try reader.u16be("Ruuvi pressure")) + 50_000
            m.accelerationX = Int16(bitPattern: try reader.u16be("Ruuvi acceleration"))
            m.accelerationY = Int16(bitPattern: try reader.u16be("Ruuvi acceleration"))
            m.accelerationZ = Int16(bitPattern: try reader.u16be("Ruuvi acceleration"))
            m.batteryMillivolts = try reader.u16be("Ruuvi battery")
            return m
        case 5:
            try requireMinimumLength(data.count, 24, "Ruuvi format 5", at: base)
            var m = RuuviMeasurement(dataFormat: 5)
            let temperature = Int16(bitPattern: try reader.u16be("Ruuvi temperature"))
            m.temperatureCelsius = temperature == Int16.min ? nil : Double(temperature) * 0.005
            let humidity = try reader.u16be("Ruuvi humidity")
            m.humidity = humidity == 0xFFFF ? nil : Double(humidity) * 0.0025
            let pressure = try reader.u16be("Ruuvi pressure")
            m.pressurePascal = pressure == 0xFFFF ? nil : UInt32(pressure) + 50_000
            func acceleration(_ reader: inout ByteReader) throws(DecodeError) -> Int16? {
                let value = Int16(bitPattern: try reader.u16be("Ruuvi acceleration"))
                return value == Int16.min ? nil : value
            }
            m.accelerationX = try acceleration(&reader)
            m.accelerationY = try acceleration(&reader)
            m.accelerationZ = try acceleration(&reader)
            let power = try reader.u16be("Ruuvi power info")
            let battery = power >> 5
            let tx = power & 0x1F
            m.batteryMillivolts = battery == 0x7FF ? nil : battery + 1600
            m.txPower = tx == 0x1F ? nil : Int8(Int(tx) * 2 - 40)
            let movement = try reader.u8("Ruuvi movement counter")
            m.movementCounter = movement == 0xFF ? nil : movement
            let sequence = try reader.u16be("Ruuvi measurement sequence")
            m.measurementSequence = sequence == 0xFFFF ? nil : sequence
            let macBytes = Array(try reader.slice(6, "Ruuvi MAC"))
            m.mac = macBytes.allSatisfy { $0 == 0xFF } ? nil : DeviceAddress.format(macBytes)
            return m
        default:
            throw DecodeError(
                .unsupportedVersion, at: base, "Ruuvi data format \(format) is not 3 or 5")
        }
    }

    init(dataFormat: UInt8) { self.dataFormat = dataFormat }
}
