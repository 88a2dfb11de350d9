import Foundation
import LocalServers
import WorkQueue

/// A CA and a server certificate for 127.0.0.1, made with openssl; readable by the broker's user.
public func makeTestPKI(openssl: String, in directory: String) async throws {
    // posix_spawn and a bounded wait off the cooperative pool: Foundation's `Process.waitUntilExit` learns of an
    // exit through SIGCHLD, which the test runner's threads may all block, and then waits forever.
    func run(_ arguments: [String]) async throws {
        let exitCode = try await onThread { () throws -> Int32? in
            let process = try ChildProcess(openssl, arguments)
            let deadline = ContinuousClock.now + .seconds(60)
            while process.isRunning, ContinuousClock.now < deadline { usleep(10_000) }
            if process.isRunning { process.terminate(SIGKILL) }
            return process.exitCode
        }
        guard exitCode == 0 else {
            throw LocalServerError("openssl \(arguments[0]) failed (exit code \(exitCode.map(String.init) ?? "none within 60 s"))")
        }
    }
    let file = { (name: String) in directory + "/" + name }
    try await run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", file("ca.key"), "-out", file("ca.pem"),
                   "-days", "2", "-subj", "/CN=beaconflow test CA"])
    try await run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", file("server.key"), "-out", file("server.csr"),
                   "-subj", "/CN=127.0.0.1"])
    try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: file("san.ext"), atomically: true, encoding: .utf8)
    try await run(["x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"),
                   "-CAcreateserial", "-out", file("server.pem"), "-days", "2", "-extfile", file("san.ext")])
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file(name))
    }
}
