import AccuracyHarness
import ArgumentParser
import BeaconAgent
import BeaconMessaging
import BeaconPositions
import BeaconSimulation
import CommandLineSupport
import Foundation
import LocalServers
import Logging

struct AccuracyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accuracy",
        abstract: "Score zone methods against simulated deployments' ground truth.",
        discussion: """
            With --scenario, plays that scenario for each method through simulated agents, a throwaway mosquitto, the ingest and a throwaway PostgreSQL (all on loopback, removed afterwards), then compares the visits and zone_occupancy views with the scenario's ground truth. Methods: nearest (raw RSSI, loudest agent wins at once), kalman (Kalman-smoothed RSSI, at once), hysteresis (raw RSSI with the default switching rule), chosen (the ingest's defaults: the history of the live decisions the likeliest path over 120 s confirms), chosen-loudest (the defaults with each zone as loud as its loudest agent), chosen-path (the defaults with the history decided by the likeliest path: zone_history: path), chosen-crossings (the defaults with the history of the live decisions as they are: zone_history: crossings, history_lag_s: 60; nearest, kalman and hysteresis store theirs so too), chosen-position (zones scored by position, the default of a site with an open floor: the simulated sites are scored by patterns as sites with walls are, their receivers not placed). Needs mosquitto and PostgreSQL installed (scripts/install-deps).

            With --preset, compares the ingest's defaults (and chosen-loudest, chosen-path, chosen-crossings) with peers' methods on generated scenarios of that preset (easy, hard, harsh: one site of 2×3 rooms, 40 beacons; large: two sites of 3×3 rooms with harsh radio, 80 beacons; or all; an hour) for each seed and site, without servers: the same smoothing and zone tracker as the ingest, fed what the simulated agents hear. Peers' methods: nearest, kalman (room-assistant: Q 0.008, R 4, then nearest), kalman-bermuda (that with Bermuda's switching rule), trimmed-mean (ESPresense: 15 s, Tukey fences), one-euro (the 1€ filter). Prints the mean over seeds and sites with the lowest and highest in brackets.

            With --recording, plays a recording of real radio (docs/recordings.md: the readings, sites.yaml beside them, and the truth: <name>.positions.csv the true positions, <name>.zones.csv the true zones, or both) through agents, a throwaway mosquitto, the ingest and a throwaway PostgreSQL with that sites file as it is (chosen; with --set, the zone keys and the radio model's keys given replace its own), and scores nearest on the same readings; the true stays are the zones file's, else the zones the positions lie in. Where the sites file gives the receivers' positions (at) and the truth gives positions, also the x/y error of the positions the ingest stored (beacon_position_history; with the median of their error_m and the share of them whose truth lies within it) and of the weighted centroid of the three loudest receivers (received power as weights), each second.

            Columns: zone accuracy (beacon-seconds in the right zone, the first 5 s of each stay not counted); false changes (visits beyond the true stays, per beacon-hour); enter and exit error (median |recorded − true| time of the visit that matches each stay); occupancy within one (zone-minutes counted within ±1 of the truth, a beacon counting where it spent at least 30 s of the minute); occupancy exact (zone-minutes counted exactly right); occupancy error (mean |counted − true| per zone-minute); missed stays (true stays without any visit in their zone); phantom beacons (through the pipeline: beacons stored of their own, with sightings, telemetry or visits, that are no beacon of the scenario: an address whose identity the pipeline did not tie to it); address rows per hour (through the pipeline: sighting and telemetry rows stored under such addresses, per hour of the run).

            Examples:
              beaconflow accuracy --scenario deploy/scenarios/boundaries.yaml
              beaconflow accuracy --scenario deploy/scenarios/demo.yaml \\
                --method nearest,chosen --json
              beaconflow accuracy --preset hard --seeds 3 --duration 120 --beacons 12
              beaconflow accuracy --scenario deploy/scenarios/demo.yaml --offline
              beaconflow accuracy \\
                --recording examples/recordings/open-office/straight-04.csv
              beaconflow accuracy --battery-fleet --beacons 20 --days 120 --seeds 1
            """
    )

    @Option(help: "The scenario (YAML), played through the real pipeline.") var scenario: String?
    @Option(help: "Generated scenarios instead: easy, hard, harsh, large or all, scored without servers.") var preset: String?
    @Option(help: "A recording with its true positions or zones instead (repeatable), played through the real pipeline.")
    var recording: [String] = []
    @Option(help: "With --recording: a recording with true positions (repeatable) whose readings fit a model of the radio (power at 1 m, path-loss exponent, each receiver's offset), for positions from a grid filter on the recordings scored; keep it apart from them.")
    var calibration: [String] = []
    @Flag(help: "With --recording: play the recordings back to back as one, 10 s apart (a recording given twice plays twice), so that the site's history learns over all of them.")
    var backToBack = false
    @Flag(help: "Instead: a simulated fleet's batteries over months (--beacons, 200 by default; --days; --seeds), each day's forecast of days left from charge counting and the voltage curve, the same with the outdoor cells' forecast nights (weather forecasts of ten nights, as wrong as published ones), from the voltage's trend as the ingest extrapolated it before (a straight line, voltage-trend) and as it does for beacons without counters (along the chemistry's curve, voltage-on-curve), and from the trend of the percent a beacon reporting only a percent sends (percent-trend), against when each cell really stopped its beacon; beside the fleet, 10 % more beacons first heard with counters restarted on a used cell, scored apart; without servers.")
    var batteryFleet = false
    @Option(help: "With --battery-fleet: days of the fleet's life.") var days = 300
    @Flag(help: "With --preset: play each generated scenario through the real pipeline (agents, mosquitto, the ingest, PostgreSQL) with the defaults, instead of every method without servers. With --battery-fleet: play each seed's fleet through it (its TLM and identity frames replayed by an agent as fast as the pipeline takes them) and compare each beacon's beacon_health at the end with the harness's forecast.")
    var throughPipeline = false
    @Flag(help: "With --scenario: score the ingest's defaults and peers' methods without servers, as with --preset.")
    var offline = false
    @Option(help: "Seeds of the generated scenarios: a range (1-5) or a list (1,4,7).") var seeds = "1-5"
    @Option(help: "Beacons of each generated scenario, over its sites (default: 40, large 80).") var beacons: Int?
    @Option(help: "Seconds of each generated scenario.") var duration = 3600
    @Option(help: "Comma-separated methods (with --scenario: nearest, kalman, hysteresis, chosen, chosen-loudest, chosen-path, chosen-crossings, chosen-position; with --preset or --offline: chosen, chosen-loudest, chosen-path, chosen-crossings, chosen-position, nearest, kalman, kalman-bermuda, trimmed-mean, one-euro). Default: all of them but chosen-position.")
    var method: String?
    @Option(name: .customLong("set"), help: "A sites-file key for every site, as key=value, applied to the chosen method (repeatable): for trying settings, e.g. --set zone_switch_evidence_db_s=20.")
    var siteKeys: [String] = []
    @Flag(help: "One JSON object per method and site instead of the table.") var json = false
    @Option(help: "Log level of the pipeline's own logs.") var logLevel: Logger.Level = .error

    func run() async throws {
        if batteryFleet { return throughPipeline ? try await runBatteryFleetThroughPipeline() : try runBatteryFleet() }
        if !recording.isEmpty {
            guard scenario == nil, preset == nil else { throw ValidationError("give --recording, --scenario or --preset, not two") }
            return try await runRecordings(recording)
        }
        guard !throughPipeline || preset != nil else { throw ValidationError("--through-pipeline goes with --preset") }
        switch (scenario, preset) {
        case (let path?, nil) where offline:
            do {
                try runOffline([("scenario", try Scenario.load(path: path))])
            } catch let error as ConfigurationError {
                throw ValidationError(error.message)
            }
        case (let path?, nil): try await runPipeline(path)
        case (nil, let preset?): try await runGenerated(preset)
        default: throw ValidationError("give either --scenario or --preset")
        }
    }

    /// Recordings through the real pipeline with their sites file's settings, and nearest on the same readings.
    func runRecordings(_ paths: [String]) async throws {
        let walks: [RecordedWalk]
        let work = try makeTemporaryDirectory(prefix: "recordings")
        defer { try? FileManager.default.removeItem(atPath: work) }
        do {
            walks = backToBack ? [try RecordedWalk(backToBack: paths, directory: work)] : try paths.map { try RecordedWalk(recording: $0) }
            for walk in walks { walk.sayReceiversWithoutAgent(command: "accuracy") }
        } catch {
            throw ValidationError("\(error)")
        }
        let (logger, database) = try await startPipelineRun(column: "recording")
        var centroids: [(name: String, errors: RecordedWalk.PositionErrors)] = []
        var grids: [(name: String, errors: RecordedWalk.PositionErrors)] = []
        var stored: [(name: String, errors: RecordedWalk.PositionErrors)] = []
        let calibrated = try calibration.isEmpty ? nil : fitRadioModel(calibration)
        for walk in walks {
            let name = backToBack ? "\(paths.count) back to back" : ((walk.path as NSString).lastPathComponent as NSString).deletingPathExtension
            let settings = try chosen().siteKeys
            let scores = [
                ("chosen", try await walk.runThroughPipeline(database: database, logger: logger, settings: settings)),
                ("nearest", walk.loudestReceiver()),
            ]
            for (method, score) in scores {
                print(json ? Self.json(score, method: method, site: name) : Self.row(score, method: method, site: name))
            }
            if walk.site.agents.contains(where: { $0.position != nil }) {
                // x/y where the truth gives positions, not only zones.
                let scored = !walk.positions.isEmpty
                if scored { centroids.append((name, walk.weightedCentroid())) }
                if scored, !scores[0].1.positions.errors.isEmpty { stored.append((name, scores[0].1.positions)) }
                if let calibrated {
                    let grid = walk.gridPositions(model: calibrated.model, offsets: calibrated.offsets, map: calibrated.map)
                    if scored { grids.append((name, grid.errors)) }
                    print(json ? Self.json(grid.zones, method: "grid", site: name) : Self.row(grid.zones, method: "grid", site: name))
                }
            }
        }
        // Where the receivers' positions are known: the usual baseline of x/y.
        guard !centroids.isEmpty else { return }
        func metres(_ value: Double?) -> String { value.map { String(format: "%.2f m", $0) } ?? "–" }
        func number(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "null" }
        if !json {
            print("\n| method | recording | x/y error (median) | x/y error (p95) | zone of the estimate wrong | error_m (median) | truth within error_m | estimates |")
            print("|---|---|---:|---:|---:|---:|---:|---:|")
        }
        // Each second for the baselines; for `chosen`, the positions the ingest stored (one each 10 s a beacon).
        for (method, results) in [("weighted-centroid", centroids), ("grid", grids), ("chosen", stored)] {
            for (name, errors) in results {
                print(
                    json
                        ? #"{"method": "\#(method)", "recording": "\#(name)", "xy_error_median_m": \#(number(errors.median)), "xy_error_p95_m": \#(number(errors.p95)), "zone_miss_rate": \#(number(errors.roomMissRate)), "error_m_median_m": \#(number(errors.medianSpread)), "within_error_m_rate": \#(number(errors.withinSpreadRate)), "estimates": \#(errors.errors.count)}"#
                        : "| \(method) | \(name) | \(metres(errors.median)) | \(metres(errors.p95)) | \(errors.roomMissRate.map { String(format: "%.1f %%", $0 * 100) } ?? "–") | \(metres(errors.medianSpread)) | \(errors.withinSpreadRate.map { String(format: "%.0f %%", $0 * 100) } ?? "–") | \(errors.errors.count) |")
            }
        }
    }

    /// Generated scenarios, every method, no servers.
    func runGenerated(_ presetName: String) async throws {
        let presets = presetName == "all" ? ScenarioFamily.presets : try ScenarioFamily.preset(named: presetName).map { [$0] }
            ?? { throw ValidationError("unknown --preset '\(presetName)'; known: easy, hard, harsh, large, all") }()
        let seedList = try Self.seeds(seeds)
        guard (1...1000).contains(beacons ?? 1), duration >= 60, duration <= 86_400 else {
            throw ValidationError("--beacons must be 1-1000 and --duration 60-86400")
        }
        var scenarios: [(group: String, scenario: Scenario)] = []
        for preset in presets {
            for seed in seedList {
                scenarios.append((preset.name, try ScenarioFamily.scenario(preset, seed: seed, beacons: beacons, durationSeconds: duration)))
            }
        }
        guard throughPipeline else { return try runOffline(scenarios) }
        let method = try chosen()
        let (logger, database) = try await startPipelineRun(column: "site")
        for (group, scenario) in scenarios {
            let scores = try await AccuracyRun(scenario: scenario, method: method).run(database: database, logger: logger)
            for site in scenario.sites.map(\.id) {
                guard let score = scores[site] else { continue }
                let name = scenario.sites.count == 1 ? "\(group) seed \(scenario.seed)" : "\(group) seed \(scenario.seed) \(site)"
                print(json ? Self.json(score, method: method.name, site: name) : Self.row(score, method: method, site: name))
            }
        }
    }

    /// Battery forecasts on simulated fleets: a row per method and chemistry or place, over the seeds.
    /// The fleets of `--seeds`, `--beacons` and `--days`.
    func fleets() throws -> [BatteryFleet] {
        guard (1...10_000).contains(beacons ?? 200), (30...3650).contains(days) else {
            throw ValidationError("--beacons must be 1-10000 and --days 30-3650")
        }
        return try Self.seeds(seeds).map { seed in
            var fleet = BatteryFleet()
            fleet.seed = seed
            fleet.beacons = beacons ?? 200
            fleet.days = days
            return fleet
        }
    }

    func runBatteryFleet() throws {
        var merged: [String: BatteryFleet.Score] = [:]
        var order: [String] = []
        for fleet in try fleets() {
            for score in fleet.run() {
                let key = score.method + "/" + score.group
                if merged[key] == nil { order.append(key) }
                var entry = merged[key] ?? BatteryFleet.Score(method: score.method, group: score.group)
                entry.add(score)
                merged[key] = entry
            }
        }
        func share(_ value: Double?) -> String { value.map { String(format: "%.1f %%", $0 * 100) } ?? "–" }
        func inDays(_ value: Double?) -> String { value.map { String(format: "%.1f d", $0) } ?? "–" }
        print("| method | battery or place | error 15-90 days left (median) | days without a forecast | error under 15 days left (median) | cells ended | flagged under 7 days before (of them stopped by the cold) | days flagged with > 60 left | swaps found at once |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for key in order.sorted() {
            guard let score = merged[key] else { continue }
            print(
                "| \(score.method) | \(score.group) | \(share(score.medianRelativeError)) | \(score.daysWithout) | \(inDays(score.medianShortError)) | "
                    + "\(score.cellsEnded) | \(score.flaggedLate) (\(score.flaggedLateInTheCold)) | \(score.falseFlagDays) | "
                    + (score.method == "charge-and-voltage" ? "\(score.swapsFoundAtOnce) of \(score.swaps)\(score.swapsHidden > 0 ? " (\(score.swapsHidden) no reading shows)" : "") |" : "– |"))
        }
        // How near the coldest night carried came, a week ahead, to the night that stopped the cells flagged late.
        if let cold = merged["charge-and-voltage/all"], !cold.coldStopsMisjudged.isEmpty {
            let sorted = cold.coldStopsMisjudged.sorted()
            print(
                "\nCells stopped by the cold and flagged late: \(sorted.count); the night that stopped each was warmer than the "
                    + "coldest it carried as forecast a week before (coldest_carried_c) by "
                    + String(format: "%.1f °C (median), %.1f-%.1f °C", sorted[sorted.count / 2], sorted[0], sorted[sorted.count - 1]))
        }
    }

    /// Every method on each scenario; a table row per group of scenarios and method, or JSON per scenario.
    func runOffline(_ scenarios: [(group: String, scenario: Scenario)]) throws {
        let all: [ZoneEvaluation.Method] = [.ingest(try chosen()), .ingest(.loudestZone), .ingest(.pathHistory), .ingest(.crossingsHistory), .ingest(.positionZones)] + ZoneEvaluation.Method.baselines
        let methods = try method.map { list in
            try list.split(separator: ",").map { name in
                guard let method = all.first(where: { $0.name == name }) else {
                    throw ValidationError("unknown method '\(name)'; known: \(all.map(\.name).joined(separator: ", "))")
                }
                return method
            }
        } ?? all.filter { $0.name != ZoneMethod.positionZones.name }
        if !json {
            print("| preset | method | zone accuracy | false changes / beacon-h | enter error (median) | occupancy within ±1 | occupancy exact | occupancy error / zone-minute | missed stays |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        }
        var groups: [String] = []
        for entry in scenarios where !groups.contains(entry.group) { groups.append(entry.group) }
        for group in groups {
            var scores: [[AccuracyScore]] = Array(repeating: [], count: methods.count)
            for entry in scenarios where entry.group == group {
                for site in entry.scenario.sites {
                    let evaluation = try ZoneEvaluation(scenario: entry.scenario, site: site.id)
                    let name = entry.scenario.sites.count == 1 ? "\(group) seed \(entry.scenario.seed)" : "\(group) seed \(entry.scenario.seed) \(site.id)"
                    for (index, method) in methods.enumerated() {
                        let score = try evaluation.score(method)
                        scores[index].append(score)
                        if json { print(Self.json(score, method: method.name, site: name)) }
                    }
                }
            }
            if !json {
                for (index, method) in methods.enumerated() { print(Self.row(scores[index], preset: group, method: method.name)) }
            }
        }
    }

    /// The ingest's defaults with the `--set` keys.
    func chosen() throws -> ZoneMethod {
        var method = ZoneMethod.chosen
        for pair in siteKeys {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw ValidationError("--set takes key=value, not '\(pair)'")
            }
            method.siteKeys.append((parts[0], parts[1]))
        }
        return method
    }

    /// `1-5` or `1,4,7`.
    static func seeds(_ text: String) throws -> [UInt64] {
        let parts = text.split(separator: "-")
        if parts.count == 2, let low = UInt64(parts[0]), let high = UInt64(parts[1]), low <= high, high - low < 1000 {
            return Array(low...high)
        }
        let list = text.split(separator: ",").compactMap { UInt64($0) }
        guard !list.isEmpty, list.count == text.split(separator: ",").count else {
            throw ValidationError("--seeds must be a range like 1-5 or a list like 1,4,7")
        }
        return list
    }

    /// The mean over seeds, with the lowest and highest.
    static func row(_ scores: [AccuracyScore], preset: String, method: String) -> String {
        func spread(_ values: [Double], _ format: String, scale: Double = 1) -> String {
            guard !values.isEmpty else { return "–" }
            let mean = values.reduce(0, +) / Double(values.count) * scale
            return String(format: format, mean) + " [" + String(format: format, (values.min() ?? 0) * scale) + "–"
                + String(format: format, (values.max() ?? 0) * scale) + "]"
        }
        return "| \(preset) | \(method) | \(spread(scores.map(\.zoneAccuracy), "%.1f", scale: 100)) % | "
            + "\(spread(scores.map(\.falseChangesPerBeaconHour), "%.2f")) | "
            + "\(spread(scores.compactMap(\.medianEnterErrorSeconds), "%.1f")) s | "
            + "\(spread(scores.map(\.occupancyWithinOne), "%.1f", scale: 100)) % | "
            + "\(spread(scores.map(\.occupancyExact), "%.1f", scale: 100)) % | "
            + "\(spread(scores.map(\.occupancyMeanAbsoluteError), "%.3f")) | "
            + "\(scores.map(\.missedStays).reduce(0, +)) of \(scores.map(\.trueStays).reduce(0, +)) |"
    }

    /// A scenario through the real pipeline, per method.
    func runPipeline(_ path: String) async throws {
        let loaded: Scenario
        do {
            loaded = try Scenario.load(path: path)
        } catch {
            throw ValidationError(error.message)
        }
        let methods = try (method ?? "nearest,kalman,hysteresis,chosen").split(separator: ",").map { name in
            guard let method = ZoneMethod.named(String(name)) else {
                throw ValidationError("unknown method '\(name)'; known: \(ZoneMethod.all.map(\.name).joined(separator: ", "))")
            }
            return method == .chosen ? try chosen() : method
        }
        let (logger, database) = try await startPipelineRun(column: "site")
        for method in methods {
            let scores = try await AccuracyRun(scenario: loaded, method: method).run(database: database, logger: logger)
            for site in loaded.sites.map(\.id) {
                guard let score = scores[site] else { continue }
                print(json ? Self.json(score, method: method.name, site: site) : Self.row(score, method: method, site: site))
            }
        }
    }

    /// The radio model and map fitted on calibration recordings' readings at their true positions.
    func fitRadioModel(_ paths: [String]) throws -> (model: RadioModel, offsets: [Double], map: RadioMap) {
        let fitted: (model: RadioModel, offsets: [(agent: String, offsetDb: Double)], map: RadioMap, readings: Int)
        do {
            fitted = try RecordedWalk.calibration(try paths.map { try RecordedWalk(recording: $0) })
        } catch {
            throw ValidationError("\(error)")
        }
        FileHandle.standardError.write(
            Data(
                String(
                    format: "radio model: %.1f dBm at 1 m, exponent %.2f, sigma %.1f dB\n", fitted.model.powerAt1mDbm, fitted.model.exponent,
                    fitted.model.sigmaDb
                ).utf8))
        return (fitted.model, fitted.offsets.map(\.offsetDb), fitted.map)
    }

    /// Logging, a throwaway PostgreSQL and the table's head, for runs through the real pipeline (`column`: what
    /// the second column names).
    func startPipelineRun(column: String) async throws -> (Logger, PostgresServer) {
        let database = try await startServers()
        if !json {
            print("| method | \(column) | zone accuracy | zone wrong, every second | false changes / beacon-h | enter error (median) | exit error (median) | occupancy error / zone-minute | missed stays | phantom beacons | address rows / h |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        }
        return (Logger(label: "beaconflow.accuracy"), database)
    }

    /// The logging and the PostgreSQL server of a run through the pipeline (each run starts its own mosquitto).
    func startServers() async throws -> PostgresServer {
        bootstrapLogging(level: logLevel)
        guard MosquittoServer.executable != nil, PostgresServer.binaries != nil else {
            FileHandle.standardError.write(Data("beaconflow accuracy: needs mosquitto and PostgreSQL (scripts/install-deps)\n".utf8))
            throw ExitCode(69)
        }
        return try await PostgresServer.start()
    }

    /// Each seed's fleet through agents, mosquitto, the ingest and PostgreSQL: `beacon_health` at the end against
    /// the harness's forecasts; a line on standard error for each beacon that differs.
    func runBatteryFleetThroughPipeline() async throws {
        let fleets = try fleets()
        let database = try await startServers()
        let logger = Logger(label: "beaconflow.accuracy")
        print("| seed | beacons | TLM transmissions | stored | days | beacon_health as the harness's | charge counting | rows under an address | batches deferred | wall clock |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for fleet in fleets {
            let seed = fleet.seed
            let comparison = try await fleet.throughPipeline(database: database, logger: logger)
            for line in comparison.differing { FileHandle.standardError.write(Data("seed \(seed): \(line)\n".utf8)) }
            for line in comparison.notStored { FileHandle.standardError.write(Data("seed \(seed): not stored: \(line)\n".utf8)) }
            print(
                "| \(seed) | \(comparison.beacons) | \(comparison.transmissions) | \(comparison.telemetryRows) | \(days) | "
                    + "\(comparison.matching) of \(comparison.beacons) | \(comparison.chargeCounting) | \(comparison.addressRows) | "
                    + "\(comparison.batchesDeferred) | \(String(format: "%.0f s", comparison.seconds)) |")
        }
    }

    static func row(_ score: AccuracyScore, method: ZoneMethod, site: String) -> String { row(score, method: method.name, site: site) }

    static func row(_ score: AccuracyScore, method: String, site: String) -> String {
        func seconds(_ value: Double?) -> String { value.map { String(format: "%.1f s", $0) } ?? "–" }
        return String(
            format: "| %@ | %@ | %.1f %% | %.1f %% | %.2f | %@ | %@ | %.3f | %d of %d | %d | %.1f |", method, site, score.zoneAccuracy * 100,
            score.zoneWrongEverySecond * 100, score.falseChangesPerBeaconHour, seconds(score.medianEnterErrorSeconds), seconds(score.medianExitErrorSeconds),
            score.occupancyMeanAbsoluteError, score.missedStays, score.trueStays, score.phantomBeacons,
            score.addressRowsPerHour)
    }

    static func json(_ score: AccuracyScore, method: String, site: String) -> String {
        func number(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "null" }
        return """
            {"method": "\(method)", "site_id": "\(site)", "zone_accuracy": \(number(score.zoneAccuracy)), \
            "zone_wrong_every_second": \(number(score.zoneWrongEverySecond)), \
            "beacon_seconds": \(score.beaconSeconds), "visits": \(score.visits), "true_stays": \(score.trueStays), \
            "missed_stays": \(score.missedStays), "stays_of_30s": \(score.longStays), "missed_stays_of_30s": \(score.missedLongStays), "false_changes_per_beacon_hour": \(number(score.falseChangesPerBeaconHour)), \
            "median_enter_error_s": \(number(score.medianEnterErrorSeconds)), \
            "median_exit_error_s": \(number(score.medianExitErrorSeconds)), \
            "occupancy_mean_absolute_error": \(number(score.occupancyMeanAbsoluteError)), \
            "occupancy_within_one": \(number(score.occupancyWithinOne)), "occupancy_exact": \(number(score.occupancyExact)), \
            "zone_minutes": \(score.zoneMinutes), \
            "phantom_beacons": \(score.phantomBeacons), "address_rows_per_hour": \(number(score.addressRowsPerHour))}
            """
    }
}
