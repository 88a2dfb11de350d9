/// One measured quantity of a transmission: a row of the `sensor_readings` view (docs/sensor-readings.md lists
/// every quantity). Quantities are lower snake case; each has one unit whatever format reports it, so values of a
/// quantity compare across beacon kinds.
public struct SensorReading: Hashable, Sendable {
    public var quantity: String
    public var value: Double
    public var unit: String

    public init(quantity: String, value: Double, unit: String) {
        self.quantity = quantity
        self.value = value
        self.unit = unit
    }
}

/// The units of `SensorReading`, by name.
public enum SensorUnit {
    public static let celsius = "celsius"
    public static let percent = "percent"
    public static let hectopascal = "hectopascal"
    public static let millivolt = "millivolt"
    public static let volt = "volt"
    public static let dbm = "dbm"
    public static let count = "count"
    public static let second = "second"
    /// Seconds since 1970-01-01 UTC (BTHome timestamp).
    public static let unixSecond = "unix_second"
    public static let boolean = "boolean"
    public static let lux = "lux"
    public static let kilogram = "kilogram"
    public static let kilowattHour = "kilowatt_hour"
    public static let watt = "watt"
    public static let ampere = "ampere"
    public static let microgramPerCubicMetre = "microgram_per_cubic_metre"
    public static let ppm = "ppm"
    public static let degree = "degree"
    public static let metre = "metre"
    public static let millimetre = "millimetre"
    public static let metrePerSecond = "metre_per_second"
    public static let metrePerSecondSquared = "metre_per_second_squared"
    public static let degreePerSecond = "degree_per_second"
    public static let litre = "litre"
    public static let cubicMetre = "cubic_metre"
    public static let cubicMetrePerHour = "cubic_metre_per_hour"
    public static let microsiemensPerCentimetre = "microsiemens_per_centimetre"
    public static let revolutionsPerMinute = "revolutions_per_minute"
    /// A dimensionless index (UV index, light level).
    public static let index = "index"
}

extension SensorReading {
    /// Standard gravity, m/s² per g (Ruuvi reports acceleration in milli-g).
    static let standardGravity = 9.80665
}

extension BeaconFrame {
    /// The frame's measurements as `sensor_readings` rows; empty for identity frames, URLs and frames still
    /// encrypted.
    public var sensorReadings: [SensorReading] {
        switch self {
        case .eddystoneTLM(let tlm): return tlm.sensorReadings
        case .eddystoneETLM(let etlm): return etlm.decrypted?.sensorReadings ?? []
        case .ruuvi(let m): return m.sensorReadings
        case .bthome(let packet): return packet.readings
        case .thermometer(let reading):
            return [
                SensorReading(quantity: "temperature", value: reading.temperatureCelsius, unit: SensorUnit.celsius),
                SensorReading(quantity: "humidity", value: reading.humidity, unit: SensorUnit.percent),
                SensorReading(quantity: "battery", value: Double(reading.batteryPercent), unit: SensorUnit.percent),
                SensorReading(
                    quantity: "battery_voltage", value: Double(reading.batteryMillivolts), unit: SensorUnit.millivolt),
                SensorReading(quantity: "frame_counter", value: Double(reading.counter), unit: SensorUnit.count),
            ]
        case .gatt(let service): return service.value.sensorReading.map { [$0] } ?? []
        case .eddystoneUID, .eddystoneURL, .eddystoneEID, .iBeacon, .altBeacon: return []
        }
    }
}

extension EddystoneTLM {
    var sensorReadings: [SensorReading] {
        var readings: [SensorReading] = []
        if let battery = batteryMillivolts {
            readings.append(SensorReading(quantity: "battery_voltage", value: Double(battery), unit: SensorUnit.millivolt))
        }
        if let temperature = temperatureCelsius {
            readings.append(SensorReading(quantity: "temperature", value: temperature, unit: SensorUnit.celsius))
        }
        readings.append(
            SensorReading(quantity: "advertising_count", value: Double(advertisingCount), unit: SensorUnit.count))
        readings.append(SensorReading(quantity: "uptime", value: Double(uptimeTenths) / 10, unit: SensorUnit.second))
        return readings
    }
}

extension RuuviMeasurement {
    var sensorReadings: [SensorReading] {
        var readings: [SensorReading] = []
        func add(_ quantity: String, _ value: Double?, _ unit: String) {
            if let value { readings.append(SensorReading(quantity: quantity, value: value, unit: unit)) }
        }
        add("temperature", temperatureCelsius, SensorUnit.celsius)
        add("humidity", humidity, SensorUnit.percent)
        add("pressure", pressurePascal.map { Double($0) / 100 }, SensorUnit.hectopascal)
        for (axis, milliG) in [("x", accelerationX), ("y", accelerationY), ("z", accelerationZ)] {
            add("acceleration_" + axis, milliG.map { Double($0) / 1000 * SensorReading.standardGravity },
                SensorUnit.metrePerSecondSquared)
        }
        add("battery_voltage", batteryMillivolts.map(Double.init), SensorUnit.millivolt)
        add("tx_power", txPower.map(Double.init), SensorUnit.dbm)
        add("movement_count", movementCounter.map(Double.init), SensorUnit.count)
        add("measurement_sequence", measurementSequence.map(Double.init), SensorUnit.count)
        return readings
    }
}

extension CharacteristicValue {
    /// The reading of a numeric characteristic (Battery Level, Temperature, Humidity, Pressure, Elevation, Tx Power,
    /// Temperature Measurement in °C); nil for strings, dates and values the sensor marks unknown.
    public var sensorReading: SensorReading? {
        guard !unknown else { return nil }
        let number: Double
        switch value {
        case .int(let integer): number = Double(integer)
        case .double(let double): number = double
        default: return nil
        }
        switch characteristic {
        case GATTCharacteristic.batteryLevel:
            return SensorReading(quantity: "battery", value: number, unit: SensorUnit.percent)
        case GATTCharacteristic.txPowerLevel:
            return SensorReading(quantity: "tx_power", value: number, unit: SensorUnit.dbm)
        case GATTCharacteristic.temperature:
            return SensorReading(quantity: "temperature", value: number, unit: SensorUnit.celsius)
        case GATTCharacteristic.temperatureMeasurement:
            let celsius = unit == "fahrenheit" ? (number - 32) * 5 / 9 : number
            return SensorReading(quantity: "temperature", value: celsius, unit: SensorUnit.celsius)
        case GATTCharacteristic.humidity:
            return SensorReading(quantity: "humidity", value: number, unit: SensorUnit.percent)
        case GATTCharacteristic.pressure:
            return SensorReading(quantity: "pressure", value: number / 100, unit: SensorUnit.hectopascal)
        case GATTCharacteristic.elevation:
            return SensorReading(quantity: "elevation", value: number, unit: SensorUnit.metre)
        default:
            return nil
        }
    }

    /// The name and text of a Device Information string (manufacturer, model, serial, revisions), for `device_info`.
    public var deviceInformation: (name: String, text: String)? {
        guard let name = GATTCharacteristic.stringNames[characteristic], case .string(let text) = value else { return nil }
        return (name, text)
    }
}

extension BeaconFrame {
    /// The frame's `type` in decoded JSON (`eddystone-tlm`, `ruuvi`, `bthome`, `atc1441`, ...).
    public var typeName: String {
        switch self {
        case .eddystoneUID: "eddystone-uid"
        case .eddystoneURL: "eddystone-url"
        case .eddystoneTLM: "eddystone-tlm"
        case .eddystoneETLM: "eddystone-etlm"
        case .eddystoneEID: "eddystone-eid"
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .ruuvi: "ruuvi"
        case .bthome: "bthome"
        case .gatt: "gatt"
        case .thermometer(let reading): reading.layout.rawValue
        }
    }

    /// Whether consecutive transmissions differ in their bytes even when the values stay: the frame carries a
    /// counter (TLM advertising count, Ruuvi measurement sequence, BTHome packet id or encryption counter, ATC/pvvx
    /// frame counter).
    public var carriesCounter: Bool {
        switch self {
        case .eddystoneTLM, .eddystoneETLM, .thermometer: true
        case .ruuvi(let m): m.measurementSequence != nil
        case .bthome(let packet): packet.packetID != nil || packet.counter != nil
        default: false
        }
    }
}
