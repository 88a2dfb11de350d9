#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Prometheus
import Synchronization

/// A small HTTP/1.1 listener for operations: `GET /metrics` (Prometheus text format, from a registry) and
/// `GET /healthz` (200 or 503 with a JSON body). One request per connection, on a dedicated thread; anything
/// else is 404 (or 405 for another method). It never reads more than 8 KiB of a request.
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
    private let clients = Mutex(0)

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

    /// Clients served at once; more are turned away at once (a scraper retries).
    static let maximumClients = 16
    /// How long a client has to send its request, and to take the response.
    static let clientTimeoutMilliseconds: Int32 = 2000

    /// Accepts clients and serves each on a thread of its own, so that a slow one never holds up the others.
    private func serve() {
        while !stopped.withLock({ $0 }) {
            let connection = accept(socket, nil, nil)
            guard connection >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                break
            }
            // Not inherited by a child process (the demo starts servers): a copy there would keep the client
            // connected after this process closes it.
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: Int(Self.clientTimeoutMilliseconds / 1000), tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let admitted = clients.withLock { count in
                guard count < Self.maximumClients else { return false }
                count += 1
                return true
            }
            guard admitted else {
                close(connection)
                continue
            }
            Thread.detachNewThread { [self] in
                respond(on: connection)
                close(connection)
                clients.withLock { $0 -= 1 }
            }
        }
        close(socket)
    }

    private func respond(on connection: Int32) {
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 2048)
        let deadline = ContinuousClock.now + .milliseconds(Int(Self.clientTimeoutMilliseconds))
        // The whole request within the deadline, however slowly it trickles in.
        while request.count < 8192, !request.ends(with: [13, 10, 13, 10]) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            var descriptor = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000) + 1
            guard poll(&descriptor, 1, milliseconds) > 0 else { return }
            let count = read(connection, &chunk, chunk.count)
            guard count > 0 else { break }
            request += chunk[..<count]
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let (status, type, body): (String, String, [UInt8])
        if line.count < 2 {
            (status, type, body) = ("400 Bad Request", "text/plain", Array("bad request\n".utf8))
        } else if line[0] != "GET" {
            (status, type, body) = ("405 Method Not Allowed", "text/plain", Array("only GET\n".utf8))
        } else if line[1] == "/metrics" {
            (status, type, body) = ("200 OK", "text/plain; version=0.0.4", registry.emitToBuffer())
        } else if line[1] == "/healthz" {
            let state = health()
            (status, type, body) = (state.healthy ? "200 OK" : "503 Service Unavailable", "application/json", Array((state.json + "\n").utf8))
        } else {
            (status, type, body) = ("404 Not Found", "text/plain", Array("try /metrics or /healthz\n".utf8))
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        var response = Array(head.utf8) + body
        var sent = 0
        while sent < response.count {
            let count = response.withUnsafeMutableBytes { send(connection, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
