@testable import BeaconIngest
import Testing

/// A beacon settled in its zone needs more evidence to move (`zone_switch_settled_s`).
@Suite struct ZoneSettlingTests {
    let start: Int64 = 1_767_225_600_000_000
    let second: Int64 = 1_000_000

    /// Two rooms; the beacon is heard in room a for `stay` seconds, room b `leadDb` louder or quieter meanwhile
    /// (within the margin: no evidence), then room b 12 dB louder (10 dB beyond the margin). Returns how many
    /// seconds after the jump the beacon moves to b.
    func secondsToMove(stay: Int, bLeadDb: Double = -12, settled: String = "") throws -> Int? {
        let site = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                rssi_smoothing: none
                zone_scoring: loudest
                zones: [{id: a}, {id: b}]
                agents: [{id: a1, zone: a}, {id: b1, zone: b}]
            \(settled)
            """
        ).sites[0]
        var tracker = SiteZoneTracker(site: site)
        // Placed in a first: b quiet for the entry dwell.
        for index in 0..<(stay + 200) {
            let time = start + Int64(index) * second
            let b = index < 5 ? -72 : index < stay ? -60 + bLeadDb : -48.0
            tracker.add(beaconID: "x", agent: "a1", timeMicros: time, rssi: -60)
            tracker.add(beaconID: "x", agent: "b1", timeMicros: time, rssi: b)
            for agent in ["a1", "b1"] { tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: time) }
            if tracker.advance(nowMicros: time).contains(where: { if case .visitOpened(_, "b", _, _) = $0 { true } else { false } }) {
                return index - stay
            }
        }
        return nil
    }

    @Test func aBeaconSettledForTheWholeTimeNeedsTwiceTheEvidence() throws {
        // 200 dB·s at 10 dB/s: 20 s (and the 2 % of 25 s settled: 21) just arrived; 400 after the default
        // 1,200 s settled, and about 300 half-way.
        #expect(try secondsToMove(stay: 30) == 21)
        #expect(try secondsToMove(stay: 1_300) == 40)
        #expect(try secondsToMove(stay: 630) == 31)
        #expect(try secondsToMove(stay: 1_300, settled: "    zone_switch_settled_s: 0") == 20)
    }

    /// Settling counts only while the beacon's zone leads: a beacon the next room hears slightly louder (within
    /// the margin) for twenty minutes is not settled where it is.
    @Test func aBeaconWhoseZoneDoesNotLeadDoesNotSettle() throws {
        // Settled only for the first 5 s, where b was quiet.
        #expect(try secondsToMove(stay: 1_300, bLeadDb: 1) == 21)
    }
}
