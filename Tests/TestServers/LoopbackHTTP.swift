import Foundation
import LocalServers

/// An HTTP/1.1 answer read whole from a loopback socket.
public struct LoopbackHTTPResponse: Sendable {
    /// The status line, e.g. `HTTP/1.1 200 OK`.
    public var statusLine: String
    /// The header fields in the order they came.
    public var headers: [(name: String, value: String)]
    public var body: String

    /// The status code, or 0 when the status line has none.
    public var status: Int { statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0 }

    /// The first field of that name, compared without case.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// One request over a plain socket to 127.0.0.1:`port` with `Connection: close`, the answer read to the end of
/// the connection (each read waits 5 s at most); a chunked body is joined.
public func httpRequest(port: Int, method: String = "GET", path: String, headers: [String] = [], body: String? = nil) throws
    -> LoopbackHTTPResponse
{
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw LocalServerError("cannot connect to 127.0.0.1:\(port)") }
    let fields = headers.map { $0 + "\r\n" }.joined()
    let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(fields)Connection: close\r\n\r\n\(body ?? "")".utf8)
    _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var response: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    for _ in 0..<1000 {
        let count = read(descriptor, &chunk, chunk.count)
        guard count > 0 else { break }
        response += chunk[..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    let parts = text.components(separatedBy: "\r\n\r\n")
    let head = parts[0].components(separatedBy: "\r\n")
    let fieldsReceived = head.dropFirst().compactMap { line -> (name: String, value: String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    var answer = LoopbackHTTPResponse(statusLine: head[0], headers: fieldsReceived, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    if answer.header("Transfer-Encoding")?.lowercased() == "chunked" { answer.body = joinedChunks(answer.body) }
    return answer
}

/// GET over a plain loopback socket: (status line, body).
public func httpGet(port: Int, path: String, headers: [String] = []) throws -> (status: String, body: String) {
    let answer = try httpRequest(port: port, path: path, headers: headers)
    return (answer.statusLine, answer.body)
}

/// A chunked body's data: each chunk's size in hex on its own line, then its bytes, up to the chunk of size 0.
private func joinedChunks(_ chunked: String) -> String {
    var bytes = Array(chunked.utf8)[...]
    var joined: [UInt8] = []
    while let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\r")),
        let size = Int(String(decoding: bytes[..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16), size > 0,
        bytes.distance(from: lineEnd, to: bytes.endIndex) >= size + 4
    {
        let start = lineEnd + 2
        joined += bytes[start..<start + size]
        bytes = bytes[(start + size + 2)...]
    }
    return String(decoding: joined, as: UTF8.self)
}
