import BeaconIngest
import Foundation
import LibPQ
import Logging
import ServiceLifecycle
import Synchronization
import WebConsole
import WorkQueue

/// Where the demo's console listened and as whom it read the views: a console kept after the demo (`--keep`)
/// takes the same address and token, so that its link stays good.
final class DemoConsoleAddress: Sendable {
    private let state = Mutex<(port: Int, conninfo: String)?>(nil)

    var listened: (port: Int, conninfo: String)? { state.withLock { $0 } }
    func set(port: Int, conninfo: String) { state.withLock { $0 = (port, conninfo) } }
}

/// The demo's web console: once the ingest has made the schema, as a reader login of its own on a server the demo
/// started (as the given login on a database given), printing its login link. A console that cannot start is
/// said, and the demo goes on without it.
struct DemoConsoleService: Service, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "demo console" }

    let ingest: Ingest
    let conninfo: String
    /// Whether the database is the demo's own, where it may make the reader login.
    let ownDatabase: Bool
    let host: String
    let port: Int
    let token: String
    let address: DemoConsoleAddress
    let say: @Sendable (String) -> Void
    let logger: Logger

    static let readerLogin = "beaconflow_demo_console"

    func run() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !ingest.statistics.databaseConnected, ContinuousClock.now < deadline, !Task.isShuttingDownGracefully {
            try? await Task.sleep(for: .milliseconds(50))
        }
        var readerConninfo = conninfo
        if ownDatabase {
            do {
                try await onThread { [conninfo] in
                    try PostgresConnection(conninfo).execute(
                        """
                        DO $$ BEGIN
                            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(Self.readerLogin)') THEN
                                CREATE ROLE \(Self.readerLogin) LOGIN IN ROLE beaconflow_reader;
                            END IF;
                        END $$
                        """)
                }
                readerConninfo = conninfo.replacingOccurrences(of: "user=postgres", with: "user=\(Self.readerLogin)")
            } catch {
                logger.warning("The console reads as the demo's own login", metadata: ["error": "\(error)"])
            }
        }
        let console = WebConsoleService(
            conninfo: readerConninfo, host: host, port: port, token: token, refresh: .seconds(1),
            maxConnections: 64, maxStreams: 32, showToken: true, logger: logger,
            onListening: { [say, address, readerConninfo] link, port in
                address.set(port: port, conninfo: readerConninfo)
                say("Console (live while the demo runs): \(link)")
            })
        do {
            try await console.run()
        } catch {
            say("The console could not start (\(error)); the demo goes on without it.")
            try? await gracefulShutdown()
        }
    }
}
