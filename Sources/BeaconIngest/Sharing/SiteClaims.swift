import LibPQ

/// The sites this writer shares with other ingest instances: joining and leaving the live instances, claiming and
/// handing over sites under leases (`SiteLeases`), and forgetting the state of sites taken over.
extension BatchWriter {
    /// Counts this instance among the live instances sharing the sites, as `instance`, with leases of
    /// `leaseDuration` renewed on a session of their own to `conninfo` (`LeaseKeeper`), let go when the writer thread
    /// has not turned for `writerStallBound`. From then on every transaction holds the leases of the sites it writes
    /// for.
    public func joinInstances(
        instance: String, leaseDuration: Duration, sitesDigest: String = "", conninfo: String, writerStallBound: Duration
    ) throws(PostgresError) {
        let keeper = try LeaseKeeper(conninfo: conninfo, instance: instance, duration: leaseDuration, writerStallBound: writerStallBound)
        let leases = try SiteLeases(connection: connection, keeper: keeper)
        try leases.publish(sitesDigest: sitesDigest)
        keeper.start()
        self.leases = leases
    }

    /// Records the digest of the sites file now in force (after a reload).
    func publish(sitesDigest: String) throws(PostgresError) { try leases?.publish(sitesDigest: sitesDigest) }

    /// Leaves the live instances (a graceful stop, after handing the sites over).
    public func leaveInstances() { leases?.leave() }

    /// What this session sees of the other live instances: how many sites each holds (by instance), which of
    /// `sites` nobody holds, and which no live instance holds.
    public func observeInstances(
        sites: [String]
    ) throws(PostgresError) -> (others: [String: Int], free: Set<String>, unserved: Set<String>, sitesDigests: [String: String]) {
        guard let observation = try leases?.observe(sites: sites) else { return ([:], [], [], [:]) }
        return (observation.others, observation.free, observation.unserved, observation.sitesDigests)
    }

    /// The writer thread turned (`LeaseKeeper.writerTurned`); returns the sites whose renewal found them taken over
    /// since the last turn, which this writer no longer serves.
    public func leasesTurned(state: inout WriterState) -> Set<String> {
        guard let leases else { return [] }
        leases.keeper.writerTurned()
        let lost = leases.keeper.takeLost()
        forget(sites: lost, state: &state)
        return lost
    }

    /// The instance's own figures (JSON), recorded with the leases' next renewal.
    func report(status: String) { leases?.keeper.report(status: status) }

    /// What ended the leases' session, if it has: the writer reconnects.
    public var leaseFailure: PostgresError? { leases?.keeper.failure }

    /// A site this writer now serves.
    public struct SiteClaim: Sendable {
        /// Another instance had claimed it last.
        public var takenOver: Bool
        public var resumption: ZoneResumption
    }

    /// Claims a site if nobody holds its lease, calls `leased` (the site is this writer's from here: its batches may
    /// be taken in, to be written after the claim), and resumes the site's zone state from the database. Nil when
    /// another instance holds it.
    public func claim(site: String, state: inout WriterState, leased: () -> Void = {}) throws(PostgresError) -> SiteClaim? {
        guard let leases, let takenOver = try leases.claim(site: site) else { return nil }
        leased()
        do {
            let resumption = try resumeZones(sites: [site], state: &state)
            state.servedSites.insert(site)
            return SiteClaim(takenOver: takenOver, resumption: resumption)
        } catch {
            _ = try? leases.release(site: site)
            throw error
        }
    }

    /// Hands a site over: forgets its zone state and its agents' progress, and ends its lease. The next owner
    /// resumes from the site's last checkpoint (saved with the last minutes counted), reading back the sightings
    /// stored after it. Batches of the site still queued are then the next owner's, through the agents' resends.
    public func release(site: String, state: inout WriterState) throws(PostgresError) {
        defer { forget(sites: [site], state: &state) }
        try leases?.release(site: site)
    }

    /// Stops serving sites whose lease is gone: their zone state and agents' progress are dropped.
    func forget(sites: Set<String>, state: inout WriterState) {
        guard !sites.isEmpty else { return }
        state.forget(sites: sites)
        for site in sites { leases?.forget(site: site) }
    }

    /// In a transaction just begun: holds the leases of `sites` until it ends; returns those no longer this
    /// writer's (nothing may be written for them).
    func hold(_ sites: Set<String>) throws(PostgresError) -> Set<String> {
        try leases?.hold(sites) ?? []
    }

    /// Stops serving sites found taken over; `WriterState.takeSitesLost` reports them.
    func lose(_ sites: Set<String>, state: inout WriterState) {
        guard !sites.isEmpty else { return }
        forget(sites: sites, state: &state)
        state.sitesLost.formUnion(sites)
    }
}
