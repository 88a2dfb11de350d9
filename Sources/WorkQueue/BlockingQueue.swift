import Foundation

/// A bounded blocking queue between threads (a source or an MQTT client → an engine or a writer thread). `push` waits while full unless
/// told to drop; `pop` waits at most a timeout. Elements cross threads, hence Sendable.
public final class BlockingQueue<Element: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Element] = []
    private let capacity: Int
    private var closed = false

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds an element; when the queue is full, waits (`dropWhenFull == false`) or returns false.
    @discardableResult
    public func push(_ element: Element, dropWhenFull: Bool = false) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while items.count >= capacity, !closed {
            if dropWhenFull { return false }
            condition.wait()
        }
        guard !closed else { return false }
        items.append(element)
        condition.broadcast()
        return true
    }

    /// Adds an element even when full: for the few control messages that must never wait or be lost.
    public func pushUrgent(_ element: Element) {
        condition.lock()
        items.append(element)
        condition.broadcast()
        condition.unlock()
    }

    /// Takes everything queued, waiting up to `timeout` for the first element.
    public func popAll(timeout: TimeInterval) -> [Element] {
        condition.lock()
        defer { condition.unlock() }
        if items.isEmpty, !closed { _ = condition.wait(until: Date(timeIntervalSinceNow: timeout)) }
        let taken = items
        items.removeAll(keepingCapacity: true)
        condition.broadcast()
        return taken
    }

    /// Whether `close()` was called and nothing is left to take.
    public var isClosedAndEmpty: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed && items.isEmpty
    }

    /// Wakes every waiter; later pushes are refused.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }
}
