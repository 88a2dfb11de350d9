import AccuracyHarness
import BeaconAgent
import BeaconIngest
import Testing

@Suite(.timeLimit(.minutes(5)))
struct ZoneEvaluationTests {
    /// Ten minutes of the hard preset, on a seed that was used neither to choose the defaults (1-2) nor for the
    /// published table (3-5): the ingest's defaults beat every peer's method on zone accuracy and false changes.
    @Test func theDefaultsBeatEveryPeerOnAHardScenario() throws {
        let scenario = try ScenarioFamily.scenario(ScenarioFamily.hard, seed: 6, durationSeconds: 600)
        let evaluation = try ZoneEvaluation(scenario: scenario)
        let chosen = try evaluation.score(.ingest(.chosen))
        #expect(chosen.zoneAccuracy >= 0.96, "\(chosen)")
        #expect(chosen.falseChangesPerBeaconHour <= 3, "\(chosen)")
        #expect(try #require(chosen.medianEnterErrorSeconds) <= 8, "\(chosen)")
        for method in ZoneEvaluation.Method.baselines {
            let peer = try evaluation.score(method)
            #expect(chosen.zoneAccuracy > peer.zoneAccuracy, "\(method.name): \(peer)")
            #expect(chosen.falseChangesPerBeaconHour < peer.falseChangesPerBeaconHour, "\(method.name): \(peer)")
        }
    }

    /// The evaluation without servers runs the ingest's own zone tracker: on a scenario without walls or correlated
    /// shadowing, the raw nearest agent flaps and the defaults do not.
    @Test func theNearestAgentFlapsUnderIndependentShadowing() throws {
        var scenario = try ScenarioFamily.scenario(ScenarioFamily.easy, seed: 7, beacons: 12, durationSeconds: 300)
        scenario.sites[0].shadowingCorrelationSeconds = 0
        scenario.sites[0].shadowingDb = 6
        let evaluation = try ZoneEvaluation(scenario: scenario)
        let nearest = try evaluation.score(.nearest)
        let chosen = try evaluation.score(.ingest(.chosen))
        #expect(nearest.falseChangesPerBeaconHour > 20 * max(chosen.falseChangesPerBeaconHour, 1), "\(nearest) \(chosen)")
    }
}
