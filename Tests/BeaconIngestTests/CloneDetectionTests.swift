@testable import BeaconIngest
import BeaconWire
import TestServers
import Testing

@Suite struct CloneDetectionTests {
    let start: Int64 = 1_767_225_600_000_000
    let second: Int64 = 1_000_000

    /// A beacon that changes its private address (the old one falls silent as the new one starts, give or take
    /// the agents' clocks) is no clone.
    @Test func aRotatingAddressIsNoClone() {
        var detection = CloneDetection()
        for index in 0..<1800 {
            let address: UInt64 = index < 900 ? 0xC1 : 0xC2
            // Another agent's clock a second behind delivers the old address once after the rotation.
            let copy = detection.heard(address, at: start + Int64(index) * second)
            let late = index == 901 && detection.heard(0xC1, at: start + 899 * second)
            #expect(!copy && !late)
        }
        #expect(detection.clonedSinceMicros == nil)
    }

    /// Two addresses heard together: flagged once they overlap for a minute, since the later one was first heard;
    /// that one is the copy. When the copy falls silent, the flag goes once its address is forgotten.
    @Test func twoAddressesAtOnceAreAClone() {
        var detection = CloneDetection()
        var copies: [Int] = []
        for index in 0..<200 {
            let time = start + Int64(index) * second
            _ = detection.heard(0xA1, at: time)
            if index >= 20, detection.heard(0xB2, at: time + 500_000) { copies.append(index) }
        }
        #expect(detection.clonedSinceMicros == start + 20 * second + 500_000)
        #expect(copies.first == 81 && copies.count == 119)
        let beacon = detection.heard(0xA1, at: start + 200 * second)
        #expect(!beacon)
        // The copy stops; 15 minutes later only the beacon is left.
        _ = detection.heard(0xA1, at: start + (199 + 15 * 60) * second)
        #expect(detection.clonedSinceMicros != nil)
        _ = detection.heard(0xA1, at: start + (200 + 15 * 60 + 2) * second)
        #expect(detection.clonedSinceMicros == nil)
    }

    /// Through the ingest's pipeline: an iBeacon in the lobby and a copy of it in the lab, each heard loudest by
    /// its room's agent. The identity is `cloned` in fleet health (once, with since when), every sighting is kept,
    /// and the copy's readings stop moving the beacon: it stays in the lobby.
    @Test func aCopyInAnotherRoomIsFlaggedAndDoesNotMoveTheBeacon() throws {
        let sites = try SitesConfiguration.parse(testSites)
        var pipeline = IngestPipeline(sites: sites)
        let id = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:1"
        let beacon = BeaconKey(beaconID: id, address: 0xC000_0000_00A1, addressIsRandom: true)
        let copy = BeaconKey(beaconID: id, address: 0xC000_0000_00B2, addressIsRandom: true)
        var sightings = 0
        var cloned: [ClonedBeacon] = []
        var labVisitsAfterTheFlag = 0
        var flagged = false
        for index in 0..<300 {
            let time = start + Int64(index) * second
            // hq-a1 (lobby) hears the beacon loud and the copy faintly, hq-a2 (lab) the other way round; the copy
            // starts 30 s after the beacon.
            for (agent, loud, faint) in [("hq-a1", beacon, copy), ("hq-a2", copy, beacon)] {
                var heard: [Sighting] = []
                if index >= 30 || loud.address == beacon.address { heard.append(Sighting(timeMicros: time, beacon: loud, rssi: -55)) }
                if index >= 30 || faint.address == beacon.address {
                    heard.append(Sighting(timeMicros: time + 200_000, beacon: faint, rssi: -82))
                }
                let batch = DecodedBatch(
                    siteID: "hq", agentID: agent, bootID: 1, sequence: UInt64(index + 1), firstUnacknowledgedSequence: 1,
                    agentClockMicros: time, sightings: heard)
                let output = pipeline.apply(batch, nowMicros: time + second)
                sightings += output.sightings.count
                if flagged {
                    labVisitsAfterTheFlag += output.zoneChanges.filter { if case .visitOpened(_, "lab", _, _) = $0 { true } else { false } }.count
                }
            }
            cloned += pipeline.health.takeNewlyCloned()
            flagged = !cloned.isEmpty
        }
        let expected = 300 * 2 + 270 * 2
        #expect(sightings == expected)
        #expect(cloned == [ClonedBeacon(beaconID: id, siteID: "hq", sinceMicros: start + 30 * second)])
        let health = try #require(pipeline.health.health(of: id))
        #expect(health.status == .cloned && health.clonedSinceMicros == start + 30 * second)
        #expect(pipeline.placements(site: "hq").map(\.zone) == ["lobby"])
        #expect(labVisitsAfterTheFlag == 0)
    }
}
