import LibPQ

/// The leases under which ingest instances serve sites, as the writer thread uses them on its own connection;
/// `LeaseKeeper` renews them on a session and thread of their own.
///
/// A site is served by the instance whose lease on it holds: a `site_claims` row with an epoch and an expiry,
/// renewed every quarter lease, and taken over by another instance once it has expired or its holder's session
/// has ended. Only the SECURITY DEFINER functions of schema version 11, callable by the writer role alone, change
/// the leases, so no other login can hold or count a site. Each transaction that writes for a site holds the
/// site's lease (`hold`, a KEY SHARE row lock that renewals pass and claims wait for) until it ends: a claim never
/// moves under a commit, and a holder that was frozen finds the site taken when it resumes and writes nothing more
/// for it.
final class SiteLeases {
    private let store: LeaseStore
    let keeper: LeaseKeeper

    var instance: String { keeper.instance }

    /// `connection` is the writer's; the keeper has joined the live instances on its own session.
    init(connection: PostgresConnection, keeper: LeaseKeeper) throws(PostgresError) {
        store = LeaseStore(connection: connection)
        self.keeper = keeper
        // A holder frozen inside a transaction (which holds its sites' claims) loses its session, and with it the
        // claims' row locks, after a lease.
        try store.limitIdleTransactions(toSeconds: keeper.duration.components.seconds)
    }

    deinit { keeper.stop(leave: false) }

    /// Records the digest of the sites file this instance runs with (`SitesConfiguration.digest`).
    func publish(sitesDigest: String) throws(PostgresError) {
        try keeper.publish(sitesDigest: sitesDigest)
    }

    /// Leaves the live instances at a graceful stop, so that the others count without it at once.
    func leave() {
        keeper.stop(leave: true)
    }

    /// Looks at the live instances and the leases of `sites`.
    func observe(sites: [String]) throws(PostgresError) -> LeaseStore.Observation {
        try store.observe(instance, sites: sites)
    }

    /// Claims a site nobody holds. Nil when it is held; otherwise whether another instance held it last.
    func claim(site: String) throws(PostgresError) -> Bool? {
        guard let claimed = try store.claimSite(site, instance: instance, leaseSeconds: keeper.duration.seconds) else { return nil }
        keeper.held(site, epoch: claimed.epoch)
        return claimed.previous != nil && claimed.previous != instance
    }

    /// In the current transaction: locks the leases of `sites` until it ends. Returns the sites of `sites` whose
    /// lease is no longer this instance's (they are forgotten here; nothing may be written for them).
    func hold(_ sites: Set<String>) throws(PostgresError) -> Set<String> {
        let wanted = sites.compactMap { site in keeper.epoch(of: site).map { (site: site, epoch: $0) } }.sorted { $0.site < $1.site }
        let lost = sites.subtracting(try store.holdSites(instance, wanted: wanted))
        for site in lost { keeper.forget(site) }
        return lost
    }

    /// Ends a lease at once, for another instance to claim.
    func release(site: String) throws(PostgresError) {
        guard let epoch = keeper.forget(site) else { return }
        try store.releaseSite(site, instance: instance, epoch: epoch)
    }

    /// Forgets a lease without a word to the database (it was taken over).
    func forget(site: String) { keeper.forget(site) }
}
