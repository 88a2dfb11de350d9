import Testing
@testable import BeaconWire

/// BTHome v2 (bthome.io/format and bthome.io/encryption).
@Suite struct BTHomeTests {
    @Test func plainPacket() throws {
        // The worked example from the BTHome maintainers (bthome-ble issue 118): packet id 63, battery 94 %,
        // 21.78 °C, 60.60 %, 2.947 V.
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes("40003f015e02820803ac170c830b")))
        guard case .bthome(let packet) = frames.first else {
            Issue.record("no BTHome frame")
            return
        }
        #expect(packet.packetID == 63)
        #expect(!packet.encrypted && !packet.triggerBased)
        #expect(packet.values == [
            JSONField("battery", .int(94)), JSONField("temperature", .double(21.78)),
            JSONField("humidity", .double(60.6)), JSONField("voltage", .double(2.947)),
        ])
    }

    @Test func repeatsAreNumberedAndBinarySensorsAndEvents() throws {
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes("44" + "02c409" + "02e803" + "2101" + "3a04" + "3c0203")))
        let json = try #require(frames.first?.json)
        #expect(json["trigger_based"] == .bool(true))
        #expect(json["values"] == .object([JSONField("temperature_1", .double(25)), JSONField("temperature_2", .double(10))]))
        #expect(json["binary"] == .object([JSONField("motion", .bool(true))]))
        #expect(json["events"] == .array([
            .object([JSONField("event", .string("button")), JSONField("type", .string("long_press"))]),
            .object([JSONField("event", .string("dimmer")), JSONField("type", .string("rotate_right")), JSONField("steps", .int(3))]),
        ]))
    }

    @Test func encryptedExampleFromTheSpecification() throws {
        // bthome.io/encryption: key 231d39c1d7cc1ab1aee224cd096db932, MAC 5448E68F80A5, counter 0x00112233 (sent
        // little-endian as 33 22 11 00 → nonce bytes 00112233 as the page prints them), data 02CA09 03BF13.
        let address = try #require(DeviceAddress("54:48:E6:8F:80:A5"))
        let key = bytes("231d39c1d7cc1ab1aee224cd096db932")
        let sealed = BTHomePacket.encrypt(objects: bytes("02ca0903bf13"), bindkey: key, address: address, counter: 0x3322_1100)
        #expect(sealed == bytes("41" + "a47266c95f73" + "00112233" + "78237214"))

        let decoder = FrameDecoder(bindkeys: [address.value: key])
        let frames = try decodeFrames(serviceData16(0xFCD2, sealed), address: address, decoder: decoder)
        guard case .bthome(let packet) = frames.first else {
            Issue.record("no BTHome frame")
            return
        }
        #expect(packet.encrypted)
        #expect(packet.values == [JSONField("temperature", .double(25.06)), JSONField("humidity", .double(50.55))])

        // Without the key the ciphertext is reported; with a wrong key the MIC fails.
        let locked = try decodeFrames(serviceData16(0xFCD2, sealed), address: address)
        #expect(locked.first?.json["ciphertext"] == .string("a47266c95f73"))
        let wrong = FrameDecoder(bindkeys: [address.value: bytes("00000000000000000000000000000000")])
        let error = decodeError { _ = try decodeFrames(serviceData16(0xFCD2, sealed), address: address, decoder: wrong) }
        #expect(error?.code == .authenticationFailed)
    }

    /// bthome.io/format, the objects added last: rotational speed (uint16, rpm), speed and acceleration (sint32,
    /// factor 0.000001) and light level (uint8).
    @Test func theNewestObjects() throws {
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes("40" + "61e803" + "6240e20100" + "63c01dfeff" + "6405")))
        guard case .bthome(let packet) = frames.first else {
            Issue.record("no BTHome frame")
            return
        }
        #expect(
            packet.values == [
                JSONField("rotational_speed", .int(1000)), JSONField("speed", .double(0.123456)),
                JSONField("acceleration", .double(-0.123456)), JSONField("light_level", .int(5)),
            ])
        #expect(packet.unknownObject == nil)
    }

    /// An object id not in the table cannot be sized: the objects before it are kept, the decoder says where it
    /// stopped, and the advert is no error.
    @Test func anUnknownObjectStopsThePacketButKeepsWhatCameBefore() throws {
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes("40" + "015e" + "e0" + "0102")))
        guard case .bthome(let packet) = frames.first else {
            Issue.record("no BTHome frame")
            return
        }
        #expect(packet.values == [JSONField("battery", .int(94))])
        #expect(packet.unknownObject == BTHomePacket.UnknownObject(id: 0xE0, offset: 7))
        #expect(frames.first?.json["stopped_at"] == .object([JSONField("object_id", .number(0xE0)), JSONField("offset", .number(7))]))
    }

    @Test func malformedPackets() {
        #expect(decodeError { _ = try decodeFrames(serviceData16(0xFCD2, bytes("20"))) }?.code == .unsupportedVersion)
        #expect(decodeError { _ = try decodeFrames(serviceData16(0xFCD2, bytes("40" + "0282"))) }?.code == .truncated)
        #expect(decodeError { _ = try decodeFrames(serviceData16(0xFCD2, bytes("41" + "0102"))) }?.code == .truncated)
    }

    /// Service data vectors of the bthome-ble test suite (github.com/Bluetooth-Devices/bthome-ble,
    /// tests/test_parser_v2.py at 7a79e673), as `sensor_readings` rows: values as that suite expects them, names
    /// numbered the same way, one unit per quantity.
    @Test(arguments: [
        // test_bthome_triple_temperature_double_humidity_battery
        ("4002ca0902cf0902cf0803b71803b717015d",
         ["temperature_1=25.06 celsius", "temperature_2=25.11 celsius", "temperature_3=22.55 celsius",
          "humidity_1=63.27 percent", "humidity_2=60.71 percent", "battery=93 percent"]),
        // test_bthome_double_voltage_different_object_id: power, two voltages of different resolution, battery
        ("400001" + "0b000000" + "4a0d09" + "0133" + "0ce90c",
         ["power=0 watt", "voltage_1=231.7 volt", "battery=51 percent", "voltage_2=3.305 volt"]),
        // test_bthome_test: a binary "power" sensor beside a voltage
        ("4000a70c780b1000", ["voltage=2.936 volt", "power_on=0 boolean"]),
        // test_bthome_shelly_button: the press is an event, not a reading
        ("400052016" + "43a01", ["battery=100 percent"]),
        // test_bthome_gyroscope, test_bthome_volume_storage
        ("44528756", ["gyroscope=22.151 degree_per_second"]),
        ("4055875" + "62a01", ["volume_storage=19551.879 litre"]),
        // test_bthome_text and test_bthome_raw: decoded, but not readings
        ("44530c48656c6c6f20576f726c6421", []),
        ("44540c48656c6c6f20576f726c6421", []),
    ])
    func readingsOfThePublicSuite(serviceData: String, expected: [String]) throws {
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes(serviceData)))
        let readings = frames.first?.sensorReadings ?? []
        #expect(readings.map { "\($0.quantity)=\($0.value.formatted(.number.grouping(.never))) \($0.unit)" } == expected)
    }

    /// bthome-ble tests/test_parser_v2.py: test_bindkey_wrong (a frame of A4:C1:38:8D:18:B2 and a key that is not its
    /// own) and test_same_service_data (counter 0x00112233, the specification's key and address).
    @Test func encryptedVectorsOfThePublicSuite() throws {
        let wrongAddress = try #require(DeviceAddress("A4:C1:38:8D:18:B2"))
        let wrong = FrameDecoder(bindkeys: [wrongAddress.value: bytes("814aac74c4f17b6c1581e1ab87816b99")])
        let error = decodeError {
            _ = try decodeFrames(serviceData16(0xFCD2, bytes("41d2fcefe52eb212d600112233bc38c966")), address: wrongAddress, decoder: wrong)
        }
        #expect(error?.code == .authenticationFailed)
        #expect(error?.message.contains("wrong bindkey for A4:C1:38:8D:18:B2") == true)

        let address = try #require(DeviceAddress("54:48:E6:8F:80:A5"))
        let decoder = FrameDecoder(bindkeys: [address.value: bytes("231d39c1d7cc1ab1aee224cd096db932")])
        let frames = try decodeFrames(serviceData16(0xFCD2, bytes("41e445f3c9962b332211006c7c4519")), address: address, decoder: decoder)
        guard case .bthome(let packet) = frames.first else {
            Issue.record("no BTHome frame")
            return
        }
        #expect(packet.counter == 1_122_867)
        #expect(packet.ciphertext == nil && !packet.readings.isEmpty)
    }
}

