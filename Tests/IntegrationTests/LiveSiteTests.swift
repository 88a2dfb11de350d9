import BeaconMessaging
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

/// A live site as an operator runs one: `beaconflow ingest` (with live presence) and two `beaconflow agent`
/// processes simulating the demo office at the present time, a third agent of the sites file that never starts,
/// and `beaconflow console`. The agents stop; the site goes dark and everyone leaves: in the views, on the presence
/// topics and in the console.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"), .timeLimit(.minutes(4)))
struct LiveSiteTests {
    static let sites = """
        sites:
          - id: hq
            allowed_lateness_s: 5
            absence_timeout_s: 10
            history_lag_s: 10
            first_batch_wait_s: 5
            zones: [{id: lobby}, {id: lab}, {id: corridor}]
            agents:
              - {id: hq-a1, zone: lobby}
              - {id: hq-a2, zone: lab}
              - {id: hq-a3, zone: corridor}
        beacons:
          - {id: "eddystone:0102030405060708090a:0000000000a1", label: cart-7}
          - {id: "altbeacon:00112233445566778899aabbccddeeff:2:12", label: pallet-12}
        """

    @Test func aSiteWhoseAgentsStopEmptiesWithinTheLatenessTheAbsenceTimeoutAndAMinute() async throws {
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "live-site")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try Self.sites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        // The demo office, starting now.
        let scenario = try String(contentsOfFile: deployDirectory + "/scenarios/demo.yaml", encoding: .utf8)
            .replacingOccurrences(of: "start_unix_s: 1767261600", with: "start_unix_s: \(Int(Date().timeIntervalSince1970))")
        try scenario.write(toFile: work + "/scenario.yaml", atomically: true, encoding: .utf8)
        let pipeline = try LivePipeline.start(broker: broker, database: database, work: work, agents: ["hq-a1", "hq-a2"], ingestArguments: ["--presence"])
        defer { pipeline.kill() }
        let (ingest, agents) = (pipeline.ingest, pipeline.agents)
        let connection = try PostgresConnection(database.conninfo)
        func rows(_ sql: String) -> [[String?]] { (try? connection.query(sql).map(\.values)) ?? [] }
        let log = { (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? "" }
        // A reader of the presence topics, as Home Assistant would be.
        let reader = try MQTTClient(MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "presence-reader"), logger: Logger(label: "reader"))
        let presence = Collector(reader.events)
        reader.start()
        defer { reader.stop() }
        try reader.subscribe(topic: PresenceTopics.siteFilter(site: "hq"))
        func presenceState() -> [String: [UInt8]] {
            var state: [String: [UInt8]] = [:]
            for case .message(let topic, let payload, _) in presence.all { state[topic] = payload }
            return state
        }
        func occupants() -> [String: Int] {
            presenceState().compactMapValues { ZonePresence(payload: $0)?.occupants }
        }
        func beaconsPresent() -> [String: Bool] {
            Dictionary(presenceState().compactMap { _, payload in BeaconPresence(payload: payload).map { ($0.beaconID, $0.present) } }) { $1 }
        }

        // Live: beacons present in their zones; the agent that never started does not hold the site back.
        try await eventuallyTrue("beacons are present in zones", timeout: .seconds(60)) {
            rows("SELECT count(*) FROM beaconflow.beacon_locations WHERE present AND zone_id IS NOT NULL") .first?[0].flatMap { Int($0) } ?? 0 >= 2
        }
        try await eventuallyTrue("the agent never heard is let go, the others are live", timeout: .seconds(30)) {
            rows("SELECT agent_id, online, zone_state FROM beaconflow.agent_health ORDER BY agent_id")
                == [["hq-a1", "t", "live"], ["hq-a2", "t", "live"], ["hq-a3", "f", "let_go"]]
        }
        // The stored history follows, the history lag (10 s) behind the live zone.
        try await eventuallyTrue("the visits are open", timeout: .seconds(30)) {
            rows("SELECT count(*) FROM beaconflow.visits WHERE exit_ts IS NULL").first?[0].flatMap { Int($0) } ?? 0 >= 2
        }
        try await eventuallyTrue("the presence topics show beacons in zones") {
            occupants().values.reduce(0, +) >= 2 && beaconsPresent()["eddystone:0102030405060708090a:0000000000a1"] == true
        }
        #expect(beaconsPresent().keys.allSatisfy { $0.hasPrefix("eddystone:0102030405060708090a:0000000000a1") || $0.hasPrefix("altbeacon:") }, "registry beacons only")
        // The console, as a reader login.
        let (console, consoleBase) = try await startConsoleProcess(database, work: work, token: "token-of-the-live-site")
        defer { console.terminate(SIGTERM) }
        let consolePort = try #require(consoleBase.split(separator: ":").last.flatMap { Int($0) })
        func consoleSays() throws -> (present: Int, online: Int) {
            let body = try httpGet(port: consolePort, path: "/api/snapshot", headers: ["Authorization: Bearer token-of-the-live-site"]).body
            let document = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let zones = document["zones"] as? [[String: Any]] ?? []
            let agents = document["agents"] as? [[String: Any]] ?? []
            return (zones.map { $0["occupants"] as? Int ?? 0 }.reduce(0, +), agents.filter { $0["online"] as? Bool == true }.count)
        }
        try await eventuallyTrue("the console shows the beacons present and the agents online") {
            let said = try consoleSays()
            return said.present >= 2 && said.online == 2
        }
        #expect(log().contains("A site's zone decisions go on without a silent agent"))

        // Half a minute of a live site, then the agents stop: their last batches are acknowledged, they say they are
        // offline.
        try await Task.sleep(for: .seconds(30))
        for agent in agents { agent.terminate(SIGTERM) }
        for agent in agents { #expect(await agent.exit() == 0) }
        let stopped = ContinuousClock.now
        // Within the lateness (5 s), the absence timeout and history lag (10 s) and the rest of the last minute: nobody
        // is left.
        try await eventuallyTrue("the site empties", timeout: .seconds(150)) {
            rows("SELECT count(*) FROM beaconflow.visits WHERE exit_ts IS NULL") == [["0"]]
                && rows("SELECT count(*) FROM beaconflow.beacon_locations WHERE present") == [["0"]]
                // The minute of the last sighting is counted.
                && rows(
                    """
                    SELECT max(bucket) >= date_trunc('minute', (SELECT max(last_seen) FROM beaconflow.beacon_state))
                    FROM beaconflow.zone_occupancy WHERE site_id = 'hq'
                    """) == [["t"]]
        }
        let emptiedAfter = ContinuousClock.now - stopped
        // The bound the docs give, with room for a busy machine.
        #expect(emptiedAfter < .seconds(5 + 10 + 60 + 30), "emptied after \(emptiedAfter)")
        // Every visit ends at its beacon's last sighting or before; the minutes with beacons in them are counted
        // (a run this short may have no minute with a beacon in a zone for 30 s: seconds of presence, then).
        #expect(rows("SELECT count(*) FROM beaconflow.visits v JOIN beaconflow.beacon_state s USING (beacon_id) WHERE v.exit_ts > s.last_seen") == [["0"]])
        #expect(
            rows("SELECT sum(occupant_seconds) > 60 FROM beaconflow.zone_occupancy") == [["t"]],
            "\(rows("SELECT zone_id, bucket, occupants, occupant_seconds FROM beaconflow.zone_occupancy ORDER BY 2, 1"))")
        #expect(rows("SELECT count(*) FROM beaconflow.beacon_locations WHERE zone_id IS NOT NULL AND since IS NOT NULL") == rows("SELECT count(DISTINCT beacon_id) FROM beaconflow.visits"))
        // The presence topics and the console say the same.
        try await eventuallyTrue("the presence topics say everyone left", timeout: .seconds(20)) {
            occupants().count == 3 && occupants().values.allSatisfy { $0 == 0 } && beaconsPresent().values.allSatisfy { !$0 }
        }
        try await eventuallyTrue("the console says everyone left and the agents are offline", timeout: .seconds(20)) {
            try consoleSays() == (0, 0)
        }
        try await eventuallyTrue("the stopped agents are offline and let go", timeout: .seconds(30)) {
            rows("SELECT agent_id, online, zone_state FROM beaconflow.agent_health ORDER BY agent_id")
                == [["hq-a1", "f", "let_go"], ["hq-a2", "f", "let_go"], ["hq-a3", "f", "let_go"]]
        }
        ingest.terminate(SIGTERM)
        #expect(await ingest.exit() == 0, "\(log())")
        print("live site emptied \(emptiedAfter) after its agents stopped")
    }
}
