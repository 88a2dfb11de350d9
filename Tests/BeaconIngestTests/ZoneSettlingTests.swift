@testable import BeaconIngest
import Testing

/// A beacon settled in its zone needs more evidence to move (`zone_switch_settled_s`).
@Suite struct ZoneSettlingTests {
    let start: Int64 = 1_767_225_600_000_000
    let second: Int64 = 1_000_000

    /// Two rooms; the beacon is heard in room a for `stay` seconds, room b `leadDb` louder or quieter meanwhile,
    /// then room b 12 dB louder. Returns how many seconds after the jump the beacon moves to b (negative: before).
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
            if tracker.advance(nowMicros: time).contains(where: { if case .placement(_, _, "b", _) = $0 { true } else { false } }) {
                return index - stay
            }
        }
        return nil
    }

    @Test func aBeaconSettledForTheWholeTimeNeedsTwiceTheEvidence() throws {
        // Settled for the default 1,200 s: 400 dB·s at 10 dB/s beyond the 2 dB margin, 40 s. Half-way (630 s):
        // about 300 dB·s at 11 dB/s beyond half the margin, 28 s. Just arrived (30 s): about 205 dB·s at 12 dB/s,
        // 18 s. Without the rule: 200 dB·s beyond the whole margin, 20 s.
        #expect(try secondsToMove(stay: 30) == 18)
        #expect(try secondsToMove(stay: 1_300) == 40)
        #expect(try secondsToMove(stay: 630) == 28)
        #expect(try secondsToMove(stay: 1_300, settled: "    zone_switch_settled_s: 0") == 20)
    }

    /// Settling counts only while the beacon's zone leads: a beacon the next room hears slightly louder (1 dB,
    /// within the settled margin) is not settled where it is, so no margin holds it, and it moves.
    @Test func aBeaconWhoseZoneDoesNotLeadDoesNotSettle() throws {
        // Settled only for the first 5 s, where b was quiet: 200 dB·s at 1 dB/s, 1,093 s before the jump.
        #expect(try secondsToMove(stay: 1_300, bLeadDb: 1) == -1_093)
        // With the rule off, the whole margin holds it until the jump.
        #expect(try secondsToMove(stay: 1_300, bLeadDb: 1, settled: "    zone_switch_settled_s: 0") == 20)
    }
}
