import BeaconAgent
import BeaconIngest
import BeaconWire
import Foundation

/// A recording with its ground truth (docs/recordings.md): `<name>.csv` the readings, `<name>.positions.csv` where
/// each transmitter was or `<name>.zones.csv` the zone it was in (`RecordedTruth`), and `sites.yaml` beside them,
/// whose zone rectangles turn positions into true stays where no zones file gives them. Played through the real
/// pipeline (one agent per receiver, a broker, the ingest, PostgreSQL) and scored as a scenario is;
/// `loudestReceiver` scores the simplest method on the same readings.
public struct RecordedWalk: Sendable {
    public let path: String
    public let sites: SitesConfiguration
    public let site: SitesConfiguration.Site
    public let rows: [RecordingRow]
    /// The beacon id of each address whose readings carry one in their data (an iBeacon, an Eddystone UID, a
    /// beacon id the recording names its transmitter by); any other address is the device `mac:<address>`.
    let identities: [DeviceAddress: String]
    /// Where each transmitter was, by the id the ingest stores, in time order; empty where the truth is zones.
    public let positions: [String: [(time: Double, x: Double, y: Double)]]
    /// The true stays of each transmitter: the zones file's, else the zones its positions lie in.
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
        for (number, line) in RecordingColumns.lines(try String(contentsOfFile: path, encoding: .utf8)).enumerated() {
            do {
                rows += try reader.read(line: line).rows
            } catch where reader.headerRead {
                // Skipped, as the agents' replay skips it.
                continue
            } catch {
                throw HarnessError("\(path): line \(number + 1): \(error.message)")
            }
        }
        // Each receiver's rows are in time order; the recording's, merged, need not be.
        rows.sort { $0.timeMicros < $1.timeMicros }
        guard let first = rows.first, let last = rows.last else { throw HarnessError("\(path) holds no reading") }
        let agents = Set(site.agents.map(\.id))
        guard rows.contains(where: { agents.contains($0.receiver) }) else {
            let receivers = Set(rows.map(\.receiver)).sorted()
            let named = receivers.prefix(5).joined(separator: ", ") + (receivers.count > 5 ? ", …" : "")
            throw HarnessError(
                "\(path): none of its \(receivers.count) receivers (\(named)) is an agent of site '\(site.id)': the sites file names each by the agent id its name reads as (docs/recordings.md)")
        }
        self.rows = rows
        start = Double(first.timeMicros) / 1e6
        end = Double(last.timeMicros) / 1e6
        identities = Self.identities(rows)
        let name = path.hasSuffix(".csv") ? String(path.dropLast(4)) : path
        let positionsPath = name + ".positions.csv"
        let zonesPath = name + ".zones.csv"
        let hasPositions = FileManager.default.fileExists(atPath: positionsPath)
        let hasZones = FileManager.default.fileExists(atPath: zonesPath)
        guard hasPositions || hasZones else {
            throw HarnessError("\(path) has no ground truth beside it: \(positionsPath) or \(zonesPath)")
        }
        positions = hasPositions ? try RecordedTruth.positions(positionsPath, identities: identities) : [:]
        if hasZones {
            stays = Self.stays(zones: try RecordedTruth.zones(zonesPath, identities: identities, zones: site.zones), end: end)
        } else {
            guard site.zones.contains(where: { $0.rect != nil }) else {
                throw HarnessError("\(positionsPath) gives stays only in zones with a rect: give the zones a rect, or \(zonesPath)")
            }
            stays = Self.stays(positions: positions, zones: site.zones, end: end)
        }
    }

    /// The recording's receivers that no agent of the site replays, each with its count of readings, most first:
    /// their readings are left out of every score.
    public var receiversWithoutAgent: [(receiver: String, readings: Int)] {
        let agents = Set(site.agents.map(\.id))
        var counts: [String: Int] = [:]
        for row in rows where !agents.contains(row.receiver) { counts[row.receiver, default: 0] += 1 }
        return counts.map { ($0.key, $0.value) }.sorted { ($0.readings, $1.receiver) > ($1.readings, $0.receiver) }
    }

    /// The first of `zones` whose rectangle holds the point (its lower and left edges in, the others out).
    static func zone(at point: (x: Double, y: Double), in zones: [SitesConfiguration.Zone]) -> String? {
        zones.first { zone in
            guard let rect = zone.rect else { return false }
            return point.x >= rect[0] && point.x < rect[2] && point.y >= rect[1] && point.y < rect[3]
        }?.id
    }

    /// The zone of the site holding the point.
    func zone(at point: (x: Double, y: Double)) -> String? { Self.zone(at: point, in: site.zones) }

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
        var text = RecordingWriter.header(data: true)
        for row in rows {
            text += RecordingWriter.line(
                micros: row.timeMicros, receiver: row.receiver, transmitter: RecordingWriter.transmitter(row.address), rssi: Int(row.rssi),
                data: row.data)
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        sites = first.sites
        site = first.site
        self.rows = rows
        identities = walks.reduce(into: [:]) { all, walk in all.merge(walk.identities) { first, _ in first } }
        self.positions = positions
        self.stays = stays
        start = first.start
        end = Double(rows.last?.timeMicros ?? 0) / 1e6
    }

    /// The run's whole seconds, from the second of the first reading to that of the last.
    var firstSecond: Int64 { Int64(start.rounded(.down)) }
    var secondCount: Int { Int((end - Double(firstSecond)).rounded(.up)) }

    /// Each second of the run in turn: its number (from 0), its end (Unix microseconds) and the readings within it.
    func forEachSecond(_ body: (_ second: Int, _ endMicros: Int64, _ readings: ArraySlice<RecordingRow>) -> Void) {
        var index = 0
        for second in 0..<secondCount {
            let endMicros = (firstSecond + Int64(second) + 1) * 1_000_000
            let from = index
            while index < rows.count, rows[index].timeMicros < endMicros { index += 1 }
            body(second, endMicros, rows[from..<index])
        }
    }

    /// The id the ingest stores for what `address` sends.
    func beaconID(_ address: DeviceAddress) -> String { Self.beaconID(address, identities: identities) }

    static func beaconID(_ address: DeviceAddress, identities: [DeviceAddress: String]) -> String {
        identities[address] ?? "mac:" + address.description
    }

    /// The identity the first reading of each address that carries one gives it, as the agent classifies it.
    static func identities(_ rows: [RecordingRow]) -> [DeviceAddress: String] {
        var identities: [DeviceAddress: String] = [:]
        for row in rows where !row.data.isEmpty && identities[row.address] == nil {
            if let identity = (try? FrameClassifier.classify(row.data[...]))?.identity?.identity {
                identities[row.address] = identity.description
            }
        }
        return identities
    }

    /// The stays of each transmitter in the zone its position lies in (the first zone whose rectangle holds it;
    /// none: away), each until the next position, the last until `end`. Where the position is not known for a
    /// while (NaN), the transmitter stays in its zone when the next known position lies in it too, and otherwise
    /// moves to that position's zone halfway through the while.
    static func stays(
        positions: [String: [(time: Double, x: Double, y: Double)]], zones: [SitesConfiguration.Zone], end: Double
    ) -> [String: [AccuracyScore.Stay]] {
        let tracks = positions.mapValues { track in
            track.indices.compactMap { index -> (time: Double, zone: String?)? in
                let point = track[index]
                guard point.x.isNaN else { return (point.time, Self.zone(at: (point.x, point.y), in: zones)) }
                guard let next = track[(index + 1)...].first(where: { !$0.x.isNaN }) else { return nil }
                return ((point.time + next.time) / 2, Self.zone(at: (next.x, next.y), in: zones))
            }
        }
        return stays(zones: tracks, end: end)
    }

    /// The stays of each transmitter in the zones its track names (none: away), each until the zone changes, the
    /// last until `end` (the recording's: what the track says after it is not scored).
    static func stays(zones tracks: [String: [(time: Double, zone: String?)]], end: Double) -> [String: [AccuracyScore.Stay]] {
        var stays: [String: [AccuracyScore.Stay]] = [:]
        for (beacon, track) in tracks {
            var open: (zone: String?, since: Double)?
            func close(at time: Double) {
                guard let open, let zone = open.zone, time > open.since else { return }
                stays[beacon, default: []].append(AccuracyScore.Stay(beacon: beacon, zone: zone, enter: open.since, exit: time))
            }
            for point in track where point.time < end {
                if let current = open, current.zone == point.zone { continue }
                close(at: point.time)
                open = (point.zone, point.time)
            }
            close(at: end)
        }
        return stays
    }
}
