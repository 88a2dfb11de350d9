import BeaconWire
import Testing
@testable import BeaconAgent

func report(_ hex: String, address: UInt64 = 0xC0FF_EE00_0001, rssi: Int8 = -60) -> AdvertisingReport {
    AdvertisingReport(
        eventType: 0x03, isExtended: false, address: DeviceAddress(value: address, kind: .random), rssi: rssi,
        data: bytesFromHex(hex))
}

func bytesFromHex(_ hex: String) -> [UInt8] {
    (try? [UInt8](hex: hex)) ?? []
}

@Suite struct SightingExtractorTests {
    // Eddystone UID (tx power -21 dBm at 0 m), TLM and URL from the same beacon; iBeacon; a phone.
    let uid = "020106 0303aafe 1516aafe 00eb 0102030405060708090a 0000000000a1"
    let tlm = "020106 0303aafe 1116aafe 2000 0bb8 1680 00000064 00001388"
    let url = "020106 0303aafe 0e16aafe 10eb 03 6578616d706c65 07"
    let iBeacon = "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"
    let phone = "02011a 0aff4c0010050318c0b5e1"

    @Test func identityFramesNameTheBeaconAndCarryTheirPower() throws {
        var extractor = SightingExtractor()
        let sighting = try extractor.sighting(of: report(uid), timeMicros: 1).get()
        #expect(sighting.beacon.beaconID == "eddystone:0102030405060708090a:0000000000a1")
        #expect(sighting.beacon.powerAt1mDbm == -62)  // -21 at 0 m, minus 41 dB
        #expect(sighting.data == nil)
        let apple = try extractor.sighting(of: report(iBeacon, address: 2), timeMicros: 1).get()
        #expect(apple.beacon.beaconID == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")
        #expect(apple.beacon.powerAt1mDbm == -59)
    }

    @Test func anIdentityThatChangesAtTheSameAddressGivesTheNewKey() throws {
        var extractor = SightingExtractor()
        let first = try extractor.sighting(of: report(iBeacon), timeMicros: 1).get()
        #expect(first.beacon.beaconID == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")
        #expect(try extractor.sighting(of: report(iBeacon), timeMicros: 2).get().beacon == first.beacon)
        // The same device now sends major 3 and another measured power.
        let moved = try extractor.sighting(of: report(String(iBeacon.dropLast(6)) + "0003c0"), timeMicros: 3).get()
        #expect(moved.beacon.beaconID == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3")
        #expect(moved.beacon.powerAt1mDbm == -64)
        // The same bytes from the same address value, now a public address.
        let publicReport = AdvertisingReport(
            eventType: 0x03, isExtended: false, address: DeviceAddress(value: 0xC0FF_EE00_0001, kind: .public),
            rssi: -60, data: bytesFromHex(iBeacon))
        let publicSighting = try extractor.sighting(of: publicReport, timeMicros: 4).get()
        #expect(publicSighting.beacon.beaconID == first.beacon.beaconID && !publicSighting.beacon.addressIsRandom)
        // Pseudonymised from now on: the address leaves the key although the bytes are the same.
        extractor.configuration.pseudonymKey = Array(repeating: 7, count: 32)
        #expect(try extractor.sighting(of: publicReport, timeMicros: 5).get().beacon.address == 0)
    }

    @Test func telemetryJoinsTheIdentityFromTheSameAddressWithinTheWindow() throws {
        var extractor = SightingExtractor()
        extractor.configuration.associationWindowMicroseconds = 10_000_000
        // Before any UID: the TLM belongs to the address.
        let early = try extractor.sighting(of: report(tlm), timeMicros: 0).get()
        #expect(early.beacon.beaconID == "mac:C0:FF:EE:00:00:01")
        #expect(early.data == .eddystone(FrameBytes(bytesFromHex("2000 0bb8 1680 00000064 00001388"))))
        _ = try extractor.sighting(of: report(uid), timeMicros: 1_000_000).get()
        let joined = try extractor.sighting(of: report(url), timeMicros: 2_000_000).get()
        #expect(joined.beacon.beaconID == "eddystone:0102030405060708090a:0000000000a1")
        #expect(joined.data == .eddystone(FrameBytes(bytesFromHex("10eb 03 6578616d706c65 07"))))
        let late = try extractor.sighting(of: report(tlm), timeMicros: 11_000_001).get()
        #expect(late.beacon.beaconID == "mac:C0:FF:EE:00:00:01")
    }

    /// The advertising event is the sighting's own: a TLM sent in a connectable advertisement joins the UID heard
    /// from the same address as non-connectable, and keeps its event.
    @Test func eachSightingSaysHowItsAdvertisementWasSent() throws {
        var extractor = SightingExtractor()
        let identity = try extractor.sighting(of: report(uid), timeMicros: 1).get()
        #expect(identity.beacon.advertisingEvent == 0x10)
        var connectable = report(tlm)
        connectable.eventType = 0x00  // ADV_IND
        let telemetry = try extractor.sighting(of: connectable, timeMicros: 2).get()
        #expect(telemetry.beacon.beaconID == identity.beacon.beaconID && telemetry.beacon.advertisingEvent == 0x13)
        #expect(try extractor.sighting(of: report(uid), timeMicros: 3).get().beacon == identity.beacon)
    }

    @Test func unknownDevicesMalformedAdvertsAndFilters() throws {
        var extractor = SightingExtractor()
        #expect(extractor.skip(report(phone)) == .unknownDevice)
        #expect(extractor.skip(report("0303aafe 1516aafe 00")) == .malformed)
        extractor.configuration.includeUnknownDevices = true
        #expect(try extractor.sighting(of: report(phone), timeMicros: 0).get().beacon.beaconID == "mac:C0:FF:EE:00:00:01")

        extractor.configuration.allow = ["eddystone:0102"]
        #expect(extractor.skip(report(iBeacon)) == .filtered)
        #expect(extractor.skip(report(uid)) == nil)
        extractor.configuration.deny = ["C0:FF:EE"]
        #expect(extractor.skip(report(uid)) == .filtered)
    }

    @Test func addressesArePseudonymisedWithTheSiteKey() throws {
        var extractor = SightingExtractor()
        extractor.configuration.includeUnknownDevices = true
        extractor.configuration.pseudonymKey = Array(repeating: 7, count: 32)
        let hidden = try extractor.sighting(of: report(phone), timeMicros: 0).get()
        #expect(hidden.beacon.beaconID.hasPrefix("anon:") && hidden.beacon.beaconID.count == 21)
        #expect(hidden.beacon.address == 0)
        let again = try extractor.sighting(of: report(phone), timeMicros: 1).get()
        #expect(again.beacon == hidden.beacon)
        extractor.configuration.pseudonymKey = Array(repeating: 8, count: 32)
        #expect(try extractor.sighting(of: report(phone), timeMicros: 2).get().beacon != hidden.beacon)
        // Beacon identities are kept; only the address goes.
        let beacon = try extractor.sighting(of: report(uid), timeMicros: 3).get()
        #expect(beacon.beacon.beaconID.hasPrefix("eddystone:") && beacon.beacon.address == 0)
    }
}

extension SightingExtractor {
    mutating func skip(_ report: AdvertisingReport) -> Skip? {
        switch sighting(of: report, timeMicros: 0) {
        case .success: nil
        case .failure(let reason): reason.skip
        }
    }
}
