import BeaconAgent
import BeaconIngest
import BeaconPositions
import BeaconSimulation
import Foundation

/// One way of deciding zones, as the sites-file settings that select it.
public struct ZoneMethod: Sendable, Equatable {
    public var name: String
    public var summary: String
    public var smoothing: RSSISmoothing
    public var switchMarginDb: Double
    public var switchEvidenceDbSeconds: Double
    public var switchDwellSeconds: Double
    /// Further sites-file keys for each site, written as given (`beaconflow accuracy --set`).
    public var siteKeys: [(key: String, value: String)] = []

    public static func == (left: ZoneMethod, right: ZoneMethod) -> Bool {
        left.name == right.name && left.smoothing == right.smoothing && left.switchMarginDb == right.switchMarginDb
            && left.switchEvidenceDbSeconds == right.switchEvidenceDbSeconds
            && left.switchDwellSeconds == right.switchDwellSeconds && left.siteKeys.map(\.key) == right.siteKeys.map(\.key)
            && left.siteKeys.map(\.value) == right.siteKeys.map(\.value)
    }

    /// The zone of the loudest reading as heard, changed at once.
    public static let nearest = ZoneMethod(
        name: "nearest", summary: "raw RSSI, loudest agent wins at once", smoothing: .none, switchMarginDb: 0,
        switchEvidenceDbSeconds: 0, switchDwellSeconds: 0, siteKeys: liveHistory)
    /// Kalman-smoothed RSSI per (beacon, agent), loudest wins at once.
    public static let kalman = ZoneMethod(
        name: "kalman", summary: "Kalman-smoothed RSSI, loudest agent wins at once", smoothing: .kalman,
        switchMarginDb: 0, switchEvidenceDbSeconds: 0, switchDwellSeconds: 0, siteKeys: liveHistory)
    /// Raw RSSI with the default switching rule.
    public static let hysteresis = ZoneMethod(
        name: "hysteresis", summary: "raw RSSI, the default switching rule", smoothing: .none,
        switchMarginDb: defaults.switchMarginDb, switchEvidenceDbSeconds: liveEvidence,
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000, siteKeys: liveHistory)
    /// The ingest's defaults: Kalman-smoothed RSSI and the switching rule of `ZoneRules`.
    public static let chosen = ZoneMethod(
        name: "chosen", summary: "the ingest's defaults: Kalman-smoothed RSSI, zones scored by learned patterns, change detection, the history confirmed by the likeliest path over 120 s",
        smoothing: .kalman, switchMarginDb: defaults.switchMarginDb, switchEvidenceDbSeconds: defaults.switchEvidenceDbSeconds,
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000)

    /// The defaults, but each zone as loud as its loudest agent instead of the learned patterns.
    public static let loudestZone = ZoneMethod(
        name: "chosen-loudest", summary: "the defaults with each zone as loud as its loudest agent",
        smoothing: .kalman, switchMarginDb: defaults.switchMarginDb,
        switchEvidenceDbSeconds: ZoneRules.defaultSwitchEvidenceDbSeconds(history: defaults.history, scoring: .loudest),
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000, siteKeys: [("zone_scoring", ZoneScoring.loudest.rawValue)])

    /// The defaults, but the history (visits, minutes) decided by the likeliest path over 120 s.
    public static let pathHistory = ZoneMethod(
        name: "chosen-path", summary: "the defaults with the history decided by the likeliest path over 120 s",
        smoothing: .kalman, switchMarginDb: defaults.switchMarginDb, switchEvidenceDbSeconds: defaults.switchEvidenceDbSeconds,
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000,
        siteKeys: [("zone_history", ZoneHistory.path.rawValue)])

    /// The defaults, but the history of the live decisions as they are, each move dated where the readings turned,
    /// counted 60 s after each minute.
    public static let crossingsHistory = ZoneMethod(
        name: "chosen-crossings", summary: "the defaults with the history of the live decisions as they are, over 60 s",
        smoothing: .kalman, switchMarginDb: defaults.switchMarginDb, switchEvidenceDbSeconds: liveEvidence,
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000, siteKeys: liveHistory)

    /// The defaults where the site has a floor: zones scored by each zone's share of the beacon's position.
    public static let positionZones = ZoneMethod(
        name: "chosen-position", summary: "the defaults where the site has a floor: zones by position",
        smoothing: .kalman, switchMarginDb: defaults.switchMarginDb,
        switchEvidenceDbSeconds: ZoneRules.defaultSwitchEvidenceDbSeconds(history: defaults.history, scoring: .position),
        switchDwellSeconds: Double(defaults.switchDwellMicros) / 1_000_000, siteKeys: [("zone_scoring", ZoneScoring.position.rawValue)])

    /// The history of the live decisions as they are (peers have no hindsight).
    private static let liveHistory: [(key: String, value: String)] = [("zone_history", ZoneHistory.crossings.rawValue), ("history_lag_s", "60")]

    private static let defaults = ZoneRules()
    /// The evidence a move needs where the live decisions are stored as they are.
    private static let liveEvidence = ZoneRules.defaultSwitchEvidenceDbSeconds(history: .crossings, scoring: defaults.scoring)

    public static let all = [nearest, kalman, hysteresis, chosen, loudestZone, pathHistory, crossingsHistory, positionZones]

    public static func named(_ name: String) -> ZoneMethod? { all.first { $0.name == name } }
}

extension SitesConfiguration {
    /// The sites file an operator would write for a simulated deployment: its sites, zones and agents with their
    /// RSSI offsets (as calibrated), its path-loss exponents, and the identity keys of its EID beacons; zone
    /// decisions by `method`, whose `--set` keys are read as a site entry's are.
    public static func forScenario(_ scenario: Scenario, beaconIDs: [String: String], method: ZoneMethod) throws(SitesError) -> SitesConfiguration {
        let settings = try SitesFileEntry(settings: method.siteKeys, place: "--set")
        try settings.allowOnly(Site.keys)
        // The receivers' positions are given only where the zones are scored by them: elsewhere following each
        // beacon's position would cost the harness's runs without changing a zone.
        let placesReceivers = settings.text("zone_scoring") == ZoneScoring.position.rawValue
        var rules = try ZoneRules(reading: settings, floor: placesReceivers ? .walled : .none)
        // The method's own settings, where --set gives none.
        if !settings.has("zone_switch_margin_db") { rules.switchMarginDb = method.switchMarginDb }
        if !settings.has("zone_switch_dwell_s") { rules.switchDwellMicros = Int64(method.switchDwellSeconds * 1_000_000) }
        if !settings.has("zone_switch_evidence_db_s") { rules.switchEvidenceDbSeconds = method.switchEvidenceDbSeconds }
        var smoothing = method.smoothing
        if let name = settings.text("rssi_smoothing") {
            guard let given = RSSISmoothing(rawValue: name) else {
                throw SitesError("--set rssi_smoothing must be 'kalman' or 'none', not '\(name)'")
            }
            smoothing = given
        }
        var sites: [Site] = []
        for site in scenario.sites {
            sites.append(
                Site(
                    id: site.id, pathLossExponent: try settings.number("path_loss_exponent") ?? site.pathLossExponent,
                    rssiSmoothing: smoothing, zoneRules: rules,
                    zones: site.zones.map { Zone(id: $0.id, capacity: $0.capacity, rect: $0.rect) },
                    // The simulated receiver hears `rssi_offset_db` more than the model; the sites file corrects it.
                    agents: site.agents.map {
                        Agent(
                            id: $0.id, zone: $0.zone, rssiOffsetDb: -$0.rssiOffsetDb,
                            position: placesReceivers ? Position(x: $0.position[0], y: $0.position[1]) : nil)
                    },
                    // The doors the operator knows.
                    doors: site.doors.map(\.zones),
                    // What a calibration walk would fit: the beacons' power at 1 m and the site's exponent.
                    radioModel: RadioModel(
                        powerAt1mDbm: try settings.number("position_power_at_1m_dbm") ?? -59,
                        exponent: try settings.number("position_path_loss_exponent") ?? site.pathLossExponent,
                        sigmaDb: try settings.number("position_noise_db") ?? 6)))
        }
        // The registry: every beacon with its scenario name as the label, and its identity key if it has one.
        var beacons: [Beacon] = []
        var seen: Set<String> = []
        for beacon in scenario.beacons {
            guard let id = beaconIDs[beacon.name], seen.insert(id).inserted else { continue }
            let key = try beacon.identityKey.map { (text) throws(SitesError) in
                guard let bytes = try? [UInt8](hex: text), bytes.count == 16 else {
                    throw SitesError("beacon \(beacon.name): identity key must be 32 hex digits")
                }
                return bytes
            }
            beacons.append(Beacon(id: id, label: beacon.name, identityKey: key))
        }
        return SitesConfiguration(sites: sites, beacons: beacons)
    }
}
