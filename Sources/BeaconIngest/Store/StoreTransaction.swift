import BeaconWire
import LibPQ

/// In-memory state that changes with the database: what a transaction changed is kept when it commits and undone
/// when it rolls back (the database transaction it went with failed or was abandoned).
protocol TransactionalState {
    mutating func beginTransaction()
    mutating func commitTransaction()
    mutating func rollbackTransaction()
}

/// How a transaction's body ends it, with what it returns either way.
enum TransactionEnd<Value> {
    case commit(Value)
    case rollback(Value)
}

extension TransactionalState {
    /// Runs `body` as one transaction of this state: it commits when `body` says so and rolls back when `body` says
    /// so or throws.
    mutating func withTransaction<Value>(
        _ body: (inout Self) throws(PostgresError) -> TransactionEnd<Value>
    ) throws(PostgresError) -> Value {
        beginTransaction()
        let end: TransactionEnd<Value>
        do {
            end = try body(&self)
        } catch {
            rollbackTransaction()
            throw error
        }
        switch end {
        case .commit(let value):
            commitTransaction()
            return value
        case .rollback(let value):
            rollbackTransaction()
            return value
        }
    }
}

extension PostgresConnection {
    /// Runs `body` in a database transaction: COMMIT when it says so, ROLLBACK when it says so or throws (a failed
    /// COMMIT throws too). Returns how it ended, for the in-memory state that goes with it.
    func transaction<Value>(
        deciding body: () throws(PostgresError) -> TransactionEnd<Value>
    ) throws(PostgresError) -> TransactionEnd<Value> {
        try execute("BEGIN")
        do {
            let end = try body()
            switch end {
            case .commit: try execute("COMMIT")
            case .rollback: try execute("ROLLBACK")
            }
            return end
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    /// A database transaction that commits unless `body` throws.
    func transaction<Value>(_ body: () throws(PostgresError) -> Value) throws(PostgresError) -> Value {
        let end = try transaction(deciding: { () throws(PostgresError) -> TransactionEnd<Value> in .commit(try body()) })
        guard case .commit(let value) = end else { preconditionFailure("a transaction that commits rolled back") }
        return value
    }

    /// A database transaction with the in-memory state that goes with it: both commit, or both roll back.
    func transaction<State: TransactionalState, Value>(
        with state: inout State, _ body: (inout State) throws(PostgresError) -> TransactionEnd<Value>
    ) throws(PostgresError) -> Value {
        try state.withTransaction { (state) throws(PostgresError) in
            try transaction(deciding: { () throws(PostgresError) in try body(&state) })
        }
    }
}

/// The steps of a transaction, for state made of transactional parts.
enum TransactionStep {
    case begin, commit, rollback
}

extension TransactionalState {
    mutating func apply(_ step: TransactionStep) {
        switch step {
        case .begin: beginTransaction()
        case .commit: commitTransaction()
        case .rollback: rollbackTransaction()
        }
    }
}

extension JournaledDictionary: TransactionalState {}
extension ProximitySmoother: TransactionalState {}
extension TelemetryDeduplicator: TransactionalState {}
extension SensorDeduplicator: TransactionalState {}
extension FleetHealth: TransactionalState {}
extension SiteZoneTracker: TransactionalState {}
extension IngestPipeline: TransactionalState {}

/// A part of `IngestPipeline` that journals its own changes, so that a transaction neither copies it nor undoes
/// it by copying: `emptied` is what a saved copy of the pipeline holds instead (nothing that changing it copies).
protocol JournaledPart {
    mutating func apply(_ step: TransactionStep)
    var emptied: Self { get }
}

extension JournaledDictionary: JournaledPart {
    var emptied: Self { Self() }
}
extension ProximitySmoother: JournaledPart {
    var emptied: Self { Self(configuration: configuration) }
}
extension TelemetryDeduplicator: JournaledPart {
    var emptied: Self { Self() }
}
extension SensorDeduplicator: JournaledPart {
    var emptied: Self { Self() }
}
extension FleetHealth: JournaledPart {
    var emptied: Self { Self(configuration: configuration) }
}
extension AgentAddresses: JournaledPart {
    var emptied: Self { Self() }
}
extension Dictionary: JournaledPart where Key == String, Value == SiteZoneTracker {
    mutating func apply(_ step: TransactionStep) {
        for site in keys { self[site]?.apply(step) }
    }
    var emptied: Self { [:] }
}
extension BeaconIDInterner: JournaledPart {
    /// A cache: kept whatever the transaction does.
    mutating func apply(_ step: TransactionStep) {}
    var emptied: Self { Self() }
}
extension EIDCandidates: JournaledPart {
    /// A cache: kept whatever the transaction does.
    mutating func apply(_ step: TransactionStep) {}
    var emptied: Self { Self() }
}
