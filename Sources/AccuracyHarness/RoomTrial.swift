import BeaconAgent
import BeaconSimulation
import BeaconWire
import Foundation

/// A room trial: rooms, receivers and walked tracks in the JSON of the ESPresense accuracy harness's scenarios
/// (`bounds`, `rooms`, `stations` with `cal_rssi` and `absorption`, `tracks` of waypoints with
/// `samples_per_segment`), turned into recordings (docs/recordings.md) that play through the real pipeline.
///
/// Each sample of a track lasts one second and every receiver hears the transmitter once in it, at the
/// log-distance RSSI of the horizontal distance (the scenarios' radio) with Gaussian noise and, with a given
/// probability, a multipath fade: the published noise profile. One transmitter walks the track for each seed, all
/// at once, each with noise of its own.
public struct RoomTrial: Sendable {
    public struct Rect: Codable, Sendable {
        public var name: String?
        public var x_min, y_min, x_max, y_max: Double
    }

    public struct Station: Codable, Sendable {
        public var id: String
        public var x, y: Double
        public var z: Double?
        public var cal_rssi: Double
        public var absorption: Double
    }

    public struct Track: Codable, Sendable {
        public var name: String
        public var samples_per_segment: Int
        public var points: [[Double]]

        /// The track's positions, one a second: each segment in `samples_per_segment` even steps, then the last
        /// waypoint.
        func samples() -> [(x: Double, y: Double)] {
            var samples: [(x: Double, y: Double)] = []
            for (from, to) in zip(points, points.dropFirst()) {
                for step in 0..<samples_per_segment {
                    let t = Double(step) / Double(samples_per_segment)
                    samples.append((from[0] + (to[0] - from[0]) * t, from[1] + (to[1] - from[1]) * t))
                }
            }
            if let last = points.last { samples.append((last[0], last[1])) }
            return samples
        }
    }

    /// The published noise profile: Gaussian spread, and how often and how deep a multipath fade is.
    public struct Noise: Sendable {
        public var sigmaDb = 2.5
        public var multipathProbability = 0.10
        public var multipathDb = 6.0

        public init() {}
    }

    public struct Scenario: Codable, Sendable {
        public var name: String
        public var bounds: Rect
        public var rooms: [Rect]
        public var stations: [Station]
        public var tracks: [Track]
    }

    public let scenario: Scenario
    public var noise = Noise()
    /// When the first sample is heard (Unix seconds): 2026-01-01.
    static let startSeconds: Int64 = 1_767_225_600

    public init(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            scenario = try JSONDecoder().decode(Scenario.self, from: data)
        } catch {
            throw HarnessError("\(path): not a room trial: \(error)")
        }
        let ids = scenario.stations.map(\.id)
        guard scenario.stations.count >= 3, Set(ids).count == ids.count,
            ids.allSatisfy({ $0.utf8.count <= 64 && $0.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") } })
        else { throw HarnessError("\(path): give at least 3 stations with distinct ids of a-z, 0-9 and '-'") }
        guard !scenario.rooms.isEmpty, scenario.rooms.allSatisfy({ $0.name != nil && $0.x_min < $0.x_max && $0.y_min < $0.y_max }) else {
            throw HarnessError("\(path): every room needs a name and x_min < x_max, y_min < y_max")
        }
        guard scenario.tracks.allSatisfy({ $0.points.count >= 2 && $0.points.allSatisfy { $0.count == 2 } && $0.samples_per_segment > 0 })
        else { throw HarnessError("\(path): every track needs two [x, y] points or more and samples_per_segment above 0") }
    }

    /// The site: a zone per room (its id the room's name made an id), an agent per station placed at its x and y
    /// (no height: the radio is that of the horizontal distance).
    public func sitesYAML(model: (power: Double, exponent: Double, sigma: Double, offsets: [String: Double])?) -> String {
        var text = "# \(scenario.name): a room trial's site (docs/recordings.md)\nsites:\n  - id: room\n"
        if let model {
            text += String(
                format: "    position_power_at_1m_dbm: %.1f\n    position_path_loss_exponent: %.2f\n    position_noise_db: %.1f\n",
                model.power, model.exponent, model.sigma)
        }
        text += "    zones:\n"
        for room in scenario.rooms {
            text += "      - {id: \(Self.zoneID(room.name ?? "")), rect: [\(room.x_min), \(room.y_min), \(room.x_max), \(room.y_max)]}\n"
        }
        text += "    agents:\n"
        for station in scenario.stations {
            let offset = model?.offsets[station.id].map { String(format: ", rssi_offset_db: %.1f", (-$0 * 10).rounded() / 10 + 0) } ?? ""
            let zone = room(of: (station.x, station.y)).map { ", zone: \(Self.zoneID($0))" } ?? ""
            text += "      - {id: \(station.id)\(zone)\(offset), at: [\(station.x), \(station.y)]}\n"
        }
        return text
    }

    /// A room's or a track's name as an id, as a recording's receiver names are read.
    static func zoneID(_ name: String) -> String { identifier(fromName: name) ?? "unnamed" }

    /// The first room holding the point (bounds inclusive, as the scenarios define it).
    func room(of point: (x: Double, y: Double)) -> String? {
        scenario.rooms.first { point.x >= $0.x_min && point.x <= $0.x_max && point.y >= $0.y_min && point.y <= $0.y_max }?.name
    }

    /// A survey of the bounds for calibration: a walk along lines 0.5 m apart, 0.5 m in from the edges.
    var survey: Track {
        let b = scenario.bounds
        var points: [[Double]] = []
        var y = b.y_min + 0.5
        var eastward = true
        while y <= b.y_max - 0.5 + 1e-9 {
            points += eastward ? [[b.x_min + 0.5, y], [b.x_max - 0.5, y]] : [[b.x_max - 0.5, y], [b.x_min + 0.5, y]]
            eastward.toggle()
            y += 0.5
        }
        let length = zip(points, points.dropFirst()).map { hypot($1[0] - $0[0], $1[1] - $0[1]) }.reduce(0, +)
        // At about 0.25 m a second.
        return Track(name: "survey", samples_per_segment: max(1, Int((4 * length / Double(max(1, points.count - 1))).rounded())), points: points)
    }

    /// The readings and true positions of `track` walked once for each seed (the transmitter of the n-th seed being
    /// `c0:00:00:00:00:nn`), as a recording and its `.positions.csv`, leaving out the readings of `silent` stations.
    public func recording(_ track: Track, seeds: [UInt64], silent: Set<String> = []) -> (readings: String, positions: String) {
        var rows: [(time: Int64, line: String)] = []
        var positions = "time_s,transmitter,x_m,y_m\n"
        let samples = track.samples()
        for (index, seed) in seeds.enumerated() {
            let address = String(format: "c0:00:00:00:%02x:%02x/random", (index >> 8) & 0xFF, index & 0xFF)
            // Each track's noise its own for a seed, and the same on every machine.
            var random = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ FNV1a.digest(track.name.utf8))
            for (second, point) in samples.enumerated() {
                let secondStart = (Self.startSeconds + Int64(second)) * 1_000_000
                positions += "\(Self.startSeconds + Int64(second)),\(address),\(point.x),\(point.y)\n"
                for (number, station) in scenario.stations.enumerated() {
                    let distance = hypot(point.x - station.x, point.y - station.y)
                    let clean = distance <= 0 ? station.cal_rssi : station.cal_rssi - 10 * station.absorption * log10(distance)
                    var rssi = clean + random.gaussian() * noise.sigmaDb
                    if random.unit() < noise.multipathProbability { rssi -= noise.multipathDb }
                    guard !silent.contains(station.id) else { continue }
                    let time = secondStart + Int64(number) * 100_000 + Int64(index) * 1_000
                    let dbm = max(-127, min(20, Int(rssi.rounded())))
                    rows.append((time, RecordingWriter.line(micros: time, receiver: station.id, transmitter: address, rssi: dbm)))
                }
            }
        }
        rows.sort { $0.time < $1.time }
        return (RecordingWriter.header(data: false) + rows.map(\.line).joined(), positions)
    }

    /// Writes the trial to `directory`: `survey.csv` (a calibration walk, seed 0), `sites.yaml` with the radio
    /// model `beaconflow calibrate` fits on it, and for each track `<track>.csv` with every station and
    /// `<track>-without-<station>.csv` with each station silent in turn, each with its `.positions.csv`.
    public func write(to directory: String, seeds: [UInt64]) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []
        func save(_ name: String, _ recording: (readings: String, positions: String)) throws {
            try recording.readings.write(toFile: "\(directory)/\(name).csv", atomically: true, encoding: .utf8)
            try recording.positions.write(toFile: "\(directory)/\(name).positions.csv", atomically: true, encoding: .utf8)
            written.append("\(directory)/\(name).csv")
        }
        try sitesYAML(model: nil).write(toFile: "\(directory)/sites.yaml", atomically: true, encoding: .utf8)
        try save("survey", recording(survey, seeds: [0]))
        let fitted = try RecordedWalk.calibration([try RecordedWalk(recording: "\(directory)/survey.csv")])
        let model = (
            fitted.model.powerAt1mDbm, fitted.model.exponent, fitted.model.sigmaDb,
            Dictionary(uniqueKeysWithValues: fitted.offsets.map { ($0.agent, $0.offsetDb) })
        )
        try sitesYAML(model: model).write(toFile: "\(directory)/sites.yaml", atomically: true, encoding: .utf8)
        for track in scenario.tracks {
            let name = Self.zoneID(track.name)
            try save(name, recording(track, seeds: seeds))
            for station in scenario.stations {
                try save("\(name)-without-\(station.id)", recording(track, seeds: seeds, silent: [station.id]))
            }
        }
        return written
    }
}
