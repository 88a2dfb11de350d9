import AccuracyHarness
import ArgumentParser
import BeaconAgent
import Foundation
import LocalServers
import Logging

struct AccuracyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accuracy",
        abstract: "Score zone methods against a simulated deployment's ground truth, through the real pipeline.",
        discussion: """
            For each method, plays the scenario through simulated agents, a throwaway mosquitto, the ingest and a
            throwaway PostgreSQL (all on loopback, removed afterwards), then compares the visits and zone_occupancy
            views with the scenario's ground truth. Prints one Markdown table row per method and site:

              zone accuracy     beacon-seconds in the right zone (the first 5 s of each stay not counted)
              false changes     visits beyond the true stays, per beacon-hour
              enter/exit error  median |recorded − true| time of the visit that matches each stay, seconds
              occupancy error   mean |counted − true| beacons per zone-minute
              missed stays      true stays without any visit in their zone

            Methods: nearest (raw RSSI, loudest agent wins at once), kalman (Kalman-smoothed RSSI, at once),
            hysteresis (raw RSSI, challenger 3 dB louder for 4 s), chosen (Kalman and hysteresis: the defaults).
            Needs mosquitto and PostgreSQL installed (scripts/install-deps).

            Example:
              beaconflow accuracy --scenario deploy/scenarios/boundaries.yaml
              beaconflow accuracy --scenario deploy/scenarios/demo.yaml --method nearest,chosen --json
            """
    )

    @Option(help: "The scenario (YAML).") var scenario: String
    @Option(help: "Comma-separated methods: nearest, kalman, hysteresis, chosen.") var method = "nearest,kalman,hysteresis,chosen"
    @Flag(help: "One JSON object per method and site instead of the table.") var json = false
    @Option(help: "Log level of the pipeline's own logs: trace, debug, info, notice, warning, error (default), critical.")
    var logLevel = "error"

    func run() async throws {
        let loaded: Scenario
        do {
            loaded = try Scenario.load(path: scenario)
        } catch {
            throw ValidationError(error.message)
        }
        let methods = try method.split(separator: ",").map { name in
            guard let method = ZoneMethod.named(String(name)) else {
                throw ValidationError("unknown method '\(name)'; known: \(ZoneMethod.all.map(\.name).joined(separator: ", "))")
            }
            return method
        }
        guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        bootstrapLogging(level: level)
        let logger = Logger(label: "beaconflow.accuracy")
        guard MosquittoServer.executable != nil, PostgresServer.binaries != nil else {
            FileHandle.standardError.write(Data("beaconflow accuracy: needs mosquitto and PostgreSQL (scripts/install-deps)\n".utf8))
            throw ExitCode(69)
        }
        let database = try await PostgresServer.start()
        if !json {
            print("| method | site | zone accuracy | false changes / beacon-h | enter error (median) | exit error (median) | occupancy error / zone-minute | missed stays |")
            print("|---|---|---:|---:|---:|---:|---:|---:|")
        }
        for method in methods {
            let scores = try await AccuracyRun(scenario: loaded, method: method).run(database: database, logger: logger)
            for site in loaded.sites.map(\.id) {
                guard let score = scores[site] else { continue }
                print(json ? Self.json(score, method: method, site: site) : Self.row(score, method: method, site: site))
            }
        }
    }

    static func row(_ score: AccuracyScore, method: ZoneMethod, site: String) -> String {
        func seconds(_ value: Double?) -> String { value.map { String(format: "%.1f s", $0) } ?? "–" }
        return String(
            format: "| %@ | %@ | %.1f %% | %.2f | %@ | %@ | %.3f | %d of %d |", method.name, site, score.zoneAccuracy * 100,
            score.falseChangesPerBeaconHour, seconds(score.medianEnterErrorSeconds), seconds(score.medianExitErrorSeconds),
            score.occupancyMeanAbsoluteError, score.missedStays, score.trueStays)
    }

    static func json(_ score: AccuracyScore, method: ZoneMethod, site: String) -> String {
        func number(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "null" }
        return """
            {"method": "\(method.name)", "site_id": "\(site)", "zone_accuracy": \(number(score.zoneAccuracy)), \
            "beacon_seconds": \(score.beaconSeconds), "visits": \(score.visits), "true_stays": \(score.trueStays), \
            "missed_stays": \(score.missedStays), "false_changes_per_beacon_hour": \(number(score.falseChangesPerBeaconHour)), \
            "median_enter_error_s": \(number(score.medianEnterErrorSeconds)), \
            "median_exit_error_s": \(number(score.medianExitErrorSeconds)), \
            "occupancy_mean_absolute_error": \(number(score.occupancyMeanAbsoluteError)), "zone_minutes": \(score.zoneMinutes)}
            """
    }
}
