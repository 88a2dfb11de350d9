import AccuracyHarness
import ArgumentParser
import BeaconAgent
import BeaconSimulation
import BeaconWire
import Foundation

struct SimulateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Play a simulated deployment into capture files (one btsnoop per agent, and the ground truth), or a room trial into recordings.",
        discussion: """
            Writes <out>/<site>-<agent>.btsnoop (datalink 1002, the HCI events each agent would have received) \
            and <out>/truth.csv (beacon_id,site_id,zone_id,enter_ts,exit_ts). The same scenario and seed always give \
            the same files. Replay them with `beaconflow agent --source btsnoop:...`, or play a scenario live with \
            `beaconflow agent --source sim:SCENARIO`.

            The scenario format is documented in Sources/BeaconSimulation/Scenario.swift and README.md.

            With --room instead, a room trial in the JSON of the ESPresense accuracy harness (rooms, stations, \
            tracks: docs/recordings.md) becomes recordings with their true positions: survey.csv, a calibration walk \
            of the room; sites.yaml, with the radio model `beaconflow calibrate` fits on it; and for each track \
            <track>.csv, one transmitter walking it for each of --seeds at once, and <track>-without-<station>.csv \
            with each station silent in turn. Score them with `beaconflow accuracy --recording`.

            Examples:
              beaconflow simulate --scenario deploy/scenarios/demo.yaml --out sim-out
              beaconflow simulate --room examples/rooms/two-rooms-6x4.json \\
                --out room-out
            """
    )

    @Option(help: "The scenario (YAML).") var scenario: String?
    @Option(help: "A room trial (JSON) instead.") var room: String?
    @Option(help: "With --room: a transmitter for each seed, as a range (1-5) or a list (1,4,7).") var seeds = "11-30"
    @Option(help: "Directory for what is written (created if missing).") var out: String

    func run() throws {
        if let room {
            guard scenario == nil else { throw ValidationError("give --scenario or --room, not both") }
            let seedList = try AccuracyCommand.seeds(seeds)
            do {
                for path in try RoomTrial(path: room).write(to: out, seeds: seedList) { print(path) }
            } catch {
                throw ValidationError("\(error)")
            }
            return
        }
        guard let scenario else { throw ValidationError("give --scenario or --room") }
        let simulator: Simulator
        do {
            simulator = try Simulator(try Scenario.load(path: scenario))
        } catch {
            throw ValidationError(error.message)
        }
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        for site in simulator.scenario.sites {
            for agent in site.agents {
                var capture = Data(BtsnoopWriter.fileHeader)
                var adverts = 0
                try simulator.run(site: site.id, agent: agent.id) { reports in
                    for timed in reports {
                        let event = AdvertisingReportDecoder.legacyReportEvent(
                            eventType: UInt8(timed.report.eventType), address: timed.report.address,
                            rssi: timed.report.rssi ?? -127, data: timed.report.data)
                        capture.append(
                            contentsOf: BtsnoopWriter.record(
                                kind: .event, received: true, packet: event, timestamp: timed.timeMicros))
                    }
                    adverts += reports.count
                }
                let path = "\(out)/\(site.id)-\(agent.id).btsnoop"
                try capture.write(to: URL(fileURLWithPath: path))
                print("\(path): \(adverts) adverts")
            }
        }
        try simulator.groundTruthCSV.write(toFile: "\(out)/truth.csv", atomically: true, encoding: .utf8)
        print("\(out)/truth.csv")
    }
}
