/// Each agent's clock offset against the ingest's, measured from its live status messages (their `clock_us`
/// against when they arrived): the largest (agent clock − arrival) over the recent samples, since delivery only
/// ever adds delay. Batches are no guide: after an outage an agent sends batches sealed long ago.
///
/// A status message is a sample only when it shows it was delivered live: it is not a retained delivery (the one
/// a broker hands out on subscribing, possibly hours old), and the time since the agent's previous status arrived
/// matches the time between their clocks within `pacingToleranceMicros`. A persistent session's backlog, delivered
/// in a burst after a reconnect, fails that test, as does the first status after either side restarts. Until a
/// sample exists no offset is applied, and offsets under `thresholdMicros` never are: NTP keeps agents within
/// milliseconds, and a correction that small would only add the network's jitter to the times.
public struct AgentClocks: Sendable {
    public var thresholdMicros: Int64 = 500_000
    /// How far the arrival spacing of two consecutive status messages may differ from their clocks' spacing.
    public var pacingToleranceMicros: Int64 = 250_000
    /// Samples the estimate looks back over.
    public var window = 32

    private struct Agent: Sendable {
        var samples: [Int64] = []
        /// The previous status message's clock and arrival.
        var previous: (clock: Int64, arrival: Int64)?
        /// The newest clock of any status message heard, live or retained.
        var newest: Int64?
    }

    private var agents: [AgentKey: Agent] = [:]

    public init() {}

    /// Records a status message's clock; returns whether it was taken as a sample.
    @discardableResult
    public mutating func observe(_ agent: AgentKey, agentClockMicros: Int64, receivedAtMicros: Int64, retained: Bool) -> Bool {
        guard !retained else { return false }
        var state = agents[agent] ?? Agent()
        defer { agents[agent] = state }
        let previous = state.previous
        state.previous = (agentClockMicros, receivedAtMicros)
        guard let previous, agentClockMicros > previous.clock,
            let clockGap = agentClockMicros.subtractingSafely(previous.clock),
            let arrivalGap = receivedAtMicros.subtractingSafely(previous.arrival),
            let mismatch = clockGap.subtractingSafely(arrivalGap), abs(mismatch) <= pacingToleranceMicros,
            let sample = agentClockMicros.subtractingSafely(receivedAtMicros)
        else { return false }
        state.samples.append(sample)
        if state.samples.count > window { state.samples.removeFirst(state.samples.count - window) }
        return true
    }

    /// Whether a status message with this clock is the agent's newest yet (and then remembers it). One that is
    /// older is stale: with several brokers, one that comes back hands out the status it kept, which can be older
    /// than those heard on another broker since.
    public mutating func isNewest(_ agent: AgentKey, statusClockMicros: Int64) -> Bool {
        if let newest = agents[agent]?.newest, statusClockMicros < newest { return false }
        agents[agent, default: Agent()].newest = statusClockMicros
        return true
    }

    /// The measured offset, applied or not; nil before the first sample.
    public func estimateMicros(_ agent: AgentKey) -> Int64? { agents[agent]?.samples.max() }

    /// The offset subtracted from the agent's times: the estimate when it reaches the threshold, else 0.
    public func offset(_ agent: AgentKey) -> Int64 {
        guard let estimate = estimateMicros(agent), abs(estimate) >= thresholdMicros else { return 0 }
        return estimate
    }
}
