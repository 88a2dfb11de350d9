import BeaconIngest
import BeaconMessaging
import Foundation
import LocalServers
import TestServers
import Testing

/// Home Assistant's command, when scripts/prepare-home-assistant has installed it.
let homeAssistantExecutable: String? =
    FileManager.default.fileExists(atPath: repositoryRoot + "/.build-ha/ready") ? repositoryRoot + "/.build-ha/bin/hass" : nil

/// A real Home Assistant (scripts/prepare-home-assistant installs it into .build-ha) with its MQTT integration on
/// the test's broker: the ingest's discovery makes its entities, with the states the presence topics give.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: homeAssistantExecutable != nil, "Home Assistant is not installed (scripts/prepare-home-assistant)"),
    .timeLimit(.minutes(5)))
struct HomeAssistantTests {
    /// Home Assistant's own files: a minimal configuration, and the MQTT integration's entry (set up in its user
    /// interface otherwise) pointing at the broker.
    static func configure(_ directory: String, brokerPort: Int) throws {
        try FileManager.default.createDirectory(atPath: directory + "/.storage", withIntermediateDirectories: true)
        try """
            homeassistant:
              name: beaconflow test
              latitude: 0
              longitude: 0
              elevation: 0
              unit_system: metric
              time_zone: UTC
              country: DE
              currency: EUR
            recorder:
              commit_interval: 1
            """.write(toFile: directory + "/configuration.yaml", atomically: true, encoding: .utf8)
        let entry: [String: Any] = [
            "version": 1, "minor_version": 2, "key": "core.config_entries",
            "data": [
                "entries": [
                    [
                        "entry_id": "beaconflowmqtt", "version": 1, "minor_version": 1, "domain": "mqtt", "title": "127.0.0.1",
                        "data": ["broker": "127.0.0.1", "port": brokerPort, "discovery": true, "discovery_prefix": "homeassistant"],
                        "options": [:] as [String: Any], "pref_disable_new_entities": false, "pref_disable_polling": false, "source": "user",
                        "unique_id": NSNull(), "disabled_by": NSNull(),
                    ]
                ]
            ],
        ]
        try JSONSerialization.data(withJSONObject: entry).write(to: URL(fileURLWithPath: directory + "/.storage/core.config_entries"))
    }

    /// Each entity's newest state in the recorder's database (device trackers are not among the states Home
    /// Assistant saves to restore), read with Home Assistant's own Python.
    static func recordedStates(_ directory: String) async throws -> [String: String] {
        let script = """
            import json, sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            rows = db.execute("SELECT m.entity_id, s.state FROM states s JOIN states_meta m ON s.metadata_id = m.metadata_id ORDER BY s.state_id").fetchall()
            print(json.dumps({entity: state for entity, state in rows}))
            """
        let run = try await runProgram(repositoryRoot + "/.build-ha/bin/python", ["-c", script, directory + "/home-assistant_v2.db"])
        return (try? JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: String]) ?? [:]
    }

    /// A `.storage` file's `data`.
    static func storage(_ directory: String, _ name: String) -> Any? {
        guard let data = FileManager.default.contents(atPath: directory + "/.storage/" + name),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["data"]
    }

    @Test func theEntitiesAppearInHomeAssistantWithTheirStates() async throws {
        // The capture's Ruuvi tag (humidity, pressure, ...) in the registry too.
        let ruuvi = "mac:C0:04:00:00:00:04"
        let harness = try await IngestHarness.start(brokerPersistence: true) { configuration in
            PresenceTests.configure(&configuration)
            configuration.presence?.discoveryBinarySensors = true
            configuration.sites.beacons.append(SitesConfiguration.Beacon(id: ruuvi, label: "Fridge"))
        }
        let (agent, _) = try await harness.client(id: "test-agent")
        defer { agent.stop() }
        // The cart and a passer-by in the lobby, live: a batch of each a second, for as long as the test runs.
        let sending = Task {
            for second in UInt64(0)..<240 {
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                for (offset, beaconID) in [(UInt64(1), PresenceTests.cart), (2, PresenceTests.passerBy)] {
                    // Each batch's sighting after the previous batch's, as an agent's are.
                    let time = now + Int64(offset) * 1000
                    try? agent.publish(
                        topic: "beaconflow/v1/hq/hq-a1/batch",
                        payload: try batchPayload(sequence: 2 * second + offset, beaconID: beaconID, count: 1, start: time, rssi: { _ in -55 }))
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
        defer { sending.cancel() }
        let work = try makeTemporaryDirectory(prefix: "home-assistant")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try await harness.eventually("the cart is present on its topic", timeout: .seconds(30)) {
            (try? harness.count("beaconflow.beacon_locations WHERE present")) == 2
        }
        // The real agent replays the capture as hq-a2: the tag's readings are stored, and go to its readings topic.
        let executable = try #require(beaconflowExecutable)
        let replay = try ChildProcess(
            executable,
            ["agent", "--site", "hq", "--agent", "hq-a2", "--source", "btsnoop:" + exampleFile("mixed-beacons.btsnoop"), "--speed", "max",
             "--broker", harness.broker.url, "--spool", work + "/spool"],
            standardErrorPath: work + "/agent.log")
        _ = await replay.exit()
        try await harness.eventually("the tag's readings are stored", timeout: .seconds(30)) {
            (try? harness.count("beaconflow.sensor_readings WHERE beacon_id = '\(ruuvi)' AND quantity = 'humidity'")) ?? 0 > 0
        }
        try Self.configure(work, brokerPort: harness.broker.port)
        let home = try ChildProcess(try #require(homeAssistantExecutable), ["-c", work], standardErrorPath: work + "/hass.log")
        defer { home.terminate(SIGKILL) }
        let key = HomeAssistantDiscovery.beaconKey(PresenceTests.cart)
        let ruuviKey = HomeAssistantDiscovery.beaconKey(ruuvi)
        let expected = [
            "beaconflow_\(key)_hq_zone", "beaconflow_\(key)_hq_battery", "beaconflow_\(key)_hq_battery_voltage",
            "beaconflow_\(key)_hq_temperature", "beaconflow_site_hq_lobby_occupancy", "beaconflow_site_hq_lab_occupancy",
            "beaconflow_\(key)_hq_tracker", "beaconflow_\(key)_hq_in_lobby", "beaconflow_\(key)_hq_in_lab",
            "beaconflow_site_hq_lobby_occupied", "beaconflow_site_hq_lab_occupied",
            "beaconflow_\(ruuviKey)_hq_r_humidity", "beaconflow_\(ruuviKey)_hq_r_pressure",
        ]
        // Home Assistant writes its entity registry a few seconds after the entities appear.
        var entities: [String: String] = [:]
        try await eventuallyTrue("Home Assistant registers the entities", timeout: .seconds(180)) {
            let registry = (Self.storage(work, "core.entity_registry") as? [String: Any])?["entities"] as? [[String: Any]] ?? []
            entities = Dictionary(
                registry.compactMap { entity in
                    (entity["unique_id"] as? String).flatMap { id in (entity["entity_id"] as? String).map { (id, $0) } }
                }, uniquingKeysWith: { first, _ in first })
            return Set(expected).isSubset(of: entities.keys)
        }
        #expect(!entities.keys.contains { $0.contains(HomeAssistantDiscovery.beaconKey(PresenceTests.passerBy)) }, "no entity for a passer-by")
        let devices = (Self.storage(work, "core.device_registry") as? [String: Any])?["devices"] as? [[String: Any]] ?? []
        #expect(Set(devices.compactMap { $0["name"] as? String }).isSuperset(of: ["Cart", "hq"]))
        try await Task.sleep(for: .seconds(3))
        // At a stop Home Assistant saves its entities' last states.
        home.send(SIGTERM)
        _ = await home.exit()
        let states = Self.storage(work, "core.restore_state") as? [[String: Any]] ?? []
        let stateOf = Dictionary(
            states.compactMap { entry -> (String, String)? in
                guard let state = entry["state"] as? [String: Any], let id = state["entity_id"] as? String else { return nil }
                return (id, state["state"] as? String ?? "")
            }, uniquingKeysWith: { first, _ in first })
        let log = (try? String(contentsOfFile: work + "/hass.log", encoding: .utf8)) ?? ""
        #expect(stateOf[entities["beaconflow_\(key)_hq_zone"] ?? ""] == "lobby", "\(stateOf)\n\(log.suffix(2000))")
        #expect(
            stateOf[entities["beaconflow_site_hq_lobby_occupancy"] ?? ""] == "2",
            "\(stateOf) \((try? harness.query("SELECT beacon_id, zone_id, present, since, last_heard FROM beaconflow.beacon_locations")) ?? [])")
        #expect(stateOf[entities["beaconflow_site_hq_lab_occupancy"] ?? ""] == "0", "\(stateOf)")
        // A device tracker, home while the cart is at the site (a person can have it), and the binary sensors.
        #expect(entities["beaconflow_\(key)_hq_tracker"]?.hasPrefix("device_tracker.") == true, "\(entities)")
        let recorded = try await Self.recordedStates(work)
        #expect(recorded[entities["beaconflow_\(key)_hq_tracker"] ?? ""] == "home", "\(recorded)")
        #expect(stateOf[entities["beaconflow_\(key)_hq_in_lobby"] ?? ""] == "on", "\(stateOf)")
        #expect(stateOf[entities["beaconflow_\(key)_hq_in_lab"] ?? ""] == "off", "\(stateOf)")
        #expect(stateOf[entities["beaconflow_site_hq_lobby_occupied"] ?? ""] == "on", "\(stateOf)")
        #expect(stateOf[entities["beaconflow_site_hq_lab_occupied"] ?? ""] == "off", "\(stateOf)")
        // The tag's readings as entities of their own, in Home Assistant's units.
        #expect(stateOf[entities["beaconflow_\(ruuviKey)_hq_r_humidity"] ?? ""] == "53.49", "\(stateOf)")
        #expect(stateOf[entities["beaconflow_\(ruuviKey)_hq_r_pressure"] ?? ""] == "1000.44", "\(stateOf)")
        try await harness.stop()
    }
}
