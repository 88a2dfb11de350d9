import Testing
@testable import BeaconWire

@Suite struct ManufacturerFrameTests {
    @Test func iBeacon() throws {
        // Apple's "Getting Started with iBeacon" layout; the UUID is the AirLocate sample UUID.
        let frames = try decodeFrames(bytes("0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"))
        let expected = IBeacon(uuidHigh: 0xE2C5_6DB5_DFFB_48D2, uuidLow: 0xB060_D0F5_A710_96E0, major: 1, minor: 2, measuredPower: -59)
        #expect(frames == [.iBeacon(expected)])
        #expect(expected.beaconID == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")
        #expect(try IBeacon.decode(expected.payload[...], base: 0) == expected)
    }

    @Test func anIdentityBecomesTheFrameThatCarriesIt() throws {
        // The iBeacon frame is Apple's layout byte for byte (the vector above without its flags).
        let iBeacon = try #require(BeaconIdentity("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"))
        #expect(iBeacon.advertisingData(powerAt1m: -59) == bytes("1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"))
        for text in ["altbeacon:0102030405060708090a0b0c0d0e0f10:1:2", "eddystone:00112233445566778899:aabbccddeeff"] {
            let identity = try #require(BeaconIdentity(text))
            let data = try #require(identity.advertisingData(powerAt1m: -62))
            let classified = try FrameClassifier.classify(data[...])
            #expect(classified.identity?.identity == identity, "\(text)")
            switch classified.identity {
            case .altBeacon(let beacon): #expect(beacon.referenceRSSI == -62)
            case .eddystoneUID(let uid): #expect(uid.txPower == -21)
            default: Issue.record("\(text): \(String(describing: classified.identity))")
            }
        }
        #expect(BeaconIdentity("mac:C0:11:22:33:44:55")?.advertisingData(powerAt1m: -59) == [])
        #expect(BeaconIdentity("eid:0011223344556677")?.advertisingData(powerAt1m: -59) == nil)
    }

    @Test func otherAppleFormatsAreNotIBeacons() throws {
        #expect(try decodeFrames(ad(0xFF, bytes("4c001005031c2d3e4f"))).isEmpty)
        let error = decodeError { _ = try decodeFrames(ad(0xFF, bytes("4c000215e2c56db5"))) }
        #expect(error?.code == .invalidLength)
        #expect(error?.offset == 4)
    }

    @Test func altBeaconSpecExample() throws {
        // AltBeacon specification (github.com/AltBeacon/spec): MFG ID 0x0118 (Radius Networks), beacon code 0xBEAC.
        let payload = ad(0xFF, bytes("1801beac" + "0102030405060708090a0b0c0d0e0f10" + "0001" + "0002" + "c5" + "00"))
        let frames = try decodeFrames(payload)
        guard case .altBeacon(let beacon) = frames.first else {
            Issue.record("no AltBeacon")
            return
        }
        #expect(beacon.manufacturerID == 0x0118)
        #expect(beacon.id1 == bytes("0102030405060708090a0b0c0d0e0f10"))
        #expect(beacon.id2 == 1 && beacon.id3 == 2)
        #expect(beacon.referenceRSSI == -59)
        #expect(beacon.beaconID == "altbeacon:0102030405060708090a0b0c0d0e0f10:1:2")
        let json = frames[0].json
        #expect(json["mfg_reserved"] == .int(0))
        #expect(json["reference_rssi"] == .int(-59))
    }

    // Ruuvi's published test vectors (docs.ruuvi.com, data formats 3 and 5: valid, maximum, minimum, invalid).
    @Test func ruuviFormat5Vectors() throws {
        let valid = try RuuviMeasurement.decode(bytes("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")[...], base: 0)
        #expect(valid.temperatureCelsius.map(roundedReading) == 24.3)
        #expect(valid.pressurePascal == 100_044)
        #expect(valid.humidity.map(roundedReading) == 53.49)
        #expect(valid.accelerationX == 4 && valid.accelerationY == -4 && valid.accelerationZ == 1036)
        #expect(valid.txPower == 4)
        #expect(valid.batteryMillivolts == 2977)
        #expect(valid.movementCounter == 66)
        #expect(valid.measurementSequence == 205)
        #expect(valid.mac == "CB:B8:33:4C:88:4F")

        let maximum = try RuuviMeasurement.decode(bytes("057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F")[...], base: 0)
        #expect(maximum.temperatureCelsius.map(roundedReading) == 163.835)
        #expect(maximum.pressurePascal == 115_534)
        #expect(maximum.humidity.map(roundedReading) == 163.835)
        #expect(maximum.accelerationZ == 32767)
        #expect(maximum.txPower == 20)
        #expect(maximum.batteryMillivolts == 3646)
        #expect(maximum.movementCounter == 254)
        #expect(maximum.measurementSequence == 65534)

        let minimum = try RuuviMeasurement.decode(bytes("058001000000008001800180010000000000CBB8334C884F")[...], base: 0)
        #expect(minimum.temperatureCelsius.map(roundedReading) == -163.835)
        #expect(minimum.pressurePascal == 50_000)
        #expect(minimum.humidity == 0)
        #expect(minimum.accelerationX == -32767)
        #expect(minimum.txPower == -40)
        #expect(minimum.batteryMillivolts == 1600)

        let invalid = try RuuviMeasurement.decode(bytes("058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF")[...], base: 0)
        #expect(invalid.temperatureCelsius == nil && invalid.humidity == nil && invalid.pressurePascal == nil)
        #expect(invalid.accelerationX == nil && invalid.batteryMillivolts == nil && invalid.txPower == nil)
        #expect(invalid.movementCounter == nil && invalid.measurementSequence == nil && invalid.mac == nil)
        let json = BeaconFrame.ruuvi(invalid).json
        #expect(json["temperature_c"] == .null && json["mac"] == .null)
    }

    @Test func ruuviFormat3Vectors() throws {
        let valid = try RuuviMeasurement.decode(bytes("03291A1ECE1EFC18F94202CA0B53")[...], base: 0)
        #expect(valid.humidity == 20.5)
        #expect(valid.temperatureCelsius.map(roundedReading) == 26.3)
        #expect(valid.pressurePascal == 102_766)
        #expect(valid.accelerationX == -1000 && valid.accelerationY == -1726 && valid.accelerationZ == 714)
        #expect(valid.batteryMillivolts == 2899)
        let maximum = try RuuviMeasurement.decode(bytes("03FF7F63FFFF7FFF7FFF7FFFFFFF")[...], base: 0)
        #expect(maximum.humidity == 127.5)
        #expect(maximum.temperatureCelsius.map(roundedReading) == 127.99)
        #expect(maximum.pressurePascal == 115_535)
        let minimum = try RuuviMeasurement.decode(bytes("0300FF6300008001800180010000")[...], base: 0)
        #expect(minimum.temperatureCelsius.map(roundedReading) == -127.99)
        #expect(minimum.pressurePascal == 50_000)
    }

    /// The specification's valid vectors with bytes appended (docs.ruuvi.com: a reader takes the format's length):
    /// the same values.
    @Test func ruuviPayloadsWithTrailingBytesDecodeAsWithout() throws {
        for vector in ["03291A1ECE1EFC18F94202CA0B53", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F"] {
            let plain = try RuuviMeasurement.decode(bytes(vector)[...], base: 0)
            #expect(try RuuviMeasurement.decode(bytes(vector + "0000")[...], base: 0) == plain)
        }
        #expect(decodeError { _ = try RuuviMeasurement.decode(bytes("03291A1ECE1EFC18F94202CA0B")[...], base: 0) }?.code == .invalidLength)
    }

    @Test func ruuviUnknownFormatAndWrongLength() {
        #expect(decodeError { _ = try RuuviMeasurement.decode(bytes("0601")[...], base: 0) }?.code == .unsupportedVersion)
        #expect(decodeError { _ = try RuuviMeasurement.decode(bytes("0512FC")[...], base: 0) }?.code == .invalidLength)
    }
}
