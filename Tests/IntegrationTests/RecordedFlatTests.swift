import AccuracyHarness
import BeaconIngest
import Foundation
import LocalServers
import Logging
import TestServers
import Testing

/// The furnished flat's robot run (examples/recordings/furnished-flat: rooms with walls and doors, six receivers,
/// the radio model fitted on the calibration survey, kept apart) through agents, mosquitto, the ingest and
/// PostgreSQL with the sites file as it is: the zones against the simplest method, the stored positions against
/// the weighted centroid, for a beacon like the calibration's and for a louder one.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct RecordedFlatTests {
    static let flat = repositoryRoot + "/examples/recordings/furnished-flat/"

    @Test func zonesAndPositionsOfTheRobotRunBeatTheBaselines() async throws {
        let walk = try RecordedWalk(recording: Self.flat + "robot-test.csv")
        #expect(walk.site.floor == .walled)
        let database = try await PostgresServer.start()
        let nearest = walk.loudestReceiver()
        // Each zone scoring, and a beacon 10 dB louder than the tag the site was calibrated with (the model 10 dB
        // quieter than the readings), whose level the ingest learns from its readings: before it did, its positions
        // were 1.4 m and 2.7 m off.
        let runs: [(name: String, settings: [(key: String, value: String)])] = [
            ("pattern", [("zone_scoring", "pattern")]), ("position", [("zone_scoring", "position")]),
            ("a louder beacon", [("position_power_at_1m_dbm", "-56.9")]),
        ]
        for (scoring, settings) in runs {
            let score = try await walk.runThroughPipeline(database: database, logger: Logger(label: "flat"), settings: settings)
            // At least 10 points above the simplest method (98 % against 87 %), no stay of 30 s missed (3), no
            // false change where the simplest makes hundreds an hour.
            #expect(score.zoneAccuracy >= nearest.zoneAccuracy + 0.10, "\(scoring): \(score.zoneAccuracy) against \(nearest.zoneAccuracy)")
            #expect(score.longStays == 3 && score.missedLongStays == 0, "\(scoring): \(score)")
            #expect(score.falseChangesPerBeaconHour <= nearest.falseChangesPerBeaconHour / 10, "\(scoring): \(score)")
            // A position every 10 s, decided with the readings after it and drawn onto the line of the seconds
            // around it, closer than the centroid each second: with the survey's radio map 0.85 m and 1.5 m
            // against 1.6 m and 3.7 m (the p95 target: at most 60 % of the centroid's; the median's, half, is not
            // met here).
            let stored = score.positions
            let centroid = walk.weightedCentroid()
            #expect(stored.errors.count >= 34, "\(stored.errors.count)")
            #expect(try #require(stored.median) <= 0.56 * (try #require(centroid.median)), "\(stored.median!) against \(centroid.median!)")
            #expect(try #require(stored.p95) <= 0.6 * (try #require(centroid.p95)), "\(stored.p95!) against \(centroid.p95!)")
            // Each with its error_m, which holds the truth in 9 positions of 10 or more (94 %) and is not so wide
            // as to say nothing (1.6 m at the median, about twice the error).
            #expect(try #require(stored.withinSpreadRate) >= 0.85, "\(scoring): \(stored.withinSpread) of \(stored.spreads.count)")
            #expect(try #require(stored.medianSpread) <= 2.5 * stored.median!, "\(scoring): \(stored.medianSpread!) against \(stored.median!)")
        }
    }
}
