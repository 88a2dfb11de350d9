@testable import AccuracyHarness
import BeaconAgent
import Foundation
import LocalServers
import TestServers
import Testing

/// A recorded walk's ground truth: the zones its positions lie in, and the simplest method scored against them.
@Suite struct RecordedWalkTests {
    let walk = repositoryRoot + "/examples/recordings/open-office/straight-04.csv"

    @Test func positionsBecomeStaysInTheZonesTheyLieIn() throws {
        let recorded = try RecordedWalk(recording: walk)
        #expect(recorded.rows.count == 558)
        let stays = try #require(recorded.stays["mac:E7:8F:13:56:24:CE"])
        // From the east half of the office to the west: quarter 4, then quarter 1 from 1581249747.503 s.
        #expect(stays.map(\.zone) == ["quarter-4", "quarter-1"])
        #expect(abs(stays[0].exit - 1_581_249_747.503109) < 1e-6 && stays[1].exit == recorded.end)
        #expect(abs(recorded.end - 1_581_249_757.0502462) < 1e-6)
    }

    @Test func theLoudestReceiverIsScoredOnTheSameSeconds() throws {
        let score = try RecordedWalk(recording: walk).loudestReceiver()
        #expect(score.trueStays == 2 && score.missedStays == 0)
        // 15 seconds scored (10 of the first stay of 14.6 s, 5 of the second of 9.5 s: the first 5 of each are left
        // out), 8 of them in the right quarter (with the receivers' offsets of the sites file).
        #expect(score.beaconSeconds == 15 && score.correctSeconds == 8)
        #expect(score.visits > 2)
    }
}

extension RecordedWalkTests {
    @Test func theWeightedCentroidIsMeasuredEverySecondAgainstWhereTheBeaconWas() throws {
        let errors = try RecordedWalk(recording: walk).weightedCentroid()
        // One estimate a second, from the second of the first reading through that of the last (24.1 s of readings
        // over 26 whole seconds), each within the office's diagonal.
        #expect(errors.errors.count == 26)
        #expect(errors.errors.allSatisfy { $0 >= 0 && $0 < 27.2 })
        let median = try #require(errors.median)
        let p95 = try #require(errors.p95)
        #expect(median <= p95 && p95 <= errors.errors.max()!)
    }

    @Test func aStoredPositionsErrorMHoldsTheTruthWhereTheTruthIsNoFartherThanIt() {
        var errors = RecordedWalk.PositionErrors()
        let oneZone: ((x: Double, y: Double)) -> String? = { _ in "floor" }
        errors.add((0, 0), truth: (3, 4), spread: 4, zoneOf: oneZone)  // 5 m off: outside
        errors.add((0, 0), truth: (0, 1), spread: 2, zoneOf: oneZone)
        errors.add((0, 0), truth: (0, 3), spread: 3, zoneOf: oneZone)  // on its edge: inside
        errors.add((0, 0), truth: (1, 0), zoneOf: oneZone)  // a baseline's, without a spread
        #expect(errors.errors == [5, 1, 3, 1])
        #expect(errors.spreads == [4, 2, 3] && errors.withinSpread == 2)
        #expect(errors.withinSpreadRate == 2.0 / 3 && errors.medianSpread == 3)
        #expect(RecordedWalk.PositionErrors().withinSpreadRate == nil)
    }
}

extension RecordedWalkTests {
    @Test func walksPlayedBackToBackFollowEachOtherWithTheirStays() throws {
        let directory = try makeTemporaryDirectory(prefix: "back-to-back")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let other = repositoryRoot + "/examples/recordings/open-office/straight-03.csv"
        let joined = try RecordedWalk(backToBack: [walk, other, walk], directory: directory)
        let parts = try [walk, other].map { try RecordedWalk(recording: $0) }
        #expect(joined.rows.count == 2 * parts[0].rows.count + parts[1].rows.count)
        let stays = try #require(joined.stays["mac:E7:8F:13:56:24:CE"])
        #expect(stays.count == 2 * parts[0].stays.values.joined().count + parts[1].stays.values.joined().count)
        // Each walk starts 10 s after the one before ended, in time order.
        let secondStart = Double(joined.rows[parts[0].rows.count].timeMicros) / 1e6
        #expect(abs(secondStart - (parts[0].end + 10)) < 1e-5)
        #expect(zip(joined.rows, joined.rows.dropFirst()).allSatisfy { $0.timeMicros <= $1.timeMicros })
        // The file the agents replay reads back as the same rows.
        var reader = RecordingReader()
        let replayed = try String(contentsOfFile: joined.path, encoding: .utf8).split(separator: "\n").flatMap { try reader.read(line: $0).rows }
        #expect(replayed == joined.rows)
    }
}

extension RecordedWalkTests {
    /// The walk above as another recorder would write it: columns in its own order, ISO 8601 times with an offset,
    /// the transmitter by a beacon id or a name of its own, and the ground truth naming it the same way.
    func rewritten(as transmitter: String, into directory: String, receiver: (Substring) -> String = { String($0) }) throws -> String {
        let source = (walk as NSString).deletingLastPathComponent
        for file in ["sites.yaml", "radio-map.csv"] { try FileManager.default.copyItem(atPath: source + "/" + file, toPath: directory + "/" + file) }
        func iso(_ seconds: Substring) -> String {
            let micros = Int64((Double(seconds)! * 1e6).rounded()) + 2 * 3_600_000_000
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
            let whole = formatter.string(from: Date(timeIntervalSince1970: Double(micros / 1_000_000)))
            return whole + String(format: ".%06lld+02:00", micros % 1_000_000)
        }
        var recording = "rssi,transmitter,receiver,time\n"
        for line in try String(contentsOfFile: walk, encoding: .utf8).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",")
            recording += "\(fields[3]),\(transmitter),\(receiver(fields[1])),\(iso(fields[0]))\n"
        }
        try recording.write(toFile: directory + "/walk.csv", atomically: true, encoding: .utf8)
        var positions = "time_s,transmitter,x_m,y_m\n"
        for line in try String(contentsOfFile: walk.replacingOccurrences(of: ".csv", with: ".positions.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        {
            let fields = line.split(separator: ",")
            positions += "\(fields[0]),\(transmitter),\(fields[2]),\(fields[3])\n"
        }
        try positions.write(toFile: directory + "/walk.positions.csv", atomically: true, encoding: .utf8)
        return directory + "/walk.csv"
    }

    @Test(arguments: [
        ("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"),
        ("tag-7", "mac:DE:29:A3:8E:F5:17"),
    ])
    func aWalkRecordedByIdOrNameIsScoredUnderTheIdTheIngestStores(transmitter: String, id: String) throws {
        let directory = try makeTemporaryDirectory(prefix: "recorded-by-id")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let original = try RecordedWalk(recording: walk)
        let recorded = try RecordedWalk(recording: rewritten(as: transmitter, into: directory))
        #expect(Array(recorded.stays.keys) == [id] && Array(recorded.positions.keys) == [id])
        #expect(recorded.stays[id]?.map(\.zone) == ["quarter-4", "quarter-1"])
        #expect(abs(recorded.start - original.start) < 1e-6 && abs(recorded.end - original.end) < 1e-6)
        let score = try recorded.loudestReceiver()
        #expect(score.beaconSeconds == 15 && score.correctSeconds == 8 && score.trueStays == 2)
    }
}

extension RecordedWalkTests {
    /// Receivers named in another recorder's way are read as the agents their names give; one whose name gives no
    /// agent of the site is named with its readings, and a recording none of whose receivers is an agent is refused.
    @Test func receiversAreTheAgentsTheirNamesReadAs() throws {
        let directory = try makeTemporaryDirectory(prefix: "recorded-by-id")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let original = try RecordedWalk(recording: walk)
        // `Sensor10` is the agent sensor10; `Sensor_22` reads as sensor-22, which the office has not.
        let renamed = try RecordedWalk(recording: rewritten(as: "tag-7", into: directory) { $0 == "sensor22" ? "Sensor_22" : $0.uppercased() })
        let sensor22 = original.rows.filter { $0.receiver == "sensor22" }.count
        #expect(sensor22 > 0 && renamed.rows.count == original.rows.count)
        #expect(renamed.receiversWithoutAgent.map(\.receiver) == ["sensor-22"] && renamed.receiversWithoutAgent.map(\.readings) == [sensor22])
        #expect(Set(renamed.rows.map(\.receiver)) == Set(original.rows.map(\.receiver)).subtracting(["sensor22"]).union(["sensor-22"]))
        #expect(original.receiversWithoutAgent.isEmpty)

        let elsewhere = try makeTemporaryDirectory(prefix: "recorded-by-id")
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        let path = try rewritten(as: "tag-7", into: elsewhere) { "Room \($0.dropFirst(6))" }
        #expect {
            try RecordedWalk(recording: path)
        } throws: { error in
            "\(error)".contains("none of its 12 receivers (room-10, room-11, room-12, room-20, room-21, …) is an agent of site 'office'")
        }
    }
}
