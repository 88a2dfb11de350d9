import Foundation
import LibPQ
import LocalServers
import Synchronization
import WorkQueue

/// A database of its own on the PostgreSQL cluster this test process shares, for tests that only work inside their
/// database: no login roles, no cluster settings, no stopping or restarting the server (those start a
/// `PostgresServer` of their own). Cheaper than a cluster per test; the cluster stops when the process exits.
public struct SharedDatabase: Sendable {
    public let conninfo: String

    /// The cluster, started by the first test that asks.
    private static let cluster = Mutex<PostgresServer?>(nil)
    private static let created = Atomic<Int>(0)

    /// A new, empty database.
    public static func create() async throws -> SharedDatabase {
        let server = try await onThread { () throws -> PostgresServer in
            try cluster.withLock { (running: inout PostgresServer?) throws -> PostgresServer in
                if let running { return running }
                let server = try PostgresServer()
                // The migrations make these cluster-wide roles when they are missing: made once here, so that
                // databases migrated at the same time do not race to create them.
                let connection = try PostgresConnection(server.conninfo)
                try connection.execute("CREATE ROLE beaconflow_writer NOLOGIN; CREATE ROLE beaconflow_reader NOLOGIN")
                running = server
                atexit {
                    SharedDatabase.cluster.withLock { running in
                        guard let server = running else { return }
                        server.stop()
                        try? FileManager.default.removeItem(atPath: server.directory)
                        running = nil
                    }
                }
                return server
            }
        }
        let name = "test_\(getpid())_\(created.add(1, ordering: .relaxed).newValue)"
        try await onThread { try PostgresConnection(server.conninfo).execute("CREATE DATABASE \(name)") }
        return SharedDatabase(conninfo: server.conninfo.replacingOccurrences(of: "dbname=postgres", with: "dbname=\(name)"))
    }
}
