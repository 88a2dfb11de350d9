/// Live instances that leave sites free: a session that joined the live instances but takes no site (a stuck
/// process, or a writer login calling `join_instances` by hand) would otherwise count in every instance's fair
/// share, and the sites handed over to it would stay unserved. An instance that holds no site while a site has been
/// free for longer than `patience` is left out of the share, until it holds a site, leaves, or `exclusion` passes
/// (then the share offers it sites again: a real instance takes them within a rebalance). A pure state machine: the
/// writer thread feeds it each look at the others.
struct IdleInstances: Sendable {
    var patience: Duration
    var exclusion: Duration
    private var freeSince: [String: ContinuousClock.Instant] = [:]
    private(set) var excluded: [String: ContinuousClock.Instant] = [:]

    init(patience: Duration, exclusion: Duration = .seconds(300)) {
        self.patience = patience
        self.exclusion = exclusion
    }

    /// Records a look (`others`: sites each other live instance holds; `free`: sites nobody holds) and returns the
    /// holdings of the instances that count in the share.
    mutating func observe(others: [String: Int], free: Set<String>, now: ContinuousClock.Instant) -> [String: Int] {
        freeSince = freeSince.filter { free.contains($0.key) }
        for site in free where freeSince[site] == nil { freeSince[site] = now }
        excluded = excluded.filter { others[$0.key] == 0 && now - $0.value < exclusion }
        if freeSince.values.contains(where: { now - $0 > patience }) {
            for (instance, held) in others where held == 0 && excluded[instance] == nil { excluded[instance] = now }
        }
        return others.filter { excluded[$0.key] == nil }
    }
}
