import Foundation

/// A port that was free a moment ago: bind port 0 on 127.0.0.1 and read it back. Another server may take it
/// before ours binds it: each server's start tells its own port from another's.
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

/// Waits until `ready()` holds while `alive()` does; `what` names the wait in the error.
public func waitForServer(_ what: String, timeout: Duration, alive: () -> Bool, ready: () -> Bool) throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        guard alive() else { throw LocalServerError("the server exited during start-up") }
        if ready() { return }
        usleep(20_000)
    }
    throw LocalServerError("\(what) not within \(timeout)")
}
