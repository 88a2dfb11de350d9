import BeaconAgent
import BeaconWire
import Foundation
import LocalServers
import Logging
import Mosquitto
import Synchronization
import TestServers

/// Stands in for the ingest: takes every batch from the broker, keeps each (agent, sequence) once, and publishes
/// the retained acknowledgement "committed through N" the way the real ingest must — only over a contiguous run
/// of sequences (or up to the batch's first unacknowledged sequence, below which the agent waits for nothing).
final class TestIngest: Sendable {
    struct State {
        var batches: [UInt64: DecodedBatch] = [:]
        var committedThrough: UInt64 = 0
        var acknowledging = true
        var duplicates = 0
        var refused = 0
        var statuses: [String: [UInt8]] = [:]
    }

    let client: MQTTClient
    let state = Mutex(State())

    init(
        broker: MosquittoServer, clientID: String = "test-ingest", committedThrough: UInt64 = 0,
        configure: (inout MQTTClient.Configuration) -> Void = { _ in }
    ) throws {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: clientID)
        configure(&configuration)
        configuration.reconnectDelayMinimum = .milliseconds(50)
        configuration.reconnectDelayMaximum = .milliseconds(200)
        client = try MQTTClient(configuration, logger: Logger(label: "test-ingest"))
        state.withLock { $0.committedThrough = committedThrough }
        try client.subscribe(topic: "beaconflow/v1/+/+/batch")
        try client.subscribe(topic: "beaconflow/v1/+/+/status")
        let client = self.client
        Task { [self] in
            for await event in client.events {
                guard case .message(let topic, let payload, _) = event else { continue }
                if topic.hasSuffix("/status") {
                    state.withLock { $0.statuses[topic] = payload }
                    continue
                }
                guard let batch = try? BatchReader.decode(payload) else {
                    state.withLock { $0.refused += 1 }
                    continue
                }
                let ack: UInt64? = state.withLock { state in
                    // Already committed, or already here: a redelivery, skipped as the real ingest must.
                    if batch.sequence <= state.committedThrough || state.batches[batch.sequence] != nil {
                        state.duplicates += 1
                    } else {
                        state.batches[batch.sequence] = batch
                    }
                    state.committedThrough = max(state.committedThrough, batch.firstUnacknowledgedSequence - 1)
                    while state.batches[state.committedThrough + 1] != nil { state.committedThrough += 1 }
                    return state.acknowledging ? state.committedThrough : nil
                }
                if let ack {
                    let ackTopic = String(topic.dropLast("batch".count)) + "ack"
                    _ = try? client.publish(
                        topic: ackTopic, payload: Array("{\"committed_through\": \(ack)}".utf8), retain: true)
                }
            }
        }
        client.start()
    }

    /// Connects and waits until the subscriptions work (a probe status comes back), so that no batch published
    /// after this returns can miss the ingest.
    static func start(
        broker: MosquittoServer, committedThrough: UInt64 = 0,
        configure: (inout MQTTClient.Configuration) -> Void = { _ in }
    ) async throws -> TestIngest {
        let ingest = try TestIngest(broker: broker, committedThrough: committedThrough, configure: configure)
        let probe = "beaconflow/v1/probe/test-ingest/status"
        // Generous: on a loaded two-core machine the first connection can take seconds.
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if ingest.client.isConnected { _ = try? ingest.client.publish(topic: probe, payload: Array("{}".utf8)) }
            try await Task.sleep(for: .milliseconds(50))
            if ingest.state.withLock({ $0.statuses[probe] != nil }) { return ingest }
        }
        ingest.stop()
        throw LocalServerError("the test ingest did not get its subscriptions working within 30 s")
    }

    /// Disconnects; this also ends the event task, which holds the ingest until then.
    func stop() { client.stop() }

    var batchCount: Int { state.withLock { $0.batches.count } }
    var sequences: [UInt64] { state.withLock { $0.batches.keys.sorted() } }

    /// Publishes a retained acknowledgement, as an ingest that committed `sequence` for this agent would have.
    func publishAcknowledgement(site: String, agent: String, _ sequence: UInt64) throws {
        try client.publish(
            topic: "beaconflow/v1/\(site)/\(agent)/ack", payload: Array("{\"committed_through\": \(sequence)}".utf8),
            retain: true)
    }

    /// Every sighting received, once per batch.
    var sightings: [Sighting] {
        state.withLock { state in state.batches.keys.sorted().flatMap { state.batches[$0]!.sightings } }
    }

    func setAcknowledging(_ on: Bool) { state.withLock { $0.acknowledging = on } }

    /// The last retained status payload of an agent, as JSON.
    func status(site: String, agent: String) -> [String: Any]? {
        let topic = "beaconflow/v1/\(site)/\(agent)/status"
        guard let payload = state.withLock({ $0.statuses[topic] }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
    }

    /// Waits until `condition` holds, polling, at most `timeout` (long: the first run's parallel load can hold a
    /// two-core machine's threads for tens of seconds).
    func wait(
        for description: String, timeout: Duration = .seconds(90), _ condition: @Sendable (TestIngest) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if condition(self) { return }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LocalServerError("timed out waiting for \(description); have \(batchCount) batches")
    }
}

/// A sighting without its data frame (batches leave out data frames that did not change), at the time a batch of
/// the default format carries it (to the millisecond).
struct SightingKey: Hashable {
    var timeMicros: Int64
    var beaconID: String
    var rssi: Int8

    init(_ sighting: Sighting) {
        timeMicros = BatchBuilder.Configuration().sentTime(sighting.timeMicros)
        beaconID = sighting.beacon.beaconID
        rssi = sighting.rssi
    }
}

func multiset(_ sightings: [Sighting]) -> [SightingKey: Int] {
    sightings.reduce(into: [:]) { $0[SightingKey($1), default: 0] += 1 }
}

