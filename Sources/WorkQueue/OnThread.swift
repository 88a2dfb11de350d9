import Foundation

/// Runs blocking work (libpq, a server's start-up) on a thread of its own and awaits its result, so that it never
/// holds one of the cooperative pool's few threads.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
