/// Which spooled batches to publish, and when: a bounded window of batches awaiting the ingest's
/// acknowledgement, sent in sequence order and resent from the oldest unacknowledged one (go-back-N) after a
/// reconnect or when the acknowledgement is late. A pure state machine; times are the caller's monotonic clock.
///
/// The window bounds what libmosquitto holds in memory (its outgoing queue has no bound of its own).
public struct DeliveryWindow: Sendable {
    public var maximumInFlight: Int
    public var acknowledgementTimeoutNanoseconds: UInt64

    /// Everything up to here is committed by the ingest.
    public private(set) var acknowledged: UInt64 = 0
    /// Batches published and not yet acknowledged, in sequence order, with when they were published.
    public private(set) var inFlight: [(sequence: UInt64, publishedAt: UInt64)] = []
    public private(set) var isConnected = false
    /// How many times the window went back to resend.
    public private(set) var resends = 0
    /// Acknowledgement timeouts in a row since the last acknowledgement that moved: an agent that no ingest
    /// acknowledges (its site served by none, a mistyped `--site`) counts up here.
    public private(set) var timeoutsWithoutAcknowledgement = 0

    public init(maximumInFlight: Int = 16, acknowledgementTimeoutNanoseconds: UInt64 = 30_000_000_000) {
        self.maximumInFlight = maximumInFlight
        self.acknowledgementTimeoutNanoseconds = acknowledgementTimeoutNanoseconds
    }

    /// The highest sequence published since the last (re)start of the window.
    public var highestPublished: UInt64 { inFlight.last?.sequence ?? acknowledged }

    public mutating func connected() {
        isConnected = true
        // After a reconnect nothing is known about what reached the ingest: start again from the oldest.
        if !inFlight.isEmpty { resends += 1 }
        inFlight.removeAll()
    }

    public mutating func disconnected() {
        isConnected = false
    }

    public mutating func acknowledge(through sequence: UInt64) {
        guard sequence > acknowledged else { return }
        acknowledged = sequence
        timeoutsWithoutAcknowledgement = 0
        inFlight.removeAll { $0.sequence <= sequence }
    }

    /// How many more batches may be published now (after `highestPublished`); 0 while disconnected. Restarts
    /// the window first when the oldest batch in flight waited longer than the timeout.
    public mutating func capacity(nowNanoseconds: UInt64) -> Int {
        guard isConnected else { return 0 }
        if let oldest = inFlight.first, nowNanoseconds &- oldest.publishedAt >= acknowledgementTimeoutNanoseconds {
            resends += 1
            timeoutsWithoutAcknowledgement += 1
            inFlight.removeAll()
        }
        return maximumInFlight - inFlight.count
    }

    public mutating func published(_ sequence: UInt64, nowNanoseconds: UInt64) {
        precondition(sequence > highestPublished, "batches are published in sequence order")
        inFlight.append((sequence, nowNanoseconds))
    }
}
