import BeaconMessaging
import Foundation

/// Generated scenarios for judging zone methods: sites of rows × columns rooms (6 m × 5 m, a door in every shared
/// wall; one site of 2×3 but for `large`), a receiver near each room's centre and three more on internal walls (so
/// two rooms have several), and beacons that stay put (now and then moving within their room), wander between
/// neighbouring rooms, pass through a few rooms and leave, or leave and come back. The radio and the layout differ
/// by preset; everything else is drawn from the seed, so different seeds give different layouts of beacons, hidden
/// receiver offsets and paths.
public enum ScenarioFamily {
    public struct Preset: Sendable, Equatable {
        public var name: String
        public var shadowingDb: Double
        public var shadowingCorrelationSeconds: Double
        public var wallLossDb: Double
        public var loss: Double
        /// Hidden receiver offsets are uniform in ± this.
        public var receiverOffsetSpreadDb: Double
        public var fadingDb: Double = 2
        public var rows = 2
        public var columns = 3
        public var sites = 1
        /// Beacons of a scenario when not given, spread evenly over its sites.
        public var beacons = 40
    }

    public static let easy = Preset(
        name: "easy", shadowingDb: 4, shadowingCorrelationSeconds: 2, wallLossDb: 8, loss: 0.05, receiverOffsetSpreadDb: 1)
    public static let hard = Preset(
        name: "hard", shadowingDb: 6, shadowingCorrelationSeconds: 5, wallLossDb: 6, loss: 0.20, receiverOffsetSpreadDb: 3)
    public static let harsh = Preset(
        name: "harsh", shadowingDb: 8, shadowingCorrelationSeconds: 10, wallLossDb: 3, loss: 0.30, receiverOffsetSpreadDb: 3)
    /// Two sites of 3×3 rooms with harsh radio, 80 beacons.
    public static let large = Preset(
        name: "large", shadowingDb: 8, shadowingCorrelationSeconds: 10, wallLossDb: 3, loss: 0.30, receiverOffsetSpreadDb: 3,
        rows: 3, columns: 3, sites: 2, beacons: 80)
    public static let presets = [easy, hard, harsh, large]

    public static func preset(named name: String) -> Preset? { presets.first { $0.name == name } }

    static let roomWidth = 6.0
    static let roomDepth = 5.0

    static func room(_ row: Int, _ column: Int) -> String { "room-\(["a", "b", "c", "d", "e", "f"][row])\(column + 1)" }

    /// The scenario of a preset and seed, as YAML (what `Scenario.parse` reads); `beacons` spread over its sites.
    public static func yaml(_ preset: Preset, seed: UInt64, beacons beaconCount: Int? = nil, durationSeconds: Int = 3600) -> String {
        var random = SeededGenerator(seed: seed &* 0x2545_F491_4F6C_DD1D ^ 0xFA11)
        let (rows, columns) = (preset.rows, preset.columns)
        let siteIDs = preset.sites == 1 ? ["grid"] : (1...preset.sites).map { "grid-\($0)" }
        let total = beaconCount ?? preset.beacons
        var lines = ["seed: \(seed)", "start_unix_s: 1767261600", "duration_s: \(durationSeconds)", "sites:"]
        var beaconLines: [String] = []
        for (siteIndex, siteID) in siteIDs.enumerated() {
            lines += [
                "  - id: \(siteID)", "    path_loss_exponent: 2.5", "    shadowing_db: \(preset.shadowingDb)",
                "    shadowing_correlation_s: \(preset.shadowingCorrelationSeconds)", "    fading_db: \(preset.fadingDb)",
                "    wall_loss_db: \(preset.wallLossDb)", "    receiver_offset_spread_db: \(preset.receiverOffsetSpreadDb)",
                "    zones:",
            ]
            for row in 0..<rows {
                for column in 0..<columns {
                    let x = Double(column) * roomWidth
                    let y = Double(row) * roomDepth
                    lines.append("      - {id: \(room(row, column)), rect: [\(x), \(y), \(x + roomWidth), \(y + roomDepth)]}")
                }
            }
            lines.append("    doors:")
            for row in 0..<rows {
                for column in 0..<columns - 1 {
                    lines.append(
                        "      - {zones: [\(room(row, column)), \(room(row, column + 1))], at: [\(Double(column + 1) * roomWidth), \(Double(row) * roomDepth + roomDepth / 2)]}")
                }
            }
            for row in 0..<rows - 1 {
                for column in 0..<columns {
                    lines.append(
                        "      - {zones: [\(room(row, column)), \(room(row + 1, column))], at: [\(Double(column) * roomWidth + roomWidth / 2), \(Double(row + 1) * roomDepth)]}")
                }
            }
            lines.append("    agents:")
            for row in 0..<rows {
                for column in 0..<columns {
                    let x = (Double(column) + 0.5) * roomWidth + (random.unit() - 0.5) * 1.4
                    let y = (Double(row) + 0.5) * roomDepth + (random.unit() - 0.5) * 1.4
                    lines.append("      - {id: \(room(row, column))-centre, zone: \(room(row, column)), position: [\(x), \(y)], loss: \(preset.loss)}")
                }
            }
            // On internal walls, 0.2 m inside the zone they serve.
            let walls: [(id: String, zone: String, x: Double, y: Double)] = [
                ("room-a1-wall", room(0, 0), roomWidth - 0.2, 1.2),
                ("room-b3-wall-west", room(1, 2), 2 * roomWidth + 0.2, roomDepth + 3.8),
                ("room-b3-wall-south", room(1, 2), 2.5 * roomWidth + 1.5, roomDepth + 0.2),
            ]
            for wall in walls {
                lines.append("      - {id: \(wall.id), zone: \(wall.zone), position: [\(wall.x), \(wall.y)], loss: \(preset.loss)}")
            }
            let duration = Double(durationSeconds)
            let first = total * siteIndex / siteIDs.count
            for index in first..<(total * (siteIndex + 1) / siteIDs.count) {
                let stops = path(kind: index % 10, rows: rows, columns: columns, duration: duration, random: &random)
                let text = stops.map { stop in
                    stop.zone.map { "{at_s: \(Int(stop.at)), zone: \($0)}" } ?? "{at_s: \(Int(stop.at))}"
                }.joined(separator: ", ")
                beaconLines.append(
                    "  - {name: tag-\(index), site: \(siteID), type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 7, minor: \(index), interval_ms: 250, path: [\(text)]}")
            }
        }
        lines.append("beacons:")
        return (lines + beaconLines).joined(separator: "\n") + "\n"
    }

    public static func scenario(_ preset: Preset, seed: UInt64, beacons: Int? = nil, durationSeconds: Int = 3600) throws(ConfigurationError) -> Scenario {
        try Scenario.parse(yaml(preset, seed: seed, beacons: beacons, durationSeconds: durationSeconds), name: "\(preset.name) seed \(seed)")
    }

    /// Behaviours by `kind` (0-9): four in ten stay in one room, three wander, two pass through, one leaves and
    /// comes back.
    static func path(kind: Int, rows: Int, columns: Int, duration: Double, random: inout SeededGenerator) -> [(at: Double, zone: String?)] {
        func anyRoom() -> (Int, Int) { (Int(random.unit() * Double(rows)), Int(random.unit() * Double(columns))) }
        func neighbour(of place: (Int, Int)) -> (Int, Int) {
            let options = [(place.0 - 1, place.1), (place.0 + 1, place.1), (place.0, place.1 - 1), (place.0, place.1 + 1)]
                .filter { (0..<rows).contains($0.0) && (0..<columns).contains($0.1) }
            return options[Int(random.unit() * Double(options.count))]
        }
        var stops: [(at: Double, zone: String?)] = []
        var place = anyRoom()
        var time = 0.0
        switch kind {
        case 0...3:
            // Stays; every 5-20 minutes moves within the room.
            while time < duration {
                stops.append((time, room(place.0, place.1)))
                time += 300 + random.unit() * 900
            }
        case 4...6:
            while time < duration {
                stops.append((time, room(place.0, place.1)))
                time += 120 + random.unit() * 480
                place = neighbour(of: place)
            }
        case 7...8:
            time = random.unit() * 300
            while time < duration {
                for _ in 0..<(2 + Int(random.unit() * 2)) {
                    stops.append((time, room(place.0, place.1)))
                    time += 20 + random.unit() * 70
                    place = neighbour(of: place)
                }
                stops.append((time, nil))
                time += 60 + random.unit() * 240
                place = anyRoom()
            }
        default:
            while time < duration {
                stops.append((time, room(place.0, place.1)))
                time += 300 + random.unit() * 600
                stops.append((time, nil))
                time += 120 + random.unit() * 480
                place = anyRoom()
            }
        }
        return stops.filter { $0.at < duration }
    }
}
