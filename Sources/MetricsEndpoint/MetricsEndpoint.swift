#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Prometheus
import Synchronization

/// A small HTTP/1.1 listener for operations: `GET /metrics` (Prometheus text format, from a registry, then the
/// process's figures) and `GET /healthz` (200 or 503 with a JSON body). One request per connection, every
/// connection served by one thread of its own; anything else is 404 (or 405 for another method). It never reads
/// more than 8 KiB of a request.
public final class MetricsEndpoint: Sendable {
    public struct Health: Sendable {
        public var healthy: Bool
        /// A JSON object describing the state.
        public var json: String

        public init(healthy: Bool, json: String) {
            self.healthy = healthy
            self.json = json
        }
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var operation: String
        public var errno: Int32
        public var description: String { "metrics listener \(operation) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
    }

    private let socket: Int32
    public let port: Int
    private let registry: PrometheusCollectorRegistry
    private let health: @Sendable () -> Health
    private let stopped = Mutex(false)

    /// Listens on `host:port` (an IPv4 or IPv6 literal; port 0 picks a free one) and starts serving.
    public init(
        host: String, port: Int, registry: PrometheusCollectorRegistry, health: @escaping @Sendable () -> Health
    ) throws(Failure) {
        var storage = sockaddr_storage()
        var length: socklen_t
        var family: Int32
        if host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { throw Failure(operation: "address \(host)", errno: EINVAL) }
            withUnsafeBytes(of: address) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            family = AF_INET6
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure(operation: "address \(host)", errno: EINVAL) }
            withUnsafeBytes(of: address) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            family = AF_INET
        }
        let descriptor = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(operation: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            let error = errno
            close(descriptor)
            throw Failure(operation: "bind \(host):\(port)", errno: error)
        }
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let boundPort = withUnsafeBytes(of: storage) { bytes -> UInt16 in
            family == AF_INET6
                ? UInt16(bigEndian: bytes.load(as: sockaddr_in6.self).sin6_port)
                : UInt16(bigEndian: bytes.load(as: sockaddr_in.self).sin_port)
        }
        self.socket = descriptor
        self.port = Int(boundPort)
        self.registry = registry
        self.health = health
        Thread.detachNewThread { [self] in serve() }
    }

    /// Stops accepting; the thread ends.
    public func stop() {
        let first = stopped.withLock { state in
            defer { state = true }
            return !state
        }
        if first { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// Clients served at once. One more arriving sheds the client that has been connected longest without
    /// finishing (the slowest): a crowd of slow clients cannot keep a scraper out.
    static let maximumClients = 64
    /// How long a client has to send its request and take the response.
    static let clientTimeout: Duration = .seconds(2)

    /// One client: its request as it arrives, then the response as it leaves.
    private struct Client {
        var descriptor: Int32
        var accepted: ContinuousClock.Instant
        var request: [UInt8] = []
        var response: [UInt8]?
        var sent = 0

        var deadline: ContinuousClock.Instant { accepted + MetricsEndpoint.clientTimeout }
    }

    /// One thread, one poll over the listener and every client, all non-blocking: no client waits for another.
    private func serve() {
        _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
        var clients: [Client] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !stopped.withLock({ $0 }) {
            let now = ContinuousClock.now
            clients.removeAll { client in
                guard client.deadline <= now else { return false }
                close(client.descriptor)
                return true
            }
            var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
            for client in clients {
                descriptors.append(pollfd(fd: client.descriptor, events: Int16(client.response == nil ? POLLIN : POLLOUT), revents: 0))
            }
            let nearest = clients.map(\.deadline).min().map { max(.zero, $0 - now) } ?? .milliseconds(500)
            let wait = min(nearest, .milliseconds(500))
            let milliseconds = Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000) + 1
            guard poll(&descriptors, nfds_t(descriptors.count), milliseconds) >= 0 || errno == EINTR else { break }
            if descriptors[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { break }
            var finished: Set<Int32> = []
            for (index, descriptor) in descriptors.enumerated().dropFirst() where descriptor.revents != 0 {
                if !advance(&clients[index - 1], chunk: &chunk) { finished.insert(descriptor.fd) }
            }
            clients.removeAll { client in
                guard finished.contains(client.descriptor) else { return false }
                close(client.descriptor)
                return true
            }
            if descriptors[0].revents & Int16(POLLIN) != 0 { acceptAll(into: &clients) }
        }
        for client in clients { close(client.descriptor) }
        close(socket)
    }

    /// Takes every connection waiting; beyond the bound, the oldest unfinished client makes room.
    private func acceptAll(into clients: inout [Client]) {
        while true {
            let connection = accept(socket, nil, nil)
            guard connection >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            // Not inherited by a child process (the demo starts servers): a copy there would keep the client
            // connected after this process closes it.
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            _ = fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK)
            if clients.count >= Self.maximumClients, let oldest = clients.indices.min(by: { clients[$0].accepted < clients[$1].accepted }) {
                close(clients[oldest].descriptor)
                clients.remove(at: oldest)
            }
            clients.append(Client(descriptor: connection, accepted: .now))
        }
    }

    /// Reads what arrived or sends what the socket takes; false once the client is done with (answered, gone).
    private func advance(_ client: inout Client, chunk: inout [UInt8]) -> Bool {
        if client.response == nil {
            let count = read(client.descriptor, &chunk, chunk.count)
            if count < 0 { return errno == EAGAIN || errno == EINTR }
            if count > 0 { client.request += chunk[..<count] }
            // The request ends at its blank line, at 8 KiB, or when the client stops sending.
            guard count == 0 || client.request.count >= 8192 || client.request.ends(with: [13, 10, 13, 10]) else { return true }
            client.response = response(to: client.request)
        }
        guard let response = client.response else { return true }
        let count = response.withUnsafeBytes {
            send(client.descriptor, $0.baseAddress! + client.sent, $0.count - client.sent, Int32(MSG_NOSIGNAL))
        }
        if count < 0 { return errno == EAGAIN || errno == EINTR }
        client.sent += count
        return client.sent < response.count
    }

    private func response(to request: [UInt8]) -> [UInt8] {
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let (status, type, body): (String, String, [UInt8])
        if line.count < 2 {
            (status, type, body) = ("400 Bad Request", "text/plain", Array("bad request\n".utf8))
        } else if line[0] != "GET" {
            (status, type, body) = ("405 Method Not Allowed", "text/plain", Array("only GET\n".utf8))
        } else if line[1] == "/metrics" {
            (status, type, body) = ("200 OK", "text/plain; version=0.0.4", registry.emitToBuffer() + Array(ProcessMetrics.exposition().utf8))
        } else if line[1] == "/healthz" {
            let state = health()
            (status, type, body) = (state.healthy ? "200 OK" : "503 Service Unavailable", "application/json", Array((state.json + "\n").utf8))
        } else {
            (status, type, body) = ("404 Not Found", "text/plain", Array("try /metrics or /healthz\n".utf8))
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
