import CSpawn
import Foundation

/// A child process started with posix_spawn, with default signal handling and an empty signal mask (a test
/// runner's or a service's threads block signals, and a child inherits that mask: a server started with Foundation's `Process`
/// from such a thread ignores SIGTERM), and no descriptor of its parent's but standard input, output and error: a
/// socket a library opened without close-on-exec would otherwise stay open in a long-lived child, and its peer
/// would never see it close.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private var exitStatus: Int32?

    /// Starts `executable`; its standard output and error go to the given files (appended), else nowhere. In a
    /// process group of its own (`newProcessGroup`), a terminal's Ctrl-C reaches only its parent, which then
    /// stops it in order.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardOutputPath: String? = nil, standardErrorPath: String? = nil, newProcessGroup: Bool = false
    ) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (newProcessGroup ? POSIX_SPAWN_SETPGROUP : 0)))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutputPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addopen(
            &actions, 2, standardErrorPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environmentStrings = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { environmentStrings.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environmentStrings)
        guard rc == 0 else { throw LocalServerError("posix_spawn \(executable): errno \(rc)") }
        self.pid = pid
    }

    private var detached = false
    /// Signals reach every process of the child's group (it was started with `newProcessGroup`): for a program
    /// that runs another and waits for it, such as faketime.
    public var signalsWholeGroup = false

    private func signal(_ signal: Int32) { kill(signalsWholeGroup ? -pid : pid, signal) }

    deinit { if !detached { terminate() } }

    /// Lets the process outlive this object (it is no longer signalled when this object goes).
    public func detach() { detached = true }

    /// The exit code once the process has exited normally; nil while it runs or when a signal ended it.
    public var exitCode: Int32? {
        guard !isRunning, let status = exitStatus, status & 0x7F == 0 else { return nil }
        return (status >> 8) & 0xFF
    }

    public var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        switch waitpid(pid, &status, WNOHANG) {
        case pid:
            exitStatus = status
            return false
        case -1 where errno == ECHILD:
            // Reaped elsewhere (a library's SIGCHLD handler): gone, its status unknown.
            exitStatus = -1
            return false
        default:
            return true
        }
    }

    /// Sends `signal` and returns at once (SIGSTOP and SIGCONT freeze and resume the process).
    public func send(_ signal: Int32) {
        guard exitStatus == nil else { return }
        self.signal(signal)
    }

    /// Sends `signal` and waits for the process to end (SIGKILL after 10 s).
    public func terminate(_ signal: Int32 = SIGTERM) {
        guard exitStatus == nil else { return }
        self.signal(signal)
        let deadline = ContinuousClock.now + .seconds(10)
        while isRunning {
            if ContinuousClock.now > deadline { self.signal(SIGKILL) }
            usleep(5_000)
        }
    }

    /// Waits for the process to exit by itself, without holding a thread of the cooperative pool;
    /// returns its wait status.
    public func exit() async -> Int32 {
        while isRunning { try? await Task.sleep(for: .milliseconds(10)) }
        return exitStatus ?? 0
    }
}
