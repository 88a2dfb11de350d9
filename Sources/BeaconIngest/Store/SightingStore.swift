import LibPQ

/// A group's sightings, stored as packs (one row per beacon, source and stretch of time; docs/schema.md) keyed by
/// the dictionaries `sighting_sources` and `beacon_keys`, with their per-minute rollups in `sighting_minutes`.
struct SightingStore {
    let connection: PostgresConnection

    /// How many times a group looks up dictionary keys that another instance was inserting at the same time.
    static let keyLookupAttempts = 5

    /// Packs and stores the sightings; `keys` learns the dictionary keys inserted or read (kept when the
    /// transaction commits).
    func store(_ sightings: [SightingRow], keys: inout DictionaryKeys) throws(PostgresError) {
        guard !sightings.isEmpty else { return }
        let packs = try keyed(SightingPack.pack(sightings), keys: &keys)
        try connection.copy(packs, into: StoredPack.copyTable)
        try upsert(MinuteRollup.of(packs))
    }

    /// The packs with their dictionary keys, inserting the sources and beacons the dictionaries lack. Another
    /// instance inserting the same entry makes this statement wait and then not see it: it looks again.
    private func keyed(_ packs: [SightingPack], keys: inout DictionaryKeys) throws(PostgresError) -> [StoredPack] {
        for _ in 0..<Self.keyLookupAttempts {
            var missingSources: [SightingSource] = []
            var missingBeacons: [String] = []
            var seenSources: Set<SightingSource> = []
            var seenBeacons: Set<String> = []
            for pack in packs {
                if keys.source(pack.source) == nil, seenSources.insert(pack.source).inserted { missingSources.append(pack.source) }
                if keys.beacon(pack.beaconID) == nil, seenBeacons.insert(pack.beaconID).inserted { missingBeacons.append(pack.beaconID) }
            }
            if missingSources.isEmpty && missingBeacons.isEmpty {
                return packs.map { StoredPack(pack: $0, sourceKey: keys.source($0.source)!, beaconKey: keys.beacon($0.beaconID)!) }
            }
            if !missingSources.isEmpty {
                for row in try connection.query(
                    """
                    WITH wanted AS (
                        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::double precision[], $5::double precision[])
                            AS w(site_id, agent_id, zone_id, rssi_offset_db, path_loss_exponent)
                    ), added AS (
                        INSERT INTO beaconflow.sighting_sources (site_id, agent_id, zone_id, rssi_offset_db, path_loss_exponent)
                        SELECT * FROM wanted ON CONFLICT DO NOTHING
                        RETURNING source_key, site_id, agent_id, zone_id, rssi_offset_db, path_loss_exponent
                    )
                    SELECT * FROM added
                    UNION ALL
                    SELECT s.source_key, s.site_id, s.agent_id, s.zone_id, s.rssi_offset_db, s.path_loss_exponent
                    FROM beaconflow.sighting_sources s JOIN wanted w ON s.site_id = w.site_id AND s.agent_id = w.agent_id
                         AND s.zone_id IS NOT DISTINCT FROM w.zone_id AND s.rssi_offset_db = w.rssi_offset_db
                         AND s.path_loss_exponent = w.path_loss_exponent
                    """,
                    [
                        missingSources.map(\.siteID), missingSources.map(\.agentID), missingSources.map(\.zoneID),
                        missingSources.map(\.rssiOffsetDb), missingSources.map(\.pathLossExponent),
                    ])
                {
                    let source = SightingSource(
                        siteID: try row.decode(1), agentID: try row.decode(2), zoneID: try row.decode(3),
                        rssiOffsetDb: try row.decode(4), pathLossExponent: try row.decode(5))
                    keys.learned(source: source, key: try row.decode(0))
                }
            }
            if !missingBeacons.isEmpty {
                for row in try connection.query(
                    """
                    WITH added AS (
                        INSERT INTO beaconflow.beacon_keys (beacon_id) SELECT unnest($1::text[])
                        ON CONFLICT DO NOTHING RETURNING beacon_key, beacon_id
                    )
                    SELECT * FROM added
                    UNION ALL
                    SELECT beacon_key, beacon_id FROM beaconflow.beacon_keys WHERE beacon_id = ANY($1)
                    """, [missingBeacons])
                {
                    // Kept under the pipeline's copy of the id, not a copy of its own per beacon.
                    let beaconID = try row.decode(1, as: String.self)
                    keys.learned(beacon: seenBeacons.firstIndex(of: beaconID).map { seenBeacons[$0] } ?? beaconID, key: try row.decode(0))
                }
            }
        }
        throw PostgresError(
            "looking up dictionary keys", sqlState: nil,
            "sources or beacons were still missing after \(Self.keyLookupAttempts) attempts")
    }

    /// Adds a group's per-minute rollups to `sighting_minutes`.
    private func upsert(_ rollups: [MinuteRollup]) throws(PostgresError) {
        guard !rollups.isEmpty else { return }
        try connection.query(
            """
            INSERT INTO beaconflow.sighting_minutes AS m (minute, source_key, beacon_key, sightings, rssi_min, rssi_max, rssi_sum)
            SELECT * FROM unnest($1::timestamptz[], $2::integer[], $3::integer[], $4::integer[], $5::smallint[],
                                 $6::smallint[], $7::bigint[])
            ON CONFLICT (beacon_key, minute, source_key) DO UPDATE SET
                sightings = m.sightings + excluded.sightings, rssi_min = least(m.rssi_min, excluded.rssi_min),
                rssi_max = greatest(m.rssi_max, excluded.rssi_max), rssi_sum = m.rssi_sum + excluded.rssi_sum
            """,
            [
                rollups.map { PostgresTimestamp(unixMicros: $0.minuteMicros) }, rollups.map(\.sourceKey),
                rollups.map(\.beaconKey), rollups.map(\.sightings), rollups.map(\.rssiMin), rollups.map(\.rssiMax),
                rollups.map(\.rssiSum),
            ])
    }
}
