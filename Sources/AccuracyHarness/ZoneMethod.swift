import BeaconAgent
import BeaconIngest
import Foundation

/// One way of deciding zones, as the sites-file settings that select it.
public struct ZoneMethod: Sendable, Equatable {
    public var name: String
    public var summary: String
    public var smoothing: RSSISmoothing
    public var switchMarginDb: Double
    public var switchDwellSeconds: Double

    /// The zone of the loudest reading as heard, changed at once.
    public static let nearest = ZoneMethod(
        name: "nearest", summary: "raw RSSI, loudest agent wins at once", smoothing: .none, switchMarginDb: 0,
        switchDwellSeconds: 0)
    /// Kalman-smoothed RSSI per (beacon, agent), loudest wins at once.
    public static let kalman = ZoneMethod(
        name: "kalman", summary: "Kalman-smoothed RSSI, loudest agent wins at once", smoothing: .kalman,
        switchMarginDb: 0, switchDwellSeconds: 0)
    /// Raw RSSI with the default hysteresis.
    public static let hysteresis = ZoneMethod(
        name: "hysteresis", summary: "raw RSSI, challenger 3 dB louder for 4 s", smoothing: .none, switchMarginDb: 3,
        switchDwellSeconds: 4)
    /// The ingest's defaults: Kalman-smoothed RSSI and hysteresis.
    public static let chosen = ZoneMethod(
        name: "chosen", summary: "Kalman-smoothed RSSI, challenger 3 dB louder for 4 s (the defaults)",
        smoothing: .kalman, switchMarginDb: 3, switchDwellSeconds: 4)

    public static let all = [nearest, kalman, hysteresis, chosen]

    public static func named(_ name: String) -> ZoneMethod? { all.first { $0.name == name } }
}

extension SitesConfiguration {
    /// The sites file an operator would write for a simulated deployment: its sites, zones and agents with their
    /// RSSI offsets (as calibrated), its path-loss exponents, and the identity keys of its EID beacons; zone
    /// decisions by `method`.
    public static func forScenario(_ scenario: Scenario, beaconIDs: [String: String], method: ZoneMethod) throws(SitesError) -> SitesConfiguration {
        var lines = ["sites:"]
        for site in scenario.sites {
            lines.append("  - id: \(site.id)")
            lines.append("    path_loss_exponent: \(site.pathLossExponent)")
            lines.append("    rssi_smoothing: \(method.smoothing.rawValue)")
            lines.append("    zone_switch_margin_db: \(method.switchMarginDb)")
            lines.append("    zone_switch_dwell_s: \(method.switchDwellSeconds)")
            lines.append("    zones:")
            for zone in site.zones { lines.append("      - {id: \(zone.id)\(zone.capacity.map { ", capacity: \($0)" } ?? "")}") }
            lines.append("    agents:")
            for agent in site.agents {
                // The simulated receiver hears `rssi_offset_db` more than the model; the sites file corrects it.
                lines.append("      - {id: \(agent.id)\(agent.zone.map { ", zone: \($0)" } ?? ""), rssi_offset_db: \(-agent.rssiOffsetDb)}")
            }
        }
        let keyed = scenario.beacons.filter { $0.identityKey != nil }
        if !keyed.isEmpty {
            lines.append("beacons:")
            for beacon in keyed {
                guard let id = beaconIDs[beacon.name], let key = beacon.identityKey else { continue }
                lines.append("  - {id: \"\(id)\", identity_key: \(key)}")
            }
        }
        return try parse(lines.joined(separator: "\n") + "\n", name: "sites for the scenario")
    }
}
