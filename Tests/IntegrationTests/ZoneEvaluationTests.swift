import AccuracyHarness
import BeaconAgent
import BeaconIngest
import BeaconSimulation
import Foundation
import TestServers
import Testing
import WorkQueue

@Suite(.timeLimit(.minutes(5)))
struct ZoneEvaluationTests {
    /// Four minutes of the hard preset with 16 beacons, on a seed that was used neither to choose the defaults (1-2)
    /// nor for the published table (3-5): the ingest's defaults meet the targets for hard radio and beat every
    /// peer's method on zone accuracy and false changes, matches or beats them on both occupancy figures, and does
    /// at least as well as the zones scored by their loudest agent (the same rules otherwise). (Small, so
    /// that it does not starve the other tests of a core.)
    /// (Seconds of computation: on a thread of its own, not the few threads of the cooperative pool.)
    @Test func theDefaultsMeetTheTargetsAndBeatEveryPeerOnAHardScenario() async throws {
        let (chosen, peers) = try await onThread {
            let evaluation = try ZoneEvaluation(scenario: try ScenarioFamily.scenario(ScenarioFamily.hard, seed: 6, beacons: 16, durationSeconds: 240))
            let others = [ZoneEvaluation.Method.ingest(.loudestZone)] + ZoneEvaluation.Method.baselines
            return (try evaluation.score(.ingest(.chosen)), try others.map { ($0.name, try evaluation.score($0)) })
        }
        #expect(chosen.zoneAccuracy >= 0.985, "\(chosen)")
        #expect(chosen.falseChangesPerBeaconHour <= 1, "\(chosen)")
        #expect(try #require(chosen.medianEnterErrorSeconds) <= 8, "\(chosen)")
        #expect(chosen.occupancyWithinOne >= 0.995, "\(chosen)")
        #expect(chosen.occupancyMeanAbsoluteError <= 0.10, "\(chosen)")
        for (name, peer) in peers {
            let ours = name == ZoneEvaluation.Method.ingest(.loudestZone).name
            #expect(ours ? chosen.zoneAccuracy >= peer.zoneAccuracy : chosen.zoneAccuracy > peer.zoneAccuracy, "\(name): \(peer)")
            #expect(
                ours ? chosen.falseChangesPerBeaconHour <= peer.falseChangesPerBeaconHour
                    : chosen.falseChangesPerBeaconHour < peer.falseChangesPerBeaconHour, "\(name): \(peer)")
            #expect(chosen.occupancyWithinOne >= peer.occupancyWithinOne, "\(name): \(peer)")
            #expect(chosen.occupancyMeanAbsoluteError <= peer.occupancyMeanAbsoluteError, "\(name): \(peer)")
        }
    }

    /// Five minutes of the harsh preset with 16 beacons (seed 6, used for no choice): the history of the live
    /// decisions the likeliest path confirms (`chosen`, the default), and that path (`chosen-path`), make fewer false
    /// changes than the live decisions dated back (`chosen-crossings`), and place beacons and count the minutes at
    /// least as well.
    @Test(arguments: [ZoneMethod.chosen, .pathHistory])
    func theLikeliestPathStoresFewerFalseChangesOnAHarshScenario(method: ZoneMethod) async throws {
        let (crossings, hindsight) = try await onThread {
            let scenario = try ScenarioFamily.scenario(ScenarioFamily.harsh, seed: 6, beacons: 16, durationSeconds: 300)
            let evaluation = try ZoneEvaluation(scenario: scenario)
            return (try evaluation.score(.ingest(.crossingsHistory)), try evaluation.score(.ingest(method)))
        }
        let context = "\(method.name) \(hindsight), chosen-crossings \(crossings)"
        #expect(hindsight.falseChangesPerBeaconHour < crossings.falseChangesPerBeaconHour, "\(context)")
        #expect(hindsight.occupancyMeanAbsoluteError <= crossings.occupancyMeanAbsoluteError, "\(context)")
        #expect(hindsight.zoneAccuracy >= crossings.zoneAccuracy, "\(context)")
    }

    /// The evaluation without servers runs the ingest's own zone tracker: on a scenario without walls or correlated
    /// shadowing, the raw nearest agent flaps and the defaults do not.
    @Test func theNearestAgentFlapsUnderIndependentShadowing() async throws {
        let (nearest, chosen) = try await onThread {
            var scenario = try ScenarioFamily.scenario(ScenarioFamily.easy, seed: 7, beacons: 12, durationSeconds: 300)
            scenario.sites[0].shadowingCorrelationSeconds = 0
            scenario.sites[0].shadowingDb = 6
            let evaluation = try ZoneEvaluation(scenario: scenario)
            return (try evaluation.score(.nearest), try evaluation.score(.ingest(.chosen)))
        }
        #expect(nearest.falseChangesPerBeaconHour > 20 * max(chosen.falseChangesPerBeaconHour, 1), "\(nearest) \(chosen)")
    }
}

@Suite(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"), .serialized, .timeLimit(.minutes(5)))
struct AccuracyCommandTests {
    @Test func badArgumentsAreNamed() async throws {
        let executable = try #require(beaconflowExecutable)
        for (arguments, message) in [
            (["accuracy", "--preset", "stormy"], "unknown --preset 'stormy'"),
            (["accuracy", "--preset", "hard", "--seeds", "x"], "--seeds must be a range"),
            (["accuracy"], "give either --scenario or --preset"),
            (["accuracy", "--preset", "hard", "--set", "nokey"], "--set takes key=value"),
        ] {
            let run = try await runProgram(executable, arguments)
            #expect(run.status == 64, "\(arguments): \(run.errors)")
            #expect(run.errors.contains(message), "\(arguments): \(run.errors)")
        }
    }
}
