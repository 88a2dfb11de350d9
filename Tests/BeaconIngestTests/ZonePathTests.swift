@testable import BeaconIngest
import Testing

/// The likeliest path of zones, decided the history lag behind the readings (`zone_history: path`).
@Suite struct ZonePathTests {
    /// Plays per-second levels of two zones (zone 1's lead over zone 0) through a path with a 60 s lag and a
    /// change cost of 270 dB·s; returns the zone decided for each second, with every second decided at the end.
    func decide(_ leads: [Double], lag: Int = 60) -> [Int] {
        var path = ZonePath(second: 0, levels: [0, leads[0]], lagSeconds: lag)
        var decided: [(second: Int64, zone: Int)] = []
        for (second, lead) in leads.enumerated().dropFirst() {
            path.add(second: Int64(second), levels: [0, lead], changeCost: { _, _ in 270 }, decided: &decided)
            #expect(path.decidedThrough == max(-1, Int64(second - lag)), "second \(second)")
        }
        path.decide(through: Int64(leads.count - 1), into: &decided)
        #expect(decided.map(\.second) == Array(0..<Int64(leads.count)))
        return decided.map(\.zone)
    }

    @Test func aMoveIsPlacedAtTheSecondTheLevelsTurned() {
        let zones = decide(Array(repeating: -5, count: 100) + Array(repeating: 5, count: 100))
        #expect(zones == Array(repeating: 0, count: 100) + Array(repeating: 1, count: 100))
    }

    /// A detour costs two changes (540 dB·s): 20 s of the other zone 10 dB louder do not pay for it, 60 s do.
    @Test func aDetourIsTakenOnlyWhenTheReadingsPayForBothChanges() {
        let shadow = Array(repeating: -5.0, count: 90) + Array(repeating: 10, count: 20) + Array(repeating: -5, count: 90)
        #expect(decide(shadow) == Array(repeating: 0, count: 200))
        let detour = Array(repeating: -5.0, count: 70) + Array(repeating: 10, count: 60) + Array(repeating: -5, count: 70)
        #expect(decide(detour) == Array(repeating: 0, count: 70) + Array(repeating: 1, count: 60) + Array(repeating: 0, count: 70))
    }

    /// A zone that is no candidate (-infinity) is never on the path; silent seconds carry no evidence.
    @Test func silentSecondsAndZonesThatAreNoCandidateDecideNothing() {
        var path = ZonePath(second: 10, levels: [-60, -.infinity], lagSeconds: 30)
        var decided: [(second: Int64, zone: Int)] = []
        path.add(second: 25, levels: [-65, -60], changeCost: { _, _ in 270 }, decided: &decided)
        path.add(second: 26, levels: [-70, -60], changeCost: { _, _ in 270 }, decided: &decided)
        #expect(decided.isEmpty)
        path.decide(through: 26, into: &decided)
        #expect(decided.count == 17 && decided.allSatisfy { $0.zone == 0 })
    }

    /// Two rooms heard as in `ZoneSettlingTests`: the beacon in a for 100 s, then b 12 dB louder for 100 s, then
    /// gone. The stored visits change rooms at the second the levels turned, where the live decision came seconds
    /// later; the minutes count the beacon where it was.
    @Test func aSiteWithPathHistoryStoresTheMoveWhereTheReadingsTurned() throws {
        let site = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                rssi_smoothing: none
                zone_scoring: loudest
                zone_history: path
                history_lag_s: 60
                zones: [{id: a}, {id: b}]
                agents: [{id: a1, zone: a}, {id: b1, zone: b}]
            """
        ).sites[0]
        #expect(site.zoneRules.history == .path)
        let start: Int64 = 1_767_225_600_000_000
        var tracker = SiteZoneTracker(site: site)
        var tables = ZoneTables()
        var liveMove: Int?
        for index in 0..<200 {
            let time = start + Int64(index) * 1_000_000
            tracker.add(beaconID: "x", agent: "a1", timeMicros: time, rssi: -60)
            tracker.add(beaconID: "x", agent: "b1", timeMicros: time, rssi: index < 100 ? -72 : -48)
            for agent in ["a1", "b1"] { tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: time) }
            tables.write(tracker.advance(nowMicros: time))
            if liveMove == nil, tracker.zone(of: "x") == "b" { liveMove = index }
        }
        #expect((liveMove ?? 0) > 100)
        tables.write(tracker.finish(closingVisits: true))
        let visits = tables.visits.sorted { $0.key.enterMicros < $1.key.enterMicros }
        #expect(visits.map(\.value.zone) == ["a", "b"])
        #expect(visits.map(\.key.enterMicros) == [start, start + 100_000_000])
        #expect(visits.map(\.value.exitMicros) == [start + 100_000_000, start + 199_000_000])
        let minute: Int64 = 60_000_000
        #expect(tables.minutes[.init(zone: "a", minuteMicros: start + minute)]?.occupants == 1)
        #expect(tables.minutes[.init(zone: "b", minuteMicros: start + 2 * minute)]?.occupants == 1)
        #expect(tables.minutes[.init(zone: "b", minuteMicros: start + minute)]?.occupants == 0)
    }

    /// While the zones' order holds, every second has the same back-pointers: a beacon that stays where it is
    /// keeps one run of them, whatever the lag, and a move adds a few runs that go once it is decided.
    @Test func theBackPointersOfASteadyBeaconTakeOneRun() {
        var path = ZonePath(second: 0, levels: [0, -20, -30], lagSeconds: 120)
        var decided: [(second: Int64, zone: Int)] = []
        let cost: (Int, Int) -> Double = { _, _ in 270 }
        for second in 1...300 { path.add(second: Int64(second), levels: [0, -20, -30], changeCost: cost, decided: &decided) }
        #expect(path.runs.count <= 2 * (2 + 3))
        for second in 301...330 { path.add(second: Int64(second), levels: [-20, 0, -30], changeCost: cost, decided: &decided) }
        #expect(path.runs.count > 2 * (2 + 3))
        for second in 331...600 { path.add(second: Int64(second), levels: [-20, 0, -30], changeCost: cost, decided: &decided) }
        #expect(path.runs.count <= 2 * (2 + 3))
        #expect(decided.count == 481 && decided.filter { $0.zone == 1 }.map(\.second).min() == 301)
    }

    /// Four zones, stays of 20-90 s with 6 dB of noise and changes that cost 270 dB·s through a door, 810 without:
    /// every second decided is the one a trace through each second's pointers, kept whole, gives from the best
    /// zone when it was decided: the run-length coded pointers lose nothing.
    @Test func theDecidedSecondsAreThoseOfAFullTrace() {
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        func uniform() -> Double {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(random >> 11) / Double(1 << 53)
        }
        let cost: (Int, Int) -> Double = { from, to in abs(from - to) == 1 ? 270 : 810 }
        var zone = 0, left = 0
        var levels: [[Double]] = []
        for _ in 0..<900 {
            if left == 0 { (zone, left) = (Int(uniform() * 4), 20 + Int(uniform() * 70)) }
            left -= 1
            levels.append((0..<4).map { ($0 == zone ? 0 : -8) + 6 * uniform() })
        }
        let lag = 40
        var path = ZonePath(second: 0, levels: levels[0], lagSeconds: lag)
        var decided: [(second: Int64, zone: Int)] = []
        var pointers: [[Int]] = [[0, 1, 2, 3]]
        var best: [Int] = [path.bestZone]
        for second in 1..<levels.count {
            let previous = path.scores
            pointers.append((0..<4).map { zone in
                var (score, from) = (previous[zone], zone)
                for other in 0..<4 where other != zone && previous[other] - cost(other, zone) > score {
                    (score, from) = (previous[other] - cost(other, zone), other)
                }
                return from
            })
            path.add(second: Int64(second), levels: levels[second], changeCost: cost, decided: &decided)
            best.append(path.bestZone)
        }
        path.decide(through: Int64(levels.count - 1), into: &decided)
        func traced(from newest: Int, at second: Int) -> Int {
            var zone = best[newest]
            for index in stride(from: newest, to: second, by: -1) { zone = pointers[index][zone] }
            return zone
        }
        let expected = (0..<levels.count).map { traced(from: min($0 + lag - 1, levels.count - 1), at: $0) }
        #expect(decided.map(\.second) == Array(0..<Int64(levels.count)))
        #expect(decided.map(\.zone) == expected)
        #expect(Set(expected).count == 4)
    }

    /// Checkpoint version 4 stored the back-pointers as a ring, a byte per zone for each second of the lag: such a
    /// path reads as the same path, and decides the same seconds.
    @Test func aPathWrittenAsARingOfPointersReadsAsTheSamePath() throws {
        let cost: (Int, Int) -> Double = { _, _ in 270 }
        let levels: (Int64) -> [Double] = { second in second < 40 ? [0, -8] : (second < 55 ? [-12, 0] : [-6, 0]) }
        var path = ZonePath(second: 0, levels: levels(0), lagSeconds: 30)
        var decided: [(second: Int64, zone: Int)] = []
        var ring = [UInt8](repeating: 0, count: 30 * 2)
        var previous = path.scores
        for second in Int64(1)...70 {
            // The ring as version 4 kept it: each second's pointers at its slot.
            for zone in 0..<2 {
                let stay = previous[zone], move = previous[1 - zone] - 270
                ring[Int(second % 30) * 2 + zone] = UInt8(move > stay ? 1 - zone : zone)
            }
            path.add(second: second, levels: levels(second), changeCost: cost, decided: &decided)
            previous = path.scores
        }
        var writer = CheckpointWriter()
        writer.int(path.lagSeconds)
        writer.int(path.newestSecond)
        writer.int(path.decidedThrough)
        for score in path.scores + path.base { writer.double(score) }
        for start in stride(from: 0, to: ring.count, by: 8) {
            var word: UInt64 = 0
            for (index, pointer) in ring[start..<(start + 8 <= ring.count ? start + 8 : ring.count)].enumerated() {
                word |= UInt64(pointer) << (8 * UInt64(index))
            }
            writer.int(Int64(bitPattern: word))
        }
        var reader = CheckpointReader(writer.bytes)
        var restored = try ZonePath.decode(from: &reader, zoneCount: 2, ringOfPointers: true)
        #expect(restored == path)
        var fromRestored: [(second: Int64, zone: Int)] = []
        restored.decide(through: 70, into: &fromRestored)
        path.decide(through: 70, into: &decided)
        #expect(fromRestored.map(\.zone) == decided.suffix(fromRestored.count).map(\.zone))
        #expect(fromRestored.map(\.zone).contains(1))
    }

    @Test func anUnknownHistoryIsNamed() {
        #expect(throws: SitesError.self) {
            try SitesConfiguration.parse("sites: [{id: hq, zone_history: hindsight, zones: [{id: a}], agents: [{id: a1, zone: a}]}]")
        }
    }
}
