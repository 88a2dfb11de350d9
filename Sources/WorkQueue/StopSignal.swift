import Foundation

/// A stop request that threads wait on: `wait(until:)` returns as soon as `stop()` is called, not at its next
/// look at a flag.
public final class StopSignal: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false

    public init() {}

    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    public var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    /// Waits until `deadline` or a stop, whichever comes first; returns whether stopped.
    @discardableResult
    public func wait(until deadline: ContinuousClock.Instant) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !stopped {
            let left = deadline - .now
            guard left > .zero else { break }
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
        }
        return stopped
    }
}
