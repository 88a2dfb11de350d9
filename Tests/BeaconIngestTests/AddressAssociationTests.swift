@testable import BeaconIngest
import BeaconWire
import TestServers
import Testing

/// Frames without an identity (URL, TLM, sensor frames, delivered as `mac:` sightings) from an address whose
/// identity the site knows are that beacon's; only an address no agent of the site tied to an identity within the
/// address lifetime stays an address beacon.
@Suite struct AddressAssociationTests {
    static let start: Int64 = 1_767_225_600_000_000
    static let address: UInt64 = 0xC0FF_EE00_0001
    static let ibeacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    static let identified = BeaconKey(beaconID: ibeacon, address: address, addressIsRandom: true, powerAt1mDbm: -59)
    static let bare = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:01", address: address, addressIsRandom: true)
    /// Eddystone-URL https://example.com/ and Eddystone-TLM (3000 mV, 24.5 °C, count 256, uptime 51.2 s).
    static let url = DataFrameContent.eddystone([0x10, 0xEB, 0x03, 0x65, 0x78, 0x61, 0x6D, 0x70, 0x6C, 0x65, 0x00])
    static let tlm = DataFrameContent.eddystone([0x20, 0x00, 0x0B, 0xB8, 0x18, 0x80, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00])

    static func batch(_ agent: String, _ sequence: UInt64, _ sightings: [Sighting]) -> DecodedBatch {
        DecodedBatch(
            siteID: "hq", agentID: agent, bootID: 1, sequence: sequence, firstUnacknowledgedSequence: sequence,
            agentClockMicros: sightings.first?.timeMicros ?? start, sightings: sightings)
    }

    /// Seconds after the start.
    static func at(_ seconds: Int64) -> Int64 { start + seconds * 1_000_000 }

    /// hq-a2 hears the beacon's iBeacon frames for 30 s, loses it for three minutes (hq-a1 never hears it), and
    /// the first frames it hears on the beacon's return are its URL and its TLM: they are the iBeacon's, and so is
    /// the telemetry.
    @Test func aBeaconBackInRangeKeepsItsIdentityForItsFirstURLAndTLMFrames() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let before = (0..<30).map { Sighting(timeMicros: Self.at($0), beacon: Self.identified, rssi: -60) }
        _ = pipeline.apply(Self.batch("hq-a2", 1, before), nowMicros: Self.at(31))
        let back = [
            Sighting(timeMicros: Self.at(210), beacon: Self.bare, rssi: -62, data: Self.url),
            Sighting(timeMicros: Self.at(211), beacon: Self.bare, rssi: -61, data: Self.tlm),
        ]
        let output = pipeline.apply(Self.batch("hq-a2", 2, back), nowMicros: Self.at(212))
        #expect(output.sightings.map(\.beaconID) == [Self.ibeacon, Self.ibeacon])
        #expect(output.telemetry.map(\.row.beaconID) == [Self.ibeacon])
    }

    /// The identity one agent heard names the frames another hears from the address.
    @Test func anotherAgentsIdentityNamesTheFrames() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        _ = pipeline.apply(Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.identified, rssi: -60)]), nowMicros: Self.at(1))
        let output = pipeline.apply(
            Self.batch("hq-a2", 1, [Sighting(timeMicros: Self.at(120), beacon: Self.bare, rssi: -70, data: Self.url)]), nowMicros: Self.at(121))
        #expect(output.sightings.map(\.beaconID) == [Self.ibeacon])
    }

    /// An address no agent tied to an identity, or tied longer ago than an address lives, stays an address beacon:
    /// its frames wait for an identity, then are stored under the address.
    @Test func anAddressWithoutAKnownIdentityStaysAnAddressBeacon() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let first = pipeline.apply(
            Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.bare, rssi: -70, data: Self.url)]), nowMicros: Self.at(1))
        #expect(first.sightings.isEmpty && pipeline.framesWaiting == 1)
        // Another beacon's batch after the wait: the frame is stored under its address.
        let other = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:09", address: 0xC0FF_EE00_0009, addressIsRandom: true)
        let unknown = pipeline.apply(
            Self.batch("hq-a2", 1, [Sighting(timeMicros: Self.at(40), beacon: other, rssi: -80)]), nowMicros: Self.at(41))
        #expect(unknown.sightings.map(\.beaconID) == ["mac:C0:FF:EE:00:00:09", "mac:C0:FF:EE:00:00:01"])
        #expect(unknown.waitingFrames.storedUnderAddress == 1 && pipeline.framesWaiting == 0)
        _ = pipeline.apply(Self.batch("hq-a1", 2, [Sighting(timeMicros: Self.at(50), beacon: Self.identified, rssi: -60)]), nowMicros: Self.at(51))
        let lifetime = BeaconIdentity.addressLifetimeMicros / 1_000_000
        let late = pipeline.apply(
            Self.batch("hq-a1", 3, [Sighting(timeMicros: Self.at(50 + lifetime + 1), beacon: Self.bare, rssi: -70, data: Self.url)]),
            nowMicros: Self.at(51 + lifetime + 1))
        #expect(late.sightings.isEmpty && pipeline.framesWaiting == 1)
        let expired = pipeline.expireWaiting(sites: nil, nowMicros: Self.at(51 + lifetime + 1) + AddressWait.waitMicros + 1)
        #expect(expired.sightings.map(\.beaconID) == ["mac:C0:FF:EE:00:00:01"])
    }
}

/// The frames a beacon sends before any receiver of the site has heard its identity wait for it.
extension AddressAssociationTests {
    /// hq-a1 hears the beacon's URL and TLM first; its iBeacon frame reaches hq-a2 four seconds later: every row is
    /// the beacon's, the URL's and TLM's under hq-a1, and the telemetry once.
    @Test func framesWaitForTheIdentityAnotherAgentHearsLater() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let early = pipeline.apply(
            Self.batch("hq-a1", 1, [
                Sighting(timeMicros: Self.at(0), beacon: Self.bare, rssi: -70, data: Self.url),
                Sighting(timeMicros: Self.at(1), beacon: Self.bare, rssi: -71, data: Self.tlm),
            ]),
            nowMicros: Self.at(2))
        #expect(early.sightings.isEmpty && early.telemetry.isEmpty)
        #expect(early.waitingFrames.held.map(\.agent.agent) == ["hq-a1", "hq-a1"] && pipeline.framesWaiting == 2)
        let identity = pipeline.apply(
            Self.batch("hq-a2", 1, [Sighting(timeMicros: Self.at(4), beacon: Self.identified, rssi: -60)]), nowMicros: Self.at(5))
        #expect(identity.sightings.map(\.beaconID) == [Self.ibeacon, Self.ibeacon, Self.ibeacon])
        #expect(identity.sightings.map(\.agentID) == ["hq-a2", "hq-a1", "hq-a1"])
        #expect(identity.sightings.map(\.timeMicros) == [Self.at(4), Self.at(0), Self.at(1)])
        #expect(identity.telemetry.map(\.row.beaconID) == [Self.ibeacon] && identity.telemetry.map(\.row.agentID) == ["hq-a1"])
        #expect(identity.waitingFrames.claimed == 2 && identity.waitingFrames.done.count == 2 && pipeline.framesWaiting == 0)
        // Nothing is left to be stored under the address.
        #expect(pipeline.expireWaiting(sites: nil, nowMicros: Self.at(100)).sightings.isEmpty)
    }

    /// An address whose frames waited in vain is not waited on again within the address lifetime: a beacon that
    /// sends only URL or TLM frames waits once.
    @Test func anAddressThatWaitedInVainIsNotWaitedOnAgain() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        _ = pipeline.apply(
            Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.bare, rssi: -70, data: Self.tlm)]), nowMicros: Self.at(1))
        #expect(pipeline.expireWaiting(sites: nil, nowMicros: Self.at(40)).sightings.count == 1)
        let next = pipeline.apply(
            Self.batch("hq-a1", 2, [Sighting(timeMicros: Self.at(41), beacon: Self.bare, rssi: -70, data: Self.url)]), nowMicros: Self.at(42))
        #expect(next.sightings.map(\.beaconID) == ["mac:C0:FF:EE:00:00:01"] && pipeline.framesWaiting == 0)
    }

    /// Frames of devices that never send an identity (sensors, plain advertisers) are stored at once.
    @Test func framesWithoutEddystoneDataDoNotWait() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let output = pipeline.apply(
            Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.bare, rssi: -70)]), nowMicros: Self.at(1))
        #expect(output.sightings.map(\.beaconID) == ["mac:C0:FF:EE:00:00:01"] && pipeline.framesWaiting == 0)
    }

    /// A transaction rolled back takes the frames it began to hold, or claimed, back with it.
    @Test func aRolledBackTransactionRestoresTheWaitingFrames() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        _ = pipeline.apply(
            Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.bare, rssi: -70, data: Self.url)]), nowMicros: Self.at(1))
        pipeline.beginTransaction()
        let claimed = pipeline.apply(
            Self.batch("hq-a2", 1, [Sighting(timeMicros: Self.at(2), beacon: Self.identified, rssi: -60)]), nowMicros: Self.at(3))
        #expect(claimed.waitingFrames.claimed == 1 && pipeline.framesWaiting == 0)
        pipeline.rollbackTransaction()
        #expect(pipeline.framesWaiting == 1)
    }

    /// At most `maximumPerAddress` frames wait per address: beyond, the oldest is stored under the address.
    @Test func anAddressHoldsABoundedNumberOfFrames() {
        var wait = AddressWait()
        let agent = AgentKey(site: "hq", agent: "hq-a1")
        var overflow: [AddressWait.Frame] = []
        for second in 0...Int64(AddressWait.maximumPerAddress) {
            let sighting = Sighting(timeMicros: Self.at(second), beacon: Self.bare, rssi: -70, data: Self.tlm)
            overflow += wait.hold(.init(agent: agent, sighting: sighting, arrivalMicros: Self.at(second)))
        }
        #expect(overflow.map(\.sighting.timeMicros) == [Self.at(0)] && wait.count == AddressWait.maximumPerAddress)
        #expect(wait.claim(site: "hq", address: Self.address).count == AddressWait.maximumPerAddress && wait.count == 0)
    }
}

/// An address beacon whose identity frame comes after the wait, within the address's lifetime, is merged into it.
extension AddressAssociationTests {
    /// hq-a1 hears the beacon's URL and TLM frames for 40 s, and no receiver its identity: they wait 15 s, then are
    /// stored under the address, which is placed in the lobby. At 60 s hq-a1 hears its iBeacon frame: the address
    /// beacon becomes the iBeacon, once: its rows of the batch, its fleet health and its place in the lobby.
    @Test func anAddressBeaconTiedLaterIsMergedIntoItsIdentityOnce() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let mac = "mac:C0:FF:EE:00:00:01"
        let other = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:09", address: 0xC0FF_EE00_0009, addressIsRandom: true)
        var stored: [String] = []
        for second in Int64(0)..<40 {
            let frame = second % 10 == 1 ? Self.tlm : Self.url
            let output = pipeline.apply(
                Self.batch("hq-a1", UInt64(second + 1), [Sighting(timeMicros: Self.at(second), beacon: Self.bare, rssi: -60, data: frame)]),
                nowMicros: Self.at(second + 1))
            pipeline.telemetryStored(output.telemetry)
            _ = pipeline.apply(
                Self.batch("hq-a2", UInt64(second + 1), [Sighting(timeMicros: Self.at(second), beacon: other, rssi: -80)]),
                nowMicros: Self.at(second + 1))
            stored += output.sightings.map(\.beaconID)
        }
        #expect(Set(stored) == [mac] && stored.count >= 39 - Int(AddressWait.waitMicros / 1_000_000))
        #expect(pipeline.health.health(of: mac)?.batteryMillivolts == 3000)
        #expect(pipeline.placements(site: "hq").contains { $0.beaconID == mac && $0.zone == "lobby" })

        let tied = pipeline.apply(
            Self.batch("hq-a1", 41, [
                Sighting(timeMicros: Self.at(40), beacon: Self.bare, rssi: -60, data: Self.url),
                Sighting(timeMicros: Self.at(41), beacon: Self.identified, rssi: -60),
            ]),
            nowMicros: Self.at(42))
        #expect(tied.addressMerges == [AddressMerge(site: "hq", addressBeaconID: mac, beaconID: Self.ibeacon)])
        #expect(tied.zoneChanges.contains(.merged(site: "hq", addressBeaconID: mac, beaconID: Self.ibeacon)))
        // The URL frame before the identity in the same batch is the iBeacon's too.
        #expect(tied.sightings.map(\.beaconID) == [Self.ibeacon, Self.ibeacon])
        #expect(pipeline.health.health(of: mac) == nil && pipeline.health.health(of: Self.ibeacon)?.batteryMillivolts == 3000)
        _ = pipeline.apply(
            Self.batch("hq-a2", 41, [Sighting(timeMicros: Self.at(45), beacon: other, rssi: -80)]), nowMicros: Self.at(46))
        let placed = pipeline.placements(site: "hq")
        #expect(!placed.contains { $0.beaconID == mac })
        #expect(placed.contains { $0.beaconID == Self.ibeacon && $0.zone == "lobby" && $0.enterMicros < Self.at(40) }, "\(placed)")
        // Once: the next identity frame merges nothing.
        let again = pipeline.apply(
            Self.batch("hq-a1", 42, [Sighting(timeMicros: Self.at(50), beacon: Self.identified, rssi: -60)]), nowMicros: Self.at(51))
        #expect(again.addressMerges.isEmpty)
    }
}
