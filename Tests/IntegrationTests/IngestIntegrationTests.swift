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

@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)), .serialized)
struct IngestIntegrationTests {
    let logger = Logger(label: "ingest-test")

    func agentConfiguration(_ broker: MosquittoServer, spool: String, agent: String = "hq-a1") throws -> AgentConfiguration {
        try testAgentConfiguration(brokerPort: broker.port, spool: spool, agent: agent)
    }

    @Test func anAgentsReplayEndsInPostgreSQLAcknowledgedWhole() async throws {
        let harness = try await IngestHarness.start()
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let capture = exampleFile("mixed-beacons.btsnoop")
        let configuration = try agentConfiguration(harness.broker, spool: spool)
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .maximum), logger: logger)
        // .finished means every batch was acknowledged, and the ingest acknowledges only what it committed.
        #expect(try await agent.run() == .finished)
        let expected = try expectedSightings(capture: capture, configuration: configuration.extractor)
        #expect(try harness.count("beaconflow.sightings") == expected.count)
        #expect(try harness.count("beaconflow.sightings WHERE agent_id = 'hq-a1' AND agent_zone_id = 'lobby'") == expected.count)
        let committed = try harness.query("SELECT committed_through FROM beaconflow.agent_state WHERE agent_id = 'hq-a1'")
        #expect(committed == [[String(harness.ingest.statistics.batchesCommitted)]])
        // One telemetry row per TLM transmission of the capture (their advertising counters differ).
        let tlmCounters = Set(
            expected.compactMap { sighting -> UInt32? in
                guard case .eddystone(let bytes)? = sighting.data, case .eddystoneTLM(let tlm)? = try? Eddystone.decode(Array(bytes)[...])
                else { return nil }
                return tlm.advertisingCount
            })
        #expect(!tlmCounters.isEmpty)
        #expect(try harness.count("beaconflow.telemetry") == tlmCounters.count)
        #expect(try harness.count("beaconflow.beacon_health") == Set(expected.map(\.beacon.beaconID)).count)
        try await harness.eventually("the agent's offline status is recorded") {
            try harness.query("SELECT online FROM beaconflow.agent_health WHERE agent_id = 'hq-a1'") == [["f"]]
        }
        try await harness.stop()
    }

    @Test func aRedeliveredBatchGivesOneSetOfRowsAndTheAcknowledgementFollowsTheCommit() async throws {
        let harness = try await IngestHarness.start()
        let (client, events) = try await harness.client()
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/hq/hq-a1/ack")
        let payload = try batchPayload(sequence: 1)
        for _ in 0..<3 { try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload) }
        try await harness.eventually("three deliveries are handled") {
            let statistics = harness.ingest.statistics
            return statistics.batchesCommitted + statistics.batchesDuplicate == 3
        }
        #expect(harness.ingest.statistics.batchesCommitted == 1)
        #expect(try harness.count("beaconflow.sightings") == 100)
        #expect(try harness.count("beaconflow.batches") == 1)
        try await events.first { event in
            guard case .message("beaconflow/v1/hq/hq-a1/ack", let payload, _) = event else { return false }
            return Acknowledgement(payload: payload) == Acknowledgement(committedThrough: 1)
        }
        // An agent that sends format version 1 (the body uncompressed, as earlier agents do) is read the same.
        let version1 = try batchPayload(sequence: 2, count: 30, start: 1_767_225_600_000_000 + 600_000_000, formatVersion: 1)
        #expect(try WireBatch(serializedBytes: version1).formatVersion == 1)
        #expect(try WireBatch(serializedBytes: payload).formatVersion == 3)
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: version1)
        try await harness.eventually("the version 1 batch is committed") { harness.ingest.statistics.batchesCommitted == 2 }
        #expect(try harness.count("beaconflow.sightings") == 130)
        // Sequence 1 again with other sightings: kept as a reused sequence, the committed batch stays.
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1, count: 50))
        try await harness.eventually("the reused sequence is rejected") { harness.ingest.statistics.batchesRejected == 1 }
        #expect(try harness.query("SELECT reason, payload_bytes > 0 FROM beaconflow.rejected_batches") == [["sequence_reused", "t"]])
        #expect(try harness.count("beaconflow.sightings") == 130)
        // The same boot id, seal time and count with other readings: its content tells it from a redelivery.
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1, rssi: { _ in -40 }))
        try await harness.eventually("the batch of other content is rejected") { harness.ingest.statistics.batchesRejected == 2 }
        #expect(try harness.query("SELECT detail FROM beaconflow.rejected_batches ORDER BY received_at DESC LIMIT 1")[0][0]?
            .contains("of other content") == true)
        // The same content in the other format version is a redelivery.
        let duplicates = harness.ingest.statistics.batchesDuplicate
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1, formatVersion: 1))
        try await harness.eventually("the same batch in version 1 is a duplicate") {
            harness.ingest.statistics.batchesDuplicate == duplicates + 1
        }
        #expect(harness.ingest.statistics.batchesRejected == 2)
        #expect(try harness.count("beaconflow.sightings") == 130)
        try await harness.stop()
    }

    @Test func badBatchesAreKeptWithTheirReasonAndGoodOnesStillGoIn() async throws {
        let harness = try await IngestHarness.start()
        let (client, events) = try await harness.client()
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/+/+/rejection")
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let cases: [(topic: String, payload: [UInt8], reason: String)] = [
            ("beaconflow/v1/hq/hq-a1/batch", Array("not a batch at all".utf8), "undecodable"),
            ("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 2, formatVersion: 9), "unsupported_version"),
            ("beaconflow/v1/hq/hq-a1/batch", try batchPayload(agent: "hq-a2", sequence: 3), "topic_mismatch"),
            ("beaconflow/v1/hq/hq-a9/batch", try batchPayload(agent: "hq-a9", sequence: 4), "unknown_agent"),
            ("beaconflow/v1/hq/Not_An_Id/batch", try batchPayload(sequence: 5), "wrong_topic"),
            ("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 6, start: now + 3_600_000_000), "bad_timestamp"),
            ("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 7, start: 1_000_000), "bad_timestamp"),
            ("beaconflow/v1/hq/hq-a1/batch", [UInt8](repeating: 0x0A, count: (1 << 20) + 1), "too_large"),
            // PostgreSQL text cannot hold NUL: the database refuses this one alone.
            ("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 8, beaconID: "mac:\u{0}"), "database_refused"),
        ]
        for item in cases { try client.publish(topic: item.topic, payload: item.payload) }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1))
        try await harness.eventually("every batch is handled") {
            let statistics = harness.ingest.statistics
            return statistics.batchesRejected == cases.count && statistics.batchesCommitted == 1
        }
        let rows = try harness.query(
            "SELECT reason, topic, length(payload), detail, payload_bytes FROM beaconflow.rejected_batches ORDER BY received_at")
        #expect(rows.map { $0[0] ?? "" }.sorted() == cases.map(\.reason).sorted())
        for row in rows {
            // Kept whole up to 64 KiB, with the size of the whole.
            let match = cases.first {
                $0.reason == row[0] && $0.topic == row[1] && String(min($0.payload.count, 65_536)) == row[2]
                    && String($0.payload.count) == row[4]
            }
            #expect(match != nil, "stored: \(row)")
            #expect((row[3] ?? "").count > 10, "with a message: \(row)")
        }
        #expect(try harness.count("beaconflow.sightings") == 100)
        // Each agent is told why, once per reason (two bad timestamps, one notice); the wrong topic names no agent.
        // A notice is published after its batch is handled, so the last may still be on its way.
        func notices() -> [String] {
            events.all.compactMap { event -> String? in
                guard case .message(let topic, let payload, _) = event, let notice = RejectionNotice(payload: payload) else {
                    return nil
                }
                return "\(topic.split(separator: "/")[3]) \(notice.reason) \(notice.sequence.map(String.init) ?? "-") \(notice.acknowledged)"
            }
        }
        try? await harness.eventually("every notice arrives") { notices().count >= 7 }
        let notices = notices()
        #expect(
            notices.sorted() == [
                "hq-a1 bad_timestamp 6 true", "hq-a1 database_refused 8 true", "hq-a1 too_large - false",
                "hq-a1 topic_mismatch 3 false", "hq-a1 undecodable - false", "hq-a1 unsupported_version - false",
                "hq-a9 unknown_agent 4 false",
            ], "\(notices)")
        try await harness.stop()
    }

    /// An agent that the sites file does not list learns why its batches stay unacknowledged: the ingest's
    /// notice shows in the agent's log and in the status it publishes, and the batches stay in its spool.
    @Test func anAgentMissingFromTheSitesFileSeesWhyInItsLogAndStatus() async throws {
        let harness = try await IngestHarness.start()
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let (client, events) = try await harness.client()
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/hq/hq-a9/status")
        var configuration = try agentConfiguration(harness.broker, spool: spool, agent: "hq-a9")
        configuration.drainTimeout = .seconds(90)
        let log = RecordingLog()
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: exampleFile("mixed-beacons.btsnoop"), speed: .maximum),
            logger: log.logger(label: "agent"))
        let run = Task { try await agent.run() }
        let isRefusal = { (entry: RecordingLog.Entry) in entry.message == "The ingest refused a batch" }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, !log.all.contains(where: isRefusal) {
            try await Task.sleep(for: .milliseconds(100))
        }
        agent.requestStop()
        guard case .stopped(let pending) = try await run.value else {
            Issue.record("the agent did not stop as asked")
            return
        }
        #expect(pending > 0)
        let refusals = log.all.filter(isRefusal)
        #expect(refusals.first?.metadata["reason"] == "unknown_agent", "\(log.all)")
        #expect(refusals.first?.metadata["error"] == "the sites file has no agent 'hq-a9' in site 'hq'")
        let status = try await events.first { event in
            guard case .message(_, let payload, _) = event, let status = try? AgentStatus(json: payload) else { return false }
            return status.online == false
        }
        guard case .message(_, let payload, _) = status else { return }
        let reported = try AgentStatus(json: payload)
        #expect(
            reported.lastError?.hasPrefix("the ingest refused batch") == true
                && reported.lastError?.contains("(unknown_agent): the sites file has no agent 'hq-a9' in site 'hq'; kept here") == true,
            "\(reported)")
        #expect((reported.refusedBatches ?? 0) >= 1 && reported.spoolBatches == Int64(pending))
        #expect(try harness.count("beaconflow.sightings") == 0)
        try await harness.stop()
    }

    /// Messages built to trap or stall the ingest, published retained (an agent's credentials allow that on its own
    /// topics): each is refused with a reason, the good batch after them commits, the refused ones with a valid
    /// header are acknowledged so that the agent moves on, the ingest stops promptly, and a restarted ingest that
    /// receives them all again from the broker still works.
    @Test func hostileMessagesAreRefusedAndNeitherTrapNorStallTheIngest() async throws {
        let harness = try await IngestHarness.start()
        let (client, events) = try await harness.client()
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/hq/hq-a1/ack")
        var read = Beaconflow_V1_CharacteristicRead()
        read.characteristicUuid16 = 0x2A19
        read.timeUs = .min
        let refused: [(payload: [UInt8], field: String)] = [
            (try batchPayload(sequence: 1, edit: { $0.agentClockUs = .min }), "agent_clock_us"),
            (try batchPayload(sequence: 2, edit: { $0.baseTimeUs = .min }), "base_time_us"),
            (try batchPayload(sequence: 3, edit: { $0.characteristicReads = [read] }), "time_us"),
            (try batchPayload(sequence: 4, rssi: { _ in 127 }), "rssi"),
            (try batchPayload(sequence: 1, edit: { $0.sequence = .max; $0.firstUnacknowledgedSequence = .max }), "sequence"),
            (try batchPayload(sequence: 1, edit: { $0.sequence = 1 << 63; $0.firstUnacknowledgedSequence = 1 << 63 }), "sequence"),
            (try batchPayload(sequence: 1, edit: { $0.siteID = "hq\nforged" }), "site_id"),
        ]
        for item in refused { try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: item.payload, retain: true) }
        for status in [#"{"online": true, "adverts_per_s": 1e300}"#, #"{"online": true, "clock_us": -9223372036854775808}"#] {
            try client.publish(topic: "beaconflow/v1/hq/hq-a1/status", payload: Array(status.utf8), retain: true)
        }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 5))
        try await harness.eventually("every batch is handled") {
            let statistics = harness.ingest.statistics
            return statistics.batchesRejected == refused.count && statistics.batchesCommitted == 1
        }
        let details = try harness.query("SELECT detail FROM beaconflow.rejected_batches").map { $0[0] ?? "" }
        for item in refused { #expect(details.contains { $0.contains(item.field) }, "\(item.field): \(details)") }
        #expect(!details.contains { $0.contains("\n") })
        #expect(try harness.count("beaconflow.sightings") == 100)
        #expect(try harness.query("SELECT adverts_per_s, clock_offset_ms FROM beaconflow.agent_state WHERE agent_id = 'hq-a1'")
            .allSatisfy { $0 == [nil, nil] })
        try await events.first { event in
            guard case .message("beaconflow/v1/hq/hq-a1/ack", let payload, _) = event else { return false }
            return Acknowledgement(payload: payload) == Acknowledgement(committedThrough: 5)
        }
        let stopping = ContinuousClock.now
        try await harness.stop()
        #expect(ContinuousClock.now - stopping < .seconds(10))

        // The broker hands the retained status and batch to the next ingest: the status is refused again, the batch
        // ignored (agents never retain batches), and the ingest works.
        let (restarted, task) = harness.anotherIngest(clientID: "test-ingest-restarted")
        try await harness.eventually("the restarted ingest serves the site") {
            restarted.statistics.mqttConnected && restarted.statistics.sitesServed == 1
        }
        try await Task.sleep(for: .milliseconds(500))  // its subscription reaches the broker
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 6, start: 1_767_225_700_000_000))
        try await harness.eventually("the next batch commits") { restarted.statistics.batchesCommitted == 1 }
        #expect(try harness.count("beaconflow.sightings") == 200)
        #expect(restarted.statistics.batchesRejected == 0 && restarted.statistics.batchesDuplicate == 0)
        restarted.requestStop()
        try await task.value
    }

    /// The broker is away while an agent replays a capture into a spool too small for it: the oldest batches are
    /// dropped. Once the broker is back, the batches still held name the first of them as their oldest
    /// unacknowledged sequence, so the ingest acknowledges them without waiting for the dropped ones: the agent
    /// ends with an empty spool and every batch it held is committed once.
    @Test func anAgentWhoseSpoolOverflowedDeliversWhatItStillHolds() async throws {
        let harness = try await IngestHarness.start()
        harness.broker.stop()
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        var configuration = try agentConfiguration(harness.broker, spool: spool)
        configuration.extractor.includeUnknownDevices = true  // the capture's devices are not beacons
        configuration.spool.maximumBytes = 4 << 10
        configuration.spool.segmentBytes = 1 << 10
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: captureFixture("wban-python-btsnoop_hci.log"), speed: .maximum),
            logger: logger)
        async let outcome = agent.run()
        try await Task.sleep(for: .seconds(2))
        try harness.broker.start()
        #expect(try await outcome == .finished)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).filter { $0.hasSuffix(".seg") }.isEmpty)
        let batches = try harness.query("SELECT count(*), count(DISTINCT sequence), min(sequence), max(sequence) FROM beaconflow.batches")[0]
            .map { Int($0 ?? "") ?? -1 }
        #expect(batches[0] == batches[1] && batches[3] - batches[2] + 1 == batches[0], "\(batches)")
        #expect(batches[2] > 1, "the oldest batches were dropped: \(batches)")
        let committed = try harness.query("SELECT committed_through FROM beaconflow.agent_state WHERE agent_id = 'hq-a1'")
        #expect(committed == [[String(batches[3])]])
        try await harness.stop()
    }

    /// The broker loses the retained acknowledgement (restarted without persistence) and the agent, never having
    /// seen it, sends the batch again: the ingest answers the duplicate with the acknowledgement.
    @Test func aLostAcknowledgementIsPublishedAgainWhenTheBatchComesAgain() async throws {
        let harness = try await IngestHarness.start(brokerPersistence: false)
        let payload = try batchPayload(sequence: 1)
        do {
            let (client, events) = try await harness.client()
            defer { client.stop() }
            try client.subscribe(topic: "beaconflow/v1/hq/hq-a1/ack")
            try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload)
            try await events.first { if case .message(_, let body, _) = $0 { Acknowledgement(payload: body)?.committedThrough == 1 } else { false } }
        }
        harness.broker.stop()
        try harness.broker.start()
        let (client, events) = try await harness.client(id: "test-publisher-again")
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/hq/hq-a1/ack")
        try await harness.eventually("the ingest is connected again") { harness.ingest.statistics.mqttConnected }
        try await Task.sleep(for: .milliseconds(500))
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload)
        try await events.first { if case .message(_, let body, _) = $0 { Acknowledgement(payload: body)?.committedThrough == 1 } else { false } }
        #expect(harness.ingest.statistics.batchesDuplicate == 1)
        #expect(try harness.count("beaconflow.sightings") == 100)
        try await harness.stop()
    }

    @Test func partitionsAreMadeAheadAndDroppedPastRetentionOnATimer() async throws {
        let harness = try await IngestHarness.start { $0.partitionMaintenanceInterval = .milliseconds(300) }
        let partitions = "SELECT relname FROM pg_class WHERE relname ~ '^(sighting_packs|telemetry_raw)_[0-9]{8}$' ORDER BY 1"
        func day(_ offset: Int) throws -> String {
            try harness.query("SELECT to_char((now() AT TIME ZONE 'UTC')::date + \(offset), 'YYYYMMDD')")[0][0]!
        }
        let made = try harness.query(partitions).map { $0[0]! }
        let (today, threeAhead, fiveAhead) = (try day(0), try day(3), try day(5))
        #expect(made.contains("sighting_packs_\(today)") && made.contains("telemetry_raw_\(threeAhead)"), "\(made)")
        #expect(!made.contains("sighting_packs_\(fiveAhead)"))
        _ = try harness.query("SELECT beaconflow.ensure_partitions('2020-01-01', 2)")
        // Bounded: no more than 62 days at once, nothing newer than the retention dropped.
        for call in ["ensure_partitions('2020-01-01', 100000)", "ensure_partitions('0001-01-01', 1)", "drop_partitions_before('2999-01-01')"] {
            #expect(throws: PostgresError.self, "\(call)") { try harness.query("SELECT beaconflow.\(call)") }
        }
        #expect(try harness.query(partitions).map { $0[0]! }.contains("sighting_packs_\(today)"))
        _ = try harness.query("UPDATE beaconflow.settings SET value = '5' WHERE key = 'partitions_ahead_days'")
        try await harness.eventually("the 2020 partitions are dropped and five days ahead are made") {
            let now = try harness.query(partitions).map { $0[0]! }
            return !now.contains { $0.hasSuffix("20200101") || $0.hasSuffix("20200102") } && now.contains("sighting_packs_\(fiveAhead)")
        }
        #expect(try harness.query(partitions).map { $0[0]! }.contains("sighting_packs_\(today)"))
        try await harness.stop()
    }

    /// The ingest runs as a login that is only in beaconflow_writer, on a schema its owner migrated: it commits,
    /// makes partitions through the bounded functions, and cannot change the retention.
    @Test func anIngestLoginThatIsOnlyAWriterWorks() async throws {
        let harness = try await IngestHarness.start()
        try await harness.stop()
        let writerLogin = try harness.writerLogin("ingest_only")
        let (writerOnly, task) = harness.anotherIngest(clientID: "test-ingest-writer-only") { $0.database = writerLogin }
        try await harness.eventually("the writer-only ingest is connected") {
            writerOnly.statistics.mqttConnected && writerOnly.statistics.databaseConnected
        }
        try await Task.sleep(for: .milliseconds(500))
        let (client, _) = try await harness.client()
        defer { client.stop() }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1, start: 1_609_459_200_000_000))
        try await harness.eventually("the batch commits") { writerOnly.statistics.batchesCommitted == 1 }
        #expect(try harness.count("beaconflow.sightings") == 100)
        let writer = try PostgresConnection(writerLogin)
        #expect(throws: PostgresError.self) { try writer.query("UPDATE beaconflow.settings SET value = '0' WHERE key = 'retention_days'") }
        #expect(throws: PostgresError.self) { try writer.query("CREATE TABLE beaconflow.intruder (x int)") }
        // Raw rows are append-only for the writer, through the parent or a partition (one the writer had made).
        let today = try #require(try harness.query("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").first?[0] ?? nil)
        for statement in [
            "DELETE FROM beaconflow.sighting_packs", "UPDATE beaconflow.sighting_packs SET tx_power = 0",
            "DELETE FROM beaconflow.sighting_packs_20210101", "DELETE FROM beaconflow.sighting_packs_\(today)",
            "DELETE FROM beaconflow.sightings_raw", "DELETE FROM beaconflow.beacon_keys", "DELETE FROM beaconflow.sighting_minutes",
            "DELETE FROM beaconflow.telemetry_raw", "DELETE FROM beaconflow.batches", "DELETE FROM beaconflow.visits_raw",
        ] {
            do {
                try writer.query(statement)
                Issue.record("the writer may: \(statement)")
            } catch { #expect(error.sqlState == "42501", "\(statement): \(error)") }
        }
        #expect(try harness.count("beaconflow.sightings") == 100)
        writerOnly.requestStop()
        try await task.value
    }
}
