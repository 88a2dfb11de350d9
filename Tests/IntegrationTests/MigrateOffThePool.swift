import BeaconIngest
import LibPQ
import Logging
import WorkQueue

extension Migrator {
    /// `migrate` on a thread of its own. A migration is seconds of blocking libpq calls on a loaded machine; on the
    /// cooperative pool (a thread per core), two at once stall every other test's tasks for as long.
    @discardableResult
    static func migrateOffThePool(
        _ connection: PostgresConnection, through version: Int = .max, logger: Logger
    ) async throws -> [Int] {
        let handed = HandedConnection(connection: connection)
        return try await onThread { try Migrator.migrate(handed.connection, through: version, logger: logger) }
    }
}

/// A connection handed to one thread while its owner waits for it.
private struct HandedConnection: @unchecked Sendable {
    let connection: PostgresConnection
}
