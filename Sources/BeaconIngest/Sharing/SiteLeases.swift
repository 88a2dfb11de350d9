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
    private let connection: PostgresConnection
    let keeper: LeaseKeeper

    var instance: String { keeper.instance }

    /// `connection` is the writer's; the keeper has joined the live instances on its own session.
    init(connection: PostgresConnection, keeper: LeaseKeeper) throws(PostgresError) {
        self.connection = connection
        self.keeper = keeper
        // A holder frozen inside a transaction (which holds its sites' claims) loses its session, and with it the
        // claims' row locks, after a lease.
        let timeout = keeper.duration.components.seconds
        try connection.execute("SET idle_in_transaction_session_timeout = '\(max(1, timeout))s'")
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

    /// What this instance sees of the sites' leases at one look.
    struct Observation: Sendable, Equatable {
        /// How many sites each other live instance holds, by instance.
        var others: [String: Int] = [:]
        /// The sites nobody holds: any instance may claim them.
        var free: Set<String> = []
        /// The sites no live instance holds: free, or held by a session that is not a live instance.
        var unserved: Set<String> = []
        /// The sites-file digest of each other live instance (empty: not recorded).
        var sitesDigests: [String: String] = [:]
    }

    /// Looks at the live instances and the leases of `sites`.
    func observe(sites: [String]) throws(PostgresError) -> Observation {
        var observation = Observation()
        for row in try connection.query(
            """
            WITH held AS (
                SELECT site_id, instance FROM beaconflow.site_claims WHERE beaconflow.lease_held(expires_at, backend_pid)),
            live AS (
                SELECT instance FROM beaconflow.ingest_instances WHERE beaconflow.lease_held(expires_at, backend_pid))
            SELECT 'instance:' || live.instance, (SELECT count(*) FROM held WHERE held.instance = live.instance)::text FROM live
            WHERE live.instance <> $2
            UNION ALL
            SELECT 'digest:' || i.instance, coalesce(i.sites_digest, '') FROM beaconflow.ingest_instances i
            WHERE i.instance <> $2 AND beaconflow.lease_held(i.expires_at, i.backend_pid)
            UNION ALL
            SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM held WHERE site_id = site) THEN 'free' ELSE 'unserved' END, site
            FROM unnest($1::text[]) AS site
            WHERE NOT EXISTS (SELECT 1 FROM held JOIN live USING (instance) WHERE site_id = site)
            """, [sites, instance])
        {
            let value = try row.decode(1, as: String.self)
            let kind = try row.decode(0, as: String.self)
            if kind.hasPrefix("digest:") {
                observation.sitesDigests[String(kind.dropFirst("digest:".count))] = value
                continue
            }
            if kind.hasPrefix("instance:") {
                observation.others[String(kind.dropFirst("instance:".count))] = Int(value) ?? 0
                continue
            }
            switch kind {
            case "free":
                observation.free.insert(value)
                observation.unserved.insert(value)
            default: observation.unserved.insert(value)
            }
        }
        return observation
    }

    /// Claims a site nobody holds. Nil when it is held; otherwise whether another instance held it last.
    func claim(site: String) throws(PostgresError) -> Bool? {
        let rows = try connection.query(
            "SELECT epoch, previous FROM beaconflow.claim_site($1, $2, $3)", [site, instance, keeper.duration.seconds])
        guard let row = rows.first else { return nil }
        keeper.held(site, epoch: try row.decode(0, as: Int64.self))
        let previous = try row.decode(1, as: String?.self)
        return previous != nil && previous != instance
    }

    /// In the current transaction: locks the leases of `sites` until it ends. Returns the sites of `sites` whose
    /// lease is no longer this instance's (they are forgotten here; nothing may be written for them).
    func hold(_ sites: Set<String>) throws(PostgresError) -> Set<String> {
        let wanted = sites.compactMap { site in keeper.epoch(of: site).map { (site, $0) } }.sorted { $0.0 < $1.0 }
        let held = Set(
            try connection.query(
                "SELECT beaconflow.hold_sites($1, $2, $3)", [instance, wanted.map(\.0), wanted.map(\.1)]
            ).map { (row) throws(PostgresError) in try row.decode(0, as: String.self) })
        let lost = sites.subtracting(held)
        for site in lost { keeper.forget(site) }
        return lost
    }

    /// Ends a lease at once, for another instance to claim.
    func release(site: String) throws(PostgresError) {
        guard let epoch = keeper.forget(site) else { return }
        try connection.query("SELECT beaconflow.release_site($1, $2, $3)", [instance, site, epoch])
    }

    /// Forgets a lease without a word to the database (it was taken over).
    func forget(site: String) { keeper.forget(site) }
}
