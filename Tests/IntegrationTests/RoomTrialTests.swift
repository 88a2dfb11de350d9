import AccuracyHarness
import BeaconIngest
import Foundation
import LocalServers
import Logging
import TestServers
import Testing
import WorkQueue

/// The two-room flat of examples/rooms (the ESPresense accuracy harness's baseline room, its radio and tracks as
/// published) turned into recordings and played through agents, mosquitto, the ingest and PostgreSQL with the
/// radio model fitted on its survey walk: the positions and rooms against that harness's targets.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct RoomTrialTests {
    static let room = repositoryRoot + "/examples/rooms/two-rooms-6x4.json"

    @Test func aTrialIsWrittenAsRecordingsWithTheirTruthAndACalibratedSite() throws {
        let directory = try makeTemporaryDirectory(prefix: "room-trial")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let trial = try RoomTrial(path: Self.room)
        let written = try trial.write(to: directory, seeds: [1, 2])
        #expect(written.count == 1 + 2 * 5, "\(written)")
        // A sample a second, each heard once by each of the four stations; a silent station leaves its readings out.
        let diagonal = try RecordedWalk(recording: directory + "/diagonal-walk.csv")
        #expect(diagonal.rows.count == 2 * 61 * 4 && diagonal.positions.count == 2)
        #expect(diagonal.end - diagonal.start >= 60 && diagonal.end - diagonal.start < 61)
        let silent = try RecordedWalk(recording: directory + "/diagonal-walk-without-node-bedroom-ne.csv")
        #expect(silent.rows.count == 2 * 61 * 3 && !silent.rows.contains { $0.receiver == "node-bedroom-ne" })
        // Stays from the rooms: the diagonal goes from the living room into the bedroom.
        #expect(diagonal.stays.values.allSatisfy { $0.map(\.zone) == ["living", "bedroom"] }, "\(diagonal.stays)")
        // The same seeds, the same readings; the site has an open floor and the survey's radio (-59 dBm, 3.0).
        let again = try makeTemporaryDirectory(prefix: "room-trial")
        defer { try? FileManager.default.removeItem(atPath: again) }
        _ = try trial.write(to: again, seeds: [1, 2])
        #expect(try String(contentsOfFile: again + "/living-to-bedroom.csv", encoding: .utf8) == String(contentsOfFile: directory + "/living-to-bedroom.csv", encoding: .utf8))
        let site = diagonal.site
        #expect(site.floor == .open && site.agents.count == 4)
        #expect(abs(site.radioModel.powerAt1mDbm + 59) < 1.5 && abs(site.radioModel.exponent - 3) < 0.3, "\(site.radioModel)")
    }

    @Test func aRoomTrialIsRefusedWithWhatIsWrong() throws {
        let path = try makeTemporaryDirectory(prefix: "room-trial") + "/trial.json"
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let text = try String(contentsOfFile: Self.room, encoding: .utf8)
        try text.replacingOccurrences(of: "node-living-nw", with: "Node NW").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: HarnessError.self) { try RoomTrial(path: path) }
        try "{}".write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: HarnessError.self) { try RoomTrial(path: path) }
        #expect(error.description.contains("not a room trial"), "\(error)")
    }

    /// Seeds 11-30, those reported on (settings were never chosen on this room): the targets of median ≤ 0.5 m and
    /// p95 ≤ 1.2 m (1.6 m with a station out), the room wrong on at most 3 % (diagonal) and 8 % (across the wall)
    /// of the seconds after the settling ones, where the weighted centroid's median is 1 m and more.
    @Test func positionsAndRoomsOfTheTrialMeetTheirTargets() async throws {
        let directory = try makeTemporaryDirectory(prefix: "room-trial")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Writing and reading the recordings is seconds of CPU in a debug build: off the cooperative pool.
        _ = try await onThread { try RoomTrial(path: Self.room).write(to: directory, seeds: Array(11...30)) }
        let database = try await PostgresServer.start()
        let logger = Logger(label: "room-trial")
        for (track, roomWrong) in [("diagonal-walk", 0.03), ("living-to-bedroom", 0.08)] {
            let walk = try await onThread { try RecordedWalk(recording: "\(directory)/\(track).csv") }
            let score = try await walk.runThroughPipeline(database: database, logger: logger)
            let stored = score.positions
            #expect(stored.errors.count == 20 * (track == "diagonal-walk" ? 7 : 13), "\(track): \(stored.errors.count)")
            #expect(try #require(stored.median) <= 0.5 && (try #require(stored.p95)) <= 1.2, "\(track): \(stored)")
            #expect(1 - score.zoneAccuracy <= roomWrong && score.missedStays == 0 && score.falseChangesPerBeaconHour == 0, "\(track): \(score)")
            let centroid = try await onThread { walk.weightedCentroid() }
            #expect(try #require(centroid.median) > 2 * (try #require(stored.median)), "\(track): \(centroid.median!) against \(stored.median!)")
        }
        for station in ["node-living-nw", "node-living-sw", "node-bedroom-ne", "node-bedroom-se"] {
            let walk = try await onThread { try RecordedWalk(recording: "\(directory)/diagonal-walk-without-\(station).csv") }
            let stored = try await walk.runThroughPipeline(database: database, logger: logger).positions
            #expect(try #require(stored.p95) <= 1.6, "without \(station): \(stored)")
        }
    }
}
