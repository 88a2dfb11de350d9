import BeaconAgent
import BeaconSimulation
import Foundation

/// The demo's deployment: three sites of four 12 × 10 m zones in a 2 × 2 grid with three agents in each zone,
/// and about 200 beacons of every simulated type wandering between the zones, some leaving and coming back, a
/// few with low batteries. Starts at `start` (Unix seconds) so that the tables read as live data.
enum DemoScenario {
    static let sites = ["hq", "warehouse", "clinic"]
    static let zoneNames = [
        "hq": ["lobby", "lab", "office", "canteen"], "warehouse": ["dock", "aisle-a", "aisle-b", "packing"],
        "clinic": ["reception", "ward", "imaging", "pharmacy"],
    ]

    static func yaml(seed: UInt64, start: Int64, durationSeconds: Int, beacons: Int = 201) -> String {
        var random = SeededGenerator(seed: seed)
        var lines = [
            "seed: \(seed)", "start_unix_s: \(start)", "duration_s: \(durationSeconds)", "sites:",
        ]
        for site in sites {
            let zones = zoneNames[site]!
            lines += ["  - id: \(site)", "    path_loss_exponent: 2.5", "    shadowing_db: 4", "    zones:"]
            for (index, zone) in zones.enumerated() {
                let x = Double(index % 2) * 12
                let y = Double(index / 2) * 10
                lines.append("      - {id: \(zone), rect: [\(x), \(y), \(x + 12), \(y + 10)]}")
            }
            lines.append("    agents:")
            for (index, zone) in zones.enumerated() {
                let x = Double(index % 2) * 12
                let y = Double(index / 2) * 10
                for (slot, (dx, dy)) in [(3.0, 3.0), (9.0, 5.0), (4.0, 8.0)].enumerated() {
                    lines.append("      - {id: \(site)-\(zone)-\(slot + 1), zone: \(zone), position: [\(x + dx), \(y + dy)]}")
                }
            }
        }
        lines.append("beacons:")
        for index in 0..<beacons {
            let site = sites[index % sites.count]
            let zones = zoneNames[site]!
            var path: [String] = []
            var at = 0
            var zone = zones[Int(random.next() % 4)]
            while at < durationSeconds {
                path.append("{at_s: \(at), zone: \(zone)}")
                at += 20 + Int(random.next() % 100)
                if random.next() % 8 == 0 {
                    path.append("{at_s: \(at)}")  // leaves for a while
                    at += 30 + Int(random.next() % 60)
                }
                zone = zones[Int(random.next() % 4)]
            }
            var beacon = ["name: tag-\(index + 1)", "site: \(site)"]
            let number = String(format: "%04x", index + 1)
            switch index % 4 {
            case 0:
                beacon += ["type: eddystone-uid", "namespace: 0102030405060708090a", "instance: 00000000\(number)", "interval_ms: 300"]
                if index % 20 == 0 { beacon.append("url: https://example.com/t\(index + 1)") }
            case 1:
                beacon += ["type: ibeacon", "uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0", "major: 1", "minor: \(index + 1)", "interval_ms: 500"]
            case 2:
                beacon += ["type: altbeacon", "uuid: 00112233445566778899aabbccddeeff", "major: 2", "minor: \(index + 1)", "interval_ms: 1000"]
            default:
                let key = (0..<16).map { _ in String(format: "%02x", random.next() % 256) }.joined()
                beacon += [
                    "type: eddystone-eid", "namespace: 0102030405060708090a", "instance: 00000000\(number)",
                    "identity_key: \(key)", "rotation_exponent: 10", "interval_ms: 300",
                ]
            }
            if index % 15 == 0 { beacon.append("battery_left_pct: 10") }
            lines.append("  - {\(beacon.joined(separator: ", ")), path: [\(path.joined(separator: ", "))]}")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
