import BeaconAgent
import BeaconIngest
import BeaconPositions
import Foundation
import LocalServers
import Logging

/// Zones on a recording: through the real pipeline, and the simplest method on the same readings.
extension RecordedWalk {
    /// The walk through agents, a broker, the ingest and PostgreSQL, scored: with the sites file as it is, or with
    /// `settings` (zone keys of a site entry, as `--set` gives them) in place of its zone rules, and any of the radio
    /// model's keys in place of the sites file's.
    public func runThroughPipeline(
        database server: PostgresServer, logger: Logger, settings: [(key: String, value: String)] = []
    ) async throws -> AccuracyScore {
        var sites = self.sites
        if !settings.isEmpty {
            let entry = try SitesFileEntry(settings: settings, place: "--set")
            try entry.allowOnly(ZoneRules.keys + SitesConfiguration.Site.radioModelKeys)
            sites.sites[0].zoneRules = try ZoneRules(reading: entry, floor: sites.sites[0].floor)
            sites.sites[0].radioModel = try RadioModel(reading: entry, over: sites.sites[0].radioModel)
        }
        let pipeline = try await PipelineUnderTest.start(sites: sites, database: server, name: "recording", logger: logger)
        defer { pipeline.ingest.requestStop() }
        let address = pipeline.address
        let spools = try makeTemporaryDirectory(prefix: "recording-spools")
        defer { try? FileManager.default.removeItem(atPath: spools) }
        try await withThrowingTaskGroup(of: (String, Agent.Outcome).self) { group in
            for agent in site.agents {
                var agentConfiguration = try AgentConfiguration(
                    siteID: site.id, agentID: agent.id, broker: address, spoolDirectory: spools + "/" + agent.id)
                agentConfiguration.extractor.includeUnknownDevices = true
                agentConfiguration.acknowledgementTimeout = .seconds(5)
                agentConfiguration.drainTimeout = .seconds(600)
                let instance = Agent(
                    configuration: agentConfiguration, source: RecordingReplaySource(path: path, receiver: agent.id, speed: .maximum, logger: logger),
                    logger: logger)
                group.addTask { (agent.id, try await instance.run()) }
            }
            for try await (agent, outcome) in group where outcome != .finished {
                throw HarnessError("agent \(agent) ended with \(outcome) before delivering everything")
            }
        }
        try await pipeline.finish()
        let views = try await pipeline.views(site: site.id)
        var score = AccuracyScore(stays: stays, start: start, end: end, visits: views.visits, minutes: views.minutes)
        score.phantomBeacons = views.beacons.subtracting(stays.keys).count
        score.addressRows = views.addressRows.filter { stays[$0.key] == nil }.values.reduce(0, +)
        score.runHours = (end - start) / 3600
        var truthIndex: [String: Int] = [:]
        for stored in try await pipeline.positions(site: site.id) {
            var index = truthIndex[stored.beacon] ?? 0
            defer { truthIndex[stored.beacon] = index }
            guard let truth = truePosition(of: stored.beacon, at: stored.time, from: &index) else { continue }
            score.positions.add((stored.x, stored.y), truth: truth, spread: stored.errorM, zoneOf: zone(at:))
        }
        return score
    }

    /// The simplest method on the same readings (the harness's `nearest`): each second, the zone of the receiver
    /// whose latest reading, at most `freshSeconds` old, is the loudest; a transmitter unheard for 30 s has left.
    public func loudestReceiver(freshSeconds: Double = 10) -> AccuracyScore {
        let zoneOf = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.zone) })
        let offsets = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.rssiOffsetDb) })
        var latest: [String: [String: (time: Int64, rssi: Double)]] = [:]
        var zoneBySecond: [String: [String?]] = [:]
        let seconds = secondCount
        forEachSecond { second, limit, readings in
            for row in readings {
                latest[beaconID(row.address), default: [:]][row.receiver] = (row.timeMicros, Double(row.rssi) + (offsets[row.receiver] ?? 0))
            }
            for (beacon, heard) in latest {
                let fresh = heard.filter { limit - $0.value.time <= Int64(freshSeconds * 1_000_000) }
                let loudest = fresh.max { ($0.value.rssi, $1.key) < ($1.value.rssi, $0.key) }
                var series = zoneBySecond[beacon] ?? Array(repeating: nil, count: seconds)
                if let loudest {
                    series[second] = zoneOf[loudest.key] ?? nil
                } else if let last = heard.values.map(\.time).max(), limit - last <= 30_000_000, second > 0 {
                    series[second] = series[second - 1]
                }
                zoneBySecond[beacon] = series
            }
        }
        return score(zoneBySecond: zoneBySecond)
    }

    /// Visits from each transmitter's runs of seconds in one zone (second 0 being `firstSecond`), minutes by the
    /// ingest's rule (the zone of most of the minute, from 30 s), scored.
    func score(zoneBySecond: [String: [String?]]) -> AccuracyScore {
        let first = firstSecond
        let seconds = secondCount
        var visits: [AccuracyScore.Visit] = []
        var occupants: [Int: [String: Int]] = [:]
        for (beacon, series) in zoneBySecond {
            var runStart = 0
            for second in 1...series.count where second == series.count || series[second] != series[second - 1] {
                if let zone = series[second - 1] {
                    visits.append(
                        AccuracyScore.Visit(
                            beaconID: beacon, zone: zone, enter: Double(first) + Double(runStart),
                            exit: second == series.count ? nil : Double(first) + Double(second)))
                }
                runStart = second
            }
            for minute in 0..<((series.count + 59) / 60) {
                let inMinute = series[(minute * 60)..<min(series.count, minute * 60 + 60)].compactMap { $0 }
                let counts = Dictionary(grouping: inMinute, by: { $0 }).mapValues(\.count)
                if let best = counts.max(by: { ($0.value, $1.key) < ($1.value, $0.key) }), best.value >= 30 {
                    occupants[minute, default: [:]][best.key, default: 0] += 1
                }
            }
        }
        let minutes = (0..<((seconds + 59) / 60)).flatMap { minute in
            site.zones.map { zone in
                AccuracyScore.ZoneMinute(
                    zone: zone.id, minuteStart: Double(first) + Double(minute * 60), occupants: occupants[minute]?[zone.id] ?? 0)
            }
        }
        return AccuracyScore(stays: stays, start: start, end: end, visits: visits, minutes: minutes)
    }
}
