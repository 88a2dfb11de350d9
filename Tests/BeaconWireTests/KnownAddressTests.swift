import BeaconWire
import Testing

/// In version 3 a beacon's device address travels only when the ingest cannot know it: the first time, when it
/// changes, once a minute, and whenever the identity is heard from two addresses.
@Suite struct KnownAddressTests {
    static let start: Int64 = 1_767_225_600_000_000
    static let ibeacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"

    static func key(_ address: UInt64, _ beaconID: String = ibeacon) -> BeaconKey {
        BeaconKey(beaconID: beaconID, address: address, addressIsRandom: true, powerAt1mDbm: -59)
    }

    /// Seals one batch per entry of `seconds` (each with one sighting of every key at that second after the start)
    /// and returns, per batch, the addresses its dictionary sent (nil: left out as known).
    static func sentAddresses(
        _ batches: [(seconds: Int64, keys: [BeaconKey])], version: UInt32 = 3
    ) throws -> [[UInt64?]] {
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
        builder.configuration.formatVersion = version
        var sent: [[UInt64?]] = []
        for (sequence, batch) in batches.enumerated() {
            for key in batch.keys {
                _ = builder.add(Sighting(timeMicros: start + batch.seconds * 1_000_000, beacon: key, rssi: -60), nowNanoseconds: 0)
            }
            let sealed = builder.seal(sequence: UInt64(sequence + 1), firstUnacknowledgedSequence: 1, agentClockMicros: 0)
            let wire = try #require(sealed)
            sent.append(wire.beacons.map { $0.addressAsBefore ? nil : $0.address })
            // Every batch reads alone: a left-out address reads as 0, flagged.
            let decoded = try BatchReader.decode(try wire.wireBytes())
            #expect(decoded.sightings.map { $0.beacon.addressAsBefore ? nil : $0.beacon.address } == sent.last)
            #expect(decoded.sightings.allSatisfy { !$0.beacon.addressAsBefore || $0.beacon.address == 0 })
        }
        return sent
    }

    @Test func anAddressIsSentFirstThenOnceAMinute() throws {
        let a: UInt64 = 0xC0FF_EE00_0001
        let sent = try Self.sentAddresses([(0, [Self.key(a)]), (1, [Self.key(a)]), (59, [Self.key(a)]), (60, [Self.key(a)]), (61, [Self.key(a)])])
        #expect(sent == [[a], [nil], [nil], [a], [nil]])
        // Versions 1 and 2 always send it.
        #expect(try Self.sentAddresses([(0, [Self.key(a)]), (1, [Self.key(a)])], version: 2) == [[a], [a]])
    }

    /// A new address is sent at once; the identity then sends every address for two minutes after it was last
    /// heard from another (a rotation, or a copy heard beside the beacon).
    @Test func aNewAddressOrTwoAtOnceAreSent() throws {
        let a: UInt64 = 0xC0FF_EE00_0001
        let b: UInt64 = 0xC0FF_EE00_0002
        let rotation = try Self.sentAddresses([
            (0, [Self.key(a)]), (1, [Self.key(a)]), (2, [Self.key(b)]), (50, [Self.key(b)]), (122, [Self.key(b)]),
            (123, [Self.key(b)]),
        ])
        #expect(rotation == [[a], [nil], [b], [b], [b], [nil]])
        let copy = try Self.sentAddresses([
            (0, [Self.key(a)]), (1, [Self.key(a), Self.key(b)]), (2, [Self.key(a)]), (121, [Self.key(a)]), (122, [Self.key(a)]),
        ])
        #expect(copy == [[a], [a, b], [a], [a], [nil]])
    }

    /// A `mac:` id's address is the id itself: always left out, and read back from the id.
    @Test func aDevicesAddressIsReadFromItsID() throws {
        let address: UInt64 = 0xC0FF_EE00_0042
        let device = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:42", address: address, addressIsRandom: true)
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
        _ = builder.add(Sighting(timeMicros: Self.start, beacon: device, rssi: -70), nowNanoseconds: 0)
        let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let wire = try #require(sealed)
        #expect(wire.beacons.map(\.addressAsBefore) == [true] && wire.beacons.map(\.address) == [0])
        #expect(try BatchReader.decode(try wire.wireBytes()).sightings.map(\.beacon) == [device])
    }

    @Test func aLeftOutAddressIsRefusedOutsideVersionThreeOrBesideAnAddress() throws {
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
        _ = builder.add(Sighting(timeMicros: Self.start, beacon: Self.key(0xC0FF_EE00_0001), rssi: -70), nowNanoseconds: 0)
        let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let wire = try #require(sealed)
        var beside = wire
        beside.beacons[0].addressAsBefore = true
        var inVersion2 = wire
        inVersion2.formatVersion = 2
        inVersion2.sightingTimeUnitUs = 0
        inVersion2.sightingTimeDeltaUs = inVersion2.sightingTimeDeltaUs.map { $0 * 1000 }
        inVersion2.beacons[0].address = 0
        inVersion2.beacons[0].addressAsBefore = true
        for refused in [beside, inVersion2] {
            let error = try #require(throws: BatchError.self) { try BatchReader.decode(try refused.wireBytes()) }
            #expect(error.code == .invalidField && error.message.contains("address_as_before"), "\(error)")
        }
    }
}
