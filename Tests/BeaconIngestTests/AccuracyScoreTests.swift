import AccuracyHarness
import BeaconAgent
import BeaconIngest
import BeaconSimulation
import Testing

/// The scoring of the accuracy harness, on hand-made visits against a two-beacon truth.
struct AccuracyScoreTests {
    // 10:00:00 for 600 s. tag-a: lobby 0-200 s, lab 200-600 s (moved within lab at 400 s). tag-b: lab 100-300 s,
    // then away.
    static let scenario = try! Scenario.parse(
        """
        seed: 1
        start_unix_s: 1767261600
        duration_s: 600
        sites:
          - id: hq
            zones: [{id: lobby, rect: [0, 0, 10, 8]}, {id: lab, rect: [10, 0, 20, 8]}]
            agents: [{id: a1, zone: lobby, position: [5, 4]}, {id: a2, zone: lab, position: [15, 4]}]
        beacons:
          - {name: tag-a, site: hq, type: ibeacon, uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0, major: 1, minor: 1,
             path: [{at_s: 0, zone: lobby}, {at_s: 200, zone: lab}, {at_s: 400, zone: lab}]}
          - {name: tag-b, site: hq, type: ibeacon, uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0, major: 1, minor: 2,
             path: [{at_s: 100, zone: lab}, {at_s: 300}]}
        """)
    static let ids = ["tag-a": "a", "tag-b": "b"]
    static let t0 = 1_767_261_600.0

    func visit(_ beacon: String, _ zone: String, _ enter: Double, _ exit: Double?) -> AccuracyScore.Visit {
        AccuracyScore.Visit(beaconID: beacon, zone: zone, enter: Self.t0 + enter, exit: exit.map { Self.t0 + $0 })
    }

    @Test func perfectVisitsScoreFull() {
        let score = AccuracyScore(
            scenario: Self.scenario, site: "hq", beaconIDs: Self.ids,
            visits: [visit("a", "lobby", 0, 200), visit("a", "lab", 200, nil), visit("b", "lab", 100, 300)],
            minutes: [
                .init(zone: "lab", minuteStart: Self.t0 + 180, occupants: 2),
                // tag-a left the lobby 20 s into this minute: it counts in the lab, where it spent 40 s.
                .init(zone: "lobby", minuteStart: Self.t0 + 180, occupants: 0),
                .init(zone: "lab", minuteStart: Self.t0 + 300, occupants: 1),
            ])
        #expect(score.trueStays == 3)  // the move within the lab is the same stay
        #expect(score.zoneAccuracy == 1)
        #expect(score.beaconSeconds == (200 - 5) + (400 - 5) + (200 - 5))
        #expect(score.extraVisits == 0 && score.missedStays == 0)
        #expect(score.medianEnterErrorSeconds == 0)
        #expect(score.medianExitErrorSeconds == 0)  // tag-a's lobby exit and tag-b's exit; tag-a's lab stay runs to the end
        #expect(score.exitErrors.count == 2)
        #expect(score.zoneMinutes == 3 && score.occupancyMeanAbsoluteError == 0 && score.occupancyWithinOne == 1)
        #expect(score.beaconHours == 800.0 / 3600)
    }

    @Test func lateMovesFlappingAndMissedStaysAreCounted() {
        let score = AccuracyScore(
            scenario: Self.scenario, site: "hq", beaconIDs: Self.ids,
            visits: [
                // tag-a moves 10 s late, and flaps back to the lobby for 20 s at 300 s.
                visit("a", "lobby", 0, 210), visit("a", "lab", 210, 300), visit("a", "lobby", 300, 320),
                visit("a", "lab", 320, nil),
                // tag-b is never placed.
            ],
            minutes: [.init(zone: "lab", minuteStart: Self.t0 + 120, occupants: 0)])
        #expect(score.missedStays == 1)
        #expect(score.extraVisits == 2)
        #expect(abs(score.falseChangesPerBeaconHour - 2 / (800.0 / 3600)) < 1e-9)
        // tag-a: lobby [5, 200) right; lab [205, 600) right except [205, 210) and [300, 320).
        #expect(score.correctSeconds == 195 + (395 - 5 - 20))
        #expect(score.enterErrors.sorted() == [0, 10])
        #expect(score.exitErrors == [10])
        // tag-b was in the lab in minute 120-180 s.
        #expect(score.occupancyMeanAbsoluteError == 1)
    }

    @Test func theSitesFileForAScenarioCarriesTheMethodAndCorrectsReceiverOffsets() throws {
        let scenario = try Scenario.parse(
            """
            seed: 1
            start_unix_s: 1767261600
            duration_s: 60
            sites:
              - id: hq
                path_loss_exponent: 3
                zones: [{id: lobby, rect: [0, 0, 10, 8]}]
                agents: [{id: a1, zone: lobby, position: [5, 4], rssi_offset_db: -4}]
            beacons:
              - {name: tag, site: hq, type: eddystone-eid, namespace: 0102030405060708090a, instance: 0000000000b9,
                 identity_key: 000102030405060708090a0b0c0d0e0f, path: [{at_s: 0, zone: lobby}]}
            """)
        let sites = try SitesConfiguration.forScenario(scenario, beaconIDs: ["tag": "eddystone:x"], method: .nearest)
        let site = try #require(sites.sites.first)
        #expect(site.rssiSmoothing == .none && site.zoneRules.switchMarginDb == 0 && site.zoneRules.switchDwellMicros == 0)
        #expect(site.pathLossExponent == 3)
        #expect(site.agents.first?.rssiOffsetDb == 4)
        #expect(sites.beacons.first?.id == "eddystone:x" && sites.beacons.first?.identityKey?.count == 16)
    }
}
