import BeaconMessaging
import BeaconWire
import LibPQ

/// The `batches` rows and each agent's committed-through sequence in `agent_state`: what makes a batch count once
/// and what the acknowledgements are read back from.
struct BatchLedger {
    let connection: PostgresConnection

    /// Inserts the `batches` rows; returns the indices of the batches that were not there yet, neither as a row
    /// nor folded into a range.
    func insert(_ batches: [DecodedBatch]) throws(PostgresError) -> Set<Int> {
        let inserted = try connection.query(
            """
            INSERT INTO beaconflow.batches (site_id, agent_id, sequence, boot_id, agent_clock, sightings, content_digest)
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::integer[], $7::bigint[])
                AS v(site, agent, seq, boot, clock, n, digest)
            WHERE NOT EXISTS (
                SELECT 1 FROM beaconflow.batch_ranges r
                WHERE r.site_id = v.site AND r.agent_id = v.agent AND r.last_sequence >= v.seq AND r.first_sequence <= v.seq)
            ON CONFLICT DO NOTHING RETURNING site_id, agent_id, sequence
            """,
            [
                batches.map(\.siteID), batches.map(\.agentID), batches.map { Int64(bitPattern: $0.sequence) },
                batches.map { Int64(bitPattern: $0.bootID) }, batches.map { PostgresTimestamp(unixMicros: $0.agentClockMicros) },
                batches.map { Int32(clamping: $0.sightings.count) }, batches.map(\.contentDigest),
            ])
        var keys: Set<BatchKey> = []
        for row in inserted {
            keys.insert(BatchKey(site: try row.decode(0), agent: try row.decode(1), sequence: try row.decode(2)))
        }
        var fresh: Set<Int> = []
        var seen: Set<BatchKey> = []
        for (index, batch) in batches.enumerated() {
            let key = BatchKey(site: batch.siteID, agent: batch.agentID, sequence: batch.sequence)
            // The same batch twice in one group: the first is the new one.
            if keys.contains(key), seen.insert(key).inserted { fresh.insert(index) }
        }
        return fresh
    }

    private struct BatchKey: Hashable {
        var site: String
        var agent: String
        var sequence: UInt64
    }

    /// The batches not inserted whose (site, agent, sequence) is committed with another boot id, seal time, number
    /// of sightings or content: not a redelivery (that says the same) but an agent that reused a sequence. A
    /// sequence folded into a range is compared by its boot id only (the range keeps no more of each batch).
    /// Returns how each differs, by index.
    func reusedSequences(_ batches: [DecodedBatch], fresh: Set<Int>) throws(PostgresError) -> [Int: String] {
        let repeated = batches.indices.filter { !fresh.contains($0) }
        guard !repeated.isEmpty else { return [:] }
        let candidates = repeated.map { batches[$0] }
        var reused: [Int: String] = [:]
        for row in try connection.query(
            """
            WITH v AS (
                SELECT * FROM unnest($1::integer[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[],
                                     $7::integer[], $8::bigint[])
                    AS v(i, site, agent, seq, boot, clock, n, digest)
            )
            SELECT v.i, b.boot_id, b.sightings, v.boot, v.n, b.agent_clock = v.clock,
                   b.content_digest IS NULL OR b.content_digest = v.digest, false
            FROM v JOIN beaconflow.batches b ON b.site_id = v.site AND b.agent_id = v.agent AND b.sequence = v.seq
            WHERE b.boot_id <> v.boot OR b.sightings <> v.n OR b.agent_clock IS DISTINCT FROM v.clock
               OR b.content_digest <> v.digest
            UNION ALL
            SELECT v.i, r.boot_id, NULL, v.boot, v.n, NULL, true, true
            FROM v JOIN beaconflow.batch_ranges r ON r.site_id = v.site AND r.agent_id = v.agent
                AND r.last_sequence >= v.seq AND r.first_sequence <= v.seq
            WHERE r.boot_id <> v.boot
            """,
            [
                repeated.map { Int32($0) }, candidates.map(\.siteID), candidates.map(\.agentID),
                candidates.map { Int64(bitPattern: $0.sequence) }, candidates.map { Int64(bitPattern: $0.bootID) },
                candidates.map { PostgresTimestamp(unixMicros: $0.agentClockMicros) },
                candidates.map { Int32(clamping: $0.sightings.count) }, candidates.map(\.contentDigest),
            ])
        {
            let index = try row.decode(0, as: Int.self)
            guard batches.indices.contains(index) else { continue }
            if try row.decode(7, as: Bool.self) {
                reused[index] =
                    "sequence \(batches[index].sequence) is committed with boot id \(row[1] ?? "?") (folded with the batches"
                    + " around it); this batch has boot id \(row[3] ?? "?")"
                continue
            }
            let sameTime = try row.decode(5, as: Bool?.self) ?? false
            let sameContent = try row.decode(6, as: Bool.self)
            reused[index] =
                "sequence \(batches[index].sequence) is committed with boot id \(row[1] ?? "?") and \(row[2] ?? "?") sightings"
                + (sameTime ? "" : " sealed at another time") + (sameContent ? "" : " of other content")
                + "; this batch has boot id \(row[3] ?? "?") and \(row[4] ?? "?")"
        }
        return reused
    }

    /// Folds the served sites' acknowledged batches committed before `compaction_lag_minutes` into ranges
    /// (`beaconflow.fold_batches`); returns the batches folded.
    func fold(sites: Set<String>) throws(PostgresError) -> Int {
        var folded = 0
        for site in sites.sorted() {
            let rows = try connection.query(
                """
                SELECT beaconflow.fold_batches($1, now() - value::integer * interval '1 minute')
                FROM beaconflow.settings WHERE key = 'compaction_lag_minutes'
                """, [site])
            if let row = rows.first { folded += try row.decode(0) as Int }
        }
        return folded
    }

    /// Each agent's committed-through sequence and last batch time, kept only ever growing.
    func recordProgress(_ through: [AgentKey: UInt64]) throws(PostgresError) {
        for (key, sequence) in through.sorted(by: { ($0.key.site, $0.key.agent) < ($1.key.site, $1.key.agent) }) {
            try connection.query(
                """
                INSERT INTO beaconflow.agent_state (site_id, agent_id, last_batch_at, committed_through)
                VALUES ($1, $2, now(), $3::bigint)
                ON CONFLICT (site_id, agent_id) DO UPDATE SET last_batch_at = now(),
                    committed_through = greatest(agent_state.committed_through, excluded.committed_through)
                """, [key.site, key.agent, Int64(bitPattern: sequence)])
        }
    }

    /// An agent's progress as the database has it, at least `floor`: its committed-through sequence and the
    /// batches committed above it.
    func storedProgress(_ key: AgentKey, atLeast floor: UInt64) throws(PostgresError) -> (through: UInt64, above: [UInt64]) {
        let rows = try connection.query(
            "SELECT committed_through FROM beaconflow.agent_state WHERE site_id = $1 AND agent_id = $2",
            [key.site, key.agent])
        // Read like wire input: a value no sequence can have (an edited row) counts as no progress.
        let stored = try rows.first.map { (row) throws(PostgresError) in try row.decode(0, as: Int64.self) } ?? 0
        let through = max((0...Int64(BatchReader.maximumSequence)).contains(stored) ? UInt64(stored) : 0, floor)
        let above = try connection.query(
            """
            SELECT sequence FROM beaconflow.batches WHERE site_id = $1 AND agent_id = $2 AND sequence > $3
            ORDER BY sequence LIMIT 100000
            """, [key.site, key.agent, Int64(bitPattern: through)]
        ).map { (row) throws(PostgresError) in try row.decode(0, as: UInt64.self) }
        return (through, above)
    }
}
