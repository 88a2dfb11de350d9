import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import Foundation
import LocalServers
import Logging
import TestServers
import Testing

/// A recording of a real office (examples/recordings/open-office) replayed through agents, a real mosquitto, the
/// ingest and a real PostgreSQL: every reading is stored once, under the agent that heard it.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct RecordingReplayTests {
    let office = repositoryRoot + "/examples/recordings/open-office"

    @Test func aRecordedWalkIsStoredWholeUnderTheReceiversThatHeardIt() async throws {
        let officeSites = try SitesConfiguration.load(path: office + "/sites.yaml")
        let harness = try await IngestHarness.start { configuration in
            configuration.sites = SitesConfiguration(
                sites: configuration.sites.sites + officeSites.sites, beacons: configuration.sites.beacons + officeSites.beacons)
            // The recording ends with the test: its last minute's positions are kept at the stop.
            configuration.finishZonesAtStop = true
        }
        let recording = office + "/straight-04.csv"
        var reader = RecordingReader()
        var expected: [String: (count: Int, rssiSum: Int)] = [:]
        var readings: [RecordingRow] = []
        for line in try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n") {
            for row in try reader.read(line: line).rows {
                expected[row.receiver, default: (0, 0)].count += 1
                expected[row.receiver, default: (0, 0)].rssiSum += Int(row.rssi)
                readings.append(row)
            }
        }
        #expect(expected.count == 12 && expected.values.reduce(0) { $0 + $1.count } == 558)

        let spools = try makeTemporaryDirectory(prefix: "recording-spools")
        defer { try? FileManager.default.removeItem(atPath: spools) }
        // One receiver as docs/recordings.md runs it, with the agent's own executable (from a directory of its own,
        // where its default spool goes, the recording's path made absolute and the broker the test's).
        let documented = try Self.documentedCommand()
        let arguments = documented.dropFirst().map {
            $0.replacingOccurrences(of: "examples/", with: repositoryRoot + "/examples/")
                .replacingOccurrences(of: "mqtt://127.0.0.1:1883", with: "mqtt://127.0.0.1:\(harness.broker.port)")
        }
        let documentedReceiver = try #require(documented.firstIndex(of: "--agent").map { documented[$0 + 1] })
        // The other receivers replay the same readings written as each receiver's log after the one before (each
        // in time order, the whole not), as concatenating a site's receivers' own logs gives.
        let lines = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n")
        let byReceiver = Dictionary(grouping: lines.dropFirst()) { $0.split(separator: ",")[1] }
        let logs = spools + "/receivers-logs.csv"
        try (([lines[0]] + byReceiver.keys.sorted().reversed().flatMap { byReceiver[$0]! }).joined(separator: "\n") + "\n")
            .write(toFile: logs, atomically: true, encoding: .utf8)
        let agentProgram = Task {
            try await runProgram(try #require(beaconflowAgentExecutable), Array(arguments), currentDirectory: spools)
        }
        let outcomes = try await withThrowingTaskGroup(of: Agent.Outcome.self) { group in
            for receiver in expected.keys where receiver != documentedReceiver {
                var configuration = try AgentConfiguration(
                    siteID: "office", agentID: receiver, broker: BrokerAddress(host: "127.0.0.1", port: harness.broker.port),
                    spoolDirectory: spools + "/" + receiver)
                // The recording kept no advertising data: the beacon is a device known by its address.
                configuration.extractor.includeUnknownDevices = true
                configuration.drainTimeout = .seconds(120)
                let agent = Agent(
                    configuration: configuration, source: RecordingReplaySource(path: logs, receiver: receiver, speed: .maximum, logger: Logger(label: receiver)),
                    logger: Logger(label: receiver))
                group.addTask { try await agent.run() }
            }
            var outcomes: [Agent.Outcome] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.count == 11 && outcomes.allSatisfy { $0 == .finished }, "\(outcomes)")
        let program = try await agentProgram.value
        #expect(program.status == 0, "\(program.errors.suffix(3000))")

        let stored = try harness.query(
            "SELECT agent_id, count(*), sum(rssi) FROM beaconflow.sightings WHERE site_id = 'office' GROUP BY 1 ORDER BY 1")
        #expect(stored.map { [$0[0] ?? "", $0[1] ?? "", $0[2] ?? ""] }
            == expected.sorted { $0.key < $1.key }.map { [$0.key, "\($0.value.count)", "\($0.value.rssiSum)"] })
        #expect(try harness.query("SELECT DISTINCT beacon_id FROM beaconflow.sightings WHERE site_id = 'office'") == [["mac:E7:8F:13:56:24:CE"]])
        // The office has a floor: the beacon's latest position, on the floor, with each quarter's share of it.
        let positions = try harness.query(
            """
            SELECT beacon_id, x, y, error_m, (SELECT sum(value::float8) FROM jsonb_each_text(zone_probabilities))
            FROM beaconflow.beacon_positions WHERE site_id = 'office'
            """)
        let position = try #require(positions.first, "no position")
        #expect(positions.count == 1 && position[0] == "mac:E7:8F:13:56:24:CE")
        let (x, y, error, shares) = (Double(position[1] ?? "") ?? -1, Double(position[2] ?? "") ?? -1, Double(position[3] ?? "") ?? -1, Double(position[4] ?? "") ?? 0)
        #expect((0...20.67).contains(x) && (0...17.65).contains(y) && error > 0 && abs(shares - 1) < 0.03, "\(position)")
        try await Self.expectWrittenBack(readings, site: "office", database: harness.database.conninfo, directory: spools)
        try await harness.stop()
        // The history: a position each 10 s of the 24 s walk, under a byte a sighting stored (each row with its line
        // pointer and its primary key's index entry).
        #expect(try harness.query("SELECT count(*) FROM beaconflow.beacon_position_history WHERE site_id = 'office'") == [["3"]])
        let bytes = try harness.query(
            """
            SELECT sum(pg_column_size(m.*) + 4 + 8 + pg_column_size(row(m.site_id, m.beacon_id, m.minute)))
            FROM beaconflow.beacon_position_minutes m WHERE site_id = 'office'
            """)
        let perSighting = (Double(bytes.first?[0] ?? "") ?? .infinity) / 558
        #expect(perSighting < 1, "\(perSighting) bytes a sighting")
    }

    /// `beaconflow recording` of the site over the readings' window writes them back: each under its receiver, with
    /// its RSSI, at its time to the millisecond the agents send, the beacon by the id the ingest stored.
    static func expectWrittenBack(_ readings: [RecordingRow], site: String, database: String, directory: String) async throws {
        let first = try #require(readings.map(\.timeMicros).min())
        let last = try #require(readings.map(\.timeMicros).max())
        func iso(_ micros: Int64) -> String {
            ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(micros / 1_000_000)))
        }
        let path = directory + "/written-back.csv"
        let result = try await runProgram(
            try #require(beaconflowExecutable),
            ["recording", "--site", site, "--from", iso(first), "--until", iso(last + 1_000_000), "--database", database, "--output", path])
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.errors.contains("\(readings.count) readings; beacons 1, agents \(Set(readings.map(\.receiver)).count)"), "\(result.errors)")
        var reader = RecordingReader()
        let written = try RecordingColumns.lines(try String(contentsOfFile: path, encoding: .utf8)).flatMap { try reader.read(line: $0).rows }
        let beacons = Set(written.map(\.address))
        #expect(beacons == [DeviceAddress(value: 0xE78F_1356_24CE, kind: .random)], "\(beacons)")
        func key(_ row: RecordingRow) -> (String, Int64, Int8) { (row.receiver, row.timeMicros, row.rssi) }
        let sortedWritten = written.sorted { key($0) < key($1) }
        let sortedRead = readings.sorted { key($0) < key($1) }
        #expect(sortedWritten.count == sortedRead.count)
        for (back, original) in zip(sortedWritten, sortedRead) {
            #expect(
                back.receiver == original.receiver && back.rssi == original.rssi && abs(back.timeMicros - original.timeMicros) < 1_000,
                "\(back) against \(original)")
        }
    }

    /// The agent's command line in docs/recordings.md, its continuation lines joined.
    static func documentedCommand() throws -> [String] {
        let text = try String(contentsOfFile: repositoryRoot + "/docs/recordings.md", encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("beaconflow-agent ") }) else {
            throw LocalServerError("docs/recordings.md has no beaconflow-agent command")
        }
        var command = ""
        for line in lines[start...] {
            command += line.trimmingCharacters(in: .whitespaces)
            guard command.hasSuffix("\\") else { break }
            command = String(command.dropLast()) + " "
        }
        return command.split(separator: " ").map(String.init)
    }
}
