import Foundation
import Synchronization
import WorkQueue

/// A throwaway PostgreSQL cluster on a free loopback port, in its own temporary directory.
/// As root, initdb and the server run as the `postgres` user (they refuse root), through setpriv, which execs in
/// place: the process held here is the server itself.
public final class PostgresServer: @unchecked Sendable {
    public let directory: String
    public private(set) var port: Int
    private var process: ChildProcess?

    /// The directory of initdb/postgres, or nil when PostgreSQL is not installed.
    public static let binaries: String? = {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let candidates = versions.sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/postgres") }
            ?? findExecutable("postgres").map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
    }()

    static let runsAsRoot = getuid() == 0

    /// The first directory on the way to `path` (itself excluded) that a user other than its owner and group may
    /// not search, with its permission bits; nil when the postgres user can get through every one.
    static func closedAncestor(of path: String) -> (path: String, mode: Int)? {
        var ancestor = "/"
        for component in URL(fileURLWithPath: path).standardized.pathComponents.dropFirst().dropLast() {
            ancestor = (ancestor as NSString).appendingPathComponent(component)
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: ancestor),
                let mode = attributes[.posixPermissions] as? Int
            else { continue }
            if mode & 0o001 == 0, attributes[.ownerAccountName] as? String != "postgres" { return (ancestor, mode) }
        }
        return nil
    }

    /// A directory holding an initdb'ed `data` directory, made at the first new cluster of the process and removed
    /// at its exit.
    private static let initializedTemplate = Mutex<String?>(nil)

    private var leftRunning = false

    private let ownProcessGroup: Bool

    /// Makes a cluster in `directory` (a new temporary one when nil; an existing one must be empty) and starts it.
    /// `ownProcessGroup`: see `ChildProcess`.
    public convenience init(directory given: String? = nil, ownProcessGroup: Bool = false) throws {
        try self.init(directory: given, ownProcessGroup: ownProcessGroup, standbyOf: nil)
    }

    /// A new cluster by initdb, or a base backup of the primary on `standbyOf` (a port on 127.0.0.1) that
    /// follows it.
    private init(directory given: String?, ownProcessGroup: Bool, standbyOf primaryPort: Int?) throws {
        self.ownProcessGroup = ownProcessGroup
        guard let binaries = Self.binaries else { throw LocalServerError("PostgreSQL is not installed") }
        directory = try given.map { try makeSharedDirectory($0) } ?? makeTemporaryDirectory(prefix: "postgres")
        port = try freeLoopbackPort()
        if Self.runsAsRoot {
            if let closed = Self.closedAncestor(of: directory) {
                throw LocalServerError(
                    "PostgreSQL runs as the postgres user, which cannot reach \(directory): \(closed.path) has mode "
                        + String(closed.mode, radix: 8)
                        + " (let others search it, chmod o+x \(closed.path), or choose a directory elsewhere)")
            }
            try runToEnd("/bin/chown", ["-R", "postgres:postgres", directory])
        }
        if let primaryPort {
            // -R writes standby.signal and the primary's address; -X stream copies the WAL written meanwhile.
            try runToEnd(
                binaries + "/pg_basebackup",
                ["-h", "127.0.0.1", "-p", String(primaryPort), "-U", "postgres", "-D", directory + "/data", "-R", "-X", "stream", "-c", "fast"],
                asPostgres: true)
        } else {
            // initdb is most of the cost of a new cluster: it runs once per process, and each cluster copies it.
            let template = try Self.initializedTemplate.withLock { (made: inout String?) throws -> String in
                if let made { return made }
                let template = try makeTemporaryDirectory(prefix: "postgres-template")
                if Self.runsAsRoot { try runToEnd("/bin/chown", ["postgres:postgres", template]) }
                try runToEnd(binaries + "/initdb", ["-D", template + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8"], asPostgres: true)
                made = template
                atexit { PostgresServer.initializedTemplate.withLock { $0.map { try? FileManager.default.removeItem(atPath: $0) } } }
                return template
            }
            try runToEnd("/bin/cp", ["-a", template + "/data", directory + "/data"])
        }
        // Another server started at the same moment may take the free port first: try another.
        for attempt in 1...3 {
            do {
                try start()
                return
            } catch where attempt < 3 && portWasTaken {
                port = try freeLoopbackPort()
            }
        }
    }

    /// A streaming standby of `primary`: a base backup of it, started on a port of its own, that replays the
    /// primary's WAL as it comes and answers read-only queries. It is asynchronous until the primary names it in
    /// `synchronous_standby_names` (set that after this call: the backup copies the primary's settings, and a
    /// promoted standby that waits for a standby of its own commits nothing).
    public static func standby(of primary: PostgresServer) async throws -> PostgresServer {
        try await onThread { try PostgresServer(directory: nil, ownProcessGroup: false, standbyOf: primary.port) }
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    public func promote() async throws {
        guard let binaries = Self.binaries else { throw LocalServerError("PostgreSQL is not installed") }
        try await onThread { try self.runToEnd(binaries + "/pg_ctl", ["promote", "-w", "-t", "30", "-D", self.directory + "/data"], asPostgres: true) }
    }

    /// Whether the last start failed because the port was in use.
    private var portWasTaken: Bool {
        ((try? String(contentsOfFile: directory + "/postgres.log", encoding: .utf8)) ?? "").contains("Address already in use")
    }

    /// Makes and starts a cluster on a thread of its own: initdb takes a second or two, which must not hold one of
    /// the few threads of the cooperative pool.
    public static func start(directory: String? = nil, ownProcessGroup: Bool = false) async throws -> PostgresServer {
        try await onThread { try PostgresServer(directory: directory, ownProcessGroup: ownProcessGroup) }
    }

    deinit {
        guard !leftRunning else { return }
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Leaves the server running, and its directory in place, when this object goes (`pg_ctl stop -D DIR/data`
    /// stops it); returns its process id.
    @discardableResult
    public func leaveRunning() -> pid_t? {
        leftRunning = true
        let pid = process?.pid
        process?.detach()
        return pid
    }

    /// A conninfo for the `postgres` superuser and database.
    public var conninfo: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres connect_timeout=5" }

    public func start() throws {
        guard let binaries = Self.binaries else { throw LocalServerError("PostgreSQL is not installed") }
        let arguments = [
            binaries + "/postgres", "-D", directory + "/data", "-p", String(port), "-k", directory,
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
        ]
        let process = try Self.asPostgres(arguments, standardErrorPath: directory + "/postgres.log", newProcessGroup: ownProcessGroup)
        self.process = process
        // Its socket in its own directory comes after its TCP port is bound: the port is this server's, not one that
        // another server took first (which answers on it until this one gives up).
        let socket = directory + "/.s.PGSQL.\(port)"
        try waitForServer("PostgreSQL's socket \(socket)", timeout: .seconds(20), alive: { process.isRunning }) {
            FileManager.default.fileExists(atPath: socket)
        }
        // The socket comes before recovery ends ("the database system is starting up"): ask pg_isready.
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let probe = try ChildProcess(binaries + "/pg_isready", ["-h", directory, "-p", String(port), "-t", "1"])
            while probe.isRunning { usleep(5_000) }
            if probe.exitCode == 0 { return }
            usleep(20_000)
        }
        throw LocalServerError("PostgreSQL did not accept connections within 20 s; see \(directory)/postgres.log")
    }

    /// Stops the server (fast shutdown) and waits until it has exited; `start()` brings it back with its data.
    public func stopAndWait() async {
        let running = process
        stop()
        _ = await running?.exit()
    }

    /// Starts it again off the shared async threads.
    public func restart() async throws {
        try await onThread { try self.start() }
    }

    /// Immediate shutdown (SIGQUIT, as `pg_ctl -m immediate`): the server quits without a checkpoint, so the next
    /// start recovers from the write-ahead log. Waits until it has exited.
    public func stopImmediately() async {
        let running = process
        process = nil
        guard let running else { return }
        Foundation.kill(running.pid, SIGQUIT)
        _ = await running.exit()
    }

    /// Fast shutdown (SIGINT): aborts sessions, keeps what was committed.
    public func stop() {
        process?.terminate(SIGINT)
        process = nil
    }

    private func runToEnd(_ executable: String, _ arguments: [String], asPostgres: Bool = false) throws {
        let process = asPostgres
            ? try Self.asPostgres([executable] + arguments, standardErrorPath: directory + "/setup.log", newProcessGroup: ownProcessGroup)
            : try ChildProcess(executable, arguments, newProcessGroup: ownProcessGroup)
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < deadline { usleep(10_000) }
        guard !process.isRunning else {
            process.terminate(SIGKILL)
            throw LocalServerError("\(executable) did not finish within 60 s")
        }
        guard process.exitCode == 0 else {
            throw LocalServerError("\(executable) \(arguments.first ?? "") failed; see \(directory)/setup.log")
        }
    }

    private static func asPostgres(_ command: [String], standardErrorPath: String, newProcessGroup: Bool) throws -> ChildProcess {
        if runsAsRoot {
            let setpriv = findExecutable("setpriv", extraDirectories: ["/usr/bin", "/bin"]) ?? "/usr/bin/setpriv"
            return try ChildProcess(
                setpriv, ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + command,
                environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], standardErrorPath: standardErrorPath,
                newProcessGroup: newProcessGroup)
        }
        return try ChildProcess(
            command[0], Array(command.dropFirst()), standardErrorPath: standardErrorPath, newProcessGroup: newProcessGroup)
    }
}
