import BeaconIngest
import BeaconMessaging
import BeaconWire
import Foundation
import LocalServers
import Mosquitto
import Synchronization
import TestServers
import Testing

/// Live presence and Home Assistant discovery through a real mosquitto, from a real ingest writing to a real
/// PostgreSQL.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(3)), .serialized)
struct PresenceTests {
    static let cart = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    static let passerBy = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:9:9"

    static func sites(registry: Bool = true) -> String {
        """
        sites:
          - id: hq
            allowed_lateness_s: 2
            absence_timeout_s: 10
            first_batch_wait_s: 1
            zones: [{id: lobby}, {id: lab}]
            agents:
              - {id: hq-a1, zone: lobby}
              - {id: hq-a2, zone: lab}
        beacons:
        \(registry ? "  - {id: \"\(cart)\", label: Cart}" : "  - {id: \"ibeacon:00000000-0000-0000-0000-000000000000:1:1\", label: Other}")
        """
    }

    static func configure(_ configuration: inout IngestConfiguration, registry: Bool = true) {
        configuration.sites = try! SitesConfiguration.parse(sites(registry: registry))
        var presence = PresenceConfiguration()
        presence.discoveryPrefix = "homeassistant"
        configuration.presence = presence
    }

    /// What a reader subscribing now is given: each presence and discovery topic's retained message.
    static func retained(_ harness: IngestHarness) async throws -> [String: [UInt8]] {
        let (client, events) = try await harness.client(id: "test-reader-\(UInt32.random(in: 0...UInt32.max))")
        defer { client.stop() }
        for filter in ["beaconflow/v1/+/presence/#", PresenceTopics.availability, "homeassistant/#"] { try client.subscribe(topic: filter) }
        try await Task.sleep(for: .seconds(2))
        return state(events.all)
    }

    /// The state the messages leave, topic by topic (an empty payload removes a retained message).
    static func state(_ events: [MQTTEvent]) -> [String: [UInt8]] {
        var state: [String: [UInt8]] = [:]
        for case .message(let topic, let payload, _) in events { state[topic] = payload.isEmpty ? nil : payload }
        return state
    }

    /// The first state the messages passed through that meets `condition`: a state the ingest published and may
    /// already have moved on from (the cart's readings end a second before the test publishes them, so on a loaded
    /// machine it can be present and gone again before the reader looks).
    static func firstState(_ events: [MQTTEvent], where condition: ([String: [UInt8]]) -> Bool) -> [String: [UInt8]]? {
        var state: [String: [UInt8]] = [:]
        for case .message(let topic, let payload, _) in events {
            state[topic] = payload.isEmpty ? nil : payload
            if condition(state) { return state }
        }
        return nil
    }

    static func beacon(_ state: [String: [UInt8]], _ id: String = cart) -> BeaconPresence? {
        state[PresenceTopics.beacon(site: "hq", beaconID: id)!].flatMap(BeaconPresence.init(payload:))
    }

    static func occupants(_ state: [String: [UInt8]], _ zone: String) -> Int? {
        state[PresenceTopics.zone(site: "hq", zone: zone)].flatMap(ZonePresence.init(payload:))?.occupants
    }

    static func configs(_ state: [String: [UInt8]]) -> Set<String> {
        Set(state.keys.filter { $0.hasPrefix("homeassistant/") && $0.contains("/beaconflow/") })
    }

    @Test func presenceFollowsTheSiteSurvivesARestartAndTheRegistryDecidesTheEntities() async throws {
        let harness = try await IngestHarness.start(brokerPersistence: true) { Self.configure(&$0) }
        let (reader, events) = try await harness.client(id: "test-live-reader")
        defer { reader.stop() }
        for filter in ["beaconflow/v1/+/presence/#", PresenceTopics.availability, "homeassistant/#"] { try reader.subscribe(topic: filter) }
        let (agent, _) = try await harness.client(id: "test-agent")
        defer { agent.stop() }
        // A minute of the cart and a passer-by in the lobby, up to now.
        let start = (Int64(Date().timeIntervalSince1970) - 60) * 1_000_000
        for (sequence, beaconID) in [(UInt64(1), Self.cart), (2, Self.passerBy)] {
            try agent.publish(
                topic: "beaconflow/v1/hq/hq-a1/batch",
                payload: try batchPayload(sequence: sequence, beaconID: beaconID, count: 60, start: start, rssi: { _ in -55 }))
        }
        // hq-a2 sends nothing: the site's decisions wait first_batch_wait_s (1 s here) for it (and on a loaded machine the
        // ingest's one-second turns stretch it).
        let cartPresent: ([String: [UInt8]]) -> Bool = { Self.beacon($0)?.present == true && Self.occupants($0, "lobby") == 2 }
        try await harness.eventually("the cart is present in the lobby, with both beacons counted", timeout: .seconds(120)) {
            Self.firstState(events.all, where: cartPresent) != nil
        }
        var state = try #require(Self.firstState(events.all, where: cartPresent))
        let cart = try #require(Self.beacon(state))
        #expect(cart.zone == "lobby" && cart.label == "Cart" && cart.site == "hq" && cart.since == RFC3339.format(microseconds: start))
        #expect(Self.occupants(state, "lab") == 0)
        #expect(Self.beacon(state, Self.passerBy) == nil, "a beacon outside the registry has no topic")
        #expect(state[PresenceTopics.availability] == PresenceTopics.online)
        // Home Assistant: the zone sensors of the site, and the cart's sensors at hq; nothing for the passer-by.
        let key = HomeAssistantDiscovery.beaconKey(Self.cart)
        let expectedConfigs = Set(
            ["site_hq_lobby_occupancy", "site_hq_lab_occupancy", "\(key)_hq_zone", "\(key)_hq_battery", "\(key)_hq_battery_voltage", "\(key)_hq_temperature"]
                .map { "homeassistant/sensor/beaconflow/\($0)/config" } + ["homeassistant/device_tracker/beaconflow/\(key)_hq_tracker/config"])
        try await harness.eventually("the discovery configs are published") { Self.configs(Self.state(events.all)) == expectedConfigs }
        state = Self.state(events.all)
        let zoneConfig = try #require(state["homeassistant/sensor/beaconflow/\(key)_hq_zone/config"].map { String(decoding: $0, as: UTF8.self) })
        #expect(zoneConfig.contains(#""unique_id":"beaconflow_\#(key)_hq_zone""#))
        #expect(zoneConfig.contains(#""state_topic":"\#(PresenceTopics.beacon(site: "hq", beaconID: Self.cart)!)""#))
        #expect(zoneConfig.contains(#""availability_topic":"beaconflow/v1/presence/availability""#))

        // The agent goes quiet: within the lateness and the absence timeout everyone leaves.
        try await harness.eventually("the cart has left and the lobby is empty", timeout: .seconds(40)) {
            let state = Self.state(events.all)
            return Self.beacon(state)?.present == false && Self.occupants(state, "lobby") == 0
        }
        #expect(Self.beacon(Self.state(events.all))?.since == RFC3339.format(microseconds: start + 59_000_000), "away since its last reading")

        // A restart: a new reader is given the same state, and the availability of the running instance.
        try await harness.stop()
        let restarted = harness.anotherIngest(clientID: "test-ingest-restarted")
        try await harness.eventually("the restarted instance says it is online", timeout: .seconds(60)) {
            Self.state(events.all)[PresenceTopics.availability] == PresenceTopics.online && events.all.contains { event in
                if case .message(PresenceTopics.availability, PresenceTopics.offline, _) = event { true } else { false }
            }
        }
        // It resumes from the site's checkpoint (taken with the last minute counted, before the cart left) and the
        // sightings after it, and finds the cart gone again.
        let resumed = ContinuousClock.now
        var afterRestart = try await Self.retained(harness)
        while !(Self.beacon(afterRestart)?.present == false && Self.occupants(afterRestart, "lobby") == 0), ContinuousClock.now - resumed < .seconds(20) {
            afterRestart = try await Self.retained(harness)
        }
        print("presence after the restart settled in \(ContinuousClock.now - resumed)")
        #expect(Self.beacon(afterRestart)?.present == false && Self.occupants(afterRestart, "lobby") == 0)
        #expect(Self.configs(afterRestart) == expectedConfigs)
        restarted.ingest.requestStop()
        try await restarted.task.value

        // The cart leaves the registry: its entities go, and its retained states with them; the site's stay.
        let edited = harness.anotherIngest(clientID: "test-ingest-edited") { Self.configure(&$0, registry: false) }
        try await harness.eventually("the cart's configs are removed", timeout: .seconds(20)) {
            Self.configs(Self.state(events.all)).count == 2
        }
        let left = try await Self.retained(harness)
        #expect(Self.configs(left).allSatisfy { $0.contains("site_hq_") })
        #expect(left[PresenceTopics.beacon(site: "hq", beaconID: Self.cart)!] == nil, "the cart's presence is no longer retained")
        edited.ingest.requestStop()
        try await edited.task.value
    }

    /// Two instances share the site: one set of entities; when the one serving it stops, the other takes the site
    /// over and publishes its state, and says presence is online.
    @Test func aHandOverKeepsOneSetOfEntitiesAndTheState() async throws {
        let harness = try await IngestHarness.start(brokerPersistence: true) { Self.configure(&$0) }
        let second = harness.anotherIngest(clientID: "test-ingest-second")
        let (reader, events) = try await harness.client(id: "test-live-reader")
        defer { reader.stop() }
        for filter in ["beaconflow/v1/+/presence/#", PresenceTopics.availability, "homeassistant/#"] { try reader.subscribe(topic: filter) }
        let (agent, _) = try await harness.client(id: "test-agent")
        defer { agent.stop() }
        // The cart in the lobby, live: a batch a second.
        let sending = Task {
            for sequence in UInt64(1)...120 {
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                try? agent.publish(
                    topic: "beaconflow/v1/hq/hq-a1/batch",
                    payload: try batchPayload(sequence: sequence, beaconID: Self.cart, count: 1, start: now, rssi: { _ in -55 }))
                try await Task.sleep(for: .seconds(1))
            }
        }
        defer { sending.cancel() }
        try await harness.eventually("the cart is present", timeout: .seconds(30)) { Self.beacon(Self.state(events.all))?.present == true }
        try await Task.sleep(for: .seconds(4))  // both instances have published their zone configs
        let configs = Self.configs(Self.state(events.all))
        #expect(configs.count == 7, "\(configs.sorted())")
        let before = Self.beacon(Self.state(events.all))

        events.reset()
        try await harness.stop()
        try await harness.eventually("the second instance publishes the site's state", timeout: .seconds(30)) {
            let state = Self.state(events.all)
            return Self.beacon(state)?.present == true && Self.occupants(state, "lobby") == 1
                && state[PresenceTopics.availability] == PresenceTopics.online
        }
        #expect(Self.beacon(Self.state(events.all))?.since == before?.since, "the same visit goes on")
        let after = try await Self.retained(harness)
        #expect(Self.configs(after) == configs)
        #expect(Self.beacon(after)?.present == true && Self.occupants(after, "lobby") == 1)
        second.ingest.requestStop()
        try await second.task.value
    }

    /// With `--presence-all-beacons`, 3,000 beacons outside the registry placed at once do not hold back the
    /// registry's beacon or the zones: at 50 messages a second they would take a minute, and the cart's state comes
    /// within seconds.
    @Test func theRegistryAndTheZonesGoBeforeBeaconsOutsideTheRegistry() async throws {
        let harness = try await IngestHarness.start {
            Self.configure(&$0)
            $0.presence?.allBeacons = true
            $0.presence?.discoveryPrefix = nil
        }
        let (reader, events) = try await harness.client(id: "test-live-reader")
        defer { reader.stop() }
        try reader.subscribe(topic: "beaconflow/v1/+/presence/#")
        let (agent, _) = try await harness.client(id: "test-agent")
        defer { agent.stop() }
        let start = (Int64(Date().timeIntervalSince1970) - 60) * 1_000_000
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 7)
        builder.configuration.maximumSightings = 100_000
        // The passers-by sort before the cart by id, and are heard first.
        let passersBy = (0..<3_000).map { String(format: "ibeacon:00000000-0000-0000-0000-%012d:1:1", $0) }
        for second in 0..<30 {
            for (index, beaconID) in (passersBy + [Self.cart]).enumerated() {
                let key = BeaconKey(beaconID: beaconID, address: 0xC000_0000_0000 + UInt64(index), addressIsRandom: true, powerAt1mDbm: -59)
                _ = builder.add(Sighting(timeMicros: start + Int64(second) * 1_000_000 + Int64(index), beacon: key, rssi: -55), nowNanoseconds: 0)
            }
        }
        let batch = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: start)
        let sealed = try #require(batch)
        try agent.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try sealed.wireBytes())
        try await harness.eventually("the batch commits", timeout: .seconds(60)) { harness.ingest.statistics.batchesCommitted == 1 }
        let committed = ContinuousClock.now
        try await harness.eventually("the cart is present and the lobby counts every beacon", timeout: .seconds(30)) {
            let state = Self.state(events.all)
            return Self.beacon(state)?.present == true && Self.occupants(state, "lobby") == 3_001
        }
        let took = ContinuousClock.now - committed
        let passersByPublished = Self.state(events.all).keys.filter { $0.contains("00000000-0000-0000-0000-0") }.count
        #expect(took < .seconds(15), "\(took)")
        #expect(passersByPublished < 3_000, "the passers-by were published first: \(passersByPublished)")
        try await harness.stop()
    }
}
