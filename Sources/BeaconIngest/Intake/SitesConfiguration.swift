import BeaconWire
import BoundedYAML
import Foundation

/// The sites file (a contract; its keys are in the README): sites with their zones and agents, and the optional beacon registry.
public struct SitesConfiguration: Sendable, Equatable {
    public struct Site: Sendable, Equatable {
        public var id: String
        public var timezone: String
        public var pathLossExponent: Double
        /// How each agent's RSSI of a beacon is smoothed before it places the beacon (`rssi_smoothing`).
        public var rssiSmoothing: RSSISmoothing
        public var zoneRules: ZoneRules
        public var zones: [Zone]
        public var agents: [Agent]
        /// Pairs of zones a beacon can walk between directly (`doors`); empty: every pair.
        public var doors: [[String]] = []
    }

    public struct Zone: Sendable, Equatable {
        public var id: String
        public var capacity: Int?
        /// Where the zone lies on the site's floor plan, in metres: x0, y0, x1, y1 (`rect`), for the console.
        public var rect: [Double]?
    }

    public struct Agent: Sendable, Equatable {
        public var id: String
        public var zone: String?
        public var rssiOffsetDb: Double
    }

    public struct Beacon: Sendable, Equatable {
        public var id: String
        public var label: String?
        /// 16 bytes, for EID resolution and eTLM decryption.
        public var identityKey: [UInt8]?
        /// 16 bytes, for decrypting BTHome (the beacon id is then `mac:<address>`, the address being the nonce's).
        public var bthomeBindkey: [UInt8]?
    }

    public var sites: [Site]
    public var beacons: [Beacon]
    /// Of the file's text (FNV-1a, 64 bits, hex): instances sharing sites compare theirs to find one that runs
    /// with another file. Empty for a configuration built in code.
    public var digest = ""

    /// The agent named by a batch topic, when the file knows it.
    public func agent(site: String, agent: String) -> Agent? {
        sites.first { $0.id == site }?.agents.first { $0.id == agent }
    }

    /// Identity keys of the registry, for the Eddystone keyring.
    public var identities: [EddystoneIdentity] {
        beacons.compactMap { beacon in
            beacon.identityKey.map { EddystoneIdentity(beaconID: beacon.id, identityKey: $0) }
        }
    }

    /// BTHome bindkeys of the registry, by device address.
    public var bindkeys: [UInt64: [UInt8]] {
        var keys: [UInt64: [UInt8]] = [:]
        for beacon in beacons {
            if let key = beacon.bthomeBindkey, let address = Self.address(ofMACBeacon: beacon.id) { keys[address] = key }
        }
        return keys
    }

    /// The address of a `mac:AA:BB:CC:DD:EE:FF` beacon id.
    static func address(ofMACBeacon id: String) -> UInt64? {
        guard let kind = BeaconIdentity.Kind(of: id), kind == .mac else { return nil }
        return DeviceAddress(String(id.dropFirst(kind.prefix.count)))?.value
    }

    public static func load(path: String) throws(SitesError) -> SitesConfiguration {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw SitesError("cannot read the sites file \(path)")
        }
        return try parse(text, name: path)
    }

    /// FNV-1a over the text's UTF-8 bytes, as 16 hex digits.
    static func digest(of text: String) -> String {
        hexString(FNV1a.digest(text.utf8), digits: 16)
    }

    /// The most sites, agents and zones (in all) and registry beacons a file may hold: what one ingest's writer
    /// can take on at a reload in seconds, far above any deployment's file.
    public static let maximumSites = 10_000
    public static let maximumAgents = 100_000
    public static let maximumZones = 100_000
    public static let maximumBeacons = 1_000_000

    /// Parses and checks the file; every error names the entry and what is wrong with it.
    public static func parse(_ text: String, name: String = "sites") throws(SitesError) -> SitesConfiguration {
        let root: Any?
        do {
            root = try BoundedYAML.load(text)
        } catch {
            throw SitesError("\(name): not valid YAML (\(error))")
        }
        guard let document = root as? [String: Any] else { throw SitesError("\(name): expected a mapping with 'sites'") }
        try unknownKeys(document, ["sites", "beacons"], "\(name)")
        guard let siteList = document["sites"] as? [[String: Any]], !siteList.isEmpty else {
            throw SitesError("\(name): 'sites' must be a non-empty list")
        }
        guard siteList.count <= Self.maximumSites else {
            throw SitesError("\(name): sites: \(siteList.count) entries, more than \(Self.maximumSites)")
        }
        var sites: [Site] = []
        var siteIDs: Set<String> = []
        var agentCount = 0
        var zoneCount = 0
        for (index, entry) in siteList.enumerated() {
            let place = "\(name): sites[\(index)]"
            try unknownKeys(
                entry,
                [
                    "id", "timezone", "path_loss_exponent", "zones", "agents", "zone_switch_margin_db",
                    "zone_switch_dwell_s", "zone_switch_evidence_db_s", "absence_timeout_s", "history_lag_s", "allowed_lateness_s",
                    "first_batch_wait_s", "rssi_smoothing", "zone_scoring", "doors", "zone_switch_doorless_factor",
                    "zone_switch_settled_s", "zone_history", "zone_path_change_db_s",
                ], place)
            let id = try identifier(entry["id"], "\(place).id")
            guard siteIDs.insert(id).inserted else { throw SitesError("\(place): site '\(id)' appears twice") }
            let timezone = entry["timezone"] as? String ?? "UTC"
            guard TimeZone(identifier: timezone) != nil else { throw SitesError("\(place): unknown timezone '\(timezone)'") }
            let exponent = try number(entry["path_loss_exponent"], "\(place).path_loss_exponent") ?? 2.5
            guard (1.5...5).contains(exponent) else {
                throw SitesError("\(place).path_loss_exponent \(exponent) is outside 1.5-5")
            }
            var zones: [Zone] = []
            var zoneIDs: Set<String> = []
            for (zoneIndex, zone) in (entry["zones"] as? [[String: Any]] ?? []).enumerated() {
                let zonePlace = "\(place).zones[\(zoneIndex)]"
                try unknownKeys(zone, ["id", "capacity", "rect"], zonePlace)
                let zoneID = try identifier(zone["id"], "\(zonePlace).id")
                guard zoneIDs.insert(zoneID).inserted else {
                    throw SitesError("\(zonePlace): zone '\(zoneID)' appears twice in site '\(id)'")
                }
                var rect: [Double]?
                if let given = zone["rect"] {
                    let corners = (given as? [Any])?.compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
                    guard let corners, corners.count == 4, corners.allSatisfy({ abs($0) <= 100_000 }), corners[0] < corners[2],
                        corners[1] < corners[3]
                    else { throw SitesError("\(zonePlace).rect must be [x0, y0, x1, y1] in metres with x0 < x1 and y0 < y1") }
                    rect = corners
                }
                zones.append(Zone(id: zoneID, capacity: zone["capacity"] as? Int, rect: rect))
            }
            guard !zones.isEmpty else { throw SitesError("\(place): site '\(id)' has no zones") }
            zoneCount += zones.count
            guard zoneCount <= Self.maximumZones else {
                throw SitesError("\(place): more than \(Self.maximumZones) zones in all")
            }
            guard let doorList = entry["doors"].map({ $0 as? [Any] }) ?? [] else {
                throw SitesError("\(place).doors must be a list of zone pairs")
            }
            var doors: [[String]] = []
            for (doorIndex, door) in doorList.enumerated() {
                guard let pair = door as? [String], pair.count == 2, pair[0] != pair[1] else {
                    throw SitesError("\(place).doors[\(doorIndex)] must be two zones of the site, as [zone, zone]")
                }
                for zone in pair where !zoneIDs.contains(zone) {
                    throw SitesError("\(place).doors[\(doorIndex)]: site '\(id)' has no zone '\(zone)'")
                }
                doors.append(pair)
            }
            var agents: [Agent] = []
            var agentIDs: Set<String> = []
            for (agentIndex, agent) in (entry["agents"] as? [[String: Any]] ?? []).enumerated() {
                let agentPlace = "\(place).agents[\(agentIndex)]"
                try unknownKeys(agent, ["id", "zone", "rssi_offset_db"], agentPlace)
                let agentID = try identifier(agent["id"], "\(agentPlace).id")
                guard agentID != "presence" else {
                    throw SitesError("\(agentPlace): agent id 'presence' is reserved (the site's live presence topics)")
                }
                guard agentIDs.insert(agentID).inserted else {
                    throw SitesError("\(agentPlace): agent '\(agentID)' appears twice in site '\(id)'")
                }
                let zone = agent["zone"] as? String
                if let zone, !zoneIDs.contains(zone) {
                    throw SitesError("\(agentPlace): agent '\(agentID)' is in zone '\(zone)', which site '\(id)' does not have")
                }
                let offset = try number(agent["rssi_offset_db"], "\(agentPlace).rssi_offset_db") ?? 0
                agents.append(Agent(id: agentID, zone: zone, rssiOffsetDb: offset))
            }
            agentCount += agents.count
            guard agentCount <= Self.maximumAgents else {
                throw SitesError("\(place): more than \(Self.maximumAgents) agents in all")
            }
            let smoothingName = entry["rssi_smoothing"] as? String ?? RSSISmoothing.kalman.rawValue
            guard let smoothing = RSSISmoothing(rawValue: smoothingName) else {
                throw SitesError("\(place).rssi_smoothing must be 'kalman' or 'none', not '\(smoothingName)'")
            }
            var rules = ZoneRules()
            let scoringName = entry["zone_scoring"] as? String ?? rules.scoring.rawValue
            guard let scoring = ZoneScoring(rawValue: scoringName) else {
                throw SitesError("\(place).zone_scoring must be 'pattern' or 'loudest', not '\(scoringName)'")
            }
            rules.scoring = scoring
            let historyName = entry["zone_history"] as? String ?? rules.history.rawValue
            guard let history = ZoneHistory(rawValue: historyName) else {
                throw SitesError("\(place).zone_history must be 'crossings', 'path' or 'confirmed', not '\(historyName)'")
            }
            rules.history = history
            rules.switchEvidenceDbSeconds = ZoneRules.defaultSwitchEvidenceDbSeconds(history: history, scoring: scoring)
            if let cost = try number(entry["zone_path_change_db_s"], "\(place).zone_path_change_db_s") {
                guard (0...100_000).contains(cost) else { throw SitesError("\(place).zone_path_change_db_s must be 0-100000") }
                rules.pathChangeDbSeconds = cost
            }
            if let margin = try number(entry["zone_switch_margin_db"], "\(place).zone_switch_margin_db") {
                guard (0...30).contains(margin) else { throw SitesError("\(place).zone_switch_margin_db must be 0-30") }
                rules.switchMarginDb = margin
            }
            if let factor = try number(entry["zone_switch_doorless_factor"], "\(place).zone_switch_doorless_factor") {
                guard (1...100).contains(factor) else { throw SitesError("\(place).zone_switch_doorless_factor must be 1-100") }
                rules.doorlessEvidenceFactor = factor
            }
            if let evidence = try number(entry["zone_switch_evidence_db_s"], "\(place).zone_switch_evidence_db_s") {
                guard (0...10_000).contains(evidence) else { throw SitesError("\(place).zone_switch_evidence_db_s must be 0-10000") }
                rules.switchEvidenceDbSeconds = evidence
            }
            for (key, path) in [
                ("zone_switch_dwell_s", \ZoneRules.switchDwellMicros), ("absence_timeout_s", \ZoneRules.absenceTimeoutMicros),
                ("history_lag_s", \ZoneRules.historyLagMicros), ("zone_switch_settled_s", \ZoneRules.settledMicros),
                ("allowed_lateness_s", \ZoneRules.allowedLatenessMicros), ("first_batch_wait_s", \ZoneRules.firstBatchWaitMicros),
            ] {
                if let seconds = try number(entry[key], "\(place).\(key)") {
                    guard (0...86_400).contains(seconds) else { throw SitesError("\(place).\(key) must be 0-86400 seconds") }
                    rules[keyPath: path] = Int64(seconds * 1_000_000)
                }
            }
            sites.append(
                Site(
                    id: id, timezone: timezone, pathLossExponent: exponent, rssiSmoothing: smoothing, zoneRules: rules,
                    zones: zones, agents: agents, doors: doors))
        }
        var beacons: [Beacon] = []
        var beaconIDs: Set<String> = []
        let beaconList = document["beacons"] as? [[String: Any]] ?? []
        guard beaconList.count <= Self.maximumBeacons else {
            throw SitesError("\(name): beacons: \(beaconList.count) entries, more than \(Self.maximumBeacons)")
        }
        for (index, entry) in beaconList.enumerated() {
            let place = "\(name): beacons[\(index)]"
            try unknownKeys(entry, ["id", "label", "identity_key", "bthome_bindkey"], place)
            guard let id = entry["id"] as? String, !id.isEmpty else { throw SitesError("\(place).id is missing") }
            guard beaconIDs.insert(id).inserted else { throw SitesError("\(place): beacon '\(id)' appears twice") }
            func key(_ name: String) throws(SitesError) -> [UInt8]? {
                guard let text = entry[name] as? String else {
                    if entry[name] != nil { throw SitesError("\(place).\(name) must be 32 hex digits") }
                    return nil
                }
                guard let bytes = try? [UInt8](hex: text), bytes.count == 16 else {
                    throw SitesError("\(place).\(name) must be 32 hex digits")
                }
                return bytes
            }
            let bindkey = try key("bthome_bindkey")
            if bindkey != nil, address(ofMACBeacon: id) == nil {
                throw SitesError(
                    "\(place).bthome_bindkey needs the beacon's address: give its id as mac:AA:BB:CC:DD:EE:FF, not '\(id)'")
            }
            if let label = entry["label"], !(label is String) {
                throw SitesError("\(place).label must be a string")
            }
            beacons.append(
                Beacon(id: id, label: entry["label"] as? String, identityKey: try key("identity_key"), bthomeBindkey: bindkey))
        }
        var configuration = SitesConfiguration(sites: sites, beacons: beacons)
        configuration.digest = digest(of: text)
        return configuration
    }

    private static func identifier(_ value: Any?, _ place: String) throws(SitesError) -> String {
        guard let text = value as? String, isValidIdentifier(text) else {
            throw SitesError("\(place) must be 1-64 characters of a-z, 0-9 and '-'")
        }
        return text
    }

    private static func number(_ value: Any?, _ place: String) throws(SitesError) -> Double? {
        switch value {
        case nil: return nil
        case let number as Double: return number
        case let number as Int: return Double(number)
        default: throw SitesError("\(place) must be a number")
        }
    }

    private static func unknownKeys(_ mapping: [String: Any], _ known: Set<String>, _ place: String) throws(SitesError) {
        if let unknown = mapping.keys.sorted().first(where: { !known.contains($0) }) {
            let suggestion = BoundedYAML.nearestKey(to: unknown, among: known.sorted()).map { " (did you mean '\($0)'?)" } ?? ""
            throw SitesError("\(place): unknown key '\(unknown)'\(suggestion)")
        }
    }
}

/// A mistake in the sites file, said so that the user can fix it.
public struct SitesError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
