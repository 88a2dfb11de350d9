@testable import BeaconIngest
import BeaconWire
import TestServers
import Testing

/// The addresses agents leave out of version 3 batches are filled in from the same agent's earlier batches of the
/// last minute, and only from those.
@Suite struct AgentAddressesTests {
    static let start: Int64 = 1_767_225_600_000_000
    static let ibeacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    static let a: UInt64 = 0xC0FF_EE00_0001
    static let b: UInt64 = 0xC0FF_EE00_0002

    static func batch(_ agent: String, _ sequence: UInt64, atSecond second: Int64, address: UInt64?) -> DecodedBatch {
        let key = BeaconKey(
            beaconID: ibeacon, address: address ?? 0, addressIsRandom: true, powerAt1mDbm: -59, addressAsBefore: address == nil)
        return DecodedBatch(
            siteID: "hq", agentID: agent, bootID: 1, sequence: sequence, firstUnacknowledgedSequence: sequence,
            agentClockMicros: start, sightings: [Sighting(timeMicros: start + second * 1_000_000, beacon: key, rssi: -60)])
    }

    /// The address the batch's sighting ends with, nil when still unknown.
    static func resolved(_ addresses: inout AgentAddresses, _ batch: DecodedBatch) -> UInt64? {
        var batch = batch
        var beaconIDs = BeaconIDInterner()
        addresses.resolve(&batch, beaconIDs: &beaconIDs, holdingAtMost: 100)
        let key = batch.sightings[0].beacon
        #expect(key.addressAsBefore == (key.address == 0))
        return key.addressAsBefore ? nil : key.address
    }

    @Test func aLeftOutAddressIsTheOneTheAgentSentWithinTheMinute() {
        var addresses = AgentAddresses()
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 1, atSecond: 0, address: Self.a)) == Self.a)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 2, atSecond: 1, address: nil)) == Self.a)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 3, atSecond: 59, address: nil)) == Self.a)
        // Not from another agent, not a minute on, not from a later batch (out of order), not before any.
        #expect(Self.resolved(&addresses, Self.batch("hq-a2", 4, atSecond: 2, address: nil)) == nil)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 4, atSecond: 60, address: nil)) == nil)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 7, atSecond: 30, address: Self.b)) == Self.b)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 6, atSecond: 29, address: nil)) == nil)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 8, atSecond: 31, address: nil)) == Self.b)
        var fresh = AgentAddresses()
        #expect(Self.resolved(&fresh, Self.batch("hq-a1", 9, atSecond: 32, address: nil)) == nil)
        // Entries no batch can use are forgotten, per site.
        #expect(addresses.count == 1)
        addresses.prune(site: "elsewhere", before: Self.start + 600_000_000)
        #expect(addresses.count == 1)
        addresses.prune(site: "hq", before: Self.start + 150_000_000)
        #expect(addresses.count == 1)
        addresses.prune(site: "hq", before: Self.start + 151_000_000)
        #expect(addresses.count == 0)
    }

    /// A rolled-back transaction forgets the addresses its batches sent.
    @Test func aRolledBackBatchIsForgotten() {
        var addresses = AgentAddresses()
        _ = Self.resolved(&addresses, Self.batch("hq-a1", 1, atSecond: 0, address: Self.a))
        addresses.apply(.begin)
        _ = Self.resolved(&addresses, Self.batch("hq-a1", 2, atSecond: 1, address: Self.b))
        addresses.apply(.rollback)
        #expect(Self.resolved(&addresses, Self.batch("hq-a1", 2, atSecond: 1, address: nil)) == Self.a)
    }

    /// Through the wire: an agent's batches, each decoded alone, give the pipeline the beacon's address for every
    /// sighting; an ingest that joins mid-stream learns it when the agent sends it again, within a minute; a copy
    /// the same agent hears beside the beacon is flagged, every address being sent while two are heard.
    @Test func thePipelineKnowsEveryAddressThroughTheWire() throws {
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        var joining = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let beacon = BeaconKey(beaconID: Self.ibeacon, address: Self.a, addressIsRandom: true, powerAt1mDbm: -59)
        var copy = beacon
        copy.address = Self.b
        var leftOut = 0
        for second in 0..<240 {
            let time = Self.start + Int64(second) * 1_000_000
            _ = builder.add(Sighting(timeMicros: time, beacon: beacon, rssi: -60), nowNanoseconds: 0)
            if second >= 150 { _ = builder.add(Sighting(timeMicros: time, beacon: copy, rssi: -70), nowNanoseconds: 0) }
            let sealed = builder.seal(sequence: UInt64(second + 1), firstUnacknowledgedSequence: 1, agentClockMicros: time)
            let wire = try #require(sealed)
            leftOut += wire.beacons.filter(\.addressAsBefore).count
            let batch = try BatchReader.decode(try wire.wireBytes())
            #expect(batch.beaconEntries == (second >= 150 ? 2 : 1))
            _ = pipeline.apply(batch, nowMicros: time + 1_000_000)
            #expect(pipeline.health.health(of: Self.ibeacon)?.heardAs?.address != nil, "second \(second)")
            if second >= 30 { _ = joining.apply(batch, nowMicros: time + 1_000_000) }
            if second == 30 { #expect(joining.health.health(of: Self.ibeacon)?.heardAs == nil) }
            if second == 90 { #expect(joining.health.health(of: Self.ibeacon)?.heardAs?.address == Self.a) }
        }
        #expect(leftOut > 130, "\(leftOut) addresses left out")
        let since = try #require(pipeline.health.health(of: Self.ibeacon)?.clonedSinceMicros)
        #expect(since == Self.start + 150_000_000)
    }
}
