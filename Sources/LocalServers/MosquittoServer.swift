import Foundation

/// A real mosquitto broker on a free loopback port, in its own temporary directory (tests, the accuracy harness).
public final class MosquittoServer: @unchecked Sendable {
    public let directory: String
    public private(set) var port: Int
    private let extraConfiguration: String
    private var process: ChildProcess?

    /// The broker binary, or nil when mosquitto is not installed.
    public static let executable: String? = findExecutable("mosquitto", extraDirectories: ["/usr/sbin", "/sbin"])

    /// Starts a broker that allows anonymous clients, plus `configuration` lines (TLS listeners, ACLs...).
    /// Lines may use `{dir}` for the broker's directory.
    private var leftRunning = false

    private let ownProcessGroup: Bool
    private let persistence: Bool

    /// `ownProcessGroup`: see `ChildProcess`. Without `persistence` the broker forgets sessions and retained
    /// messages when it stops.
    public init(
        configuration: String = "", port: Int? = nil, directory given: String? = nil, ownProcessGroup: Bool = false,
        persistence: Bool = true
    ) throws {
        self.ownProcessGroup = ownProcessGroup
        self.persistence = persistence
        directory = try given.map { try makeSharedDirectory($0) } ?? makeTemporaryDirectory(prefix: "mosquitto")
        self.port = try port ?? freeLoopbackPort()
        extraConfiguration = configuration.replacingOccurrences(of: "{dir}", with: directory)
        // Another server started at the same moment may take a port chosen here first: try another.
        for attempt in 1...3 {
            do {
                try start()
                return
            } catch where attempt < 3 && port == nil && log.contains("Address already in use") {
                self.port = try freeLoopbackPort()
            }
        }
    }

    deinit {
        guard !leftRunning else { return }
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Leaves the broker running, and its directory in place, when this object goes; returns its process id.
    @discardableResult
    public func leaveRunning() -> pid_t? {
        leftRunning = true
        let pid = process?.pid
        process?.detach()
        return pid
    }

    public var url: String { "mqtt://127.0.0.1:\(port)" }

    public func start() throws {
        guard let executable = Self.executable else { throw LocalServerError("mosquitto is not installed") }
        let configuration = """
            per_listener_settings false
            set_tcp_nodelay true
            max_inflight_messages 100
            max_queued_messages 100000
            persistence \(persistence)
            persistence_location \(directory)/
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            log_type information
            \(extraConfiguration.isEmpty ? "listener \(port) 127.0.0.1\nallow_anonymous true" : extraConfiguration)

            """
        let path = directory + "/mosquitto.conf"
        try configuration.write(toFile: path, atomically: true, encoding: .utf8)
        let logged = log.utf8.count
        // Its log is opened here, not by the broker, which may run as a user that cannot reach the directory.
        let process = try ChildProcess(executable, ["-c", path], standardErrorPath: directory + "/mosquitto.log", newProcessGroup: ownProcessGroup)
        self.process = process
        // Said once every listener is open: until then, its port may answer for another broker that took it first.
        try waitForServer("mosquitto running", timeout: .seconds(10), alive: { process.isRunning }) {
            String(decoding: log.utf8.dropFirst(logged), as: UTF8.self).contains(" running")
        }
    }

    /// Stops the broker (SIGTERM, so it saves its persistence file) and waits for it.
    public func stop() {
        guard let process else { return }
        process.terminate()
        self.process = nil
    }

    /// Kills the broker (SIGKILL: nothing saved) and waits for it; `start()` brings it back on the same port.
    public func kill() {
        process?.terminate(SIGKILL)
        process = nil
    }

    public var log: String { (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? "" }
}

public struct LocalServerError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public func findExecutable(_ name: String, extraDirectories: [String] = []) -> String? {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
    return (path + extraDirectories).map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// A directory every user may enter (servers started as root drop to their own users).
public func makeTemporaryDirectory(prefix: String) throws -> String {
    try makeSharedDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path)
}

/// Creates `path` (and its parents) open to every user; returns it absolute.
public func makeSharedDirectory(_ path: String) throws -> String {
    let absolute = URL(fileURLWithPath: path).standardized.path
    try FileManager.default.createDirectory(atPath: absolute, withIntermediateDirectories: true)
    try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: absolute)
    return absolute
}
