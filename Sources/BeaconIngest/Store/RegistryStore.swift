import BeaconMessaging
import BeaconWire
import LibPQ

/// What the ingest knows apart from the data: the sites file's registries, agents' statuses, and refused batches.
struct RegistryStore {
    let connection: PostgresConnection

    /// How much of a rejected batch is kept (its size is kept too).
    static let rejectedPayloadBytes = 65_536

    /// Writes what the views need of the sites file: the beacon registry (labels, whether keys are configured,
    /// never the keys, and whether the beacon hangs outdoors) into `beacon_registry`, each site's timing into `site_registry` and its zones into
    /// `zone_registry`. With `pruning`, what the file no longer has is deleted too (sites, zones, beacons, and the
    /// zone states of agents the file no longer places); without, it is left (another live instance runs with
    /// another sites file, whose rows these may be). Returns `pruning`.
    @discardableResult
    func writeRegistry(_ sites: SitesConfiguration, pruning: Bool) throws(PostgresError) -> Bool {
        let beacons = sites.beacons
        let placed = sites.sites.flatMap { site in site.agents.filter { $0.zone != nil }.map { (site: site.id, agent: $0.id) } }
        let zones = sites.sites.flatMap { site in site.zones.enumerated().map { (site: site.id, position: $0, zone: $1) } }
        try connection.transaction { () throws(PostgresError) in
            if pruning {
                try connection.query(
                    "DELETE FROM beaconflow.beacon_registry WHERE NOT (beacon_id = ANY ($1::text[]))", [beacons.map(\.id)])
                try connection.query(
                    "DELETE FROM beaconflow.site_registry WHERE NOT (site_id = ANY ($1::text[]))", [sites.sites.map(\.id)])
                try connection.query(
                    """
                    DELETE FROM beaconflow.zone_registry z WHERE NOT EXISTS (
                        SELECT 1 FROM unnest($1::text[], $2::text[]) AS f(site_id, zone_id)
                        WHERE f.site_id = z.site_id AND f.zone_id = z.zone_id)
                    """, [zones.map(\.site), zones.map(\.zone.id)])
                try connection.query(
                    """
                    DELETE FROM beaconflow.agent_zone_state z WHERE NOT EXISTS (
                        SELECT 1 FROM unnest($1::text[], $2::text[]) AS p(site_id, agent_id)
                        WHERE p.site_id = z.site_id AND p.agent_id = z.agent_id)
                    """,
                    [placed.map(\.site), placed.map(\.agent)])
            }
            try connection.query(
                """
                INSERT INTO beaconflow.beacon_registry (beacon_id, label, identity_key, bthome_bindkey, outdoors)
                SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::boolean[], $5::boolean[])
                ON CONFLICT (beacon_id) DO UPDATE SET
                    label = excluded.label, identity_key = excluded.identity_key, bthome_bindkey = excluded.bthome_bindkey,
                    outdoors = excluded.outdoors
                """,
                [
                    beacons.map(\.id), beacons.map(\.label), beacons.map { $0.identityKey != nil },
                    beacons.map { $0.bthomeBindkey != nil }, beacons.map(\.outdoors),
                ])
            try connection.query(
                """
                INSERT INTO beaconflow.site_registry (site_id, timezone, absence_timeout_s, allowed_lateness_s)
                SELECT * FROM unnest($1::text[], $2::text[], $3::double precision[], $4::double precision[])
                ON CONFLICT (site_id) DO UPDATE SET timezone = excluded.timezone,
                    absence_timeout_s = excluded.absence_timeout_s, allowed_lateness_s = excluded.allowed_lateness_s
                """,
                [
                    sites.sites.map(\.id), sites.sites.map(\.timezone),
                    sites.sites.map { Double($0.zoneRules.absenceTimeoutMicros) / 1_000_000 },
                    sites.sites.map { Double($0.zoneRules.allowedLatenessMicros) / 1_000_000 },
                ])
            try connection.query(
                """
                INSERT INTO beaconflow.zone_registry (site_id, zone_id, position, capacity, rect)
                SELECT s, z, p, c, CASE WHEN x0 IS NULL THEN NULL ELSE ARRAY[x0, y0, x1, y1] END
                FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::double precision[], $6::double precision[],
                            $7::double precision[], $8::double precision[]) AS r(s, z, p, c, x0, y0, x1, y1)
                ON CONFLICT (site_id, zone_id) DO UPDATE SET
                    position = excluded.position, capacity = excluded.capacity, rect = excluded.rect
                """,
                [
                    zones.map(\.site), zones.map(\.zone.id), zones.map { Int32($0.position) }, zones.map { $0.zone.capacity.map(Int32.init(clamping:)) },
                    zones.map { $0.zone.rect?[0] }, zones.map { $0.zone.rect?[1] }, zones.map { $0.zone.rect?[2] }, zones.map { $0.zone.rect?[3] },
                ])
        }
        return pruning
    }

    /// Whether a live instance other than `instance` runs with a sites file of another digest (or has not said
    /// which): the registry's rows may then be its.
    func anotherSitesFileIsLive(instance: String, digest: String) throws(PostgresError) -> Bool {
        try connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM beaconflow.ingest_instances
                           WHERE instance <> $1 AND beaconflow.lease_held(expires_at, backend_pid)
                             AND coalesce(sites_digest, '') <> $2)
            """, [instance, digest]
        ).first?.decode(0, as: Bool.self) ?? false
    }

    /// An agent's status message: online or not, its rates and spool, its clock offset, its last error.
    func recordStatus(_ agent: AgentKey, _ status: AgentStatus, clockOffsetMillis: Double?) throws(PostgresError) {
        try connection.query(
            """
            INSERT INTO beaconflow.agent_state AS a (site_id, agent_id, online, adverts_per_s, spool_bytes,
                clock_offset_ms, last_error, online_since)
            VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $3 THEN now() END)
            ON CONFLICT (site_id, agent_id) DO UPDATE SET online = excluded.online,
                online_since = CASE WHEN NOT excluded.online THEN NULL WHEN a.online THEN a.online_since ELSE now() END,
                adverts_per_s = coalesce(excluded.adverts_per_s, a.adverts_per_s),
                spool_bytes = coalesce(excluded.spool_bytes, a.spool_bytes),
                clock_offset_ms = coalesce(excluded.clock_offset_ms, a.clock_offset_ms),
                last_error = excluded.last_error
            """,
            [
                agent.site, agent.agent, status.online, status.advertsPerSecond.map(Float.init),
                status.spoolBytes, clockOffsetMillis.map(Float.init), status.lastError,
            ])
    }

    /// Keeps a refused batch whole (up to `rejectedPayloadBytes`), with why.
    func recordRejection(topic: String, payload: [UInt8], reason: String, message: String, header: BatchHeader?) throws(PostgresError) {
        try connection.query(
            """
            INSERT INTO beaconflow.rejected_batches (topic, reason, detail, payload, payload_bytes, site_id, agent_id, sequence)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            """,
            [
                String(topic.prefix(1000)), reason, message, PostgresBytes(Array(payload.prefix(Self.rejectedPayloadBytes))),
                Int32(clamping: payload.count), header?.siteID, header?.agentID, header.map { Int64(bitPattern: $0.sequence) },
            ])
    }
}
