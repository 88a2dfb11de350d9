import AccuracyHarness
import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import Reporting
import Synchronization
import TestServers
import Testing
import WorkQueue

/// Agent states, restarts and checkpoints, and agents far behind.
extension IngestIntegrationTests {
    /// hq-a2 is online (the harness's status); hq-a1 sends a batch. Pushed back in time, hq-a2 is flagged silent,
    /// hq-a1 (a recent batch) and an offline agent are not.
    @Test func anAgentOnlineWithoutAdvertsIsFlaggedSilent() async throws {
        let harness = try await IngestHarness.start()
        let (client, _) = try await harness.client()
        defer { client.stop() }
        _ = try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: batchPayload(sequence: 1, count: 3))
        _ = try client.publish(topic: "beaconflow/v1/hq/hq-a1/status", payload: Array(#"{"online": true}"#.utf8))
        try await harness.eventually("hq-a1's batch and status are in") {
            try harness.query("SELECT last_batch_at IS NOT NULL AND online FROM beaconflow.agent_state WHERE agent_id = 'hq-a1'") == [["t"]]
        }
        let health = "SELECT agent_id, last_error FROM beaconflow.agent_health ORDER BY 1"
        #expect(try harness.query(health) == [["hq-a1", nil], ["hq-a2", nil]])
        _ = try harness.query("UPDATE beaconflow.agent_state SET online_since = now() - interval '10 minutes', last_error = 'scan restarted'")
        _ = try harness.query("UPDATE beaconflow.agent_state SET last_batch_at = now() - interval '6 minutes' WHERE agent_id = 'hq-a2'")
        let flagged = try harness.query(health)
        #expect(flagged[0] == ["hq-a1", "scan restarted"])
        #expect(flagged[1][1]?.hasPrefix("silent: online but no adverts since 20") == true, "\(flagged)")
        #expect(flagged[1][1]?.hasSuffix("Z; scan restarted") == true, "\(flagged)")
        _ = try client.publish(topic: "beaconflow/v1/hq/hq-a2/status", payload: Array(#"{"online": false}"#.utf8))
        try await harness.eventually("hq-a2 is offline and no longer flagged") {
            try harness.query("SELECT online, last_error FROM beaconflow.agent_health WHERE agent_id = 'hq-a2'") == [["f", nil]]
        }
        try await harness.stop()
    }

    /// Publishes `count` sightings of `beaconID` from `start` as each of hq's agents, hq-a1 the louder: the beacon
    /// is in the lobby.
    private func publishInTheLobby(
        with client: MQTTClient, _ sequence: UInt64, beaconID: String, at start: Int64, count: Int
    ) throws {
        for (agent, rssi) in [("hq-a1", Int8(-55)), ("hq-a2", Int8(-75))] {
            let payload = try batchPayload(
                agent: agent, sequence: sequence, beaconID: beaconID, count: count, start: start, rssi: { _ in rssi })
            _ = try client.publish(topic: "beaconflow/v1/hq/\(agent)/batch", payload: payload)
        }
    }

    /// The beacon's visits: zone, enter and exit in microseconds (exit nil while open).
    private func visitsQuery(of beacon: String) -> String {
        "SELECT zone_id, (extract(epoch FROM enter_ts) * 1000000)::bigint, (extract(epoch FROM exit_ts) * 1000000)::bigint FROM beaconflow.visits WHERE beacon_id = '\(beacon)'"
    }

    /// A beacon in the lobby when the ingest restarts stays in the same visit when heard again, and that visit
    /// closes (when it was last heard) once it is gone; the minutes already counted are not counted again.
    @Test func aRestartedIngestGoesOnWithOpenVisits() async throws {
        let harness = try await IngestHarness.start()
        let (client, _) = try await harness.client()
        defer { client.stop() }
        let t0: Int64 = 1_767_225_600_000_000
        let beacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
        func publish(_ sequence: UInt64, beaconID: String = beacon, at start: Int64, count: Int) throws {
            try publishInTheLobby(with: client, sequence, beaconID: beaconID, at: start, count: count)
        }
        let visits = visitsQuery(of: beacon)
        try publish(1, at: t0, count: 20)
        try await harness.eventually("the beacon is placed in the lobby") { try harness.query(visits) == [["lobby", String(t0), nil]] }
        try await harness.stop()

        let (restarted, task) = harness.anotherIngest(clientID: "test-ingest-restarted")
        try await harness.eventually("the restarted ingest is connected") {
            restarted.statistics.mqttConnected && restarted.statistics.databaseConnected
        }
        try await Task.sleep(for: .milliseconds(500))
        try publish(2, at: t0 + 25_000_000, count: 20)
        try publish(3, beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:9", at: t0 + 120_000_000, count: 100)
        let lastHeard = t0 + 44_000_000
        try await harness.eventually("the visit goes on, then closes when the beacon was last heard") {
            try harness.query(visits) == [["lobby", String(t0), String(lastHeard)]]
        }
        let firstMinute = try harness.query(
            "SELECT zone_id, occupants FROM beaconflow.zone_occupancy WHERE bucket = to_timestamp(\(t0 / 1_000_000)) ORDER BY 1")
        #expect(firstMinute == [["lab", "0"], ["lobby", "1"]])
        restarted.requestStop()
        try await task.value
    }

    /// A site checkpointed under `zone_history: crossings` and restarted with the default history (an upgrade from
    /// a version whose default that was, or an edited sites file): the checkpoint is set aside, the site resumes
    /// from its open visits, and the beacon's visit goes on, the only one open, until it closes when the beacon
    /// was last heard. Restored as it was, the checkpoint would leave that visit open and open another.
    @Test func aCheckpointOfAnotherHistoryIsSetAsideAndTheVisitGoesOn() async throws {
        let harness = try await IngestHarness.start()
        let (client, _) = try await harness.client()
        defer { client.stop() }
        let t0: Int64 = 1_767_225_600_000_000
        let beacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
        func publish(_ sequence: UInt64, beaconID: String = beacon, at start: Int64, count: Int) throws {
            try publishInTheLobby(with: client, sequence, beaconID: beaconID, at: start, count: count)
        }
        let visits = visitsQuery(of: beacon)
        #expect(harness.ingest.configuration.sites.sites[0].zoneRules.history == .crossings)
        try publish(1, at: t0, count: 150)
        try await harness.eventually("a minute is counted and checkpointed, the beacon in the lobby") {
            try harness.count("beaconflow.zone_checkpoints") == 1 && harness.query(visits) == [["lobby", String(t0), nil]]
        }
        try await harness.stop()

        let (restarted, task) = harness.anotherIngest(clientID: "test-ingest-restarted") { configuration in
            configuration.sites.sites[0].zoneRules.history = ZoneRules().history
            configuration.sites.sites[0].zoneRules.historyLagMicros = ZoneRules().historyLagMicros
        }
        #expect(restarted.configuration.sites.sites[0].zoneRules.history == .confirmed)
        try await harness.eventually("the restarted ingest serves the site") { restarted.statistics.sitesServed == 1 }
        try publish(2, at: t0 + 150_000_000, count: 100)
        try publish(3, beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:9", at: t0 + 400_000_000, count: 200)
        let lastHeard = t0 + 249_000_000
        try await harness.eventually("the visit goes on, then closes when the beacon was last heard") {
            try harness.query(visits) == [["lobby", String(t0), String(lastHeard)]]
        }
        restarted.requestStop()
        try await task.value
    }

    /// A checkpoint row damaged or edited in the database (its next minute set to Int64.min, which once trapped
    /// the zone tracker at the site's next batch) is set aside: the ingest that claims the site logs it, counts it,
    /// resumes the site from its open visits and goes on committing, and saves a sound checkpoint over it. An open
    /// visit or a minute dated at infinity is left out of that resume rather than stop it.
    @Test func aDamagedCheckpointRowIsSetAsideAndTheSiteGoesOn() async throws {
        let harness = try await IngestHarness.start()
        let (client, _) = try await harness.client()
        defer { client.stop() }
        let t0: Int64 = 1_767_225_600_000_000
        for agent in ["hq-a1", "hq-a2"] {
            _ = try client.publish(topic: "beaconflow/v1/hq/\(agent)/batch", payload: try batchPayload(agent: agent, sequence: 1, count: 150, start: t0))
        }
        try await harness.eventually("a minute is counted and checkpointed") { try harness.count("beaconflow.zone_checkpoints") == 1 }
        try await harness.stop()
        let saved = try #require(try harness.connection.query("SELECT state FROM beaconflow.zone_checkpoints").first?.decode(0, as: PostgresBytes.self))
        let (damaged, _) = try #require(checkpointWithNextMinuteAtInt64Min(saved.bytes))
        try harness.connection.query("UPDATE beaconflow.zone_checkpoints SET state = $1", [PostgresBytes(damaged)])
        // And rows no sighting could have made, which the resume without the checkpoint reads.
        try harness.connection.execute(
            """
            INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts) VALUES ('hq', 'lobby', 'x', 'infinity');
            INSERT INTO beaconflow.zone_occupancy_minute (site_id, zone_id, bucket, occupants) VALUES ('hq', 'lab', 'infinity', 1);
            """)

        let (restarted, task) = harness.anotherIngest(clientID: "test-ingest")
        try await harness.eventually("the restarted ingest serves the site") { restarted.statistics.sitesServed == 1 }
        for agent in ["hq-a1", "hq-a2"] {
            _ = try client.publish(
                topic: "beaconflow/v1/hq/\(agent)/batch", payload: try batchPayload(agent: agent, sequence: 2, count: 150, start: t0 + 150_000_000))
        }
        try await harness.eventually("the site's next batches are committed and a sound checkpoint saved") {
            let state = try harness.connection.query("SELECT state FROM beaconflow.zone_checkpoints").first?.decode(0, as: PostgresBytes.self)
            return restarted.statistics.batchesCommitted == 2 && state.map { $0.bytes != damaged } == true
        }
        #expect(try harness.count("beaconflow.zone_occupancy WHERE bucket >= to_timestamp(\(t0 / 1_000_000 + 150))") > 0)
        restarted.requestStop()
        try await task.value
    }

    /// The lab's agent delivers its first ten minutes two hours late, after the lobby's agent has sent all of its
    /// two hours and ten minutes. Past the allowed lateness (2 s here) the site went on without it: its sightings
    /// are stored, its TLM frames (the same transmissions the lobby's agent heard) add no telemetry row, and its
    /// readings, louder than the lobby's, move no zone and change no minute (counted as late).
    @Test func anAgentTwoHoursBehindAddsItsSightingsButNoTelemetryTwiceAndNoZoneChange() async throws {
        let harness = try await IngestHarness.start { configuration in
            configuration.sites.sites[0].zoneRules.allowedLatenessMicros = 2_000_000
        }
        let (client, _) = try await harness.client()
        defer { client.stop() }
        let t0: Int64 = 1_767_225_600_000_000
        let beacon = BeaconKey(beaconID: "eddystone:0102030405060708090a:0000000000b7", address: 0xC000_0000_00B7, addressIsRandom: true, powerAt1mDbm: -59)
        /// One sighting every 10 s from `first` (an index), every third a TLM frame with the beacon's counters.
        func publish(agent: String, sequence: UInt64, first: Int, count: Int, rssi: Int8) throws {
            var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 7)
            builder.configuration.maximumSightings = 10_000
            for index in first..<(first + count) {
                var data: DataFrameContent?
                if index % 3 == 0 {
                    let advertisingCount = UInt32(index * 40)
                    let uptimeTenths = UInt32(index * 100)
                    let fields: [UInt8] = [0x20, 0x00, 0x0B, 0xB8, 0x16, 0x00]
                    let counters = withUnsafeBytes(of: advertisingCount.bigEndian, Array.init) + withUnsafeBytes(of: uptimeTenths.bigEndian, Array.init)
                    data = .eddystone(FrameBytes(fields + counters))
                }
                _ = builder.add(Sighting(timeMicros: t0 + Int64(index) * 10_000_000, beacon: beacon, rssi: rssi, data: data), nowNanoseconds: 0)
            }
            let batch = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: t0 + Int64(first) * 10_000_000)
            let sealed = try #require(batch)
            _ = try client.publish(topic: "beaconflow/v1/hq/\(agent)/batch", payload: try sealed.wireBytes())
        }
        // The lobby's agent: 2 h 10 min in 13 batches of 10 minutes.
        for batch in 0..<13 { try publish(agent: "hq-a1", sequence: UInt64(batch + 1), first: batch * 60, count: 60, rssi: -70) }
        try await harness.eventually("the lobby agent's sightings are stored") { try harness.count("beaconflow.sightings") == 780 }
        let minutes = "SELECT zone_id, sum(occupants) FROM beaconflow.zone_occupancy WHERE bucket < to_timestamp(\((t0 + 600_000_000) / 1_000_000)) GROUP BY 1 ORDER BY 1"
        try await harness.eventually("the site goes on without the lab's agent") { try harness.query(minutes) == [["lab", "0"], ["lobby", "10"]] }
        let telemetryBefore = try harness.count("beaconflow.telemetry")
        #expect(telemetryBefore == 260)

        // Two hours late, the lab's agent: its first ten minutes, 20 dB louder than the lobby's.
        let lateBefore = harness.ingest.statistics.lateReadings
        try publish(agent: "hq-a2", sequence: 1, first: 0, count: 60, rssi: -50)
        try await harness.eventually("the lab agent's sightings are stored") { try harness.count("beaconflow.sightings") == 840 }
        #expect(try harness.count("beaconflow.telemetry") == telemetryBefore)
        #expect(try harness.query("SELECT count(*), count(DISTINCT (adv_count, uptime_s)) FROM beaconflow.telemetry") == [["260", "260"]])
        #expect(harness.ingest.statistics.lateReadings - lateBefore == 60)
        #expect(try harness.query("SELECT zone_id, (extract(epoch FROM enter_ts) * 1000000)::bigint FROM beaconflow.visits") == [["lobby", String(t0)]])
        #expect(try harness.query(minutes) == [["lab", "0"], ["lobby", "10"]])
        try await harness.stop()
    }

    /// An agent replaying 214 s of a real capture at 50× real time (about 4 s) into the harness's broker, every
    /// device included, started once the harness is up; returns the run once some batches are committed.
    func replayUntilSomeAreCommitted(
        _ harness: IngestHarness, spool: String, change: (inout AgentConfiguration) -> Void = { _ in }
    ) async throws -> (run: Task<Agent.Outcome, Error>, expectedSightings: Int) {
        let capture = captureFixture("wban-python-btsnoop_hci.log")
        var configuration = try agentConfiguration(harness.broker, spool: spool)
        configuration.extractor.includeUnknownDevices = true
        change(&configuration)
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .factor(50)), logger: logger)
        let run = Task { try await agent.run() }
        try await harness.eventually("some batches are committed") { harness.ingest.statistics.batchesCommitted >= 3 }
        return (run, try expectedSightings(capture: capture, configuration: configuration.extractor).count)
    }

    /// Every sighting of the replay, and every batch sequence, once.
    func expectEachOnce(_ connection: PostgresConnection, expectedSightings: Int) throws {
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [[String(expectedSightings)]])
        let sequences = try connection.query("SELECT count(*), max(sequence) FROM beaconflow.batches")
        #expect(sequences[0][0] == sequences[0][1], "every sequence once: \(sequences)")
    }
}
