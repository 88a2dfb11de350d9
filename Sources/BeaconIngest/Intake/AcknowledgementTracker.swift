/// Which sequence the ingest may acknowledge to each agent: "committed through N" must mean every batch up to N
/// is in the database, so it advances only over a contiguous run. Each batch says which of its agent's
/// sequences is the oldest still unacknowledged; everything below it was acknowledged or dropped by the agent's
/// full spool, and is not waited for. A pure state machine (delivery: docs/wire-format.md).
public struct AcknowledgementTracker: Sendable {
    public struct AgentKey: Hashable, Sendable {
        public var site: String
        public var agent: String

        public init(site: String, agent: String) {
            self.site = site
            self.agent = agent
        }
    }

    private struct Progress: Sendable {
        var through: UInt64 = 0
        /// Committed sequences above `through`, waiting for the gap below them to fill.
        var above: Set<UInt64> = []
    }

    private var progress: [AgentKey: Progress] = [:]
    /// The progress as it was at `beginTransaction()`.
    private var savedProgress: [AgentKey: Progress]?

    public init() {}

    /// Resumes an agent's progress as the database has it (at start, or from another instance's commits).
    public mutating func restore(_ key: AgentKey, through: UInt64, above: some Sequence<UInt64>) {
        var state = Progress(through: through, above: Set(above.filter { $0 > through }))
        Self.advance(&state)
        progress[key] = state
    }

    /// Records a batch that is now in the database (newly committed, or found there already); returns the
    /// sequence to acknowledge.
    public mutating func committed(_ key: AgentKey, sequence: UInt64, firstUnacknowledged: UInt64) -> UInt64 {
        var state = progress[key] ?? Progress()
        if firstUnacknowledged > 0 { state.through = max(state.through, firstUnacknowledged - 1) }
        if sequence > state.through { state.above.insert(sequence) }
        Self.advance(&state)
        progress[key] = state
        return state.through
    }

    public func committedThrough(_ key: AgentKey) -> UInt64 { progress[key]?.through ?? 0 }

    /// Batches committed beyond a gap, for one agent (for the health view and tests).
    public func waiting(_ key: AgentKey) -> Int { progress[key]?.above.count ?? 0 }

    private static func advance(_ state: inout Progress) {
        state.above = state.above.filter { $0 > state.through }
        while state.above.remove(state.through + 1) != nil { state.through += 1 }
    }

    /// Starts a transaction: the progress recorded until `commitTransaction()` is undone by
    /// `rollbackTransaction()`.
    public mutating func beginTransaction() { savedProgress = progress }
    public mutating func commitTransaction() { savedProgress = nil }
    public mutating func rollbackTransaction() {
        if let savedProgress { progress = savedProgress }
        savedProgress = nil
    }
}
