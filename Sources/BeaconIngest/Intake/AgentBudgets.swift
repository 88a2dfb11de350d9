/// What each agent's batches may bring: new partition days and sightings, each a budget per agent.
struct AgentBudgets: Sendable {
    var days = PartitionDayBudget()
    var sightings: SightingBudget
}

/// A token bucket: `burst` tokens at most, refilled at `perSecond`. Pure, over the time it is given.
struct TokenBucket: Sendable {
    private(set) var tokens: Double
    private var at: ContinuousClock.Instant

    init(full burst: Double, at now: ContinuousClock.Instant) {
        tokens = burst
        at = now
    }

    /// Takes `cost` tokens if there are that many after refilling to `now`.
    mutating func take(_ cost: Double, burst: Double, perSecond: Double, now: ContinuousClock.Instant) -> Bool {
        tokens = min(burst, tokens + max(0, (now - at).seconds) * perSecond)
        at = now
        guard tokens >= cost else { return false }
        tokens -= cost
        return true
    }
}

/// Token buckets by agent, at most `capacity` of them: when full, the buckets that are full again are forgotten
/// first (an agent forgotten starts full, as it would be).
struct AgentBuckets: Sendable {
    var burst: Double
    var perSecond: Double
    var capacity = 10_000
    private var buckets: [AgentKey: TokenBucket] = [:]

    init(burst: Double, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }

    mutating func take(_ cost: Double, from agent: AgentKey, now: ContinuousClock.Instant) -> Bool {
        if buckets[agent] == nil, buckets.count >= capacity {
            buckets = buckets.filter { $0.value.tokens < burst }
        }
        var bucket = buckets[agent] ?? TokenBucket(full: burst, at: now)
        defer { buckets[agent] = bucket }
        return bucket.take(cost, burst: burst, perSecond: perSecond, now: now)
    }
}

/// How many sightings each agent's batches may bring a second, so that one credential (a flood, or a spool sent
/// as fast as the broker takes it) cannot take the writer from the other sites: `burst` sightings at once (two
/// batches of the wire's largest), refilled at `perSecond`. A batch past its agent's budget is deferred (not
/// acknowledged, sent again by its agent), never refused. Pure, over the time it is given.
struct SightingBudget: Sendable {
    static let defaultPerSecond = 20_000
    private var buckets: AgentBuckets

    init(perSecond: Int = Self.defaultPerSecond, burst: Int = 2 * 100_000) {
        buckets = AgentBuckets(burst: Double(burst), perSecond: Double(perSecond))
    }

    /// Whether the agent may bring `sightings` now; if so they are taken from its budget. A batch larger than the
    /// burst goes once the bucket is full.
    mutating func admit(_ agent: AgentKey, sightings: Int, now: ContinuousClock.Instant) -> Bool {
        buckets.take(min(Double(sightings), buckets.burst), from: agent, now: now)
    }
}

/// How many days without a partition each agent's batches may bring, so that one credential cannot make the
/// database's partitions by the thousand (each day is a table per raw table): a token bucket per agent of
/// `burst` days, refilled at `perMinute`. A day is charged once, to the first agent that brings it, and is free
/// for an hour after (every batch of today's backlog costs nothing after the first). A batch past its agent's
/// budget is deferred (not acknowledged, sent again), never refused: an agent resending a spool of ten old days
/// takes a couple of minutes, no more. Pure, over the time it is given; it remembers at most `capacity` agents and
/// days (the oldest are forgotten first).
struct PartitionDayBudget: Sendable {
    static let burst = 4
    static let perMinute = 4
    var capacity = 10_000
    /// How long a day admitted stays free.
    var dayMemory: Duration = .seconds(3600)
    private var buckets = AgentBuckets(burst: Double(Self.burst), perSecond: Double(Self.perMinute) / 60)
    private var admittedDays: [Int64: ContinuousClock.Instant] = [:]

    /// Whether the agent may bring these days (Unix days without a known partition) now; if so, those not admitted
    /// within `dayMemory` are taken from its budget.
    mutating func admit(_ agent: AgentKey, days: Set<Int64>, now: ContinuousClock.Instant) -> Bool {
        let new = days.filter { admittedDays[$0].map { now - $0 >= dayMemory } ?? true }
        guard !new.isEmpty else { return true }
        // A batch of more days than the burst goes alone, once the bucket is full.
        guard buckets.take(Double(min(new.count, Self.burst)), from: agent, now: now) else { return false }
        if admittedDays.count + new.count > capacity { admittedDays = admittedDays.filter { now - $0.value < dayMemory } }
        for day in new { admittedDays[day] = now }
        return true
    }
}
