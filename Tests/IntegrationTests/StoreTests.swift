import BeaconWire
@testable import BeaconIngest
import LibPQ
import LocalServers
import Logging
import TestServers
import Testing

/// The store's parts on their own, against a real PostgreSQL: the transaction helper, the transmission
/// deduplicator of both kinds, and the batch ledger.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct StoreTests {
    /// In-memory state that counts what it was told, and what it had when its transaction began.
    struct Counter: TransactionalState {
        var value = 0
        private var saved: Int?
        mutating func beginTransaction() { saved = value }
        mutating func commitTransaction() { saved = nil }
        mutating func rollbackTransaction() {
            if let saved { value = saved }
            saved = nil
        }
    }

    static func migrated() async throws -> (SharedDatabase, PostgresConnection) {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "store-test"))
        return (server, connection)
    }

    @Test func stateCommitsAndRollsBackWithTheDatabase() async throws {
        let connection = try PostgresConnection(try await SharedDatabase.create().conninfo)
        try connection.execute("CREATE TABLE t (n integer PRIMARY KEY, d integer REFERENCES t DEFERRABLE INITIALLY DEFERRED)")
        func rows() throws -> Int { try connection.query("SELECT count(*) FROM t").first!.decode(0, as: Int.self) }
        var state = Counter()

        let committed = try connection.transaction(with: &state) { (state) throws(PostgresError) -> TransactionEnd<String> in
            state.value += 1
            try connection.query("INSERT INTO t VALUES (1, NULL)")
            return .commit("kept")
        }
        let afterCommit = try rows()
        #expect(committed == "kept" && state.value == 1 && afterCommit == 1)

        let abandoned = try connection.transaction(with: &state) { (state) throws(PostgresError) -> TransactionEnd<String> in
            state.value += 10
            try connection.query("INSERT INTO t VALUES (2, NULL)")
            return .rollback("abandoned")
        }
        let afterRollback = try rows()
        #expect(abandoned == "abandoned" && state.value == 1 && afterRollback == 1)

        // A statement that fails, and a COMMIT that fails (a deferred constraint): both roll the state back too.
        for statement in ["INSERT INTO t VALUES (1, NULL)", "INSERT INTO t VALUES (3, 99)"] {
            do {
                _ = try connection.transaction(with: &state) { (state) throws(PostgresError) -> TransactionEnd<Void> in
                    state.value += 100
                    try connection.query(statement)
                    return .commit(())
                }
                Issue.record("\(statement) committed")
            } catch {
                #expect(error.sqlState == "23505" || error.sqlState == "23503", "\(error)")
            }
            let afterFailure = try rows()
            #expect(state.value == 1 && afterFailure == 1, "after \(statement)")
        }
        // The connection is usable after each.
        try connection.transaction { () throws(PostgresError) in _ = try connection.query("INSERT INTO t VALUES (4, NULL)") }
        #expect(try rows() == 2)
    }

    @Test func aTransmissionIsStoredOnceWhateverOffersIt() async throws {
        let (_, connection) = try await Self.migrated()
        try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 2)")
        let store = TransmissionStore(connection: connection)
        let t: Int64 = 1_767_225_600_000_000 + 3_600_000_000
        func tlm(_ agent: String, _ counter: UInt32, at time: Int64) -> NewTelemetry {
            NewTelemetry(
                row: TelemetryRow(
                    timeMicros: time, siteID: "hq", agentID: agent, beaconID: "b1", batteryMillivolts: 3000,
                    temperatureCelsius: 21, advertisingCount: counter, uptimeSeconds: Double(counter) / 10),
                rebooted: false)
        }
        let offers = [tlm("a1", 7, at: t), tlm("a2", 7, at: t + 40_000), tlm("a1", 8, at: t + 1_000_000)]
        let stored = try connection.transaction { () throws(PostgresError) in try store.storeNew(offers, TransmissionStore.telemetry) }
        #expect(stored.map(\.row.agentID) == ["a1", "a1"], "the first offer of each transmission")
        let again = try connection.transaction { () throws(PostgresError) in
            try store.storeNew([tlm("a3", 7, at: t + 90_000)], TransmissionStore.telemetry)
        }
        #expect(again.isEmpty)

        func reading(_ agent: String, _ quantity: String, hash: Int64, at time: Int64) -> SensorReadingRow {
            SensorReadingRow(
                timeMicros: time, siteID: "hq", agentID: agent, beaconID: "b2",
                reading: SensorReading(quantity: quantity, value: 1, unit: "celsius"), frameType: "bthome", frameHash: hash,
                toleranceMicros: 5_000_000)
        }
        // One transmission's two readings are both stored; the same bytes heard again within the tolerance are not,
        // later they are a new reading.
        let first = try connection.transaction { () throws(PostgresError) in
            try store.storeNew(
                [reading("a1", "temperature", hash: 42, at: t), reading("a1", "humidity", hash: 42, at: t)],
                TransmissionStore.sensorReadings)
        }
        #expect(first.count == 2)
        let repeated = try connection.transaction { () throws(PostgresError) in
            try store.storeNew([reading("a2", "temperature", hash: 42, at: t + 4_000_000)], TransmissionStore.sensorReadings)
        }
        #expect(repeated.isEmpty)
        let later = try connection.transaction { () throws(PostgresError) in
            try store.storeNew([reading("a2", "temperature", hash: 42, at: t + 6_000_000)], TransmissionStore.sensorReadings)
        }
        #expect(later.count == 1)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.telemetry_raw") == [["2"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sensor_readings_raw") == [["3"]])
    }

    @Test func theLedgerCountsABatchOnceAndTellsAReusedSequence() async throws {
        let (_, connection) = try await Self.migrated()
        let ledger = BatchLedger(connection: connection)
        let one = try decodedBatch(sequence: 1)
        let two = try decodedBatch(sequence: 2)
        #expect(try ledger.insert([one, two, one]) == [0, 1], "the same batch twice in a group: the first is new")
        #expect(try ledger.insert([one]).isEmpty)
        #expect(try ledger.reusedSequences([one], fresh: []).isEmpty, "a redelivery says the same")
        let other = try decodedBatch(sequence: 1, beaconID: "eddystone:0102030405060708090a:0000000000b2")
        let reused = try ledger.reusedSequences([other], fresh: [])
        #expect(reused[0]?.contains("of other content") == true, "\(reused)")

        let agent = AgentKey(site: "hq", agent: "hq-a1")
        try ledger.recordProgress([agent: 1])
        try ledger.recordProgress([agent: 0])  // only ever grows
        let progress = try ledger.storedProgress(agent, atLeast: 0)
        #expect(progress.through == 1 && progress.above == [2])
    }
}
