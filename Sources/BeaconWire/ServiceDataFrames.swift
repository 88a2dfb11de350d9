/// A GATT-format value sent as service data: under a service UUID (0x180F battery, 0x1809 health thermometer)
/// whose data is one characteristic's value, or directly under a characteristic UUID (0x2A19, 0x2A6E, ...).
public struct GATTServiceValue: Hashable, Sendable {
    public var serviceUUID: UInt16
    public var value: CharacteristicValue

    public static let characteristicOfService: [UInt16: UInt16] = [
        0x180F: GATTCharacteristic.batteryLevel,
        0x1809: GATTCharacteristic.temperatureMeasurement,
    ]
}

/// The custom 0x181A (Environmental Sensing) layouts of the popular Xiaomi thermometer firmwares:
/// ATC1441 (13 bytes, big-endian, github.com/atc1441/ATC_MiThermometer) and pvvx (15 bytes, little-endian,
/// github.com/pvvx/ATC_MiThermometer, "custom format").
public struct ThermometerReading: Hashable, Sendable {
    public enum Layout: String, Hashable, Sendable {
        case atc1441
        case pvvx
    }

    public var layout: Layout
    public var mac: String
    public var temperatureCelsius: Double
    public var humidity: Double
    public var batteryPercent: UInt8
    public var batteryMillivolts: UInt16
    public var counter: UInt8
    /// pvvx only: the firmware's flag bits (reed switch, trigger outputs).
    public var flags: UInt8?

    static func decode(_ data: ArraySlice<UInt8>, base: Int) throws(DecodeError) -> ThermometerReading? {
        var reader = ByteReader(data, base: base)
        switch data.count {
        case 13:
            let mac = DeviceAddress.format(Array(try reader.slice(6, "ATC1441 MAC")))
            let temperature = Int16(bitPattern: try reader.u16be("ATC1441 temperature"))
            let humidity = try reader.u8("ATC1441 humidity")
            let battery = try reader.u8("ATC1441 battery")
            let millivolts = try reader.u16be("ATC1441 battery voltage")
            let counter = try reader.u8("ATC1441 counter")
            return ThermometerReading(
                layout: .atc1441, mac: mac, temperatureCelsius: Double(temperature) / 10, humidity: Double(humidity),
                batteryPercent: battery, batteryMillivolts: millivolts, counter: counter, flags: nil)
        case 15:
            let mac = DeviceAddress.format(Array(try reader.slice(6, "pvvx MAC")).reversed())
            let temperature = Int16(bitPattern: try reader.u16le("pvvx temperature"))
            let humidity = try reader.u16le("pvvx humidity")
            let millivolts = try reader.u16le("pvvx battery voltage")
            let battery = try reader.u8("pvvx battery")
            let counter = try reader.u8("pvvx counter")
            let flags = try reader.u8("pvvx flags")
            return ThermometerReading(
                layout: .pvvx, mac: mac, temperatureCelsius: Double(temperature) / 100,
                humidity: Double(humidity) / 100, batteryPercent: battery, batteryMillivolts: millivolts,
                counter: counter, flags: flags)
        default:
            return nil
        }
    }
}
