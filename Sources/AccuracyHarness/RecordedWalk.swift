import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import WorkQueue

/// A recording with its ground truth (docs/recordings.md): `<name>.csv` the readings, `<name>.positions.csv` where
/// each transmitter was (`time_s,transmitter,x_m,y_m`, a line per change), and `sites.yaml` beside them, whose zone
/// rectangles turn positions into true stays. Played through the real pipeline (one agent per receiver, a broker,
/// the ingest, PostgreSQL) and scored as a scenario is; `loudestReceiver` scores the simplest method on the same
/// readings.
public struct RecordedWalk: Sendable {
    public let path: String
    public let sites: SitesConfiguration
    public let site: SitesConfiguration.Site
    public let rows: [RecordingRow]
    /// Where each transmitter was, by the id the ingest stores (`mac:...`), in time order.
    public let positions: [String: [(time: Double, x: Double, y: Double)]]
    /// The true stays of each transmitter, in the zones its positions lie in.
    public let stays: [String: [AccuracyScore.Stay]]
    /// The run, in Unix seconds: from the first reading to the last.
    public let start: Double
    public let end: Double

    public init(recording path: String) throws {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        sites = try SitesConfiguration.load(path: (directory.isEmpty ? "." : directory) + "/sites.yaml")
        guard sites.sites.count == 1, let site = sites.sites.first else {
            throw HarnessError("\(directory)/sites.yaml must hold the recording's one site")
        }
        self.site = site
        var reader = RecordingReader()
        var rows: [RecordingRow] = []
        for (number, line) in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            do {
                if let row = try reader.read(line: line) { rows.append(row) }
            } catch where reader.headerRead {
                // Skipped, as the agents' replay skips it.
                continue
            } catch {
                throw HarnessError("\(path): line \(number + 1): \(error.message)")
            }
        }
        guard let first = rows.first, let last = rows.last else { throw HarnessError("\(path) holds no reading") }
        self.rows = rows
        start = Double(first.timeMicros) / 1e6
        end = Double(last.timeMicros) / 1e6
        positions = try Self.positions((path.hasSuffix(".csv") ? String(path.dropLast(4)) : path) + ".positions.csv")
        stays = Self.stays(positions: positions, zones: site.zones, end: end)
    }

    /// Recordings of one site played back to back as one (`gapSeconds` apart, each moved in time to follow the
    /// one before), written to `directory` for the agents to replay: what a site's history learned over several
    /// walks does. The stays are each walk's own, moved with it (the gaps hold none).
    public init(backToBack paths: [String], gapSeconds: Double = 10, directory: String) throws {
        let walks = try paths.map { try RecordedWalk(recording: $0) }
        guard let first = walks.first else { throw HarnessError("no recording to play") }
        guard walks.allSatisfy({ $0.site == first.site }) else { throw HarnessError("recordings played back to back must share their site") }
        var rows: [RecordingRow] = []
        var positions: [String: [(time: Double, x: Double, y: Double)]] = [:]
        var stays: [String: [AccuracyScore.Stay]] = [:]
        var next = first.start
        for walk in walks {
            let shift = next - walk.start
            let shiftMicros = Int64((shift * 1e6).rounded())
            rows += walk.rows.map { row in
                var moved = row
                moved.timeMicros += shiftMicros
                return moved
            }
            for (beacon, track) in walk.positions { positions[beacon, default: []] += track.map { ($0.time + shift, $0.x, $0.y) } }
            for (beacon, list) in walk.stays {
                stays[beacon, default: []] += list.map { AccuracyScore.Stay(beacon: $0.beacon, zone: $0.zone, enter: $0.enter + shift, exit: $0.exit + shift) }
            }
            next = walk.end + shift + gapSeconds
        }
        path = directory + "/back-to-back.csv"
        var text = "time_s,receiver,transmitter,rssi,data\n"
        for row in rows {
            let address = row.address.description + (row.address.kind == .public ? "/public" : "/random")
            text += String(format: "%lld.%06lld", row.timeMicros / 1_000_000, row.timeMicros % 1_000_000)
                + ",\(row.receiver),\(address),\(row.rssi),\(row.data.hexString)\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        sites = first.sites
        site = first.site
        self.rows = rows
        self.positions = positions
        self.stays = stays
        start = first.start
        end = Double(rows.last?.timeMicros ?? 0) / 1e6
    }

    /// The id the ingest stores for a device known by its address.
    static func beaconID(_ address: DeviceAddress) -> String { "mac:" + address.description }

    /// Reads `time_s,transmitter,x_m,y_m` lines.
    static func positions(_ path: String) throws -> [String: [(time: Double, x: Double, y: Double)]] {
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        guard lines.first?.hasPrefix("time_s,transmitter,x_m,y_m") == true else {
            throw HarnessError("\(path): the header must be time_s,transmitter,x_m,y_m")
        }
        var positions: [String: [(time: Double, x: Double, y: Double)]] = [:]
        for (number, line) in lines.dropFirst().enumerated() {
            let fields = line.split(separator: ",")
            guard fields.count == 4, let time = Double(fields[0]), let address = RecordingReader.address(fields[1]),
                let x = Double(fields[2]), let y = Double(fields[3])
            else { throw HarnessError("\(path): line \(number + 2) is not time_s,transmitter,x_m,y_m") }
            positions[beaconID(address), default: []].append((time, x, y))
        }
        return positions
    }

    /// The stays of each transmitter in the zone its position lies in (the first zone whose rectangle holds it;
    /// none: away), each until the next position, the last until `end`.
    static func stays(
        positions: [String: [(time: Double, x: Double, y: Double)]], zones: [SitesConfiguration.Zone], end: Double
    ) -> [String: [AccuracyScore.Stay]] {
        var stays: [String: [AccuracyScore.Stay]] = [:]
        for (beacon, track) in positions {
            var open: (zone: String?, since: Double)?
            func close(at time: Double) {
                guard let open, let zone = open.zone, time > open.since else { return }
                stays[beacon, default: []].append(AccuracyScore.Stay(beacon: beacon, zone: zone, enter: open.since, exit: time))
            }
            for point in track {
                let zone = zones.first { zone in
                    guard let rect = zone.rect else { return false }
                    return point.x >= rect[0] && point.x < rect[2] && point.y >= rect[1] && point.y < rect[3]
                }?.id
                if let current = open, current.zone == zone { continue }
                close(at: point.time)
                open = (zone, point.time)
            }
            close(at: end)
        }
        return stays
    }

    /// Errors of a position estimate against the truth, in metres.
    public struct PositionErrors: Sendable {
        public var errors: [Double]
        public var median: Double? { AccuracyScore.median(errors) }
        /// The 95th percentile (nearest rank).
        public var p95: Double? {
            guard !errors.isEmpty else { return nil }
            let sorted = errors.sorted()
            return sorted[min(sorted.count - 1, Int((0.95 * Double(sorted.count)).rounded(.up)) - 1)]
        }
    }

    /// Where the transmitter truly was at `time` (its latest position then), if known.
    func truePosition(of beacon: String, at time: Double, from index: inout Int) -> (x: Double, y: Double)? {
        guard let track = positions[beacon], !track.isEmpty else { return nil }
        while index + 1 < track.count, track[index + 1].time <= time { index += 1 }
        guard track[index].time <= time else { return nil }
        return (track[index].x, track[index].y)
    }

    /// The receivers with a position (`at`), in the sites file's order, for a `PositionGrid`.
    var placedReceivers: [(id: String, position: SitesConfiguration.Position)] {
        site.agents.compactMap { agent in agent.position.map { (agent.id, $0) } }
    }

    /// Every reading at its true distance from the receiver that heard it: a calibration walk's samples for
    /// `PositionGrid.RadioModel.fit`.
    public func calibrationSamples(transmitterHeight: Double = 1.2) -> [(receiver: Int, distance: Double, rssi: Double)] {
        let placed = placedReceivers
        let number = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        var indices: [String: Int] = [:]
        var samples: [(receiver: Int, distance: Double, rssi: Double)] = []
        for row in rows {
            guard let receiver = number[row.receiver] else { continue }
            let beacon = Self.beaconID(row.address)
            var index = indices[beacon] ?? 0
            defer { indices[beacon] = index }
            guard let truth = truePosition(of: beacon, at: Double(row.timeMicros) / 1e6, from: &index) else { continue }
            let at = placed[receiver].position
            let dz = transmitterHeight - (at.z ?? transmitterHeight)
            let distance = ((truth.x - at.x) * (truth.x - at.x) + (truth.y - at.y) * (truth.y - at.y) + dz * dz).squareRoot()
            samples.append((receiver, distance, Double(row.rssi)))
        }
        return samples
    }

    /// Positions from a `PositionGrid` over the site's zones with `model` and receivers' `offsets` (fitted on
    /// other walks): each second, the grid's estimate against where the transmitter was, and the zone that holds
    /// most of the belief, scored as zones are (a transmitter unheard for 30 s has left).
    public func gridPositions(
        model: PositionGrid.RadioModel, offsets: [Double], transmitterHeight: Double = 1.2
    ) -> (errors: PositionErrors, zones: AccuracyScore) {
        let placed = placedReceivers
        let number = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        let rects = site.zones.compactMap(\.rect)
        let bounds: [Double] = [
            rects.map { $0[0] }.min() ?? 0, rects.map { $0[1] }.min() ?? 0, rects.map { $0[2] }.max() ?? 1, rects.map { $0[3] }.max() ?? 1,
        ]
        let receivers = placed.enumerated().map { index, receiver in
            PositionGrid.Receiver(x: receiver.position.x, y: receiver.position.y, z: receiver.position.z ?? transmitterHeight, offsetDb: offsets[index])
        }
        var grids: [String: PositionGrid] = [:]
        var indices: [String: Int] = [:]
        var errors: [Double] = []
        let first = Int64(start.rounded(.down))
        let seconds = Int((end - Double(first)).rounded(.up))
        var zoneBySecond: [String: [String?]] = [:]
        var lastHeard: [String: Int64] = [:]
        var index = 0
        for second in 0..<seconds {
            let limit = (first + Int64(second) + 1) * 1_000_000
            var heard: Set<String> = []
            while index < rows.count, rows[index].timeMicros < limit {
                let row = rows[index]
                index += 1
                guard let receiver = number[row.receiver] else { continue }
                let beacon = Self.beaconID(row.address)
                var grid = grids[beacon] ?? PositionGrid(bounds: bounds, receivers: receivers, model: model, transmitterHeight: transmitterHeight)
                grid.update(receiver: receiver, rssi: Double(row.rssi), timeMicros: row.timeMicros)
                grids[beacon] = grid
                heard.insert(beacon)
                lastHeard[beacon] = row.timeMicros
            }
            for (beacon, grid) in grids {
                var series = zoneBySecond[beacon] ?? Array(repeating: nil, count: seconds)
                if limit - (lastHeard[beacon] ?? .min) <= 30_000_000 {
                    series[second] = site.zones.max { grid.probability(in: $0.rect ?? []) < grid.probability(in: $1.rect ?? []) }?.id
                }
                zoneBySecond[beacon] = series
            }
            for beacon in heard {
                guard let grid = grids[beacon] else { continue }
                var truthIndex = indices[beacon] ?? 0
                defer { indices[beacon] = truthIndex }
                guard let truth = truePosition(of: beacon, at: Double(limit) / 1e6, from: &truthIndex) else { continue }
                let estimate = grid.estimate
                errors.append(((estimate.x - truth.x) * (estimate.x - truth.x) + (estimate.y - truth.y) * (estimate.y - truth.y)).squareRoot())
            }
        }
        return (PositionErrors(errors: errors), score(zoneBySecond: zoneBySecond, first: first, seconds: seconds))
    }

    /// The usual baseline of positions: each second, the centroid of the `count` receivers whose latest reading
    /// (at most `freshSeconds` old) is loudest, weighted by received power (mW); its error against where the
    /// transmitter was at that second.
    public func weightedCentroid(count: Int = 3, freshSeconds: Double = 2) -> PositionErrors {
        let at = Dictionary(uniqueKeysWithValues: site.agents.compactMap { agent in agent.position.map { (agent.id, $0) } })
        let offsets = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.rssiOffsetDb) })
        var latest: [String: [String: (time: Int64, rssi: Double)]] = [:]
        var truthIndex: [String: Int] = [:]
        var errors: [Double] = []
        let first = Int64(start.rounded(.down))
        var index = 0
        for second in 0..<Int((end - Double(first)).rounded(.up)) {
            let limit = (first + Int64(second) + 1) * 1_000_000
            while index < rows.count, rows[index].timeMicros < limit {
                let row = rows[index]
                latest[Self.beaconID(row.address), default: [:]][row.receiver] = (row.timeMicros, Double(row.rssi) + (offsets[row.receiver] ?? 0))
                index += 1
            }
            let now = Double(limit) / 1e6
            for (beacon, heard) in latest {
                let loudest = heard.filter { limit - $0.value.time <= Int64(freshSeconds * 1_000_000) && at[$0.key] != nil }
                    .sorted { ($0.value.rssi, $1.key) > ($1.value.rssi, $0.key) }.prefix(count)
                guard !loudest.isEmpty, let track = positions[beacon] else { continue }
                var next = truthIndex[beacon] ?? 0
                while next + 1 < track.count, track[next + 1].time <= now { next += 1 }
                truthIndex[beacon] = next
                guard track[next].time <= now else { continue }
                let weights = loudest.map { pow(10, $0.value.rssi / 10) }
                let total = weights.reduce(0, +)
                let x = zip(loudest, weights).reduce(0) { $0 + at[$1.0.key]!.x * $1.1 } / total
                let y = zip(loudest, weights).reduce(0) { $0 + at[$1.0.key]!.y * $1.1 } / total
                errors.append(((x - track[next].x) * (x - track[next].x) + (y - track[next].y) * (y - track[next].y)).squareRoot())
            }
        }
        return PositionErrors(errors: errors)
    }

    /// The walk through agents, a broker, the ingest and PostgreSQL, scored: with the sites file as it is, or with
    /// `settings` (zone keys of a site entry, as `--set` gives them) in place of its zone rules.
    public func runThroughPipeline(
        database server: PostgresServer, logger: Logger, settings: [(key: String, value: String)] = []
    ) async throws -> AccuracyScore {
        var sites = self.sites
        if !settings.isEmpty {
            let entry = try SitesFileEntry(settings: settings, place: "--set")
            try entry.allowOnly(ZoneRules.keys)
            sites.sites[0].zoneRules = try ZoneRules(reading: entry)
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
        return score
    }

    /// The simplest method on the same readings (the harness's `nearest`): each second, the zone of the receiver
    /// whose latest reading, at most `freshSeconds` old, is the loudest; a transmitter unheard for 30 s has left.
    public func loudestReceiver(freshSeconds: Double = 10) -> AccuracyScore {
        let zoneOf = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.zone) })
        let offsets = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.rssiOffsetDb) })
        var latest: [String: [String: (time: Int64, rssi: Double)]] = [:]
        var zoneBySecond: [String: [String?]] = [:]
        let first = Int64(start.rounded(.down))
        let seconds = Int((end - Double(first)).rounded(.up))
        var index = 0
        for second in 0..<seconds {
            let limit = (first + Int64(second) + 1) * 1_000_000
            while index < rows.count, rows[index].timeMicros < limit {
                let row = rows[index]
                latest[Self.beaconID(row.address), default: [:]][row.receiver] = (row.timeMicros, Double(row.rssi) + (offsets[row.receiver] ?? 0))
                index += 1
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
        return score(zoneBySecond: zoneBySecond, first: first, seconds: seconds)
    }

    /// Visits from each transmitter's runs of seconds in one zone (from second `first`, Unix), minutes by the
    /// ingest's rule (the zone of most of the minute, from 30 s), scored.
    func score(zoneBySecond: [String: [String?]], first: Int64, seconds: Int) -> AccuracyScore {
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
