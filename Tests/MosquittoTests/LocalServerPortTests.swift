import Foundation
import LocalServers
import Testing

/// A server the tests start is ready when it has opened its port itself: a port another server took first answers
/// too, and a test told its server was ready would use the other's data and lose it when that one stops.
@Suite(.enabled(if: MosquittoServer.executable != nil, "mosquitto is not installed"), .timeLimit(.minutes(1)))
struct LocalServerPortTests {
    /// Listens on a free loopback port in this process; returns the descriptor and the port.
    func listenHere() throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 4) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        try #require(listening, "errno \(errno)")
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test func aBrokerWhosePortIsTakenDoesNotStart() throws {
        let (descriptor, port) = try listenHere()
        defer { close(descriptor) }
        #expect(throws: LocalServerError.self) { try MosquittoServer(port: port) }
    }
}
