import ArgumentParser
import BeaconAgent
import Foundation
import LibPQ
import Reporting

struct RecordingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recording",
        abstract: "Write what a site's agents heard in a window of time as a recording.",
        discussion: """
            Reads the public sightings view (a role granted beaconflow_reader is enough) and writes every agent's \
            reading of every advert of the site from --from up to --until as a recording (docs/recordings.md): \
            time_s,receiver,transmitter,rssi, the receiver being the agent and the transmitter the beacon id, in \
            time order. A walk through one's own site, recorded by its own agents, is then a recording to \
            calibrate on (beaconflow calibrate) or to score (beaconflow accuracy --recording), with its true \
            positions or zones and the sites file beside it. A beacon whose id no replay can send (eid:, anon:) \
            is left out, and said with its count of readings.

            Examples:
              beaconflow recording --site hq \\
                --from 2025-11-22T08:26:40Z --until 2025-11-22T08:27:00Z \\
                --database postgresql://grafana@127.0.0.1/beaconflow --output walk.csv
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(help: "The site whose agents' readings to write.") var site: String
    @Option(help: "The window's start: an ISO 8601 date and time with its offset from UTC (2025-11-22T08:26:40Z).") var from: String
    @Option(help: "The window's end, not included, as --from.") var until: String
    @Option(help: "Only this beacon's readings, by its beacon id (repeatable).") var beacon: [String] = []
    @Option(help: "The file to write (default: standard output).") var output: String?

    func validate() throws {
        let (start, end) = try window()
        guard start < end else { throw ValidationError("--until must be later than --from") }
    }

    /// The window in Unix microseconds.
    private func window() throws -> (from: Int64, until: Int64) {
        func micros(_ text: String, _ option: String) throws -> Int64 {
            guard let micros = try? RecordingTime.iso8601.micros(Substring(text)) else {
                throw ValidationError("\(option): '\(text)' is no ISO 8601 date and time with its offset from UTC, such as 2025-11-22T08:26:40Z or +01:00")
            }
            return micros
        }
        return (try micros(from, "--from"), try micros(until, "--until"))
    }

    func run() throws {
        let (start, end) = try window()
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection(databaseOptions.database)
        } catch {
            FileHandle.standardError.write(Data("beaconflow recording: \(error)\n".utf8))
            throw ExitCode(error.isConnectionFailure ? 69 : 1)
        }
        let out: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil), let file = FileHandle(forWritingAtPath: output) else {
                throw ValidationError("--output: cannot write \(output)")
            }
            out = file
        } else {
            out = FileHandle.standardOutput
        }
        var written = (readings: 0, beacons: Set<String>(), agents: Set<String>())
        var leftOut: [String: Int] = [:]
        // Whether a replay can send each beacon id, read once an id.
        var replayable: [String: Bool] = [:]
        do {
            out.write(Data(("# site \(site), \(from) to \(until), as its agents heard it\n" + RecordingWriter.header(data: false)).utf8))
            try SiteRecording.read(connection, site: site, fromMicros: start, untilMicros: end, beacons: beacon) { readings in
                var text = ""
                for reading in readings {
                    let sendable = replayable[reading.beaconID] ?? {
                        let sendable = (try? RecordedTransmitter.read(Substring(reading.beaconID))) != nil
                        replayable[reading.beaconID] = sendable
                        return sendable
                    }()
                    guard sendable else {
                        leftOut[reading.beaconID, default: 0] += 1
                        continue
                    }
                    text += RecordingWriter.line(
                        micros: reading.micros, receiver: reading.agentID, transmitter: reading.beaconID, rssi: reading.rssi)
                    written.readings += 1
                    written.beacons.insert(reading.beaconID)
                    written.agents.insert(reading.agentID)
                }
                out.write(Data(text.utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("beaconflow recording: \(error)\n".utf8))
            throw ExitCode((error as? PostgresError)?.isConnectionFailure == true ? 69 : 1)
        }
        if output != nil { try out.close() }
        var summary = "beaconflow recording: \(written.readings) readings; beacons \(written.beacons.count), agents \(written.agents.count)\n"
        for (beaconID, count) in leftOut.sorted(by: { $0.key < $1.key }).prefix(20) {
            summary += "beaconflow recording: left out \(count) readings of \(beaconID): a replay cannot send its id\n"
        }
        if leftOut.count > 20 { summary += "beaconflow recording: left out the readings of \(leftOut.count - 20) more such beacons\n" }
        FileHandle.standardError.write(Data(summary.utf8))
    }
}
