import Foundation
import LocalServers
import TestServers
import Testing

/// The console's connections against clients that connect and say nothing, or never show the token.
@Suite(
    .enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(2)))
struct ConsoleAdmissionTests {
    static let token = "admission-test-token-0123456789"

    /// Twenty idle connections against a console of eight: viewers with the token are still answered at once, and
    /// each idle connection is closed, within the request timeout (5 s) of its acceptance: six at a time wait out
    /// the timeout, the rest in the listen backlog.
    @Test func idleUnauthenticatedConnectionsNeverKeepAViewerOut() async throws {
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "console-admission")
        defer { try? FileManager.default.removeItem(atPath: work) }
        // The console reads the views: the schema first.
        let migrate = try ChildProcess(
            try #require(beaconflowExecutable), ["migrate", "--database", database.conninfo], standardErrorPath: work + "/migrate.log")
        #expect(await migrate.exit() == 0)
        let (console, base) = try await startConsoleProcess(database, work: work, token: Self.token, options: ["--max-connections", "8"])
        defer { console.terminate(SIGTERM) }
        let port = try #require(Int(base.split(separator: ":").last ?? ""))

        let opened = ContinuousClock.now
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<20 {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(connected == 0)
            idle.append(descriptor)
        }
        try await Task.sleep(for: .milliseconds(300))
        for attempt in 1...2 {
            let started = ContinuousClock.now
            let answer = try httpGet(port: port, path: "/api/snapshot", headers: ["Authorization: Bearer \(Self.token)"])
            #expect(answer.status == "HTTP/1.1 200 OK", "request \(attempt): \(answer.status)")
            #expect(ContinuousClock.now - started < .seconds(2), "request \(attempt)")
        }
        // Every idle connection is closed by the console: end of file (or a reset) on each.
        var closed = Set<Int32>()
        while closed.count < idle.count, ContinuousClock.now - opened < .seconds(45) {
            for descriptor in idle where !closed.contains(descriptor) {
                var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                if poll(&entry, 1, 0) > 0 {
                    var scratch = [UInt8](repeating: 0, count: 64)
                    if recv(descriptor, &scratch, scratch.count, 0) <= 0 { closed.insert(descriptor) }
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let after = ContinuousClock.now - opened
        #expect(closed.count == idle.count, "\(closed.count) of \(idle.count) closed after \(after)")
        #expect(after < .seconds(40), "\(after)")
    }
}
