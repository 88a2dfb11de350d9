@testable import AccuracyHarness
import BeaconAgent
import Foundation
import LocalServers
import TestServers
import Testing

/// A recording's ground truth as positions or as zones, written the ways other recorders write it, and a recording
/// written as its receivers' logs one after another.
@Suite struct RecordedTruthTests {
    let walk = repositoryRoot + "/examples/recordings/open-office/straight-04.csv"
    let beacon = "mac:E7:8F:13:56:24:CE"

    /// A directory with the walk's site, its readings as `walk.csv` (or `readings`), and no truth yet.
    func site(readings: String? = nil) throws -> String {
        let directory = try makeTemporaryDirectory(prefix: "recorded-truth")
        let source = (walk as NSString).deletingLastPathComponent
        for file in ["sites.yaml", "radio-map.csv"] { try FileManager.default.copyItem(atPath: source + "/" + file, toPath: directory + "/" + file) }
        try (readings ?? String(contentsOfFile: walk, encoding: .utf8)).write(toFile: directory + "/walk.csv", atomically: true, encoding: .utf8)
        return directory
    }

    /// The walk's true positions: time, x, y.
    func truePositions() throws -> [(time: Substring, x: Substring, y: Substring)] {
        try String(contentsOfFile: walk.replacingOccurrences(of: ".csv", with: ".positions.csv"), encoding: .utf8).split(separator: "\n")
            .dropFirst().map { line in
                let fields = line.split(separator: ",")
                return (fields[0], fields[2], fields[3])
            }
    }

    @Test func zonesGiveTheStaysThePositionsInThemGive() throws {
        let original = try RecordedWalk(recording: walk)
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A line each time the zone changes, the columns in another order, a line where the beacon is in none.
        var zones = "zone,time_s,transmitter\n"
        var last: String??
        for (time, x, y) in try truePositions() {
            let zone = RecordedWalk.zone(at: (Double(x)!, Double(y)!), in: original.site.zones)
            if last != .some(zone) { zones += "\(zone ?? ""),\(time),e7:8f:13:56:24:ce\n" }
            last = zone
        }
        try zones.write(toFile: directory + "/walk.zones.csv", atomically: true, encoding: .utf8)
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(recorded.positions.isEmpty)
        #expect(recorded.stays[beacon]?.map(\.zone) == ["quarter-4", "quarter-1"])
        #expect(recorded.stays[beacon] == original.stays[beacon])
        let score = try recorded.loudestReceiver()
        #expect(score.beaconSeconds == 15 && score.correctSeconds == 8 && score.trueStays == 2)
        // Without positions there is nothing to place: no x/y is scored.
        #expect(recorded.weightedCentroid().errors.isEmpty)
        #expect(throws: HarnessError.self) { try RecordedWalk.calibration([recorded]) }

        // Zones and positions both: the zones file's stays, the positions for x/y. Here the zones say the beacon
        // stood in quarter 2 throughout.
        try "time_s,transmitter,zone\n1581249733,e7:8f:13:56:24:ce,quarter-2\n".write(
            toFile: directory + "/walk.zones.csv", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: walk.replacingOccurrences(of: ".csv", with: ".positions.csv"), toPath: directory + "/walk.positions.csv")
        let both = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(both.stays[beacon]?.map(\.zone) == ["quarter-2"] && both.positions[beacon]?.count == original.positions[beacon]?.count)
        #expect(both.weightedCentroid() == original.weightedCentroid())
    }

    @Test func theDocumentedZonesFileScoresTheWalk() throws {
        let text = try String(contentsOfFile: repositoryRoot + "/docs/recordings.md", encoding: .utf8)
        let blocks = text.components(separatedBy: "```text\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
            .filter { $0.hasPrefix("time_s,transmitter,zone\n") }
        #expect(blocks.count == 1)
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try blocks.first?.write(toFile: directory + "/walk.zones.csv", atomically: true, encoding: .utf8)
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(recorded.stays[beacon]?.map(\.zone) == ["quarter-4", "quarter-1"])
        #expect(recorded.stays[beacon]?.last?.exit == recorded.end)
    }

    /// The survey of marked spots docs/recordings.md shows: two spots, each left at its empty line.
    @Test func theDocumentedSurveyOfSpotsReads() throws {
        let text = try String(contentsOfFile: repositoryRoot + "/docs/recordings.md", encoding: .utf8)
        let blocks = text.components(separatedBy: "```text\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
            .filter { $0.hasPrefix("time,transmitter,x_m,y_m\n") }
        #expect(blocks.count == 1)
        let directory = try makeTemporaryDirectory(prefix: "recorded-truth")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try blocks.first?.write(toFile: directory + "/walk.positions.csv", atomically: true, encoding: .utf8)
        let tracks = try RecordedTruth.positions(directory + "/walk.positions.csv", identities: [:])
        let track = try #require(tracks.first?.value)
        #expect(tracks.count == 1 && track.map(\.time) == [1_763_800_000, 1_763_800_035, 1_763_800_045, 1_763_800_080])
        #expect(track.map(\.x.isNaN) == [false, true, false, true] && track[2].x == 4 && track[2].y == 2)
    }

    @Test func positionsComeInAnyOrderWithTimesInISO8601() throws {
        let original = try RecordedWalk(recording: walk)
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var positions = "y_m,x_m,transmitter,time\n"
        for (time, x, y) in try truePositions() {
            let micros = Int64((Double(time)! * 1e6).rounded())
            let date = Date(timeIntervalSince1970: Double(micros / 1_000_000))
            let formatter = ISO8601DateFormatter()
            formatter.timeZone = TimeZone(secondsFromGMT: -5 * 3600)
            let whole = formatter.string(from: date).dropLast(6)
            positions += "\(y),\(x),E7:8F:13:56:24:CE/random,\(whole)" + String(format: ".%06lld-05:00", micros % 1_000_000) + "\n"
        }
        try positions.write(toFile: directory + "/walk.positions.csv", atomically: true, encoding: .utf8)
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(recorded.stays == original.stays)
        let track = try #require(recorded.positions[beacon])
        let expected = try #require(original.positions[beacon])
        #expect(track.count == expected.count)
        #expect(zip(track, expected).allSatisfy { abs($0.time - $1.time) < 1e-6 && $0.x == $1.x && $0.y == $1.y })
    }

    @Test func aTransmittersLinesAreTakenInTimeOrder() throws {
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            time_s,transmitter,zone
            1581249745,e7:8f:13:56:24:ce,quarter-1
            1581249733,tag-7,quarter-3
            1581249740,e7:8f:13:56:24:ce,quarter-4
            1581249750,e7:8f:13:56:24:ce,
            1581249740,e7:8f:13:56:24:ce,quarter-2

            """.write(toFile: directory + "/walk.zones.csv", atomically: true, encoding: .utf8)
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        // Of two lines of one time, the later in the file holds from then (quarter 2 at once, not quarter 4).
        #expect(recorded.stays[beacon]?.map { [$0.zone, "\($0.enter)", "\($0.exit)"] } == [
            ["quarter-2", "1581249740.0", "1581249745.0"], ["quarter-1", "1581249745.0", "1581249750.0"],
        ])
        #expect(recorded.stays["mac:DE:29:A3:8E:F5:17"]?.map(\.zone) == ["quarter-3"])
    }

    @Test func receiversLogsOneAfterAnotherReadAsTheRecording() throws {
        let original = try RecordedWalk(recording: walk)
        let lines = try String(contentsOfFile: walk, encoding: .utf8).split(separator: "\n")
        // Grouped by receiver, each receiver's lines in their own order: what concatenating each receiver's log gives.
        let byReceiver = Dictionary(grouping: lines.dropFirst()) { $0.split(separator: ",")[1] }
        let concatenated = ([lines[0]] + byReceiver.keys.sorted().flatMap { byReceiver[$0]! }).joined(separator: "\n") + "\n"
        let directory = try site(readings: concatenated)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: walk.replacingOccurrences(of: ".csv", with: ".positions.csv"), toPath: directory + "/walk.positions.csv")
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        func key(_ row: RecordingRow) -> String { "\(row.timeMicros) \(row.receiver) \(row.rssi)" }
        #expect(recorded.rows.count == 558)
        #expect(recorded.rows.map(key).sorted() == original.rows.map(key).sorted())
        #expect(zip(recorded.rows, recorded.rows.dropFirst()).allSatisfy { $0.timeMicros <= $1.timeMicros })
        #expect(recorded.start == original.start && recorded.end == original.end)
        let score = try recorded.loudestReceiver()
        #expect(score.beaconSeconds == 15 && score.correctSeconds == 8)
        #expect(recorded.weightedCentroid() == original.weightedCentroid())
    }

    /// The walk and its positions as a spreadsheet exports them in a locale whose decimal sign is a comma: a byte
    /// order mark, the header in capitals, semicolons, decimal commas and a carriage return ending each line.
    @Test func aRecordingAndItsTruthAsASpreadsheetExportsThem() throws {
        let original = try RecordedWalk(recording: walk)
        func exported(_ path: String) throws -> String {
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            let rows = lines.dropFirst().map { $0.replacingOccurrences(of: ",", with: ";").replacingOccurrences(of: ".", with: ",") }
            return "\u{FEFF}" + ([lines[0].uppercased().replacingOccurrences(of: ",", with: ";")] + rows).joined(separator: "\r\n") + "\r\n"
        }
        let directory = try site(readings: try exported(walk))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try exported(walk.replacingOccurrences(of: ".csv", with: ".positions.csv"))
            .write(toFile: directory + "/walk.positions.csv", atomically: true, encoding: .utf8)
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(recorded.rows.count == 558 && recorded.rows == original.rows)
        #expect(recorded.stays == original.stays && recorded.stays[beacon]?.count == 2)
        let track = try #require(recorded.positions[beacon])
        let expected = try #require(original.positions[beacon])
        #expect(track.count == expected.count && zip(track, expected).allSatisfy { $0 == $1 })
        #expect(recorded.weightedCentroid() == original.weightedCentroid())
    }

    /// The walk written with a column per receiver, as fingerprint datasets write readings: the same rows, the
    /// same score.
    @Test func aColumnPerReceiverReadsAsTheRecording() throws {
        let original = try RecordedWalk(recording: walk)
        let lines = try String(contentsOfFile: walk, encoding: .utf8).split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        let receivers = Set(lines.map { String($0[1]) }).sorted()
        var wide = "time_s,transmitter," + receivers.joined(separator: ",") + "\n"
        for fields in lines {
            wide += "\(fields[0]),\(fields[2])," + receivers.map { $0 == fields[1] ? String(fields[3]) : "" }.joined(separator: ",") + "\n"
        }
        let directory = try site(readings: wide)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: walk.replacingOccurrences(of: ".csv", with: ".positions.csv"), toPath: directory + "/walk.positions.csv")
        let recorded = try RecordedWalk(recording: directory + "/walk.csv")
        #expect(receivers.count == 12 && recorded.rows.count == 558 && recorded.rows == original.rows)
        let score = try recorded.loudestReceiver()
        #expect(score.beaconSeconds == 15 && score.correctSeconds == 8)
        #expect(recorded.weightedCentroid() == original.weightedCentroid())
    }

    /// A survey of marked spots: the beacon held at each for a while, then carried to the next, where it was on the
    /// way not known (a line with x_m and y_m empty). The readings on the way are left out of the calibration and
    /// of x/y; the stays move halfway through a way that ends in another zone.
    @Test func aSurveyOfMarkedSpotsLeavesOutTheWaysBetweenThem() throws {
        let original = try RecordedWalk(recording: walk)
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The walk as spots: each 6 s, where the beacon was then, held for 4 s, then 2 s not known.
        let track = try #require(original.positions[beacon])
        var spots = "time_s,transmitter,x_m,y_m\n"
        var known: [(from: Double, until: Double)] = []
        var time = try #require(track.first).time
        while time < original.end {
            var index = 0
            let spot = try #require(original.truePosition(of: beacon, at: time, from: &index))
            spots += "\(time),e7:8f:13:56:24:ce,\(spot.x),\(spot.y)\n\(time + 4),e7:8f:13:56:24:ce,,\n"
            known.append((time, time + 4))
            time += 6
        }
        try spots.write(toFile: directory + "/walk.positions.csv", atomically: true, encoding: .utf8)
        let survey = try RecordedWalk(recording: directory + "/walk.csv")
        let onSpots = survey.rows.filter { row in
            let second = Double(row.timeMicros) / 1e6
            return known.contains { $0.from <= second && second < $0.until }
        }
        #expect(!onSpots.isEmpty && onSpots.count < survey.rows.count)
        #expect(survey.calibrationSamples().count == onSpots.count)
        #expect(survey.weightedCentroid().errors.count < original.weightedCentroid().errors.count)
        // The stays: the walk's two, the move within 4 s of the truth's (a way is 2 s and a spot 4 s long).
        let stays = try #require(survey.stays[beacon])
        let truth = try #require(original.stays[beacon])
        #expect(stays.map(\.zone) == truth.map(\.zone) && abs(stays[0].exit - truth[0].exit) <= 4, "\(stays) against \(truth)")
        // A way's middle: the spot before lies in quarter 4, the one after in quarter 1.
        let move = try #require(known.indices.dropLast().first { index in
            var at = 0
            let before = survey.truePosition(of: beacon, at: known[index].from + 0.001, from: &at)
            let after = survey.truePosition(of: beacon, at: known[index + 1].from + 0.001, from: &at)
            return before.flatMap { survey.zone(at: $0) } != after.flatMap { survey.zone(at: $0) }
        })
        #expect(stays[0].exit == known[move].until + 1)
        var index = 0
        #expect(survey.truePosition(of: beacon, at: known[move].until + 1, from: &index) == nil)
    }

    @Test(arguments: [
        ("walk.zones.csv", "time_s,transmitter,zone\n1,e7:8f:13:56:24:ce,kitchen\n",
            "line 2: zone 'kitchen' is none of the site's: quarter-1, quarter-2, quarter-3, quarter-4 (empty for none)"),
        ("walk.zones.csv", "# rooms as noted on the walk\ntime_s,transmitter,room\n",
            "line 2: the header must name the columns time_s (or time_ms or time or time_utc),transmitter,zone, in any order, not 'time_s,transmitter,room'"),
        ("walk.zones.csv", "time,transmitter,zone\n2021-08-03T16:54:12,e7:8f:13:56:24:ce,quarter-1\n",
            "line 2: time '2021-08-03T16:54:12' is no ISO 8601 time with its offset, such as 2021-08-03T16:54:12.227Z or +02:00 "
                + "(a column of times in UTC without one is named time_utc)"),
        ("walk.positions.csv", "time_s,transmitter,x_m,y_m\n1,e7:8f:13:56:24:ce,3.5\n", "line 2: 3 fields where the header has 4"),
        ("walk.positions.csv", "time_s,transmitter,x_m,y_m\n1,e7:8f:13:56:24:ce,3.5,north\n",
            "line 2: x_m '3.5' and y_m 'north' must be metres on the floor plan"),
        ("walk.positions.csv", "time_s,transmitter,x_m,y_m\n1,e7:8f:13:56:24:ce,,4\n",
            "line 2: x_m '' and y_m '4' must be metres on the floor plan (both empty where it is not known)"),
        ("walk.positions.csv", "time_s,transmitter,x_m,y_m\n1,e7:8f:13:56:24:cg,3.5,4\n", "line 2: transmitter 'e7:8f:13:56:24:cg' is no address"),
        ("walk.positions.csv", "", "the header must name the columns time_s (or time_ms or time or time_utc),transmitter,x_m,y_m"),
    ])
    func aTruthThatCannotBeReadIsRefusedWithItsLine(file: String, text: String, problem: String) throws {
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try text.write(toFile: directory + "/" + file, atomically: true, encoding: .utf8)
        let error = #expect(throws: HarnessError.self) { try RecordedWalk(recording: directory + "/walk.csv") }
        #expect(error?.description.hasPrefix(directory + "/" + file + ": " + problem) == true, "\(error?.description ?? "")")
    }

    @Test func aRecordingWithoutTruthSaysWhatItLacks() throws {
        let directory = try site()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: HarnessError.self) { try RecordedWalk(recording: directory + "/walk.csv") }
        #expect(
            error?.description
                == "\(directory)/walk.csv has no ground truth beside it: \(directory)/walk.positions.csv or \(directory)/walk.zones.csv")
    }
}
