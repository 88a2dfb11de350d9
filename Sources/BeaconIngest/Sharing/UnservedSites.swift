/// Which sites of the sites file no ingest instance has served for longer than a bound, as one instance sees them
/// at each look at the others. A pure state machine: the writer thread feeds it the free sites it observed.
public struct UnservedSites: Sendable {
    public let bound: Duration
    /// When each site now unserved was first seen so (since then it has been unserved at every look).
    private var unservedSince: [String: ContinuousClock.Instant] = [:]
    /// The sites already reported as overdue (each is reported once per stretch without an owner).
    private var reported: Set<String> = []

    public init(bound: Duration) { self.bound = bound }

    /// Records a look: `unserved` are the sites no live instance served at `now`. Returns how many sites have
    /// been unserved for longer than the bound, and those that passed it since the last look.
    public mutating func observe(unserved: Set<String>, now: ContinuousClock.Instant) -> (count: Int, newlyOverdue: Set<String>) {
        unservedSince = unservedSince.filter { unserved.contains($0.key) }
        reported.formIntersection(unserved)
        for site in unserved where unservedSince[site] == nil { unservedSince[site] = now }
        let overdue = Set(unservedSince.filter { now - $0.value > bound }.keys)
        let newly = overdue.subtracting(reported)
        reported.formUnion(newly)
        return (overdue.count, newly)
    }
}
