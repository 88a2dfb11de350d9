/// How many sightings one transaction takes at most, from how long the last ones took.
///
/// A group's pipeline work (smoothing, zones, health) runs between its statements, and the writer's session ends a
/// transaction left idle for longer than the lease (`idle_in_transaction_session_timeout`). On a slow or starved
/// machine a group as large as `IngestConfiguration.maximumGroupSightings` allows can take longer than that: it is
/// ended, retried whole after the reconnect and ended again, and nothing commits. So the bound follows the
/// measured cost of a sighting, to keep each transaction near `target`; it at most doubles after a commit, halves
/// when a transaction is lost with its connection, and stays between one sighting (a batch above the bound goes
/// alone) and `maximum`.
struct CommitPace: Sendable, Equatable {
    let maximum: Int
    let target: Duration
    private(set) var sightingsLimit: Int

    /// Starts at `initial` (or `maximum`, when lower): the first groups after a start or an outage, when the
    /// backlog is deepest and nothing is measured yet, are moderate; fast machines double from there.
    init(maximum: Int, target: Duration, initial: Int = 4_096) {
        self.maximum = max(1, maximum)
        self.target = target
        sightingsLimit = min(self.maximum, max(1, initial))
    }

    /// A group of `sightings` committed in `took`.
    mutating func committed(sightings: Int, took: Duration) {
        guard sightings > 0 else { return }
        let affordable = Double(sightings) * target.seconds / max(took.seconds, 1e-6)
        let next = min(Double(2 * sightingsLimit), affordable)
        sightingsLimit = Int(min(Double(maximum), max(1, next)))
    }

    /// A transaction lost with its connection (ended by the server's idle timeout, or the network).
    mutating func transactionLost() {
        sightingsLimit = max(1, sightingsLimit / 2)
    }
}
