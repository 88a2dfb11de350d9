import Foundation

/// A real mosquitto broker on a free loopback port, in its own temporary directory (tests, the accuracy harness).
public final class MosquittoServer: @unchecked Sendable {
    public let directory: String
    public let port: Int
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
        try start()
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
            log_dest file \(directory)/mosquitto.log
            log_type error
            log_type warning
            log_type notice
            \(extraConfiguration.isEmpty ? "listener \(port) 127.0.0.1\nallow_anonymous true" : extraConfiguration)

            """
        let path = directory + "/mosquitto.conf"
        try configuration.write(toFile: path, atomically: true, encoding: .utf8)
        let process = try ChildProcess(executable, ["-c", path], newProcessGroup: ownProcessGroup)
        self.process = process
        try waitForPort(port, timeout: .seconds(10)) { process.isRunning }
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

/// A port that was free a moment ago: bind port 0 on 127.0.0.1 and read it back.
public func freeLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw LocalServerError("socket: errno \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
            bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
        }
    }
    guard bound else { throw LocalServerError("bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port`, while `alive()` holds.
public func waitForPort(_ port: Int, timeout: Duration, alive: () -> Bool) throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        guard alive() else { throw LocalServerError("the server exited during start-up") }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(descriptor)
        if connected { return }
        usleep(20_000)
    }
    throw LocalServerError("nothing listened on port \(port) within \(timeout)")
}
