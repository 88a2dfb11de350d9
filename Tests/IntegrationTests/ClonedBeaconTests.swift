import BeaconAgent
import BeaconIngest
import BeaconSimulation
import Foundation
import LocalServers
import TestServers
import Testing

/// A copy of a beacon's identity, placed in another room, through agents, broker, ingest and PostgreSQL. The copy
/// transmits 15 dB louder than the beacon (-44 dBm at 1 m against -59) and the wall between the rooms is thick
/// (20 dB), so the lab's agent hears the copy only: were its readings taken for the beacon's, the beacon would move
/// to the lab.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct ClonedBeaconTests {
    static let scenario = """
        seed: 3
        start_unix_s: 1767261600
        duration_s: 360
        sites:
          - id: hq
            shadowing_db: 4
            shadowing_correlation_s: 2
            wall_loss_db: 20
            zones:
              - {id: lobby, rect: [0, 0, 6, 5]}
              - {id: lab, rect: [6, 0, 12, 5]}
            doors:
              - {zones: [lobby, lab], at: [6, 2.5]}
            agents:
              - {id: hq-a1, zone: lobby, position: [3, 2.5]}
              - {id: hq-a2, zone: lab, position: [9, 2.5]}
        beacons:
          - {name: cart, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 7, minor: 1, interval_ms: 250,
             path: [{at_s: 0, zone: lobby}]}
          - {name: copy-of-cart, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 7, minor: 1,
             interval_ms: 250, power_1m_dbm: -44, path: [{at_s: 40, zone: lab}]}
        """

    @Test func aCopyInAnotherRoomIsFlaggedAndTheBeaconStaysInItsRoom() async throws {
        let scenario = try Scenario.parse(Self.scenario, name: "cloned beacon")
        let simulator = try Simulator(scenario)
        let harness = try await playThroughThePipeline(simulator, site: "hq", agents: ["hq-a1", "hq-a2"], sites: testSites)

        let id = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:1"
        // Flagged, since the copy was first heard (it starts at 40 s; its first advert within a second). (The
        // view says `stale` now, the scenario being in the past: the stored status is the ingest's.)
        let health = try harness.query(
            """
            SELECT s.status, extract(epoch FROM h.cloned_since) - 1767261600
            FROM beaconflow.beacon_state s JOIN beaconflow.beacon_health h USING (beacon_id) WHERE beacon_id = '\(id)'
            """)
        #expect(health.first?[0] == "cloned", "\(health)")
        let since = try #require(health.first?[1].flatMap(Double.init))
        #expect((40...41).contains(since), "cloned since \(since) s")
        // Every sighting of both is stored under the one identity, and it is one beacon, not two.
        #expect(try harness.count("beaconflow.beacons") == 1)
        let agents = try harness.query("SELECT agent_id, count(*) FROM beaconflow.sightings GROUP BY 1 ORDER BY 1")
        #expect(agents.map { $0[0] } == ["hq-a1", "hq-a2"])
        // The beacon stays in the lobby once the copy is known: no visit to the lab begins after that, and the
        // lobby's minutes count it once.
        let labVisits = try harness.query(
            """
            SELECT count(*) FROM beaconflow.visits WHERE beacon_id = '\(id)' AND zone_id = 'lab'
                AND enter_ts > to_timestamp(1767261600 + \(since) + 60)
            """)
        #expect(labVisits == [["0"]])
        let minutes = try harness.query(
            """
            SELECT zone_id, min(occupants), max(occupants), count(*) FROM beaconflow.zone_occupancy
            WHERE bucket >= to_timestamp(1767261600 + 120) AND bucket < to_timestamp(1767261600 + 240) GROUP BY 1 ORDER BY 1
            """)
        #expect(minutes == [["lab", "0", "0", "2"], ["lobby", "1", "1", "2"]], "\(minutes)")
    }
}
