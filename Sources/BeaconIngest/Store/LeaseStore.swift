import LibPQ

/// The site leases' statements, one call each: the SECURITY DEFINER functions of schema version 11 on (the only
/// way to change `site_claims` and `ingest_instances`) and the look at both. `SiteLeases` calls them on the
/// writer's session, `LeaseKeeper` on its own.
struct LeaseStore {
    let connection: PostgresConnection

    /// What an instance sees of the sites' leases at one look.
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

    /// Ends the session of a holder frozen inside a transaction (which holds its sites' claims), and with it the
    /// claims' row locks, after `seconds`.
    func limitIdleTransactions(toSeconds seconds: Int64) throws(PostgresError) {
        try connection.execute("SET idle_in_transaction_session_timeout = '\(max(1, seconds))s'")
    }

    /// Counts `instance` among the live instances for `leaseSeconds`.
    func joinInstances(_ instance: String, leaseSeconds: Double) throws(PostgresError) {
        try connection.query("SELECT beaconflow.join_instances($1, $2)", [instance, leaseSeconds])
    }

    func setSitesDigest(_ instance: String, digest: String) throws(PostgresError) {
        try connection.query("SELECT beaconflow.set_sites_digest($1, $2)", [instance, digest])
    }

    /// Records `instance`'s own figures (`InstanceStatus`, JSON) in its row among the live instances.
    func setInstanceStatus(_ instance: String, status: String) throws(PostgresError) {
        try connection.query("SELECT beaconflow.set_instance_status($1, $2::jsonb)", [instance, status])
    }

    func leaveInstances(_ instance: String) throws(PostgresError) {
        try connection.query("SELECT beaconflow.leave_instances($1)", [instance])
    }

    /// Renews the leases of `held` (site and epoch); returns the sites renewed.
    func renewSites(_ instance: String, held: [(site: String, epoch: Int64)], leaseSeconds: Double) throws(PostgresError) -> Set<String> {
        Set(
            try connection.query(
                "SELECT beaconflow.renew_sites($1, $2, $3, $4)", [instance, held.map(\.site), held.map(\.epoch), leaseSeconds]
            ).map { (row) throws(PostgresError) in try row.decode(0, as: String.self) })
    }

    /// Looks at the live instances other than `instance` and the leases of `sites`.
    func observe(_ instance: String, sites: [String]) throws(PostgresError) -> Observation {
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

    /// Claims a site nobody holds: its epoch and the instance that held it last; nil when it is held.
    func claimSite(_ site: String, instance: String, leaseSeconds: Double) throws(PostgresError) -> (epoch: Int64, previous: String?)? {
        guard let row = try connection.query("SELECT epoch, previous FROM beaconflow.claim_site($1, $2, $3)", [site, instance, leaseSeconds]).first
        else { return nil }
        return (try row.decode(0, as: Int64.self), try row.decode(1, as: String?.self))
    }

    /// In the current transaction: locks the leases of `wanted` (site and epoch) until it ends; returns the sites
    /// still this instance's.
    func holdSites(_ instance: String, wanted: [(site: String, epoch: Int64)]) throws(PostgresError) -> Set<String> {
        Set(
            try connection.query("SELECT beaconflow.hold_sites($1, $2, $3)", [instance, wanted.map(\.site), wanted.map(\.epoch)])
                .map { (row) throws(PostgresError) in try row.decode(0, as: String.self) })
    }

    func releaseSite(_ site: String, instance: String, epoch: Int64) throws(PostgresError) {
        try connection.query("SELECT beaconflow.release_site($1, $2, $3)", [instance, site, epoch])
    }
}
