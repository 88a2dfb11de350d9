import BeaconBatteries
import BeaconMessaging
import BeaconWire
import Foundation
import BoundedYAML
import Yams

/// A simulated deployment (YAML): the sites of a sites file with agent positions and zone rectangles in metres, the
/// beacons, and each beacon's path through the zones over time.
///
/// ```yaml
/// seed: 7
/// start_unix_s: 1767261600      # 2026-01-01T10:00:00Z
/// duration_s: 600
/// sites:
///   - id: hq
///     path_loss_exponent: 2.5     # n of the log-distance model
///     shadowing_db: 6             # σ of the shadowing of each beacon-receiver link...
///     shadowing_correlation_s: 5  # ...an AR(1) process with this correlation time (0: independent per advert)
///     fading_db: 2                # σ of the fast fading, independent per advert
///     wall_loss_db: 6             # attenuation per zone boundary between beacon and receiver
///     receiver_offset_spread_db: 3  # hidden receiver offsets, uniform in ±this (the sites file does not know them)
///     zones:
///       - {id: lobby, rect: [0, 0, 10, 8]}      # x0, y0, x1, y1
///       - {id: lab, rect: [10, 0, 20, 8], capacity: 12}
///     doors:
///       - {zones: [lobby, lab], at: [10, 4]}    # beacons moving between the two walk through here
///     agents:
///       - {id: hq-a1, zone: lobby, position: [5, 4], rssi_offset_db: 0, loss: 0.05}
///       - {id: hq-a2, zone: lab, position: [10.3, 7], hidden_rssi_offset_db: -2}
/// beacons:
///   - {name: cart-7, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000a1,
///      url: https://example.com/cart7, path: [{at_s: 0, zone: lobby}, {at_s: 300, zone: lab}, {at_s: 500}]}
///   - {name: badge-3, site: hq, type: ibeacon, uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0, major: 1, minor: 3,
///      battery: cr2477, battery_left_pct: 40, temperature_c: 4, path: [{at_s: 60, zone: lab}]}
/// ```
/// A path stop without `zone` means the beacon left the site (not heard). A beacon walks (1.2 m/s) between the
/// spots of its stops, through the door of the two zones when there is one, and crosses the boundary exactly at the
/// next stop's `at_s`, so the path is the ground truth. `rssi_offset_db` is what the receiver hears more than the
/// model and the sites file knows (it calibrates it away); `hidden_rssi_offset_db` (or one drawn from
/// `receiver_offset_spread_db`) is unknown to the sites file. Beacon types: `eddystone-uid` (UID,
/// with a TLM every `tlm_every` adverts and the URL between when `url` is set), `eddystone-eid` (EID and eTLM from
/// `identity_key`, rotating every 2^`rotation_exponent` s), `ibeacon`, `altbeacon`. Each beacon runs on a cell
/// (`battery`: `cr2032`, `cr2477` or `2xaa-lithium`; `battery_left_pct`, 100; `transmit_power_dbm`, 0) in the
/// temperature of its place (`temperature_c`, 22, a day's cycle `temperature_swing_c`, 1.5, either way): a cell of
/// that chemistry with the spreads of real ones, discharged by the beacon's adverts, which TLM reports under load
/// at the temperature of the moment; its TLM counters start as if it had run since the cell was fitted. A beacon whose cell cannot hold its radio up (near its end, or in the cold)
/// is silent, and boots again, its counters from zero, when it can. At each of `battery_swaps_at_s` its cell is
/// swapped for a fresh one of the chemistry, and it boots again.
public struct Scenario: Decodable, Sendable {
    public var seed: UInt64
    public var startUnixSeconds: Int64
    public var durationSeconds: Double
    public var sites: [Site]
    public var beacons: [Beacon]

    public struct Site: Decodable, Sendable {
        public var id: String
        public var pathLossExponent: Double
        public var shadowingDb: Double
        public var shadowingCorrelationSeconds: Double
        public var fadingDb: Double
        public var wallLossDb: Double
        public var receiverOffsetSpreadDb: Double
        public var zones: [Zone]
        public var doors: [Door]
        public var agents: [Agent]

        enum CodingKeys: String, CodingKey {
            case id, zones, doors, agents
            case pathLossExponent = "path_loss_exponent"
            case shadowingDb = "shadowing_db"
            case shadowingCorrelationSeconds = "shadowing_correlation_s"
            case fadingDb = "fading_db"
            case wallLossDb = "wall_loss_db"
            case receiverOffsetSpreadDb = "receiver_offset_spread_db"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            pathLossExponent = try container.decodeIfPresent(Double.self, forKey: .pathLossExponent) ?? 2.5
            shadowingDb = try container.decodeIfPresent(Double.self, forKey: .shadowingDb) ?? 6
            shadowingCorrelationSeconds = try container.decodeIfPresent(Double.self, forKey: .shadowingCorrelationSeconds) ?? 5
            fadingDb = try container.decodeIfPresent(Double.self, forKey: .fadingDb) ?? 0
            wallLossDb = try container.decodeIfPresent(Double.self, forKey: .wallLossDb) ?? 0
            receiverOffsetSpreadDb = try container.decodeIfPresent(Double.self, forKey: .receiverOffsetSpreadDb) ?? 0
            zones = try container.decode([Zone].self, forKey: .zones)
            doors = try container.decodeIfPresent([Door].self, forKey: .doors) ?? []
            agents = try container.decode([Agent].self, forKey: .agents)
        }
    }

    /// Where beacons cross between two zones.
    public struct Door: Decodable, Sendable {
        public var zones: [String]
        public var at: [Double]
    }

    public struct Zone: Decodable, Sendable {
        public var id: String
        /// x0, y0, x1, y1 in metres.
        public var rect: [Double]
        public var capacity: Int?
    }

    public struct Agent: Decodable, Sendable {
        public var id: String
        public var zone: String?
        public var position: [Double]
        public var rssiOffsetDb: Double
        /// An offset the sites file does not know; nil: drawn from the site's `receiver_offset_spread_db`.
        public var hiddenRSSIOffsetDb: Double?
        /// Probability that the receiver misses an advert.
        public var loss: Double

        enum CodingKeys: String, CodingKey {
            case id, zone, position, loss
            case rssiOffsetDb = "rssi_offset_db"
            case hiddenRSSIOffsetDb = "hidden_rssi_offset_db"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            zone = try container.decodeIfPresent(String.self, forKey: .zone)
            position = try container.decode([Double].self, forKey: .position)
            rssiOffsetDb = try container.decodeIfPresent(Double.self, forKey: .rssiOffsetDb) ?? 0
            hiddenRSSIOffsetDb = try container.decodeIfPresent(Double.self, forKey: .hiddenRSSIOffsetDb)
            loss = try container.decodeIfPresent(Double.self, forKey: .loss) ?? 0.05
        }
    }

    public struct Stop: Decodable, Sendable {
        public var atSeconds: Double
        /// nil: away from the site.
        public var zone: String?

        enum CodingKeys: String, CodingKey {
            case zone
            case atSeconds = "at_s"
        }
    }

    public struct Beacon: Decodable, Sendable {
        public var name: String
        public var site: String
        public var type: String
        public var namespace: String?
        public var instance: String?
        public var uuid: String?
        public var major: UInt16?
        public var minor: UInt16?
        public var url: String?
        public var identityKey: String?
        public var rotationExponent: UInt8
        public var intervalMs: Double
        /// Calibrated power at 1 m (dBm); Eddystone frames carry it + 41 as their 0 m power.
        public var power1mDbm: Int
        public var tlmEvery: Int
        /// Its cell's chemistry, the share of its charge left at the scenario's start (0-1) and its radio's
        /// transmit power, which sets the charge an advert takes.
        public var battery: BatteryChemistry
        public var batteryLeft: Double
        public var transmitPowerDbm: Double
        /// The temperature it hangs in: a day's cycle about `temperatureC`, `temperatureSwingC` either way, coldest
        /// at 04:00 UTC.
        public var temperatureC: Double
        public var temperatureSwingC: Double
        /// When its cell is swapped for a fresh one of the same chemistry, seconds into the scenario.
        public var batterySwapsAtSeconds: [Double]
        public var path: [Stop]

        enum CodingKeys: String, CodingKey {
            case name, site, type, namespace, instance, uuid, major, minor, url, path
            case identityKey = "identity_key"
            case rotationExponent = "rotation_exponent"
            case intervalMs = "interval_ms"
            case power1mDbm = "power_1m_dbm"
            case tlmEvery = "tlm_every"
            case battery
            case batteryLeftPercent = "battery_left_pct"
            case transmitPowerDbm = "transmit_power_dbm"
            case temperatureC = "temperature_c"
            case temperatureSwingC = "temperature_swing_c"
            case batterySwapsAtSeconds = "battery_swaps_at_s"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            site = try container.decode(String.self, forKey: .site)
            type = try container.decode(String.self, forKey: .type)
            namespace = try container.decodeIfPresent(String.self, forKey: .namespace)
            instance = try container.decodeIfPresent(String.self, forKey: .instance)
            uuid = try container.decodeIfPresent(String.self, forKey: .uuid)
            major = try container.decodeIfPresent(UInt16.self, forKey: .major)
            minor = try container.decodeIfPresent(UInt16.self, forKey: .minor)
            url = try container.decodeIfPresent(String.self, forKey: .url)
            identityKey = try container.decodeIfPresent(String.self, forKey: .identityKey)
            rotationExponent = try container.decodeIfPresent(UInt8.self, forKey: .rotationExponent) ?? 10
            intervalMs = try container.decodeIfPresent(Double.self, forKey: .intervalMs) ?? 100
            power1mDbm = try container.decodeIfPresent(Int.self, forKey: .power1mDbm) ?? -59
            tlmEvery = try container.decodeIfPresent(Int.self, forKey: .tlmEvery) ?? 10
            // A name that is no chemistry reads as `unknown`, which `validate` refuses.
            battery = BatteryChemistry(rawValue: try container.decodeIfPresent(String.self, forKey: .battery) ?? "cr2032") ?? .unknown
            batteryLeft = (try container.decodeIfPresent(Double.self, forKey: .batteryLeftPercent) ?? 100) / 100
            transmitPowerDbm = try container.decodeIfPresent(Double.self, forKey: .transmitPowerDbm) ?? 0
            temperatureC = try container.decodeIfPresent(Double.self, forKey: .temperatureC) ?? 22
            temperatureSwingC = try container.decodeIfPresent(Double.self, forKey: .temperatureSwingC) ?? 1.5
            batterySwapsAtSeconds = try container.decodeIfPresent([Double].self, forKey: .batterySwapsAtSeconds) ?? []
            path = try container.decode([Stop].self, forKey: .path)
        }
    }

    enum CodingKeys: String, CodingKey {
        case seed, sites, beacons
        case startUnixSeconds = "start_unix_s"
        case durationSeconds = "duration_s"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        seed = try container.decodeIfPresent(UInt64.self, forKey: .seed) ?? 1
        startUnixSeconds = try container.decodeIfPresent(Int64.self, forKey: .startUnixSeconds) ?? 1_767_261_600
        durationSeconds = try container.decode(Double.self, forKey: .durationSeconds)
        sites = try container.decode([Site].self, forKey: .sites)
        beacons = try container.decode([Beacon].self, forKey: .beacons)
    }

    /// Parses and checks a scenario; the error names the file and the problem.
    public static func load(path: String) throws(ConfigurationError) -> Scenario {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("cannot read the scenario \(path)")
        }
        return try parse(text, name: path)
    }

    public static func parse(_ text: String, name: String = "scenario") throws(ConfigurationError) -> Scenario {
        let scenario: Scenario
        do {
            // Within bounds first: the decoder would expand every alias and follow any depth.
            guard try BoundedYAML.compose(text) != nil else { throw ConfigurationError("\(name): the scenario is empty") }
            scenario = try YAMLDecoder().decode(Scenario.self, from: text)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("\(name): \(error)")
        }
        try scenario.validate(name: name)
        return scenario
    }

    func validate(name: String) throws(ConfigurationError) {
        guard durationSeconds > 0, durationSeconds <= 31 * 86_400 else {
            throw ConfigurationError("\(name): duration_s must be more than 0 and at most 31 days")
        }
        for site in sites {
            let zones = Set(site.zones.map(\.id))
            for value in [site.shadowingDb, site.shadowingCorrelationSeconds, site.fadingDb, site.wallLossDb, site.receiverOffsetSpreadDb]
            where !(0...100).contains(value) {
                throw ConfigurationError(
                    "\(name): site \(site.id): shadowing_db, shadowing_correlation_s, fading_db, wall_loss_db and receiver_offset_spread_db must be 0-100")
            }
            for door in site.doors where door.zones.count != 2 || door.at.count != 2 || !door.zones.allSatisfy(zones.contains) {
                throw ConfigurationError("\(name): site \(site.id): a door needs zones: [two zones of the site] and at: [x, y]")
            }
            for zone in site.zones where zone.rect.count != 4 || zone.rect[0] >= zone.rect[2] || zone.rect[1] >= zone.rect[3] {
                throw ConfigurationError("\(name): zone \(site.id)/\(zone.id) rect must be [x0, y0, x1, y1] with x0 < x1, y0 < y1")
            }
            for agent in site.agents {
                guard agent.position.count == 2 else {
                    throw ConfigurationError("\(name): agent \(site.id)/\(agent.id) position must be [x, y]")
                }
                guard (0...1).contains(agent.loss) else {
                    throw ConfigurationError("\(name): agent \(site.id)/\(agent.id) loss must be 0-1")
                }
                if let zone = agent.zone, !zones.contains(zone) {
                    throw ConfigurationError("\(name): agent \(site.id)/\(agent.id) is in unknown zone '\(zone)'")
                }
            }
        }
        for beacon in beacons {
            guard let site = sites.first(where: { $0.id == beacon.site }) else {
                throw ConfigurationError("\(name): beacon \(beacon.name) names unknown site '\(beacon.site)'")
            }
            let zones = Set(site.zones.map(\.id))
            for stop in beacon.path {
                if let zone = stop.zone, !zones.contains(zone) {
                    throw ConfigurationError("\(name): beacon \(beacon.name) goes to unknown zone '\(zone)'")
                }
            }
            guard beacon.path.map(\.atSeconds) == beacon.path.map(\.atSeconds).sorted() else {
                throw ConfigurationError("\(name): beacon \(beacon.name) path must be in time order")
            }
            guard beacon.intervalMs >= 20, beacon.tlmEvery >= 2 else {
                throw ConfigurationError("\(name): beacon \(beacon.name) interval_ms must be ≥ 20 and tlm_every ≥ 2")
            }
            guard beacon.battery != .unknown else {
                throw ConfigurationError("\(name): beacon \(beacon.name) battery must be one of 'cr2032', 'cr2477', '2xaa-lithium'")
            }
            guard (0...1).contains(beacon.batteryLeft), (-40...20).contains(beacon.transmitPowerDbm) else {
                throw ConfigurationError("\(name): beacon \(beacon.name) battery_left_pct must be 0-100 and transmit_power_dbm -40-20")
            }
            guard beacon.batterySwapsAtSeconds == beacon.batterySwapsAtSeconds.sorted(), beacon.batterySwapsAtSeconds.allSatisfy({ $0 > 0 }) else {
                throw ConfigurationError("\(name): beacon \(beacon.name) battery_swaps_at_s must be times after 0 in order")
            }
            guard (-60...85).contains(beacon.temperatureC), (0...40).contains(beacon.temperatureSwingC) else {
                throw ConfigurationError("\(name): beacon \(beacon.name) temperature_c must be -60-85 and temperature_swing_c 0-40")
            }
            do {
                _ = try SimulatedBeacon(beacon, index: 0)
            } catch {
                throw ConfigurationError("\(name): beacon \(beacon.name): \(error.message)")
            }
        }
    }
}
