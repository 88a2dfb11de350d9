import BeaconMessaging

/// What live presence says now, kept from committed zone changes, and the messages that change it (retained, so
/// each topic's latest message is its state). Pure: the publisher sends what it returns.
///
/// Per served site: each beacon's placement (zone and since), its latest position where the site has a floor, and
/// each zone's occupants (beacons placed there).
/// Beacons get topics of their own only when in the registry, unless `allBeacons`; with `discovery`, a registry
/// beacon's Home Assistant configs are made the first time it is placed at a site.
struct PresenceBoard: Sendable {
    struct Message: Sendable, Equatable {
        var topic: String
        var payload: [UInt8]
        /// A beacon outside the registry (`allBeacons`): sent after every other message, and dropped past a bound.
        var unregistered = false
    }

    private let labels: [String: String?]
    private let allBeacons: Bool
    private let zonesOfSite: [String: [String]]
    let discovery: HomeAssistantDiscovery?
    /// Per site: beacon → (zone, since).
    private var placed: [String: [String: (zone: String, since: Int64)]] = [:]
    /// Per site: beacon with a topic → its latest position, until it leaves.
    private var positions: [String: [String: BeaconPosition]] = [:]
    /// Per site and zone: the beacons placed there, and the count last published.
    private var counts: [String: [String: Int]] = [:]
    private var occupants: [String: [String: Int]] = [:]
    /// The beacon configs published (or found on the broker), by key (`<component>/<object id>`).
    private(set) var discoveryPublished: Set<String> = []
    /// Per site: beacon → its condition's payload last given, so that an unchanged one is not sent again.
    private var conditions: [String: [String: [UInt8]]] = [:]
    /// Per site: beacon → its latest value of each quantity it reports, and the payload last given.
    private var readings: [String: [String: (values: [String: Double], payload: [UInt8])]] = [:]

    init(sites: SitesConfiguration, allBeacons: Bool, discovery: HomeAssistantDiscovery?) {
        labels = Dictionary(sites.beacons.map { ($0.id, $0.label) }, uniquingKeysWith: { first, _ in first })
        self.allBeacons = allBeacons
        zonesOfSite = Dictionary(uniqueKeysWithValues: sites.sites.map { ($0.id, $0.zones.map(\.id)) })
        self.discovery = discovery
    }

    var servedSites: Set<String> { Set(placed.keys) }

    private func publishes(_ beaconID: String) -> Bool { allBeacons || labels[beaconID] != nil }

    /// A site this instance now serves, as its tracker has it: every published beacon's and zone's state.
    mutating func serve(site: String, placements: [(beaconID: String, zone: String, enterMicros: Int64)]) -> [Message] {
        guard let zones = zonesOfSite[site] else { return [] }
        var board: [String: (zone: String, since: Int64)] = [:]
        for placement in placements { board[placement.beaconID] = (placement.zone, placement.enterMicros) }
        placed[site] = board
        positions[site] = [:]
        counts[site] = Dictionary(board.values.map { ($0.zone, 1) }, uniquingKeysWith: +)
        occupants[site] = [:]
        var messages: [Message] = []
        for (beaconID, placement) in board.sorted(by: { $0.key < $1.key }) {
            messages += beaconMessages(site: site, beaconID: beaconID, zone: placement.zone, present: true, since: placement.since)
        }
        for zone in zones { messages += occupancyMessage(site: site, zone: zone, force: true) }
        return messages
    }

    /// A site served elsewhere now: its messages are the new owner's.
    mutating func forget(site: String) {
        placed[site] = nil
        positions[site] = nil
        counts[site] = nil
        occupants[site] = nil
        conditions[site] = nil
        readings[site] = nil
    }

    /// Forgets every site and which beacon configs were published: following the sites served publishes it all
    /// again.
    mutating func forgetAll() {
        placed = [:]
        positions = [:]
        counts = [:]
        occupants = [:]
        conditions = [:]
        readings = [:]
        discoveryPublished = []
    }

    /// The messages of committed zone changes, for the sites served: they follow the live placements, not the
    /// visits (which follow the stored history, up to the history lag later).
    mutating func apply(_ changes: [ZoneChange]) -> [Message] {
        var messages: [Message] = []
        var touched: [String: Set<String>] = [:]
        for change in changes {
            switch change {
            case .placement(let site, let beaconID, let zone?, let since):
                guard placed[site] != nil else { continue }
                if let old = placed[site]?[beaconID] {
                    touched[site, default: []].insert(old.zone)
                    counts[site]?[old.zone, default: 0] -= 1
                }
                placed[site]?[beaconID] = (zone, since)
                counts[site]?[zone, default: 0] += 1
                touched[site, default: []].insert(zone)
                messages += beaconMessages(site: site, beaconID: beaconID, zone: zone, present: true, since: since)
            case .placement(let site, let beaconID, nil, let since):
                guard let current = placed[site]?[beaconID] else { continue }
                placed[site]?[beaconID] = nil
                positions[site]?[beaconID] = nil
                counts[site]?[current.zone, default: 0] -= 1
                touched[site, default: []].insert(current.zone)
                messages += beaconMessages(site: site, beaconID: beaconID, zone: current.zone, present: false, since: since)
            case .position(let site, let beaconID, let position):
                // Kept only for a beacon with a topic, from before its placement until it leaves.
                guard placed[site] != nil, publishes(beaconID) else { continue }
                positions[site]?[beaconID] = position
                if let current = placed[site]?[beaconID] {
                    messages += beaconMessages(site: site, beaconID: beaconID, zone: current.zone, present: true, since: current.since)
                }
            case .merged(let site, let addressBeaconID, let beaconID):
                guard let current = placed[site]?[addressBeaconID] else { continue }
                messages += beaconMessages(site: site, beaconID: addressBeaconID, zone: current.zone, present: false, since: current.since)
                placed[site]?[addressBeaconID] = nil
                counts[site]?[current.zone, default: 0] -= 1
                if let previous = placed[site]?[beaconID] {
                    counts[site]?[previous.zone, default: 0] -= 1
                    touched[site, default: []].insert(previous.zone)
                }
                placed[site]?[beaconID] = current
                counts[site]?[current.zone, default: 0] += 1
                touched[site, default: []].insert(current.zone)
                if let position = positions[site]?.removeValue(forKey: addressBeaconID), publishes(beaconID) {
                    positions[site]?[beaconID] = position
                }
                messages += beaconMessages(site: site, beaconID: beaconID, zone: current.zone, present: true, since: current.since)
            case .visitOpened, .visitClosed, .occupancy, .agentState, .positionMinute:
                continue
            }
        }
        for (site, zones) in touched.sorted(by: { $0.key < $1.key }) {
            for zone in zones.sorted() { messages += occupancyMessage(site: site, zone: zone, force: false) }
        }
        return messages
    }

    /// Battery and temperature of the published beacons at the sites served, where they changed since last given
    /// (the temperature to a hundredth of a degree: a TLM's 1/256 °C steps are not news).
    mutating func condition(_ health: [BeaconHealth]) -> [Message] {
        health.compactMap { beacon in
            guard placed[beacon.siteID] != nil, publishes(beacon.beaconID),
                let topic = PresenceTopics.beaconCondition(site: beacon.siteID, beaconID: beacon.beaconID)
            else { return nil }
            let status = beacon.status == .stale ? BeaconHealth.Status.ok : beacon.status
            let payload = BeaconCondition(
                batteryMillivolts: beacon.batteryMillivolts.map(Int.init), batteryPercent: beacon.batteryPercent,
                temperatureCelsius: beacon.temperatureCelsius.map { ($0 * 100).rounded() / 100 }, status: status.rawValue
            ).payload
            guard conditions[beacon.siteID, default: [:]][beacon.beaconID] != payload else { return nil }
            conditions[beacon.siteID, default: [:]][beacon.beaconID] = payload
            return Message(topic: topic, payload: payload, unregistered: labels[beacon.beaconID] == nil)
        }
    }

    /// Sensor readings stored: each published beacon's latest value of each quantity on its readings topic, when
    /// they changed (`states`); with discovery, a registry beacon's entity of a quantity the first time it reports it
    /// at a site (`configs`).
    mutating func readings(_ rows: [SensorReadingRow]) -> (configs: [Message], states: [Message]) {
        var changed: [String: Set<String>] = [:]
        var configs: [Message] = []
        var states: [Message] = []
        for row in rows where placed[row.siteID] != nil && publishes(row.beaconID) {
            var entry = readings[row.siteID, default: [:]][row.beaconID] ?? ([:], [])
            if entry.values[row.reading.quantity] == nil, let discovery, labels[row.beaconID] != nil,
                let config = discovery.readingConfig(
                    site: row.siteID, beaconID: row.beaconID, label: labels[row.beaconID] ?? nil, quantity: row.reading.quantity,
                    unit: row.reading.unit),
                discoveryPublished.insert(config.key).inserted
            {
                configs.append(Message(topic: discovery.topic(key: config.key), payload: config.payload))
            }
            entry.values[row.reading.quantity] = row.reading.value
            readings[row.siteID, default: [:]][row.beaconID] = entry
            changed[row.siteID, default: []].insert(row.beaconID)
        }
        for (site, beacons) in changed.sorted(by: { $0.key < $1.key }) {
            for beaconID in beacons.sorted() {
                guard var entry = readings[site]?[beaconID], let topic = PresenceTopics.beaconReadings(site: site, beaconID: beaconID) else { continue }
                let payload = PresenceTopics.readingsPayload(entry.values)
                guard payload != entry.payload else { continue }
                entry.payload = payload
                readings[site]?[beaconID] = entry
                states.append(Message(topic: topic, payload: payload, unregistered: labels[beaconID] == nil))
            }
        }
        return (configs, states)
    }

    /// Configs found on the broker at start (by key, with the state topics each reads): those this ingest would
    /// not publish now (beacons no longer in the registry, sites or zones no longer in the sites file, binary
    /// sensors no longer asked for) are removed (an empty retained message), and with them the retained state
    /// topics they read that no beacon or zone of now uses; the others count as published.
    mutating func discoveryFound(_ found: [String: Set<String>]) -> [Message] {
        guard let discovery else { return [] }
        var expected: Set<String> = []
        var live: Set<String> = []
        for (site, zones) in zonesOfSite {
            for (beaconID, label) in labels {
                expected.formUnion(discovery.beaconConfigs(site: site, beaconID: beaconID, label: label, zones: zones).map(\.key))
                live.formUnion(
                    [
                        PresenceTopics.beacon(site: site, beaconID: beaconID), PresenceTopics.beaconCondition(site: site, beaconID: beaconID),
                        PresenceTopics.beaconReadings(site: site, beaconID: beaconID),
                    ].compactMap { $0 })
            }
            for zone in zones {
                expected.formUnion(discovery.zoneConfigs(site: site, zone: zone).map(\.key))
                live.insert(PresenceTopics.zone(site: site, zone: zone))
            }
        }
        var removals: [Message] = []
        var cleared: Set<String> = []
        let beaconKeys = Set(labels.keys.map(HomeAssistantDiscovery.beaconKey))
        let sites = Set(zonesOfSite.keys)
        for (key, stateTopics) in found.sorted(by: { $0.key < $1.key }) {
            if expected.contains(key) || HomeAssistantDiscovery.isReading(key, beaconKeys: beaconKeys, sites: sites) {
                discoveryPublished.insert(key)
                continue
            }
            removals.append(Message(topic: discovery.topic(key: key), payload: []))
            for topic in stateTopics.sorted() where !live.contains(topic) && cleared.insert(topic).inserted {
                removals.append(Message(topic: topic, payload: []))
            }
        }
        return removals
    }

    /// Every zone's configs (published by every instance: the same retained messages).
    var zoneDiscovery: [Message] {
        guard let discovery else { return [] }
        return zonesOfSite.sorted(by: { $0.key < $1.key }).flatMap { site, zones in
            zones.flatMap { discovery.zoneConfigs(site: site, zone: $0) }.map { Message(topic: discovery.topic(key: $0.key), payload: $0.payload) }
        }
    }

    private mutating func beaconMessages(site: String, beaconID: String, zone: String, present: Bool, since: Int64) -> [Message] {
        guard publishes(beaconID), let topic = PresenceTopics.beacon(site: site, beaconID: beaconID) else { return [] }
        let label = labels[beaconID] ?? nil
        var messages: [Message] = []
        if let discovery, labels[beaconID] != nil {
            for config in discovery.beaconConfigs(site: site, beaconID: beaconID, label: label, zones: zonesOfSite[site] ?? [])
            where discoveryPublished.insert(config.key).inserted {
                messages.append(Message(topic: discovery.topic(key: config.key), payload: config.payload))
            }
        }
        var presence = BeaconPresence(site: site, beaconID: beaconID, label: label, zone: zone, present: present, sinceMicros: since)
        if present, let position = positions[site]?[beaconID] {
            presence.x = position.x
            presence.y = position.y
            presence.errorM = position.errorM
            presence.zoneProbabilities = position.zoneShares
        }
        messages.append(Message(topic: topic, payload: presence.payload, unregistered: labels[beaconID] == nil))
        return messages
    }

    private mutating func occupancyMessage(site: String, zone: String, force: Bool) -> [Message] {
        let count = counts[site]?[zone] ?? 0
        guard force || occupants[site]?[zone] != count else { return [] }
        occupants[site]?[zone] = count
        return [Message(topic: PresenceTopics.zone(site: site, zone: zone), payload: ZonePresence(site: site, zone: zone, occupants: count).payload)]
    }
}
