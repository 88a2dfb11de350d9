/// How many days without a partition each agent's batches may bring, so that one credential cannot make the
/// database's partitions by the thousand (each day is a table per raw table): a token bucket per agent of
/// `burst` days, refilled at `perMinute`. A day is charged once, to the first agent that brings it, and is free
/// for an hour after (every batch of today's backlog costs nothing after the first). A batch past its agent's
/// budget is deferred (not acknowledged, sent again), never refused: an agent resending a spool of ten old days
/// takes a couple of minutes, no more. Pure, over the time it is given; it remembers at most `capacity` agents and
/// days (the oldest are forgotten first).
struct PartitionDayBudget: Sendable {
    var burst: Double = 4
    var perMinute: Double = 4
    var capacity = 10_000
    /// How long a day admitted stays free.
    var dayMemory: Duration = .seconds(3600)
    private var buckets: [AgentKey: (tokens: Double, at: ContinuousClock.Instant)] = [:]
    private var admittedDays: [Int64: ContinuousClock.Instant] = [:]

    /// Whether the agent may bring these days (Unix days without a known partition) now; if so, those not admitted
    /// within `dayMemory` are taken from its budget.
    mutating func admit(_ agent: AgentKey, days: Set<Int64>, now: ContinuousClock.Instant) -> Bool {
        let new = days.filter { admittedDays[$0].map { now - $0 >= dayMemory } ?? true }
        guard !new.isEmpty else { return true }
        var bucket = buckets[agent] ?? (burst, now)
        bucket = (min(burst, bucket.tokens + (now - bucket.at).seconds / 60 * perMinute), now)
        // A batch of more days than the burst goes alone, once the bucket is full.
        let cost = min(Double(new.count), burst)
        guard bucket.tokens >= cost else {
            remember(agent, bucket)
            return false
        }
        bucket.tokens -= cost
        remember(agent, bucket)
        if admittedDays.count + new.count > capacity { admittedDays = admittedDays.filter { now - $0.value < dayMemory } }
        for day in new { admittedDays[day] = now }
        return true
    }

    private mutating func remember(_ agent: AgentKey, _ bucket: (tokens: Double, at: ContinuousClock.Instant)) {
        if buckets[agent] == nil, buckets.count >= capacity {
            buckets = buckets.filter { $0.value.tokens < burst }
        }
        buckets[agent] = bucket
    }
}
