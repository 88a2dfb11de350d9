import Foundation
import LocalServers
import Testing

/// A child keeps none of its parent's descriptors but standard input, output and error, so a socket its parent
/// closes is closed for its peer even while a long-lived child (a database, a broker) runs.
@Suite(.timeLimit(.minutes(1)))
struct ChildProcessTests {
    @Test func aChildHoldsNoneOfItsParentsDescriptors() throws {
        var pair: [Int32] = [0, 0]
        // Deliberately without close-on-exec, as some libraries open their sockets.
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        let child = try ChildProcess("/bin/sleep", ["30"])
        defer { child.terminate(SIGKILL) }
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd").sorted()
        #expect(held == ["0", "1", "2"])

        close(pair[0])
        var poller = pollfd(fd: pair[1], events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, 2000)
        #expect(ready == 1, "the peer did not see its socket close")
        if ready == 1 {
            var byte: UInt8 = 0
            #expect(read(pair[1], &byte, 1) == 0)
        }
    }
}
