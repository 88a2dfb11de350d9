import Synchronization

/// The time every instance judges by: the database's clock, as this instance's wall clock plus the offset last
/// measured (`ClockComparison`). Sighting times are checked, agents' clock offsets measured and zones moved by it,
/// so an instance whose own clock is wrong (an NTP failure, a VM restored from a snapshot) still refuses and
/// accepts exactly what the others do. Thread-safe: the brokers' threads stamp arrivals, the writer thread sets it.
public final class IngestClock: Sendable {
    private let offset = Atomic<Int64>(0)

    public init() {}

    /// Now, Unix microseconds, by the database's clock.
    public func nowMicros() -> Int64 { wallClockMicros() + offset.load(ordering: .relaxed) }

    func set(offsetMicros: Int64) { offset.store(offsetMicros, ordering: .relaxed) }
}

/// This instance's clock against the database's: pure, over the readings it is given.
struct ClockComparison: Sendable, Equatable {
    /// Beyond this difference the instance says its clock is wrong and is unhealthy (it still judges times by the
    /// database's clock).
    var toleranceMicros: Int64
    /// A reading whose round trip took longer than this says too little about the offset and is not used.
    var longestRoundTripMicros: Int64 = 500_000
    private(set) var offsetMicros: Int64 = 0
    private(set) var skewed = false

    init(toleranceMicros: Int64) { self.toleranceMicros = toleranceMicros }

    enum Change: Equatable {
        case none
        /// The difference passed the tolerance.
        case becameSkewed
        /// The difference came back within the tolerance.
        case cameBack
    }

    /// One reading of the database's clock, between two readings of this instance's.
    mutating func measured(localBeforeMicros: Int64, databaseMicros: Int64, localAfterMicros: Int64) -> Change {
        guard localAfterMicros >= localBeforeMicros, localAfterMicros - localBeforeMicros <= longestRoundTripMicros else {
            return .none
        }
        offsetMicros = databaseMicros - (localBeforeMicros + (localAfterMicros - localBeforeMicros) / 2)
        let wasSkewed = skewed
        skewed = abs(offsetMicros) > toleranceMicros
        return skewed == wasSkewed ? .none : (skewed ? .becameSkewed : .cameBack)
    }
}
