import Foundation
import LocalServers

/// Debian's faketime, which runs a program with its wall clock off. It forks the program and waits for it, so the
/// two run in a process group of their own that every signal reaches. (Preloading its library by hand leaves a
/// Swift program without its command-line arguments.)
public let faketimeExecutable = findExecutable("faketime")

/// Starts `executable` with its wall clock `offset` off (faketime's syntax, such as `-600s`) and its monotonic
/// clock untouched.
public func startWithWallClockOffset(
    _ offset: String, _ executable: String, _ arguments: [String], standardErrorPath: String
) throws -> ChildProcess {
    guard let faketimeExecutable else { throw LocalServerError("faketime is not installed (Debian's faketime)") }
    var environment = ProcessInfo.processInfo.environment
    environment["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    let process = try ChildProcess(
        faketimeExecutable, ["-f", offset, executable] + arguments, environment: environment,
        standardErrorPath: standardErrorPath, newProcessGroup: true)
    process.signalsWholeGroup = true
    return process
}
