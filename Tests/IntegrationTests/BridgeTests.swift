import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

/// `beaconflow bridge` between receivers of other firmware and the pipeline: their messages published on the
/// broker as Theengs Gateway (or OpenMQTTGateway) and ESPresense publish them (QoS 0, a topic per device and
/// receiver), the bridge's agents sending them on with their spools, sequence numbers and acknowledgements, the
/// sightings stored under the beacons' own ids, each by the agent its receiver is mapped to.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(5)))
struct BridgeTests {
    static let iBeacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"

    /// Publishes `messages` (topic, JSON) every 200 ms while the bridge runs, until `done` holds or 150 s pass (the
    /// rest of the suite loads both cores); then reads its `/healthz` and `/metrics`, stops it with SIGTERM and
    /// returns its log, exit code and both.
    func bridge(
        _ arguments: [String], messages: [(String, String)], until done: (PostgresConnection) throws -> Bool
    ) async throws -> (log: String, exitCode: Int32?, done: Bool, health: String, metrics: String) {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "bridge")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let ingest = try await startIngestProcess(broker: broker, database: database, work: work)
        defer { ingest.process.terminate() }
        let bridgeLog = work + "/bridge.log"
        let metricsPort = try freeLoopbackPort()
        let bridge = try ChildProcess(
            executable,
            ["bridge", "--from", broker.url, "--broker", broker.url, "--spool", work + "/spool", "--metrics-listen", "127.0.0.1:\(metricsPort)"]
                + arguments,
            standardOutputPath: bridgeLog, standardErrorPath: bridgeLog)
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "receivers")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let receivers = try MQTTClient(configuration, logger: Logger(label: "receivers"))
        receivers.start()
        defer { receivers.stop() }
        let connection = try PostgresConnection(database.conninfo)
        let deadline = ContinuousClock.now + .seconds(150)
        var finished = false
        while ContinuousClock.now < deadline {
            for (topic, payload) in messages { _ = try? receivers.publish(topic: topic, payload: Array(payload.utf8), qos: 0) }
            if try done(connection) {
                finished = true
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let health = (try? httpGet(port: metricsPort, path: "/healthz")).map { $0.status + " " + $0.body } ?? ""
        let metrics = (try? httpGet(port: metricsPort, path: "/metrics").body) ?? ""
        bridge.terminate(SIGTERM)
        _ = await bridge.exit()
        return ((try? String(contentsOfFile: bridgeLog, encoding: .utf8)) ?? "", bridge.exitCode, finished, health, metrics)
    }

    func sightingsByAgent(_ connection: PostgresConnection, _ beacon: String) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try connection.query(
            "SELECT agent_id, count(*) FROM beaconflow.sightings WHERE site_id = 'hq' AND beacon_id = $1 GROUP BY 1", [beacon])
        {
            counts[row[0] ?? ""] = Int(row[1] ?? "") ?? 0
        }
        return counts
    }

    @Test func theengsGatewaysRunAsTheSitesAgents() async throws {
        let iBeacon = #"{"id":"C1:2A:DE:54:73:55","rssi":RSSI,"model":"iBeacon","model_id":"IBEACON","manufacturerdata":"4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"}"#
        let eddystone = #"{"id":"0C:61:55:00:11:22","rssi":-70,"servicedatauuid":"feaa","servicedata":"00e200112233445566778899aabbccddeeff0000"}"#
        let tlm = #"{"id":"0C:61:55:00:11:22","rssi":-70,"servicedatauuid":"feaa","servicedata":"20000bb8160000000064000000c8"}"#
        let messages = [
            ("home/kitchen/BTtoMQTT/C12ADE547355", iBeacon.replacingOccurrences(of: "RSSI", with: "-55")),
            ("home/hall/BTtoMQTT/C12ADE547355", iBeacon.replacingOccurrences(of: "RSSI", with: "-85")),
            ("home/kitchen/BTtoMQTT/0C6155001122", eddystone),
            ("home/kitchen/BTtoMQTT/0C6155001122", tlm),
            ("home/attic/BTtoMQTT/C12ADE547355", iBeacon.replacingOccurrences(of: "RSSI", with: "-90")),
            ("home/kitchen/LWT", "online"),
        ]
        let result = try await bridge(
            ["--format", "theengs", "--site", "hq", "--receiver", "kitchen=hq-a1", "--receiver", "hall=hq-a2"], messages: messages
        ) { connection in
            let counts = try sightingsByAgent(connection, Self.iBeacon)
            let telemetry = try connection.query(
                "SELECT count(*) FROM beaconflow.telemetry WHERE beacon_id = 'eddystone:00112233445566778899:aabbccddeeff'")
            return (counts["hq-a1"] ?? 0) >= 3 && (counts["hq-a2"] ?? 0) >= 3 && (Int(telemetry[0][0] ?? "") ?? 0) >= 1
        }
        #expect(result.done, "\(result.log)")
        // Stopped cleanly: what it was handed acknowledged, the unnamed receiver said once.
        #expect(result.exitCode == 0, "\(result.log)")
        #expect(result.log.contains("A receiver no --receiver names is passed over") && result.log.contains("attic"), "\(result.log)")
        #expect(!result.log.contains("could not be read"), "\(result.log)")
        // Its /healthz says both receivers' agents are connected; /metrics counts what they sent.
        #expect(result.health.contains("200") && result.health.contains(#""agents":2,"agents_connected":2"#), "\(result.health)")
        let acknowledged = result.metrics.split(separator: "\n").first { $0.hasPrefix("beaconflow_agent_batches_acknowledged_total ") }
        #expect(acknowledged.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 > 0 } == true, "\(result.metrics.prefix(3000))")
    }

    @Test func espresenseRoomsRunAsTheSitesAgents() async throws {
        let topic = "espresense/devices/iBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-1-2/"
        let payload = #"{"mac":"c12ade547355","id":"iBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-1-2","rssi@1m":-59,"rssi":RSSI,"distance":1.2}"#
        let result = try await bridge(
            ["--format", "espresense", "--site", "hq", "--receiver", "office=hq-a1", "--receiver", "lab=hq-a2"],
            messages: [
                (topic + "office", payload.replacingOccurrences(of: "RSSI", with: "-61.25")),
                (topic + "lab", payload.replacingOccurrences(of: "RSSI", with: "-80.50")),
                ("espresense/rooms/office/status", "online"),
            ]
        ) { connection in
            let counts = try sightingsByAgent(connection, Self.iBeacon)
            return (counts["hq-a1"] ?? 0) >= 3 && (counts["hq-a2"] ?? 0) >= 3
        }
        #expect(result.done && result.exitCode == 0, "\(result.log)")
    }
}
