/// The agents whose batches wait for a condition of the ingest's own side to clear: a lock another login holds, a
/// partition limit, a missing privilege, a statement timeout. Such a batch is not refused and not acknowledged;
/// the agent keeps it and sends it again (after its acknowledgement timeout), and it commits once the condition
/// has cleared. Pure, over the time it is given: the ingest is unhealthy while any agent is held.
struct HeldBatches: Sendable {
    /// An agent held and not heard from again for this long is forgotten (it went away, or was removed from the
    /// sites file): three of an agent's default acknowledgement timeouts.
    var forgetAfter: Duration = .seconds(90)
    private var lastHeld: [AgentKey: ContinuousClock.Instant] = [:]

    var agents: Set<AgentKey> { Set(lastHeld.keys) }

    /// One of the agent's batches was held. Returns whether no agent was held before (the condition begins).
    mutating func held(_ agent: AgentKey, now: ContinuousClock.Instant) -> Bool {
        let began = lastHeld.isEmpty
        lastHeld[agent] = now
        return began
    }

    /// The agents' batches committed, and those held too long ago forgotten. Returns whether this emptied the set
    /// (the condition cleared).
    mutating func committed(_ agents: some Sequence<AgentKey>, now: ContinuousClock.Instant) -> Bool {
        guard !lastHeld.isEmpty else { return false }
        for agent in agents { lastHeld[agent] = nil }
        lastHeld = lastHeld.filter { now - $0.value < forgetAfter }
        return lastHeld.isEmpty
    }
}
