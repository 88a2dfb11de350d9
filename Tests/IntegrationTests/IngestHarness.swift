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

/// A real mosquitto, a real PostgreSQL and the ingest between them, in this process.
final class IngestHarness: @unchecked Sendable {
    let broker: MosquittoServer
    let database: PostgresServer
    let ingest: Ingest
    let task: Task<Void, Error>
    /// The test's own connection, for queries.
    let connection: PostgresConnection
    /// The ingest's warnings and errors, for a failure's message (they go to standard error as well).
    let log = RecordingLog()

    /// `database`: a server of the test's (a new one when nil); `conninfo`: how the ingest reaches it (its
    /// `conninfo` when nil).
    static func start(
        brokerPersistence: Bool = true, database given: PostgresServer? = nil, conninfo: String? = nil,
        configure: (inout IngestConfiguration) -> Void = { _ in }
    ) async throws -> IngestHarness {
        let broker = try MosquittoServer(persistence: brokerPersistence)
        let database = if let given { given } else { try await PostgresServer.start() }
        var mqtt = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "test-ingest")
        mqtt.reconnectDelayMinimum = .milliseconds(50)
        mqtt.reconnectDelayMaximum = .milliseconds(200)
        var configuration = IngestConfiguration(
            mqtt: mqtt, database: conninfo ?? database.conninfo, sites: try SitesConfiguration.parse(testSites))
        configuration.reconnectDelayMinimum = .milliseconds(100)
        configuration.reconnectDelayMaximum = .milliseconds(500)
        configure(&configuration)
        let harness = try IngestHarness(broker: broker, database: database, configuration: configuration)
        do {
            try await harness.waitUntilSubscribed()
        } catch {
            // An ingest left running outlives its servers and retries them for the rest of the run.
            try? await harness.stop()
            throw error
        }
        return harness
    }

    private init(broker: MosquittoServer, database: PostgresServer, configuration: IngestConfiguration) throws {
        self.broker = broker
        self.database = database
        ingest = Ingest(
            configuration: configuration, logger: log.logger(label: "test-ingest", recording: .warning, alsoTo: StreamLogHandler.standardError))
        task = Task { [ingest] in try await ingest.run() }
        connection = try PostgresConnection(database.conninfo)
    }

    /// Stops the ingest and waits for it (intake stops, the queue is committed).
    func stop() async throws {
        ingest.requestStop()
        try await task.value
    }

    func query(_ sql: String) throws -> [[String?]] { try connection.query(sql).map(\.values) }

    /// Another ingest on the same broker and database (a restart, a second instance), with the harness's
    /// configuration as `configure` leaves it and a client id of its own; the caller stops it.
    func anotherIngest(
        clientID: String, configure: (inout IngestConfiguration) -> Void = { _ in }
    ) -> (ingest: Ingest, task: Task<Void, Error>) {
        var configuration = ingest.configuration
        configuration.mqtt.clientID = clientID
        configure(&configuration)
        let another = Ingest(configuration: configuration, logger: Logger(label: clientID))
        return (another, Task { try await another.run() })
    }

    /// Makes a login that is only in beaconflow_writer (the schema must exist); returns its connection string.
    func writerLogin(_ role: String) throws -> String {
        _ = try query("CREATE ROLE \(role) LOGIN IN ROLE beaconflow_writer")
        return database.conninfo.replacingOccurrences(of: "user=postgres", with: "user=\(role)")
    }

    func count(_ relation: String) throws -> Int {
        Int(try query("SELECT count(*) FROM \(relation)")[0][0] ?? "") ?? -1
    }

    /// A connected client of the test's own, to publish batches as an agent would and to read acknowledgements.
    func client(id: String = "test-publisher") async throws -> (MQTTClient, Collector<MQTTEvent>) {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: id)
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(configuration, logger: Logger(label: id))
        let events = Collector(client.events)
        client.start()
        try await events.first { if case .connected = $0 { true } else { false } }
        return (client, events)
    }

    /// Publishes an agent status until the ingest has recorded one: its subscriptions then work, and no message
    /// published after this returns can miss it. The ingest migrates its schema first; with dozens of tests
    /// starting servers at once on two cores, that has taken over 30 s.
    func waitUntilSubscribed() async throws {
        let (client, _) = try await client(id: "test-probe")
        defer { client.stop() }
        try await eventually("the ingest records a status message", timeout: .seconds(120)) {
            _ = try? client.publish(topic: "beaconflow/v1/hq/hq-a2/status", payload: Array(#"{"online": true}"#.utf8))
            return (try? self.count("beaconflow.agent_state WHERE agent_id = 'hq-a2'")) == 1
        }
    }

    /// Publishes `payload` on `topic` every half second until `condition` holds, as an agent resends: a
    /// subscription made just now may not be in place at the broker yet.
    func publish(
        _ payload: [UInt8], on topic: String, with client: MQTTClient, until description: String, _ condition: () throws -> Bool
    ) async throws {
        var last = ContinuousClock.now - .seconds(1)
        try await eventually(description) {
            if ContinuousClock.now - last >= .milliseconds(500) {
                last = .now
                try client.publish(topic: topic, payload: payload)
            }
            return try condition()
        }
    }

    func eventually(
        _ description: String, timeout: Duration = .seconds(30), _ condition: () throws -> Bool
    ) async throws {
        do {
            try await eventuallyTrue(description, timeout: timeout, condition)
        } catch let error as LocalServerError {
            let warnings = log.all.suffix(10).map { "\n  \($0)" }.joined()
            throw LocalServerError("\(error); ingest: \(ingest.statistics); its last warnings:\(warnings.isEmpty ? " none" : warnings)")
        }
    }
}
