import Testing
@testable import BeaconWire

/// IEEE 11073-20601 number formats and GATT characteristics (Bluetooth GATT Specification Supplement).
@Suite struct GATTTests {
    @Test func sfloatValues() {
        // 0xF16C: exponent -1, mantissa 0x16C = 364 → 36.4.
        let value = MedicalFloat(sfloat: 0xF16C)
        #expect(value.mantissa == 364 && value.exponent == -1 && value.value == 36.4)
        #expect(MedicalFloat(sfloat: 0x0FFF).mantissa == -1)
        #expect(MedicalFloat(sfloat: 0x2001).value == 100)
        #expect(MedicalFloat(sfloat: 0x8001).value == 1e-8)
    }

    @Test(arguments: [
        (UInt16(0x07FF), MedicalFloat.Special.nan), (0x0800, .nres), (0x07FE, .positiveInfinity),
        (0x0802, .negativeInfinity), (0x0801, .reserved),
    ])
    func sfloatSpecialValues(raw: UInt16, special: MedicalFloat.Special) {
        let value = MedicalFloat(sfloat: raw)
        #expect(value.special == special)
        #expect(value.value == nil)
        #expect(value.json["special"] == .string(special.rawValue))
        #expect(value.json["value"] == .null)
    }

    @Test(arguments: [
        (UInt32(0x007F_FFFF), MedicalFloat.Special.nan), (0x0080_0000, .nres), (0x007F_FFFE, .positiveInfinity),
        (0x0080_0002, .negativeInfinity), (0x0080_0001, .reserved),
    ])
    func floatSpecialValues(raw: UInt32, special: MedicalFloat.Special) {
        #expect(MedicalFloat(float: raw).special == special)
    }

    @Test func floatValuesAndExtremeExponents() {
        // 0xFF00016C: exponent -1, mantissa 364.
        #expect(MedicalFloat(float: 0xFF00_016C).value == 36.4)
        #expect(MedicalFloat(float: 0x02FF_FFFF).value == -100)
        // Exponent -128 once trapped on negation (found by fuzzing).
        #expect(MedicalFloat(float: 0x8000_0001).value == 1e-128)
        #expect(MedicalFloat(float: 0x7F00_0001).value == 1e127)
    }

    @Test func batteryLevel() throws {
        #expect(try GATTCharacteristic.decode(0x2A19, [87]).json == .object([
            JSONField("characteristic", .string("2a19")), JSONField("value", .int(87)), JSONField("unit", .string("percent")),
        ]))
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A19, [101]) }?.code == .invalidValue)
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A19, []) }?.code == .invalidLength)
    }

    @Test func environmentalCharacteristics() throws {
        #expect(try GATTCharacteristic.decode(0x2A6E, bytes("6c09")).value == .double(24.12))
        #expect(try GATTCharacteristic.decode(0x2A6E, bytes("f6ff")).value == .double(-0.1))
        let unknown = try GATTCharacteristic.decode(0x2A6E, bytes("0080"))
        #expect(unknown.value == .null && unknown.unknown)
        #expect(unknown.json["unknown"] == .bool(true))
        #expect(try GATTCharacteristic.decode(0x2A6F, bytes("8813")).value == .double(50))
        #expect(try GATTCharacteristic.decode(0x2A6F, bytes("ffff")).unknown)
        #expect(try GATTCharacteristic.decode(0x2A6D, bytes("40420f00")).value == .double(100_000))
        #expect(try GATTCharacteristic.decode(0x2A6C, bytes("f0d8ff")).value == .double(-100))
        #expect(try GATTCharacteristic.decode(0x2A07, bytes("f4")).value == .int(-12))
    }

    @Test func dateTime() throws {
        let value = try GATTCharacteristic.decode(0x2A08, bytes("e807030f0c1e05"))
        #expect(value.value == .string("2024-03-15T12:30:05"))
        #expect(value.json["year"] == .int(2024) && value.json["seconds"] == .int(5))
        let unknown = try GATTCharacteristic.decode(0x2A08, bytes("00000000000000"))
        #expect(unknown.value == .null && unknown.json["month"] == .int(0))
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A08, bytes("e8070d0f0c1e05")) }?.code == .invalidValue)
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A08, bytes("e807030f0c1e")) }?.code == .invalidLength)
    }

    @Test func temperatureMeasurement() throws {
        // Flags 0x06: Celsius, time stamp and type present; 36.4 °C; 2024-03-15 12:30:05; type 2 (body).
        let value = try GATTCharacteristic.decode(0x2A1C, bytes("06" + "6c0100ff" + "e807030f0c1e05" + "02"))
        #expect(value.value == .double(36.4))
        #expect(value.unit == "celsius")
        #expect(value.json["temperature_type"] == .int(2))
        #expect(value.json["timestamp"]?["hours"] == .int(12))
        let fahrenheit = try GATTCharacteristic.decode(0x2A1C, bytes("01" + "e40300ff"))
        #expect(fahrenheit.unit == "fahrenheit" && fahrenheit.value == .double(99.6))
        let nan = try GATTCharacteristic.decode(0x2A1C, bytes("00ffff7f00"))
        #expect(nan.value == .null && nan.json["special"] == .string("nan"))
        // Flags announce a time stamp that is not there; and a stray byte after the fields.
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A1C, bytes("02" + "6c0100ff")) }?.code == .truncated)
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A1C, bytes("00" + "6c0100ff" + "00")) }?.code == .invalidLength)
    }

    @Test func deviceInformation() throws {
        #expect(try GATTCharacteristic.decode(0x2A29, Array("Acme".utf8)).value == .string("Acme"))
        let system = try GATTCharacteristic.decode(0x2A23, bytes("0102030405060708"))
        #expect(system.json["manufacturer_identifier"] == .int(0x05_0403_0201))
        #expect(system.json["organizationally_unique_identifier"] == .string("080706"))
        #expect(decodeError { _ = try GATTCharacteristic.decode(0x2A00, [1]) }?.code == .unknownType)
    }

    @Test func serviceDataFrames() throws {
        // A public sample advertisement (a Freetec PX-1737 thermometer): 0x1809 with a bare FLOAT, 0x180F battery.
        let frames = try decodeFrames(bytes("020104 0909384242414334394407160918470800fe04160f185b".replacingOccurrences(of: " ", with: "")))
        #expect(frames.map { $0.json["value"] } == [.double(21.19), .int(91)])
        #expect(frames.map { $0.json["service_uuid"] } == [.string("1809"), .string("180f")])
        let characteristic = try decodeFrames(serviceData16(0x2A6E, bytes("6c09")))
        #expect(characteristic.first?.json["characteristic"] == .string("2a6e"))
    }

    @Test func xiaomiCustomLayouts() throws {
        // pvvx custom format: MAC reversed, 23.5 °C, 45.67 %, 2.9 V, 75 %, counter 7, flags 0.
        let pvvx = try decodeFrames(serviceData16(0x181A, bytes("a5808fe64854" + "2e09" + "d711" + "540b" + "4b" + "07" + "00")))
        #expect(pvvx.first?.json == .object([
            JSONField("type", .string("pvvx")), JSONField("mac", .string("54:48:E6:8F:80:A5")),
            JSONField("temperature", .double(23.5)), JSONField("humidity", .double(45.67)),
            JSONField("battery", .int(75)), JSONField("voltage", .double(2.9)), JSONField("counter", .int(7)),
            JSONField("flags", .int(0)),
        ]))
        // ATC1441: big-endian, 0.1 °C, whole percent.
        let atc = try decodeFrames(serviceData16(0x181A, bytes("a4c138010203" + "00eb" + "2d" + "4b" + "0b54" + "07")))
        #expect(atc.first?.json["type"] == .string("atc1441"))
        #expect(atc.first?.json["temperature"] == .double(23.5))
        #expect(atc.first?.json["mac"] == .string("A4:C1:38:01:02:03"))
    }
}
