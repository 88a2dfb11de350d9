import WorkQueue

/// Adverts another part of the process hands over (a bridge's subscription to the MQTT output of receivers that
/// run other firmware), as an agent's source. `run` waits on its queue and ends once the queue is closed and
/// taken: whoever hands closes it to stop the agent's intake.
public final class HandedSource: AdvertSource {
    public let name: String
    private let queue: BlockingQueue<TimedReport>

    /// `capacity` reports wait at most; beyond it `hand` refuses.
    public init(name: String, capacity: Int = 10_000) {
        self.name = name
        queue = BlockingQueue(capacity: capacity)
    }

    /// Queues a report for the agent; false when the queue is full or closed.
    public func hand(_ report: TimedReport) -> Bool { queue.push(report, dropWhenFull: true) }

    /// No more reports: the agent takes what is queued, then its source ends.
    public func close() { queue.close() }

    public func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws {
        while !queue.isClosedAndEmpty {
            let reports = queue.popAll(timeout: 86_400)
            if !reports.isEmpty { deliver(reports) }
        }
    }
}
