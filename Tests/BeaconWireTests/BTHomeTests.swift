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
            .object([JSONField("type", .string("button")), JSONField("event", .string("long_press"))]),
            .object([JSONField("type", .string("dimmer")), JSONField("event", .string("rotate_right")), JSONField("steps", .int(3))]),
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
}
