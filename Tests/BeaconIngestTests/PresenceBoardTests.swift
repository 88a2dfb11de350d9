import BeaconMessaging
import BeaconWire
import Testing

@testable import BeaconIngest

/// Live presence as pure logic: which messages committed zone changes make.
@Suite struct PresenceBoardTests {
    static let sites = try! SitesConfiguration.parse(
        """
        sites:
          - id: hq
            zones: [{id: lobby}, {id: lab}]
            agents: [{id: hq-a1, zone: lobby}]
        beacons:
          - {id: "ibeacon:a:1:1", label: Cart}
          - {id: "bad/id", label: Odd}
        """)

    func decoded(_ messages: [PresenceBoard.Message]) -> [String] {
        messages.map { message in
            if let beacon = BeaconPresence(payload: message.payload) {
                return "\(beacon.beaconID) \(beacon.present ? "in" : "left") \(beacon.zone) \(beacon.since)"
            }
            if let zone = ZonePresence(payload: message.payload) { return "\(zone.zone) \(zone.occupants)" }
            return message.topic
        }
    }

    @Test func movesAndLeavesMakeBeaconAndZoneMessages() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: nil)
        #expect(decoded(board.serve(site: "hq", placements: [])) == ["lobby 0", "lab 0"])
        // Nothing for a site served elsewhere.
        #expect(board.apply([.placement(site: "other", beaconID: "ibeacon:a:1:1", zone: "x", sinceMicros: 0)]).isEmpty)
        let moved = board.apply([
            .placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lobby", sinceMicros: 0),
            .placement(site: "hq", beaconID: "passer-by", zone: "lobby", sinceMicros: 0),
            .placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: nil, sinceMicros: 60_000_000),
            .placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lab", sinceMicros: 60_000_000),
            .occupancy(site: "hq", zone: "lab", minuteMicros: 0, occupants: 1, occupantSeconds: 60),
        ])
        #expect(
            decoded(moved) == [
                "ibeacon:a:1:1 in lobby 1970-01-01T00:00:00.000000Z", "ibeacon:a:1:1 left lobby 1970-01-01T00:01:00.000000Z",
                "ibeacon:a:1:1 in lab 1970-01-01T00:01:00.000000Z", "lab 1", "lobby 1",
            ])
        // The visits follow the stored history, which may lag the live zone: they change nothing here.
        #expect(
            board.apply([
                .visitClosed(site: "hq", beaconID: "ibeacon:a:1:1", enterMicros: 0, exitMicros: 70_000_000),
                .visitOpened(site: "hq", zone: "lobby", beaconID: "ibeacon:a:1:1", enterMicros: 70_000_000),
            ]).isEmpty)
        // A beacon that leaves without being placed changes nothing; an unchanged count is not sent again.
        #expect(board.apply([.placement(site: "hq", beaconID: "never-placed", zone: nil, sinceMicros: 1)]).isEmpty)
        #expect(decoded(board.apply([.placement(site: "hq", beaconID: "passer-by", zone: nil, sinceMicros: 5)])) == ["lobby 0"])
        // A registry id that cannot be a topic level has no topic (it still counts).
        #expect(decoded(board.apply([.placement(site: "hq", beaconID: "bad/id", zone: "lab", sinceMicros: 0)])) == ["lab 2"])
        // Served again (after a hand-over back, or a broker that lost its retained messages): the whole state.
        board.forget(site: "hq")
        #expect(
            decoded(board.serve(site: "hq", placements: [("ibeacon:a:1:1", "lab", 60_000_000)]))
                == ["ibeacon:a:1:1 in lab 1970-01-01T00:01:00.000000Z", "lobby 0", "lab 1"])
    }

    /// An address beacon found to be a registry beacon (`ZoneChange.merged`): the address's topic says it left, the
    /// beacon is where the address was, since the address came, and the device counts once.
    @Test func anAddressBeaconMergedIntoABeaconTakesItsPlace() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: true, discovery: nil)
        _ = board.serve(site: "hq", placements: [])
        _ = board.apply([
            .placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lab", sinceMicros: 0),
            .placement(site: "hq", beaconID: "mac:C0:FF:EE:00:00:01", zone: "lobby", sinceMicros: 60_000_000),
        ])
        let merged = board.apply([.merged(site: "hq", addressBeaconID: "mac:C0:FF:EE:00:00:01", beaconID: "ibeacon:a:1:1")])
        #expect(
            decoded(merged.filter { !$0.topic.hasSuffix("/config") }) == [
                "mac:C0:FF:EE:00:00:01 left lobby 1970-01-01T00:01:00.000000Z", "ibeacon:a:1:1 in lobby 1970-01-01T00:01:00.000000Z",
                "lab 0",
            ])
        // The lobby's count stays 1 (not sent again); the beacon leaving takes it to 0.
        #expect(decoded(board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: nil, sinceMicros: 90_000_000)])).last == "lobby 0")
        // Nothing more when the address beacon is no longer placed.
        #expect(board.apply([.merged(site: "hq", addressBeaconID: "mac:C0:FF:EE:00:00:01", beaconID: "ibeacon:a:1:1")]).isEmpty)
    }

    @Test func everyBeaconWhenAskedAndDiscoveryOnlyForTheRegistry() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: true, discovery: HomeAssistantDiscovery(prefix: "ha"))
        _ = board.serve(site: "hq", placements: [])
        let messages = board.apply([
            .placement(site: "hq", beaconID: "passer-by", zone: "lobby", sinceMicros: 0),
            .placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lobby", sinceMicros: 0),
        ])
        let key = HomeAssistantDiscovery.beaconKey("ibeacon:a:1:1")
        #expect(
            messages.map(\.topic) == [
                "beaconflow/v1/hq/presence/beacons/passer-by", "ha/device_tracker/beaconflow/\(key)_hq_tracker/config",
                "ha/sensor/beaconflow/\(key)_hq_zone/config",
                "ha/sensor/beaconflow/\(key)_hq_battery/config", "ha/sensor/beaconflow/\(key)_hq_battery_voltage/config",
                "ha/sensor/beaconflow/\(key)_hq_temperature/config", "beaconflow/v1/hq/presence/beacons/ibeacon:a:1:1",
                "beaconflow/v1/hq/presence/zones/lobby",
            ])
        // Configs go once.
        _ = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: nil, sinceMicros: 1)])
        #expect(!board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lab", sinceMicros: 2)]).contains { $0.topic.hasPrefix("ha/") })
    }

    /// Configs found at start that this ingest would not publish now go, with the retained states they read that no
    /// beacon or zone uses any more (a beacon gone from the registry, a zone gone from the sites file); a config
    /// no longer asked for (a binary sensor) goes, its state, still a beacon's, stays.
    @Test func configsOfBeaconsZonesAndSitesNoLongerListedAreRemoved() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: HomeAssistantDiscovery())
        let key = HomeAssistantDiscovery.beaconKey("ibeacon:a:1:1")
        let gone = HomeAssistantDiscovery.beaconKey("ibeacon:gone:1:1")
        let presence = PresenceTopics.beacon(site: "hq", beaconID: "ibeacon:a:1:1")!
        let gonePresence = PresenceTopics.beacon(site: "hq", beaconID: "ibeacon:gone:1:1")!
        let goneCondition = PresenceTopics.beaconCondition(site: "hq", beaconID: "ibeacon:gone:1:1")!
        let removals = board.discoveryFound([
            "sensor/\(key)_hq_zone": [presence], "device_tracker/\(key)_hq_tracker": [presence],
            "sensor/\(key)_old-site_zone": [], "sensor/\(gone)_hq_zone": [gonePresence], "sensor/\(gone)_hq_battery": [goneCondition],
            "binary_sensor/\(key)_hq_in_lobby": [presence],
            "sensor/site_hq_lobby_occupancy": [PresenceTopics.zone(site: "hq", zone: "lobby")],
            "sensor/site_hq_attic_occupancy": [PresenceTopics.zone(site: "hq", zone: "attic")],
        ])
        #expect(removals.allSatisfy { $0.payload.isEmpty })
        #expect(
            Set(removals.map(\.topic)) == Set(
                ["sensor/\(key)_old-site_zone", "sensor/\(gone)_hq_zone", "sensor/\(gone)_hq_battery", "binary_sensor/\(key)_hq_in_lobby", "sensor/site_hq_attic_occupancy"]
                    .map { "homeassistant/\($0.split(separator: "/")[0])/beaconflow/\($0.split(separator: "/")[1])/config" }
                    + [gonePresence, goneCondition, PresenceTopics.zone(site: "hq", zone: "attic")]))
        #expect(board.discoveryPublished == ["sensor/\(key)_hq_zone", "device_tracker/\(key)_hq_tracker", "sensor/site_hq_lobby_occupancy"])
    }

    /// Readings stored go to a registry beacon's readings topic, the latest of each quantity, when they changed;
    /// with discovery, an entity per quantity the first time it comes, with Home Assistant's device class and unit
    /// (a binary one as a binary sensor), none for what its condition's sensors show.
    @Test func readingsOnTheirTopicWithAnEntityEach() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: HomeAssistantDiscovery())
        _ = board.serve(site: "hq", placements: [])
        func row(_ beaconID: String, _ quantity: String, _ value: Double, _ unit: String) -> SensorReadingRow {
            SensorReadingRow(
                timeMicros: 0, siteID: "hq", agentID: "hq-a1", beaconID: beaconID, reading: SensorReading(quantity: quantity, value: value, unit: unit),
                frameType: "bthome", frameHash: 0, toleranceMicros: 0)
        }
        let key = HomeAssistantDiscovery.beaconKey("ibeacon:a:1:1")
        let topic = PresenceTopics.beaconReadings(site: "hq", beaconID: "ibeacon:a:1:1")!
        let first = board.readings([
            row("ibeacon:a:1:1", "humidity", 53.49, "percent"), row("ibeacon:a:1:1", "temperature", 21.5, "celsius"),
            row("ibeacon:a:1:1", "door", 1, "boolean"), row("passer-by", "humidity", 40, "percent"),
        ])
        #expect(first.configs.map(\.topic) == [
            "homeassistant/sensor/beaconflow/\(key)_hq_r_humidity/config", "homeassistant/binary_sensor/beaconflow/\(key)_hq_r_door/config",
        ])
        #expect(first.states.map(\.topic) == [topic])
        let humidity = String(decoding: first.configs[0].payload, as: UTF8.self)
        #expect(humidity.contains(#""device_class":"humidity""#) && humidity.contains(#""unit_of_measurement":"%""#), "\(humidity)")
        #expect(humidity.contains(#""value_template":"{{ value_json.humidity }}""#) && humidity.contains(#""state_topic":"\#(topic)""#))
        #expect(String(decoding: first.configs[1].payload, as: UTF8.self).contains(#""device_class":"door""#))
        #expect(String(decoding: first.states[0].payload, as: UTF8.self) == #"{"door":1,"humidity":53.49,"temperature":21.5}"#)
        // The same values again: nothing; a new one: the topic alone.
        let again = board.readings([row("ibeacon:a:1:1", "humidity", 53.49, "percent")])
        #expect(again.configs.isEmpty && again.states.isEmpty)
        let newer = board.readings([row("ibeacon:a:1:1", "humidity", 54, "percent")])
        #expect(newer.configs.isEmpty && newer.states.map(\.topic) == [topic])
        // Kept at start like the beacon's other entities.
        #expect(board.discoveryFound(["sensor/\(key)_hq_r_humidity": [topic]]).isEmpty)
    }

    /// With binary sensors: one per zone of the beacon's site, on its device; one per zone on the site's.
    @Test func binarySensorsWhenAsked() {
        let discovery = HomeAssistantDiscovery(binarySensors: true)
        let beacon = discovery.beaconConfigs(site: "hq", beaconID: "ibeacon:a:1:1", label: "Cart", zones: ["lobby", "lab"])
        let key = HomeAssistantDiscovery.beaconKey("ibeacon:a:1:1")
        #expect(beacon.filter { $0.component == "binary_sensor" }.map(\.objectID) == ["\(key)_hq_in_lobby", "\(key)_hq_in_lab"])
        let lobby = String(decoding: beacon.first { $0.objectID == "\(key)_hq_in_lobby" }!.payload, as: UTF8.self)
        #expect(lobby.contains(#""value_template":"{{ 'ON' if value_json.present and value_json.zone == 'lobby' else 'OFF' }}""#), "\(lobby)")
        #expect(discovery.zoneConfigs(site: "hq", zone: "lobby").map(\.key) == ["sensor/site_hq_lobby_occupancy", "binary_sensor/site_hq_lobby_occupied"])
        #expect(HomeAssistantDiscovery().zoneConfigs(site: "hq", zone: "lobby").map(\.key) == ["sensor/site_hq_lobby_occupancy"])
        #expect(discovery.key(inTopic: "homeassistant/binary_sensor/beaconflow/site_hq_lobby_occupied/config") == "binary_sensor/site_hq_lobby_occupied")
        #expect(discovery.key(inTopic: "homeassistant/light/beaconflow/x/config") == nil)
        #expect(discovery.topic(key: "device_tracker/x") == "homeassistant/device_tracker/beaconflow/x/config")
        #expect(HomeAssistantDiscovery.stateTopics(inConfig: Array(#"{"state_topic":"a/b","json_attributes_topic":"a/c","name":"x"}"#.utf8)) == ["a/b", "a/c"])
    }

    @Test func theAgentIDPresenceIsReserved() {
        #expect(throws: SitesError.self) { try SitesConfiguration.parse("sites: [{id: hq, zones: [{id: a}], agents: [{id: presence}]}]") }
    }

    @Test func conditionFollowsTheRegistryAtTheSitesServed() {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: nil)
        _ = board.serve(site: "hq", placements: [])
        let health = BeaconHealth(
            beaconID: "ibeacon:a:1:1", siteID: "hq", lastSeenMicros: 0, batteryMillivolts: 2900, temperatureCelsius: 21.5,
            rebootsIn7Days: 0, status: .ok, firstSeenMicros: 0)
        var passerBy = health
        passerBy.beaconID = "passer-by"
        var elsewhere = health
        elsewhere.siteID = "other"
        let messages = board.condition([health, passerBy, elsewhere])
        #expect(messages.map(\.topic) == ["beaconflow/v1/hq/presence/beacons/ibeacon:a:1:1/condition"])
        #expect(
            String(decoding: messages[0].payload, as: UTF8.self)
                == #"{"battery_mv":2900,"battery_pct":null,"status":"ok","temperature_c":21.5}"#)
        // Unchanged, nothing again; a TLM's 1/256 °C step is given to a hundredth of a degree, and is news.
        #expect(board.condition([health]).isEmpty)
        var warmer = health
        warmer.temperatureCelsius = 22.00390625
        let again = board.condition([warmer])
        #expect(again.map { String(decoding: $0.payload, as: UTF8.self) } == [#"{"battery_mv":2900,"battery_pct":null,"status":"ok","temperature_c":22}"#])
        #expect(board.condition([warmer]).isEmpty)
        // After the broker came back (or the site was served elsewhere and back), given again.
        board.forgetAll()
        _ = board.serve(site: "hq", placements: [])
        #expect(board.condition([warmer]).count == 1)
    }
}

extension PresenceBoardTests {
    /// Where the site has a floor, a placed beacon's message carries its latest position (and only while present).
    @Test func aPositionIsToldWithThePlacement() throws {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: nil)
        _ = board.serve(site: "hq", placements: [])
        let position = BeaconPosition(timeMicros: 10_000_000, x: 3.14159, y: 2.5, errorM: 1.234, zoneShares: ["lobby": 0.9, "lab": 0.1])
        // Not placed yet: nothing to tell.
        #expect(board.apply([.position(site: "hq", beaconID: "ibeacon:a:1:1", position: position)]).isEmpty)
        let placed = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lobby", sinceMicros: 0)])
        let first = try #require(placed.compactMap { BeaconPresence(payload: $0.payload) }.first)
        #expect(first.x == 3.14 && first.y == 2.5 && first.errorM == 1.23 && first.zoneProbabilities == ["lobby": 0.9, "lab": 0.1])
        var moved = position
        moved.x = 4
        let told = board.apply([.position(site: "hq", beaconID: "ibeacon:a:1:1", position: moved)])
        #expect(told.compactMap { BeaconPresence(payload: $0.payload) }.map(\.x) == [4])
        #expect(String(decoding: told[0].payload, as: UTF8.self).contains(#""error_m":1.23"#))
        // Away: the message says where it was last placed, not a position.
        let left = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: nil, sinceMicros: 20_000_000)])
        let away = try #require(left.compactMap { BeaconPresence(payload: $0.payload) }.first)
        #expect(!away.present && away.x == nil && away.zoneProbabilities == nil)
        #expect(String(decoding: left[0].payload, as: UTF8.self).contains(#""x":null"#))
    }
}

extension PresenceBoardTests {
    /// Positions are kept only for beacons with a topic, and forgotten when they leave: a passer-by's are never
    /// told, and a registry beacon placed again is told without its old position until a new one comes.
    @Test func positionsAreKeptOnlyForPublishedBeaconsWhileTheyStay() throws {
        var board = PresenceBoard(sites: Self.sites, allBeacons: false, discovery: nil)
        _ = board.serve(site: "hq", placements: [])
        let position = BeaconPosition(timeMicros: 10_000_000, x: 1, y: 2, errorM: 1, zoneShares: ["lobby": 1])
        #expect(board.apply([.position(site: "hq", beaconID: "passer-by", position: position)]).isEmpty)
        _ = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lobby", sinceMicros: 0)])
        #expect(board.apply([.position(site: "hq", beaconID: "ibeacon:a:1:1", position: position)]).count == 1)
        _ = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: nil, sinceMicros: 20_000_000)])
        let back = board.apply([.placement(site: "hq", beaconID: "ibeacon:a:1:1", zone: "lab", sinceMicros: 60_000_000)])
        let told = try #require(back.compactMap { BeaconPresence(payload: $0.payload) }.first)
        #expect(told.present && told.zone == "lab" && told.x == nil)
    }
}
