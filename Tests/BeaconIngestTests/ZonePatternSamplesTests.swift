@testable import BeaconIngest
import Testing

/// What the patterns learn from with a history decided in hindsight (`ZonePatternSamples`).
@Suite struct ZonePatternSamplesTests {
    func levels(_ pairs: [(Int, Double)]) -> [(agent: Int, level: Double)] { pairs.map { (agent: $0.0, level: $0.1) } }

    /// Every tenth second is kept, a later reading of it replacing the earlier; each teaches the zone the history
    /// decided for it, and is forgotten once decided, taught or not.
    @Test func theSampledSecondsTeachTheZoneTheHistoryDecided() {
        var samples = ZonePatternSamples()
        samples.add(second: 100, levels: levels([(0, -70)]))
        samples.add(second: 100, levels: levels([(0, -60), (1, -72)]))
        samples.add(second: 105, levels: levels([(0, -61)]))
        samples.add(second: 110, levels: levels([(1, -65)]))
        samples.add(second: 120, levels: levels([(2, -80)]))
        #expect(samples.seconds == [100, 110, 120])
        var taught: [(zone: Int, levels: [Int32: Float])] = []
        samples.take((100...110).map { (second: Int64($0), zone: $0 < 110 ? 1 : 0) }) { zone, levels in
            taught.append((zone, Dictionary(uniqueKeysWithValues: levels.map { ($0.agent, $0.level) })))
        }
        #expect(taught.map(\.zone) == [1, 0])
        #expect(taught.map(\.levels) == [[0: -60, 1: -72], [1: -65]])
        #expect(samples.seconds == [120])
        #expect(samples.levels.map(\.agent) == [2] && samples.ends == [1])
        // A second before the oldest kept is no sample; deciding past a sample that was never kept teaches nothing.
        samples.add(second: 90, levels: levels([(0, -50)]))
        #expect(samples.seconds == [120])
        taught = []
        samples.take([(second: 130, zone: 2)]) { zone, levels in taught.append((zone, [:])) }
        #expect(taught.isEmpty && samples.isEmpty)
    }

    /// A second of a beacon teaches its zone every agent's level relative to the loudest, whichever zone's agent
    /// that is: a zone whose beacons are louder at the next room's agent learns so.
    @Test func aSecondTeachesEveryAgentRelativeToTheLoudest() {
        var patterns = ZonePatterns(zoneCount: 2, zoneOfAgent: [0, 1])
        let before = patterns.expectation(zone: 0, agent: 1).meanDb
        for _ in 0..<3000 { patterns.learn(zone: 0, second: [(agent: 0, level: -64), (agent: 1, level: -60)]) }
        #expect(before == ZonePatterns.priorOtherDb)
        #expect(abs(patterns.expectation(zone: 0, agent: 1).meanDb) < 0.5)
        #expect(abs(patterns.expectation(zone: 0, agent: 0).meanDb - -4) < 0.5)
        // The live rule's learning (`zone_history: crossings`) leaves such a reading out.
        var live = ZonePatterns(zoneCount: 2, zoneOfAgent: [0, 1])
        for _ in 0..<3000 { live.learn(zone: 0, agent: 1, levels: levels([(0, -64), (1, -60)])) }
        #expect(live.expectation(zone: 0, agent: 1).meanDb == ZonePatterns.priorOtherDb)
    }

    /// The samples a tracker holds are in its checkpoint: restored from it, a tracker holds every beacon's.
    @Test func aTrackerRestoredHoldsTheSamplesOfItsCheckpoint() throws {
        let site = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                zones: [{id: lobby}, {id: lab}]
                agents: [{id: a1, zone: lobby}, {id: a2, zone: lab}]
            """
        ).sites[0]
        var tracker = SiteZoneTracker(site: site)
        let start: Int64 = 1_767_225_600_000_000
        for second in 0..<95 {
            let time = start + Int64(second) * 1_000_000
            for (index, agent) in ["a1", "a2"].enumerated() {
                tracker.add(
                    (0..<3).map { beacon in
                        SiteZoneTracker.BeaconReading(beaconID: "b\(beacon)", timeMicros: time, rssi: -60 - Double((beacon + index + second) % 7))
                    }, agent: agent)
                tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: time)
            }
            _ = tracker.advance(nowMicros: time + 900_000)
        }
        let held = tracker.beacons.filter { !$0.value.samples.isEmpty }
        #expect(held.count == 3)
        var restored = SiteZoneTracker(site: site)
        try restored.restore(checkpoint: tracker.takeCheckpoint())
        for (beaconID, beacon) in held { #expect(restored.beacons[beaconID]?.samples == beacon.samples, "\(beaconID)") }
    }

    /// The samples survive a checkpoint; a damaged one (a second that is no sample, an agent out of range) is
    /// refused.
    @Test func theSamplesAreReadBackAndDamageIsRefused() throws {
        var samples = ZonePatternSamples()
        samples.add(second: 200, levels: levels([(0, -60), (2, -71.5)]))
        samples.add(second: 210, levels: levels([(1, -66)]))
        var writer = CheckpointWriter()
        samples.encode(into: &writer)
        var reader = CheckpointReader(writer.bytes)
        #expect(try ZonePatternSamples.decode(from: &reader, agentCount: 3) == samples)
        #expect(reader.isAtEnd)
        reader = CheckpointReader(writer.bytes)
        #expect(throws: CheckpointError.self) { try ZonePatternSamples.decode(from: &reader, agentCount: 2) }
        var odd = CheckpointWriter()
        odd.int(1)
        odd.int(Int64(205))
        odd.int(0)
        reader = CheckpointReader(odd.bytes)
        #expect(throws: CheckpointError.self) { try ZonePatternSamples.decode(from: &reader, agentCount: 3) }
    }
}
