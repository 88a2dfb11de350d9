import BeaconBatteries
import BeaconPositions
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
        /// The radio model positions are found with (`position_power_at_1m_dbm`, `position_path_loss_exponent`,
        /// `position_noise_db`).
        public var radioModel: RadioModel = .openPlan
        /// What each receiver hears above the model, place by place (`position_radio_map`: a file `beaconflow
        /// calibrate --radio-map` writes).
        public var radioMap: RadioMap?

        public init(
            id: String, timezone: String = "UTC", pathLossExponent: Double = 2.5, rssiSmoothing: RSSISmoothing = .kalman,
            zoneRules: ZoneRules = ZoneRules(), zones: [Zone], agents: [Agent], doors: [[String]] = [], radioModel: RadioModel = .openPlan
        ) {
            self.id = id
            self.timezone = timezone
            self.pathLossExponent = pathLossExponent
            self.rssiSmoothing = rssiSmoothing
            self.zoneRules = zoneRules
            self.zones = zones
            self.agents = agents
            self.doors = doors
            self.radioModel = radioModel
        }

        /// Whether beacons get positions on the site's floor: at least three agents have a position (`at`) and every
        /// zone a `rect`.
        public var hasFloor: Bool {
            agents.filter { $0.position != nil }.count >= Self.receiversForPositions && zones.allSatisfy { $0.rect != nil }
        }

        public static let receiversForPositions = 3

        /// The site's floor as its zone rules see it: none, with walls (its `doors` say where they open), or open.
        public var floor: ZoneRules.Floor { !hasFloor ? .none : doors.isEmpty ? .open : .walled }

        /// For each two zones (by index), whether one can walk from the one into the other: always within a zone,
        /// through a listed door between two; nil where the site lists no doors (no walls are known).
        public var passages: [[Bool]]? {
            guard !doors.isEmpty else { return nil }
            let ids = zones.map(\.id)
            return ids.map { from in ids.map { to in from == to || doors.contains { Set($0) == Set([from, to]) } } }
        }
    }

    public struct Zone: Sendable, Equatable {
        public var id: String
        public var capacity: Int?
        /// Where the zone lies on the site's floor plan, in metres: x0, y0, x1, y1 (`rect`), for the console.
        public var rect: [Double]?

        public init(id: String, capacity: Int? = nil, rect: [Double]? = nil) {
            self.id = id
            self.capacity = capacity
            self.rect = rect
        }
    }

    public struct Agent: Sendable, Equatable {
        public var id: String
        public var zone: String?
        public var rssiOffsetDb: Double
        /// Where the receiver is on the site's floor plan, in metres (`at`).
        public var position: Position?

        public init(id: String, zone: String?, rssiOffsetDb: Double = 0, position: Position? = nil) {
            self.id = id
            self.zone = zone
            self.rssiOffsetDb = rssiOffsetDb
            self.position = position
        }
    }

    /// A point on a site's floor plan, in metres, in the frame of its zones' `rect`; `z` the height when known.
    public struct Position: Sendable, Equatable {
        public var x: Double
        public var y: Double
        public var z: Double?

        public init(x: Double, y: Double, z: Double? = nil) {
            self.x = x
            self.y = y
            self.z = z
        }
    }

    public struct Beacon: Sendable, Equatable {
        public var id: String
        public var label: String?
        /// 16 bytes, for EID resolution and eTLM decryption.
        public var identityKey: [UInt8]?
        /// K, when known: the beacon's EID rotates every 2^K s. Without it every K from 0 to 15 is tried.
        public var eidRotationExponent: UInt8?
        /// 16 bytes, for decrypting BTHome (the beacon id is then `mac:<address>`, the address being the nonce's).
        public var bthomeBindkey: [UInt8]?
        /// 16 bytes, most significant first: a phone's or watch's identity resolving key, which ties each of its
        /// resolvable private addresses to this beacon.
        public var irk: [UInt8]?
        /// Its cell, its capacity and its radio's transmit power, for the battery forecast; nil when the file
        /// names none of them.
        public var battery: BatteryDescription?
        /// Whether it hangs outdoors, in the weather of its site's night forecasts.
        public var outdoors: Bool

        public init(
            id: String, label: String? = nil, identityKey: [UInt8]? = nil, eidRotationExponent: UInt8? = nil, bthomeBindkey: [UInt8]? = nil,
            irk: [UInt8]? = nil, battery: BatteryDescription? = nil, outdoors: Bool = false
        ) {
            self.id = id
            self.label = label
            self.identityKey = identityKey
            self.eidRotationExponent = eidRotationExponent
            self.bthomeBindkey = bthomeBindkey
            self.irk = irk
            self.battery = battery
            self.outdoors = outdoors
        }
    }

    public var sites: [Site]
    public var beacons: [Beacon]
    /// Of the file's text (FNV-1a, 64 bits, hex): instances sharing sites compare theirs to find one that runs
    /// with another file. Empty for a configuration built in code.
    public var digest = ""

    /// A configuration built in code (the accuracy harness's), taken as it is: a file's is checked as it is read.
    public init(sites: [Site], beacons: [Beacon] = []) {
        self.sites = sites
        self.beacons = beacons
    }

    /// The agent named by a batch topic, when the file knows it.
    public func agent(site: String, agent: String) -> Agent? {
        sites.first { $0.id == site }?.agents.first { $0.id == agent }
    }

    /// Identity keys of the registry, for the Eddystone keyring.
    public var identities: [EddystoneIdentity] {
        beacons.compactMap { beacon in
            beacon.identityKey.map { EddystoneIdentity(beaconID: beacon.id, identityKey: $0, rotationExponent: beacon.eidRotationExponent) }
        }
    }

    /// Identity resolving keys of the registry, by beacon.
    public var irks: [(beaconID: String, irk: [UInt8])] {
        beacons.compactMap { beacon in beacon.irk.map { (beacon.id, $0) } }
    }

    /// The cells the registry names, by beacon.
    public var batteries: [String: BatteryDescription] {
        var batteries: [String: BatteryDescription] = [:]
        for beacon in beacons { if let battery = beacon.battery { batteries[beacon.id] = battery } }
        return batteries
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
        return try parse(text, name: path, directory: (path as NSString).deletingLastPathComponent)
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

    /// Parses and checks the file; every error names the entry and what is wrong with it. Files it names (a
    /// site's radio map) are found in `directory` unless their path is absolute.
    public static func parse(_ text: String, name: String = "sites", directory: String = "") throws(SitesError) -> SitesConfiguration {
        let root: Any?
        do {
            root = try BoundedYAML.load(text)
        } catch {
            throw SitesError("\(name): not valid YAML (\(error))")
        }
        guard let mapping = root as? [String: Any] else { throw SitesError("\(name): expected a mapping with 'sites'") }
        let document = SitesFileEntry(mapping, place: name)
        try document.allowOnly(["sites", "beacons"])
        guard let siteList = mapping["sites"] as? [[String: Any]], !siteList.isEmpty else {
            throw SitesError("\(name): 'sites' must be a non-empty list")
        }
        guard siteList.count <= Self.maximumSites else {
            throw SitesError("\(name): sites: \(siteList.count) entries, more than \(Self.maximumSites)")
        }
        let beaconList = mapping["beacons"] as? [[String: Any]] ?? []
        guard beaconList.count <= Self.maximumBeacons else {
            throw SitesError("\(name): beacons: \(beaconList.count) entries, more than \(Self.maximumBeacons)")
        }
        var configuration = try SitesConfiguration(
            sites: siteList.enumerated().map { SitesFileEntry($1, place: "\(name): sites[\($0)]") },
            beacons: beaconList.enumerated().map { SitesFileEntry($1, place: "\(name): beacons[\($0)]") }, directory: directory)
        // A changed radio map is a changed file.
        configuration.digest = digest(of: text + configuration.sites.compactMap { $0.radioMap?.csv }.joined())
        return configuration
    }

    /// The sites and beacons read from their entries, checked across entries (ids once, the file's maximums).
    init(sites siteEntries: [SitesFileEntry], beacons beaconEntries: [SitesFileEntry], directory: String = "") throws(SitesError) {
        var sites: [Site] = []
        var siteIDs: Set<String> = []
        var agentCount = 0
        var zoneCount = 0
        for entry in siteEntries {
            let site = try Site(reading: entry, directory: directory)
            guard siteIDs.insert(site.id).inserted else { throw SitesError("\(entry.place): site '\(site.id)' appears twice") }
            zoneCount += site.zones.count
            guard zoneCount <= Self.maximumZones else { throw SitesError("\(entry.place): more than \(Self.maximumZones) zones in all") }
            agentCount += site.agents.count
            guard agentCount <= Self.maximumAgents else {
                throw SitesError("\(entry.place): more than \(Self.maximumAgents) agents in all")
            }
            sites.append(site)
        }
        var beacons: [Beacon] = []
        var beaconIDs: Set<String> = []
        for entry in beaconEntries {
            let beacon = try Beacon(reading: entry)
            guard beaconIDs.insert(beacon.id).inserted else { throw SitesError("\(entry.place): beacon '\(beacon.id)' appears twice") }
            beacons.append(beacon)
        }
        self.init(sites: sites, beacons: beacons)
    }
}

extension SitesConfiguration.Site {
    /// The keys of a site entry: its own and its zone rules'.
    package static let keys =
        ["id", "timezone", "path_loss_exponent", "zones", "agents", "doors", "rssi_smoothing", "position_radio_map"] + radioModelKeys
        + ZoneRules.keys
    package static let radioModelKeys = ["position_power_at_1m_dbm", "position_path_loss_exponent", "position_noise_db"]

    init(reading entry: SitesFileEntry, directory: String = "") throws(SitesError) {
        let place = entry.place
        try entry.allowOnly(Self.keys)
        id = try entry.identifier("id")
        timezone = entry.text("timezone") ?? "UTC"
        guard TimeZone(identifier: timezone) != nil else { throw SitesError("\(place): unknown timezone '\(timezone)'") }
        pathLossExponent = try entry.number("path_loss_exponent") ?? 2.5
        guard (1.5...5).contains(pathLossExponent) else {
            throw SitesError("\(place).path_loss_exponent \(pathLossExponent) is outside 1.5-5")
        }
        var zoneIDs: Set<String> = []
        zones = []
        for zoneEntry in entry.entries("zones") {
            let zone = try SitesConfiguration.Zone(reading: zoneEntry)
            guard zoneIDs.insert(zone.id).inserted else {
                throw SitesError("\(zoneEntry.place): zone '\(zone.id)' appears twice in site '\(id)'")
            }
            zones.append(zone)
        }
        guard !zones.isEmpty else { throw SitesError("\(place): site '\(id)' has no zones") }
        guard let doorList = entry.has("doors") ? entry.list("doors") : [] else {
            throw SitesError("\(place).doors must be a list of zone pairs")
        }
        doors = []
        for (doorIndex, door) in doorList.enumerated() {
            guard let pair = door as? [String], pair.count == 2, pair[0] != pair[1] else {
                throw SitesError("\(place).doors[\(doorIndex)] must be two zones of the site, as [zone, zone]")
            }
            for zone in pair where !zoneIDs.contains(zone) {
                throw SitesError("\(place).doors[\(doorIndex)]: site '\(id)' has no zone '\(zone)'")
            }
            doors.append(pair)
        }
        var agentIDs: Set<String> = []
        agents = []
        for agentEntry in entry.entries("agents") {
            let agent = try SitesConfiguration.Agent(reading: agentEntry, zones: zoneIDs, site: id)
            guard agentIDs.insert(agent.id).inserted else {
                throw SitesError("\(agentEntry.place): agent '\(agent.id)' appears twice in site '\(id)'")
            }
            agents.append(agent)
        }
        let smoothingName = entry.text("rssi_smoothing") ?? RSSISmoothing.kalman.rawValue
        guard let smoothing = RSSISmoothing(rawValue: smoothingName) else {
            throw SitesError("\(place).rssi_smoothing must be 'kalman' or 'none', not '\(smoothingName)'")
        }
        rssiSmoothing = smoothing
        radioModel = try RadioModel(reading: entry)
        if let file = entry.text("position_radio_map") {
            radioMap = try Self.radioMap(file, directory: directory, place: place)
            let placed = Set(agents.filter { $0.position != nil }.map(\.id))
            if let stranger = radioMap?.receivers.subtracting(placed).sorted().first {
                throw SitesError("\(place).position_radio_map \(file): '\(stranger)' is no agent of site '\(id)' with a position ('at')")
            }
        }
        // The rules' defaults depend on the floor, which the rest of the entry gives.
        zoneRules = ZoneRules()
        zoneRules = try ZoneRules(reading: entry, floor: floor)
    }
}

extension SitesConfiguration.Site {
    /// The radio map in `file` (relative to `directory` unless absolute).
    static func radioMap(_ file: String, directory: String, place: String) throws(SitesError) -> RadioMap {
        let path = file.hasPrefix("/") || directory.isEmpty ? file : directory + "/" + file
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw SitesError("\(place).position_radio_map: cannot read \(path)")
        }
        do {
            return try RadioMap(csv: text)
        } catch {
            throw SitesError("\(place).position_radio_map \(path): \(error)")
        }
    }
}

extension SitesConfiguration.Zone {
    init(reading entry: SitesFileEntry) throws(SitesError) {
        try entry.allowOnly(["id", "capacity", "rect"])
        id = try entry.identifier("id")
        capacity = entry.integer("capacity")
        if entry.has("rect") {
            let corners = entry.list("rect")?.compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
            guard let corners, corners.count == 4, corners.allSatisfy({ abs($0) <= 100_000 }), corners[0] < corners[2],
                corners[1] < corners[3]
            else { throw SitesError("\(entry.place).rect must be [x0, y0, x1, y1] in metres with x0 < x1 and y0 < y1") }
            rect = corners
        }
    }
}

extension SitesConfiguration.Agent {
    init(reading entry: SitesFileEntry, zones: Set<String>, site: String) throws(SitesError) {
        try entry.allowOnly(["id", "zone", "rssi_offset_db", "at"])
        id = try entry.identifier("id")
        guard id != "presence" else {
            throw SitesError("\(entry.place): agent id 'presence' is reserved (the site's live presence topics)")
        }
        zone = entry.text("zone")
        if let zone, !zones.contains(zone) {
            throw SitesError("\(entry.place): agent '\(id)' is in zone '\(zone)', which site '\(site)' does not have")
        }
        rssiOffsetDb = try entry.number("rssi_offset_db") ?? 0
        if entry.has("at") {
            let coordinates = entry.list("at")?.compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
            guard let coordinates, coordinates.count == 2 || coordinates.count == 3, coordinates.allSatisfy({ abs($0) <= 100_000 })
            else { throw SitesError("\(entry.place).at must be [x, y] or [x, y, z] in metres") }
            position = SitesConfiguration.Position(x: coordinates[0], y: coordinates[1], z: coordinates.count == 3 ? coordinates[2] : nil)
        }
    }
}

extension SitesConfiguration.Beacon {
    init(reading entry: SitesFileEntry) throws(SitesError) {
        let place = entry.place
        try entry.allowOnly([
            "id", "label", "identity_key", "eid_rotation_exponent", "bthome_bindkey", "irk", "battery", "battery_mah", "transmit_power_dbm",
            "outdoors",
        ])
        guard let id = entry.text("id"), !id.isEmpty else { throw SitesError("\(place).id is missing") }
        self.id = id
        func key(_ name: String) throws(SitesError) -> [UInt8]? {
            guard let text = entry.text(name) else {
                if entry.has(name) { throw SitesError("\(place).\(name) must be 32 hex digits") }
                return nil
            }
            guard let bytes = try? [UInt8](hex: text), bytes.count == 16 else {
                throw SitesError("\(place).\(name) must be 32 hex digits")
            }
            return bytes
        }
        bthomeBindkey = try key("bthome_bindkey")
        if bthomeBindkey != nil, SitesConfiguration.address(ofMACBeacon: id) == nil {
            throw SitesError(
                "\(place).bthome_bindkey needs the beacon's address: give its id as mac:AA:BB:CC:DD:EE:FF, not '\(id)'")
        }
        if entry.has("label"), entry.text("label") == nil {
            throw SitesError("\(place).label must be a string")
        }
        label = entry.text("label")
        identityKey = try key("identity_key")
        if entry.has("eid_rotation_exponent") {
            guard let exponent = entry.integer("eid_rotation_exponent"), (0...15).contains(exponent) else {
                throw SitesError("\(place).eid_rotation_exponent must be an integer from 0 to 15")
            }
            guard identityKey != nil else { throw SitesError("\(place).eid_rotation_exponent needs the beacon's identity_key") }
            eidRotationExponent = UInt8(exponent)
        }
        if let text = entry.text("irk") {
            irk = try Self.irk(text, place: place)
            guard BeaconIdentity.Kind(of: id) == nil else {
                throw SitesError("\(place).irk names a phone or watch: give it an id of its own such as phone-alice, not '\(id)'")
            }
        } else if entry.has("irk") {
            throw SitesError("\(place).irk must be 32 hex digits, or base64 as iOS keeps it")
        }
        battery = try Self.battery(entry)
        if entry.has("outdoors") {
            guard let outdoors = entry.flag("outdoors") else { throw SitesError("\(place).outdoors must be true or false") }
            self.outdoors = outdoors
        } else {
            outdoors = false
        }
    }

    /// `battery` (the cell's chemistry), `battery_mah` and `transmit_power_dbm`, or nil when none is given.
    private static func battery(_ entry: SitesFileEntry) throws(SitesError) -> BatteryDescription? {
        guard entry.has("battery") || entry.has("battery_mah") || entry.has("transmit_power_dbm") else { return nil }
        var description = BatteryDescription()
        if entry.has("battery") {
            guard let name = entry.text("battery"), let chemistry = BatteryChemistry(rawValue: name) else {
                let names = BatteryChemistry.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
                throw SitesError("\(entry.place).battery must be one of \(names)")
            }
            description.chemistry = chemistry
        }
        description.capacityMilliampHours = try entry.number("battery_mah", within: 1...100_000)
        description.transmitPowerDbm = try entry.number("transmit_power_dbm", within: -40...20) ?? 0
        return description
    }
}

extension ZoneRules {
    /// The keys of a site entry that set its zone rules.
    package static let keys = [
        "zone_switch_margin_db", "zone_switch_dwell_s", "zone_switch_evidence_db_s", "absence_timeout_s", "history_lag_s",
        "allowed_lateness_s", "first_batch_wait_s", "zone_scoring", "zone_switch_doorless_factor", "zone_switch_settled_s",
        "zone_history", "zone_path_change_db_s",
    ]

    /// The rules a site entry sets, the defaults for the others (the scoring's by the site's floor, the
    /// evidence's by the scoring and history).
    package init(reading entry: SitesFileEntry, floor: Floor) throws(SitesError) {
        self.init()
        let place = entry.place
        let scoringName = entry.text("zone_scoring") ?? (floor == .open ? ZoneScoring.position : scoring).rawValue
        guard let scoring = ZoneScoring(rawValue: scoringName) else {
            let names = ZoneScoring.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
            throw SitesError("\(place).zone_scoring must be one of \(names), not '\(scoringName)'")
        }
        if scoring == .position, floor == .none {
            throw SitesError(
                "\(place).zone_scoring 'position' needs a floor: at least \(SitesConfiguration.Site.receiversForPositions) agents with 'at' and a 'rect' for every zone")
        }
        self.scoring = scoring
        let historyName = entry.text("zone_history") ?? history.rawValue
        guard let history = ZoneHistory(rawValue: historyName) else {
            throw SitesError("\(place).zone_history must be 'crossings', 'path' or 'confirmed', not '\(historyName)'")
        }
        self.history = history
        switchEvidenceDbSeconds = Self.defaultSwitchEvidenceDbSeconds(history: history, scoring: scoring)
        pathChangeDbSeconds = Self.defaultPathChangeDbSeconds(scoring: scoring)
        if let cost = try entry.number("zone_path_change_db_s", within: 0...100_000) { pathChangeDbSeconds = cost }
        if let margin = try entry.number("zone_switch_margin_db", within: 0...30) { switchMarginDb = margin }
        if let factor = try entry.number("zone_switch_doorless_factor", within: 1...100) { doorlessEvidenceFactor = factor }
        if let evidence = try entry.number("zone_switch_evidence_db_s", within: 0...10_000) { switchEvidenceDbSeconds = evidence }
        for (key, path) in [
            ("zone_switch_dwell_s", \ZoneRules.switchDwellMicros), ("absence_timeout_s", \ZoneRules.absenceTimeoutMicros),
            ("history_lag_s", \ZoneRules.historyLagMicros), ("zone_switch_settled_s", \ZoneRules.settledMicros),
            ("allowed_lateness_s", \ZoneRules.allowedLatenessMicros), ("first_batch_wait_s", \ZoneRules.firstBatchWaitMicros),
        ] {
            if let micros = try entry.seconds(key) { self[keyPath: path] = micros }
        }
    }
}

extension RadioModel {
    /// The model a site entry sets (`SitesConfiguration.Site.radioModelKeys`), `base`'s values for the others.
    package init(reading entry: SitesFileEntry, over base: RadioModel = .openPlan) throws(SitesError) {
        self = base
        if let power = try entry.number("position_power_at_1m_dbm", within: -120...20) { powerAt1mDbm = power }
        if let exponent = try entry.number("position_path_loss_exponent", within: 1...6) { self.exponent = exponent }
        if let noise = try entry.number("position_noise_db", within: 1...30) { sigmaDb = noise }
    }
}

/// A mistake in the sites file, said so that the user can fix it.
public struct SitesError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension SitesConfiguration.Beacon {
    /// An IRK as given: 32 hex digits, most significant octet first (as the Core Specification prints keys and
    /// Home Assistant's Private BLE Device takes them in hex), or base64 ending in `=`, as iOS keeps it (least
    /// significant first); an `irk:` prefix is allowed.
    static func irk(_ text: String, place: String) throws(SitesError) -> [UInt8] {
        let given = text.hasPrefix("irk:") ? String(text.dropFirst(4)) : text
        if given.hasSuffix("="), let decoded = Foundation.Data(base64Encoded: given), decoded.count == 16 {
            return Array(decoded.reversed())
        }
        guard let bytes = try? [UInt8](hex: given), bytes.count == 16 else {
            throw SitesError("\(place).irk must be 32 hex digits, or base64 as iOS keeps it")
        }
        return bytes
    }
}
