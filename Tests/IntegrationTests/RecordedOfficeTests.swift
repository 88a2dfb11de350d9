import AccuracyHarness
import BeaconIngest
import Foundation
import LocalServers
import Logging
import TestServers
import Testing

/// The office recording's walks kept for reporting (examples/recordings/open-office: rectangular and zigzagging,
/// played back to back as one), through agents, mosquitto, the ingest and PostgreSQL with the sites file as it is:
/// the zones from positions against the simplest method, the stored positions against the weighted centroid.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct RecordedOfficeTests {
    static let office = repositoryRoot + "/examples/recordings/open-office/"
    static let reported = ["rectangular-with-rotation", "rectangular-without-rotation", "zigzagging-with-rotation", "zigzagging-without-rotation"]

    @Test func zonesAndPositionsOnWalksKeptForReportingBeatTheBaselines() async throws {
        let directory = try makeTemporaryDirectory(prefix: "office")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let walk = try RecordedWalk(backToBack: Self.reported.map { Self.office + $0 + ".csv" }, directory: directory)
        let database = try await PostgresServer.start()
        let score = try await walk.runThroughPipeline(database: database, logger: Logger(label: "office"))
        let nearest = walk.loudestReceiver()
        // While present: at least 10 points above the simplest method, no stay of 16 missed, no false change where
        // the simplest method makes about a thousand an hour.
        #expect(score.trueStays == 16 && score.missedStays == 0, "\(score)")
        #expect(score.zoneAccuracy >= nearest.zoneAccuracy + 0.10, "\(score.zoneAccuracy) against \(nearest.zoneAccuracy)")
        #expect(score.falseChangesPerBeaconHour <= nearest.falseChangesPerBeaconHour / 10)
        #expect(score.occupancyMeanAbsoluteError <= nearest.occupancyMeanAbsoluteError, "\(score)")
        // Moves dated with the seconds after them as well: the visits' enter and exit times within 2 s and 3 s of
        // the truth at the median (1.5 s and 2.5 s with the beacon's level learned, 1.4 s and 1.6 s before; 2.4 s
        // and 3.6 s from the live levels alone; 1.4 s and 1.5 s with the readings' noise 1.3 times the model's
        // instead of 1.5), and 5.7 % of every second of the stays in the wrong zone (7.3 %, 9.7 %).
        #expect(try #require(score.medianEnterErrorSeconds) <= 2 && (try #require(score.medianExitErrorSeconds)) <= 3, "\(score)")
        #expect(score.zoneWrongEverySecond <= 0.08, "\(score)")
        // A position stored every 10 s of the beacon's readings, decided with the readings after it and drawn onto
        // the line of the seconds around it: about half the weighted centroid's error at the median (the
        // centroid each second: 2.2 m, p95 5.7 m; stored 0.94 m, 43 %, and 2.6 m), and at most 60 % at p95.
        let stored = score.positions
        let centroid = walk.weightedCentroid()
        #expect(stored.errors.count >= 36, "\(stored.errors.count)")
        #expect(try #require(stored.median) <= 0.5 * (try #require(centroid.median)), "\(stored.median!) against \(centroid.median!)")
        #expect(try #require(stored.p95) <= 0.6 * (try #require(centroid.p95)), "\(stored.p95!) against \(centroid.p95!)")
        // Each with its error_m, which holds the truth in about 9 positions of 10 (88 %) and is not so wide as to
        // say nothing (2.0 m at the median, about twice the error).
        #expect(try #require(stored.withinSpreadRate) >= 0.8, "\(stored.withinSpread) of \(stored.spreads.count)")
        #expect(try #require(stored.medianSpread) <= 3 * stored.median!, "\(stored.medianSpread!) against \(stored.median!)")
    }

    /// A walk's first and last seconds, each walk alone: rectangular-with-rotation (reported) re-enters its first
    /// quarter 10.5 s before it ends, too short for the live rule, and the path's move there is stored (88.7 % and a
    /// stay missed before, 98.4 % now); straight-04 (kept for choosing) runs 0.5 m from a border, where a beacon
    /// placed before its belief gathers starts on the wrong side (0.0 % before, 100 % now).
    @Test func aWalksFirstAndLastSecondsAreInTheRightZones() async throws {
        let database = try await PostgresServer.start()
        for name in ["rectangular-with-rotation", "straight-04"] {
            let walk = try RecordedWalk(recording: Self.office + name + ".csv")
            let score = try await walk.runThroughPipeline(database: database, logger: Logger(label: "office"))
            #expect(score.missedStays == 0 && score.zoneAccuracy >= 0.95, "\(name): \(score)")
            #expect(score.falseChangesPerBeaconHour == 0, "\(name): \(score)")
        }
    }
}
