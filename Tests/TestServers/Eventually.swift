import Foundation
import LocalServers
import Synchronization

/// Collects the values of an async sequence in the background, so tests can wait for one with a time limit.
public final class Collector<Element: Sendable>: Sendable {
    private let values = Mutex<[Element]>([])

    /// Collects until `sequence` ends (for `MQTTClient.events`: until the client stops).
    public init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Element {
        Task { [self] in
            do {
                for try await value in sequence { values.withLock { $0.append(value) } }
            } catch {}
        }
    }

    public var all: [Element] { values.withLock { $0 } }

    /// Waits until some collected value satisfies `predicate`, polling every 10 ms, at most `timeout` (and looks
    /// once more at the end: on a loaded machine the sleep itself may outlast the deadline).
    @discardableResult
    public func first(
        within timeout: Duration = .seconds(10), where predicate: (Element) -> Bool
    ) async throws -> Element {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let match = values.withLock({ $0.first(where: predicate) }) { return match }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw LocalServerError("no matching value within \(timeout); saw \(all.suffix(10))")
    }

    /// Forgets what was collected so far.
    public func reset() { values.withLock { $0.removeAll() } }
}

/// Polls `condition` every 50 ms until it holds, at most `timeout` (and once more at the end); throws naming
/// `description` when it never does.
public func eventuallyTrue(
    _ description: String, timeout: Duration = .seconds(30), _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return }
        guard ContinuousClock.now < deadline else { break }
        try await Task.sleep(for: .milliseconds(50))
    }
    if try condition() { return }
    throw LocalServerError("timed out waiting until \(description)")
}
