import BeaconMessaging
import BeaconWire
import Foundation
import LibPQ

/// Commits batches to PostgreSQL exactly once. A group of batches is one transaction: their `batches` rows (a
/// (site, agent, sequence) already there is a redelivery and adds nothing), a binary COPY of the new batches'
/// sightings as packs (with the dictionary keys they lack and their per-minute rollups), their telemetry and
/// readings, the zone and fleet-health rows they change, and each agent's committed-through sequence. The
/// pipeline state that derives those rows is rolled back with the transaction when it fails. Blocking: it runs
/// on the writer thread.
public final class BatchWriter {
    public enum Outcome: Sendable, Equatable {
        case committed(rows: Int)
        case duplicate
        /// The sequence is committed with other content; says how they differ.
        case sequenceReused(String)
        /// Another instance has taken the batch's site over: nothing was written for it.
        case notServed
    }

    public struct GroupResult: Sendable {
        /// One per batch, in order.
        public var outcomes: [Outcome]
        /// Agents whose committed-through sequence this group moved, with the new value to acknowledge.
        public var acknowledgements: [AgentKey: UInt64]
        public var telemetryRows = 0
        public var sensorReadingRows = 0
        public var undecodableFrames: [UndecodableFrame] = []
        /// Readings too late to move zones (they are stored as sightings).
        public var lateReadings = 0
        /// Beacons forgotten to stay within the pipeline's maximum.
        public var evictedBeacons = 0
        /// What the group changed in zones, visits, minutes and agent states, as committed.
        public var zoneChanges: [ZoneChange] = []
        /// The beacons whose fleet health the group changed, as committed.
        public var healthChanges: [BeaconHealth] = []
    }

    private let connection: PostgresConnection
    public private(set) var pipeline: IngestPipeline
    public private(set) var tracker = AcknowledgementTracker()
    /// Agents whose progress was read from the database.
    private var loadedAgents: Set<AgentKey> = []
    /// Days whose partitions are known to exist.
    private var partitionedDays: Set<Int64> = []
    private var keys = DictionaryKeys()
    /// The leases of the sites served, once this writer has joined the instances sharing them.
    private var leases: SiteLeases?
    private var sitesLost: Set<String> = []

    /// The sites whose zones this writer moves. The ingest starts with none and claims them (`claim`): then they
    /// are the sites whose leases this writer holds.
    public private(set) var servedSites: Set<String>

    /// `servedSites` nil: every site of the pipeline's sites file, without claiming them.
    public init(connection: PostgresConnection, pipeline: IngestPipeline, servedSites: Set<String>? = nil) {
        self.connection = connection
        self.pipeline = pipeline
        keys.maximumEntries = pipeline.maximumBeacons
        self.servedSites = servedSites ?? Set(pipeline.sites.sites.map(\.id))
    }

    /// The pipeline, for the status messages the writer thread feeds it between groups.
    public func updatePipeline(_ change: (inout IngestPipeline) -> Void) { change(&pipeline) }

    public func commit(_ batch: DecodedBatch) throws(PostgresError) -> Outcome {
        try commit([batch]).outcomes[0]
    }

    public func commit(_ batches: [DecodedBatch], nowMicros: Int64 = wallClockMicros()) throws(PostgresError) -> GroupResult {
        guard !batches.isEmpty else { return GroupResult(outcomes: [], acknowledgements: [:]) }
        try ensurePartitions(for: batches)
        for key in Set(batches.map { AgentKey(site: $0.siteID, agent: $0.agentID) }) where !loadedAgents.contains(key) {
            try loadProgress(key)
        }
        try connection.execute("BEGIN")
        let lost: Set<String>
        do {
            lost = try hold(Set(batches.map(\.siteID)))
            if !lost.isEmpty {
                try connection.execute("ROLLBACK")
                lose(lost)
            }
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
        guard lost.isEmpty else {
            // Taken over since the group was queued: its batches are the new owner's, through the agents' resends.
            let kept = batches.indices.filter { !lost.contains(batches[$0].siteID) }
            var result = try commit(kept.map { batches[$0] }, nowMicros: nowMicros)
            var outcomes = Array(repeating: Outcome.notServed, count: batches.count)
            for (index, outcome) in zip(kept, result.outcomes) { outcomes[index] = outcome }
            result.outcomes = outcomes
            return result
        }
        let savedTracker = tracker
        var committed = false
        pipeline.beginTransaction()
        do {
            let fresh = try insertRecords(batches)
            let reused = try reusedSequences(batches, fresh: fresh)
            var sightings: [SightingRow] = []
            var telemetry: [NewTelemetry] = []
            var readings: [SensorReadingRow] = []
            var deviceInfo: [DeviceInfoRow] = []
            var undecodable: [UndecodableFrame] = []
            var zoneChanges: [ZoneChange] = []
            var lateReadings = 0
            var evictedBeacons = 0
            var outcomes: [Outcome] = []
            var before: [AgentKey: UInt64] = [:]
            var after: [AgentKey: UInt64] = [:]
            /// Agents that sent a batch again: they lack the acknowledgement (a retained one can be lost with the
            /// broker), so it is published again even when it did not move.
            var redelivered: Set<AgentKey> = []
            for (index, batch) in batches.enumerated() {
                let key = AgentKey(site: batch.siteID, agent: batch.agentID)
                if before[key] == nil { before[key] = tracker.committedThrough(key) }
                after[key] = tracker.committed(
                    key, sequence: batch.sequence, firstUnacknowledged: batch.firstUnacknowledgedSequence)
                let inOrder = tracker.waiting(key) == 0
                if fresh.contains(index) {
                    let output = pipeline.apply(batch, nowMicros: nowMicros, inOrder: inOrder)
                    sightings += output.sightings
                    telemetry += output.telemetry
                    readings += output.sensorReadings
                    deviceInfo += output.deviceInfo
                    undecodable += output.undecodableFrames
                    zoneChanges += output.zoneChanges
                    lateReadings += output.lateReadings
                    evictedBeacons += output.evictedBeacons
                    outcomes.append(.committed(rows: output.sightings.count))
                } else {
                    outcomes.append(reused[index].map(Outcome.sequenceReused) ?? .duplicate)
                    redelivered.insert(key)
                }
                if inOrder { pipeline.releaseHeldProgress(key, arrivalMicros: nowMicros) }
            }
            if !sightings.isEmpty {
                let packs = try keyed(SightingPack.pack(sightings))
                try connection.copy(packs, into: StoredPack.copyTable)
                try upsert(MinuteRollup.of(packs))
            }
            let stored = try insertTelemetry(telemetry)
            pipeline.telemetryStored(stored)
            let storedReadings = try insertSensorReadings(readings)
            pipeline.sensorReadingsStored(storedReadings)
            try upsertDeviceInfo(deviceInfo)
            let healthChanges = pipeline.health.takeChanged()
            try upsertHealth(healthChanges)
            try write(zoneChanges)
            try saveZoneCheckpoints()
            try recordProgress(after)
            try connection.execute("COMMIT")
            committed = true
            pipeline.commitTransaction()
            keys.commit()
            var acknowledgements: [AgentKey: UInt64] = [:]
            for (key, through) in after where through != before[key] || (redelivered.contains(key) && through > 0) {
                acknowledgements[key] = through
            }
            // Batches beyond a gap may have been committed by another ingest instance: look before waiting.
            for key in after.keys where tracker.waiting(key) > 0 {
                let old = tracker.committedThrough(key)
                try loadProgress(key)
                if tracker.committedThrough(key) != old { acknowledgements[key] = tracker.committedThrough(key) }
                if tracker.waiting(key) == 0 { pipeline.releaseHeldProgress(key, arrivalMicros: nowMicros) }
            }
            return GroupResult(
                outcomes: outcomes, acknowledgements: acknowledgements, telemetryRows: stored.count,
                sensorReadingRows: storedReadings.count, undecodableFrames: undecodable, lateReadings: lateReadings,
                evictedBeacons: evictedBeacons, zoneChanges: zoneChanges, healthChanges: healthChanges)
        } catch {
            // After the commit only the look for other instances' progress can fail: what committed stays.
            if !committed {
                _ = try? connection.execute("ROLLBACK")
                pipeline.rollbackTransaction()
                keys.rollback()
                tracker = savedTracker
            }
            throw error
        }
    }

    /// Zone decisions that only time moved (agents gone idle), in a transaction of their own; with `finish`, every
    /// reading waiting and every minute begun (the end of the data), the visits ending at their beacons' last
    /// readings.
    /// Sites found taken over meanwhile are forgotten (`takeSitesLost`). Returns the changes committed.
    @discardableResult
    public func advanceZones(nowMicros: Int64 = wallClockMicros(), finish: Bool = false) throws(PostgresError) -> [ZoneChange] {
        pipeline.beginTransaction()
        let changes = finish ? pipeline.finishZones(sites: servedSites, closingVisits: true) : pipeline.advanceZones(sites: servedSites, nowMicros: nowMicros)
        guard !changes.isEmpty else {
            pipeline.commitTransaction()
            return []
        }
        do {
            try connection.execute("BEGIN")
            // Written only while this transaction holds the sites' leases; with one taken over, nothing is written
            // and the next tick decides again for the sites still served.
            let lost = try hold(Set(changes.map(\.site)))
            guard lost.isEmpty else {
                try connection.execute("ROLLBACK")
                pipeline.rollbackTransaction()
                lose(lost)
                return []
            }
            try write(changes)
            // Past the end of the data the state has counted a part of the last minute: nothing to resume from.
            if !finish { try saveZoneCheckpoints() }
            try connection.execute("COMMIT")
            pipeline.commitTransaction()
            return changes
        } catch {
            _ = try? connection.execute("ROLLBACK")
            pipeline.rollbackTransaction()
            throw error
        }
    }

    // MARK: - Sites shared with other instances

    /// Counts this session among the live instances sharing the sites, as `instance`, with leases of `leaseDuration`
    /// (`SiteLeases`). From then on every transaction holds the leases of the sites it writes for.
    public func joinInstances(instance: String, leaseDuration: Duration) throws(PostgresError) {
        let leases = SiteLeases(connection: connection, instance: instance, duration: leaseDuration)
        try leases.join()
        self.leases = leases
    }

    /// Leaves the live instances (a graceful stop, after handing the sites over).
    public func leaveInstances() throws(PostgresError) { try leases?.leave() }

    /// What this session sees of the other live instances: how many sites each holds, which of `sites` nobody
    /// holds, and which no live instance holds.
    public func observeInstances(sites: [String]) throws(PostgresError) -> (others: [Int], free: Set<String>, unserved: Set<String>) {
        guard let observation = try leases?.observe(sites: sites) else { return ([], [], []) }
        return (observation.others, observation.free, observation.unserved)
    }

    /// How often the leases are renewed (nil without them).
    public var leaseRenewalInterval: Duration? { leases?.renewalInterval }

    /// Renews the leases of the sites served; returns the sites taken over by another instance meanwhile, which
    /// this writer no longer serves.
    public func renewLeases() throws(PostgresError) -> Set<String> {
        guard let leases else { return [] }
        let lost = try leases.renew()
        forget(sites: lost)
        return lost
    }

    /// A site this writer now serves.
    public struct SiteClaim: Sendable {
        /// Another instance had claimed it last.
        public var takenOver: Bool
        public var resumption: ZoneResumption
    }

    /// Claims a site if nobody holds its lease, calls `leased` (the site is this writer's from here: its batches may
    /// be taken in, to be written after the claim), and resumes the site's zone state from the database. Nil when
    /// another instance holds it.
    public func claim(site: String, leased: () -> Void = {}) throws(PostgresError) -> SiteClaim? {
        guard let leases, let takenOver = try leases.claim(site: site) else { return nil }
        leased()
        do {
            let resumption = try resumeZones(sites: [site])
            servedSites.insert(site)
            return SiteClaim(takenOver: takenOver, resumption: resumption)
        } catch {
            _ = try? leases.release(site: site)
            throw error
        }
    }

    /// Hands a site over: forgets its zone state and its agents' progress, and ends its lease. The next owner
    /// resumes from the site's last checkpoint (saved with the last minutes counted), reading back the sightings
    /// stored after it. Batches of the site still queued are then the next owner's, through the agents' resends.
    public func release(site: String) throws(PostgresError) {
        defer { forget(sites: [site]) }
        try leases?.release(site: site)
    }

    /// Stops serving sites whose lease is gone: their zone state and agents' progress are dropped.
    private func forget(sites: Set<String>) {
        guard !sites.isEmpty else { return }
        servedSites.subtract(sites)
        pipeline.resetZones(sites: sites)
        loadedAgents = loadedAgents.filter { !sites.contains($0.site) }
        for site in sites { leases?.forget(site: site) }
    }

    /// In a transaction just begun: holds the leases of `sites` until it ends; returns those no longer this
    /// writer's (nothing may be written for them).
    private func hold(_ sites: Set<String>) throws(PostgresError) -> Set<String> {
        try leases?.hold(sites) ?? []
    }

    /// Stops serving sites found taken over; `takeSitesLost` reports them.
    private func lose(_ sites: Set<String>) {
        forget(sites: sites)
        sitesLost.formUnion(sites)
    }

    /// The sites found taken over by another instance since the last call: this writer no longer serves them.
    public func takeSitesLost() -> Set<String> {
        defer { sitesLost = [] }
        return sitesLost
    }

    /// How a restart picked up each site's zone state.
    public struct ZoneResumption: Sendable {
        /// Sites restored from their checkpoint, with the stored sightings read back after it.
        public var restoredSites = 0
        public var replayedSightings = 0
        /// The most stored readings a site's zone tracker held at once while reading them back.
        public var peakPendingReadings = 0
        /// Sites whose checkpoint could not be used, with why (they resume from their open visits).
        public var unusableCheckpoints: [(site: String, error: CheckpointError)] = []
    }

    /// Restores the sites' zone trackers from the checkpoint each site's last transaction with counted minutes
    /// saved and reads back the site's sightings stored after it, so that the zone tables come out as if one
    /// process had served the site throughout. A site that has not counted a minute yet reads back all its
    /// sightings. A site without a usable checkpoint that has counted minutes (a database written before
    /// checkpoints, an edited sites file) resumes from its open visits and last counted minute. What the trackers
    /// held before is dropped: the database is the reference.
    public func resumeZones(sites: Set<String>, nowMicros: Int64 = wallClockMicros()) throws(PostgresError) -> ZoneResumption {
        var resumption = ZoneResumption()
        pipeline.resetZones(sites: sites)
        var restored: Set<String> = []
        for row in try connection.query(
            """
            SELECT site_id, CASE WHEN watermark BETWEEN '2000-01-01Z' AND '2200-01-01Z'
                                 THEN (extract(epoch FROM watermark) * 1000000)::bigint END, state
            FROM beaconflow.zone_checkpoints WHERE site_id = ANY($1::text[])
            """,
            [sites.sorted()])
        {
            let site = try row.decode(0, as: String.self)
            guard sites.contains(site) else { continue }
            // Read like wire input: a watermark out of range is damage, as is any value of the state.
            let watermark: Int64
            do throws(CheckpointError) {
                guard let time = try? row.decode(1, as: Int64.self), let state = try? row.decode(2, as: PostgresBytes.self) else {
                    throw CheckpointError(code: .damaged, offset: 0)
                }
                try pipeline.restoreZones(site: site, checkpoint: state.bytes)
                watermark = time
            } catch {
                resumption.unusableCheckpoints.append((site, error))
                continue
            }
            restored.insert(site)
            resumption.restoredSites += 1
            let replay = try replaySightings(site: site, after: watermark, arrivalMicros: nowMicros)
            resumption.replayedSightings += replay.sightings
            resumption.peakPendingReadings = max(resumption.peakPendingReadings, replay.peakPending)
        }
        var others = sites.subtracting(restored)
        var lastMinutes: [String: Int64] = [:]
        if !others.isEmpty {
            for row in try connection.query(
                """
                SELECT site_id, (extract(epoch FROM date_trunc('minute', max(bucket))) * 1000000)::bigint
                FROM beaconflow.zone_occupancy_minute
                WHERE site_id = ANY($1::text[]) AND bucket BETWEEN '2000-01-01Z' AND '2200-01-01Z' GROUP BY 1
                """, [others.sorted()])
            {
                lastMinutes[try row.decode(0)] = try row.decode(1, as: Int64.self)
            }
        }
        for site in others.sorted() where lastMinutes[site] == nil {
            let replay = try replaySightings(site: site, after: nil, arrivalMicros: nowMicros)
            resumption.replayedSightings += replay.sightings
            resumption.peakPendingReadings = max(resumption.peakPendingReadings, replay.peakPending)
            others.remove(site)
        }
        if !others.isEmpty {
            var openVisits: [String: [SiteZoneTracker.OpenVisit]] = [:]
            for row in try connection.query(
                """
                SELECT v.site_id, v.zone_id, v.beacon_id, (extract(epoch FROM v.enter_ts) * 1000000)::bigint,
                       (extract(epoch FROM CASE WHEN s.last_seen BETWEEN v.enter_ts AND '2200-01-01Z' THEN s.last_seen
                                                ELSE v.enter_ts END) * 1000000)::bigint
                FROM beaconflow.visits_raw v LEFT JOIN beaconflow.beacon_state s USING (beacon_id)
                -- Read like wire input: rows with times no sighting can have (edited, damaged) are left out.
                WHERE v.exit_ts IS NULL AND v.site_id = ANY($1::text[]) AND v.enter_ts BETWEEN '2000-01-01Z' AND '2200-01-01Z'
                """, [others.sorted()])
            {
                openVisits[try row.decode(0), default: []].append(
                    SiteZoneTracker.OpenVisit(
                        beaconID: try row.decode(2), zone: try row.decode(1), enterMicros: try row.decode(3),
                        lastSeenMicros: try row.decode(4)))
            }
            pipeline.resumeZones(openVisits: openVisits, lastCountedMinutes: lastMinutes, sites: others, nowMicros: nowMicros)
        }
        return resumption
    }

    /// How much event time one query of `replaySightings` reads at most, and how many sightings it aims at: a
    /// window that returned more makes the next one shorter (down to a second), so a busy stretch is read in
    /// pieces.
    static let replayWindowMicros: Int64 = 60_000_000
    static let replayWindowSightings = 50_000

    /// Gives a site's zone tracker the sightings stored after `watermark` (nil: all of them), a window of event
    /// time at a time; their agents count as live from `arrivalMicros`. After each window the tracker applies what
    /// every agent has passed, and the zone rows that moves are written (upserts: the previous owner may have
    /// written them already), so the readings held in memory stay within about a window whatever the backlog.
    /// Returns the number of sightings and the most readings the tracker held at once.
    private func replaySightings(
        site: String, after watermark: Int64?, arrivalMicros: Int64
    ) throws(PostgresError) -> (sightings: Int, peakPending: Int) {
        // Packs start at most a minute before their sightings; the bounds are refined by the windows' exact filter.
        let bounds = try connection.query(
            """
            SELECT (extract(epoch FROM min(ts)) * 1000000)::bigint, (extract(epoch FROM max(ts)) * 1000000)::bigint + 60000000
            FROM (SELECT ts FROM beaconflow.sightings_raw WHERE site_id = $1 AND ts > $2
                  UNION ALL
                  SELECT p.ts FROM beaconflow.sighting_packs p
                  JOIN beaconflow.sighting_sources s ON s.source_key = p.source_key
                  WHERE s.site_id = $1 AND p.ts > $2 - interval '1 minute') t
            """, [site, watermark.map(PostgresTimestamp.init(unixMicros:)) ?? .distantPast])
        guard let bound = bounds.first, let oldest = try bound.decode(0, as: Int64?.self),
            let newest = try bound.decode(1, as: Int64?.self)
        else { return (0, 0) }
        var from = max(watermark ?? .min, oldest - 1)
        var replayed = 0
        var peakPending = 0
        var window = Self.replayWindowMicros
        var newestByAgent: [String: Int64] = [:]
        while from < newest {
            let through = from + min(window, newest - from)
            var readings: [String: [SiteZoneTracker.BeaconReading]] = [:]
            var count = 0
            for row in try connection.query(
                """
                SELECT agent_id, beacon_id, (extract(epoch FROM ts) * 1000000)::bigint, rssi
                FROM beaconflow.sightings_between($2, $3) WHERE site_id = $1 AND ts > $2
                """, [site, PostgresTimestamp(unixMicros: from), PostgresTimestamp(unixMicros: through + 1)])
            {
                let agent = try row.decode(0, as: String.self)
                let beacon = try row.decode(1, as: String.self)
                let time = try row.decode(2, as: Int64.self)
                let rssi = try row.decode(3, as: Double.self)
                readings[agent, default: []].append(.init(beaconID: beacon, timeMicros: time, rssi: rssi))
                newestByAgent[agent] = max(newestByAgent[agent] ?? .min, time)
                count += 1
            }
            replayed += count
            for (agent, list) in readings { pipeline.replayZoneReadings(list, agent: AgentKey(site: site, agent: agent)) }
            peakPending = max(peakPending, pipeline.zoneTrackers[site]?.pendingReadings ?? 0)
            for (agent, time) in newestByAgent {
                pipeline.agentProgressed(AgentKey(site: site, agent: agent), newestMicros: time, arrivalMicros: arrivalMicros)
            }
            try write(pipeline.advanceZones(site: site, nowMicros: arrivalMicros))
            from = through
            window = max(1_000_000, min(Self.replayWindowMicros, window * Int64(Self.replayWindowSightings) / Int64(max(count, 1))))
        }
        return (replayed, peakPending)
    }

    /// Saves the checkpoints of the served sites whose trackers counted minutes, in the current transaction.
    private func saveZoneCheckpoints() throws(PostgresError) {
        for checkpoint in pipeline.takeZoneCheckpoints(sites: servedSites) {
            try connection.query(
                """
                INSERT INTO beaconflow.zone_checkpoints (site_id, watermark, state) VALUES ($1, $2, $3)
                ON CONFLICT (site_id) DO UPDATE SET watermark = excluded.watermark, state = excluded.state, saved_at = now()
                """,
                [checkpoint.site, PostgresTimestamp(unixMicros: checkpoint.watermarkMicros), PostgresBytes(checkpoint.state)])
        }
    }

    /// How much of a rejected batch is kept (its size is kept too).
    static let rejectedPayloadBytes = 65_536

    /// Creates the raw tables' daily partitions from today (UTC) through `partitions_ahead_days` ahead and, with
    /// `dropExpired`, drops those older than `retention_days` (both in `beaconflow.settings`) and deletes the
    /// rejected batches as old. Returns the number of partitions made and dropped.
    @discardableResult
    public func maintainPartitions(dropExpired: Bool) throws(PostgresError) -> (made: Int, dropped: Int) {
        if dropExpired {
            try connection.query("SELECT beaconflow.prune_rejections()")
        }
        let rows = try connection.query(
            """
            SELECT beaconflow.ensure_partitions((now() AT TIME ZONE 'UTC')::date,
                       (SELECT value::integer FROM beaconflow.settings WHERE key = 'partitions_ahead_days') + 1),
                   CASE WHEN $1 THEN beaconflow.drop_partitions_before((now() AT TIME ZONE 'UTC')::date
                       - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')) ELSE 0 END
            """, [dropExpired])
        partitionedDays.removeAll()  // a dropped day is made again if a late batch needs it
        guard let row = rows.first else { return (0, 0) }
        return (try row.decode(0), try row.decode(1))
    }

    /// How many times a group looks up dictionary keys that another instance was inserting at the same time.
    static let keyLookupAttempts = 5

    /// The packs with their dictionary keys, inserting the sources and beacons the dictionaries lack. Another
    /// instance inserting the same entry makes this statement wait and then not see it: it looks again.
    private func keyed(_ packs: [SightingPack]) throws(PostgresError) -> [StoredPack] {
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
                    keys.learned(beacon: try row.decode(1), key: try row.decode(0))
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

    /// Advisory lock class of the per-beacon telemetry locks ('bflt').
    static let telemetryLockClass = 1_650_879_604
    /// Receptions of one transmission lie within this of each other (agents' capture times, clock offsets under the
    /// applied threshold): rows this close to a UTC midnight are checked against the other day's partition too.
    static let transmissionSpread = "interval '5 minutes'"
    static let nearMidnight = """
        (n.ts - (date_trunc('day', n.ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') < \(transmissionSpread)
         OR (date_trunc('day', n.ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') + interval '1 day' - n.ts <= \(transmissionSpread))
        """

    /// Writes the telemetry rows the database does not hold yet and returns them. A transmission is unique within
    /// its day's partition (migration 4); near a midnight, where two receptions may fall on either side, the
    /// writer takes a per-beacon lock and looks at the neighbouring day itself, so concurrent instances agree too.
    private func insertTelemetry(_ telemetry: [NewTelemetry]) throws(PostgresError) -> [NewTelemetry] {
        guard !telemetry.isEmpty else { return [] }
        try connection.execute(
            "CREATE TEMP TABLE IF NOT EXISTS telemetry_incoming (LIKE beaconflow.telemetry_raw) ON COMMIT DELETE ROWS")
        try connection.copy(telemetry.map(\.row), into: TelemetryRow.copyTable)
        // Locks in a statement of their own: the insert's snapshot then sees what the lock waited for.
        try connection.query(
            """
            SELECT count(pg_advisory_xact_lock(\(Self.telemetryLockClass), hashtext(beacon_id)))
            FROM (SELECT DISTINCT n.beacon_id FROM pg_temp.telemetry_incoming n WHERE \(Self.nearMidnight) ORDER BY 1) s
            """)
        let inserted = try connection.query(
            """
            INSERT INTO beaconflow.telemetry_raw (ts, beacon_id, battery_mv, temperature_c, adv_count, uptime_s, site_id, agent_id)
            SELECT n.ts, n.beacon_id, n.battery_mv, n.temperature_c, n.adv_count, n.uptime_s, n.site_id, n.agent_id
            FROM pg_temp.telemetry_incoming n
            WHERE NOT (\(Self.nearMidnight) AND EXISTS (
                SELECT FROM beaconflow.telemetry_raw t
                WHERE t.beacon_id = n.beacon_id AND t.adv_count = n.adv_count AND t.uptime_s = n.uptime_s
                  AND t.ts BETWEEN n.ts - \(Self.transmissionSpread) AND n.ts + \(Self.transmissionSpread)))
            ON CONFLICT DO NOTHING
            RETURNING beacon_id, adv_count, uptime_s
            """)
        var keys = Set<TransmissionKey>()
        for row in inserted {
            keys.insert(
                TransmissionKey(beaconID: try row.decode(0), advertisingCount: try row.decode(1), uptimeSeconds: try row.decode(2)))
        }
        // The first offer of each stored transmission (a group may offer one twice).
        return telemetry.filter { keys.remove($0.transmission) != nil }
    }

    /// Advisory lock class of the per-beacon sensor-reading locks ('bfsr').
    static let sensorLockClass = 1_650_881_394

    /// Writes the readings of transmissions the database does not hold yet and returns them: a transmission is
    /// stored unless a row of the same beacon and frame hash lies within its tolerance. Per-beacon locks (in beacon
    /// order, after the telemetry's) make instances committing the same transmission at once agree.
    private func insertSensorReadings(_ rows: [SensorReadingRow]) throws(PostgresError) -> [SensorReadingRow] {
        guard !rows.isEmpty else { return [] }
        try connection.execute(
            """
            CREATE TEMP TABLE IF NOT EXISTS sensor_incoming (LIKE beaconflow.sensor_readings_raw, tolerance_us bigint)
            ON COMMIT DELETE ROWS
            """)
        try connection.copy(rows, into: SensorReadingRow.copyTable)
        try connection.query(
            """
            SELECT count(pg_advisory_xact_lock(\(Self.sensorLockClass), hashtext(beacon_id)))
            FROM (SELECT DISTINCT beacon_id FROM pg_temp.sensor_incoming ORDER BY 1) s
            """)
        let inserted = try connection.query(
            """
            WITH fresh AS (
                SELECT DISTINCT n.beacon_id, n.frame_hash, n.ts FROM pg_temp.sensor_incoming n
                WHERE NOT EXISTS (
                    SELECT FROM beaconflow.sensor_readings_raw r
                    WHERE r.beacon_id = n.beacon_id AND r.frame_hash = n.frame_hash
                      AND r.ts BETWEEN n.ts - n.tolerance_us * interval '1 microsecond'
                                   AND n.ts + n.tolerance_us * interval '1 microsecond')
            ), stored AS (
                INSERT INTO beaconflow.sensor_readings_raw (ts, site_id, agent_id, beacon_id, quantity, value, unit, frame_hash)
                SELECT n.ts, n.site_id, n.agent_id, n.beacon_id, n.quantity, n.value, n.unit, n.frame_hash
                FROM pg_temp.sensor_incoming n JOIN fresh USING (beacon_id, frame_hash, ts)
                RETURNING 1
            )
            SELECT beacon_id, frame_hash, (extract(epoch FROM ts) * 1000000)::bigint FROM fresh
            """)
        struct Key: Hashable {
            var beacon: String
            var hash: Int64
            var time: Int64
        }
        var keys = Set<Key>()
        for row in inserted {
            keys.insert(Key(beacon: try row.decode(0), hash: try row.decode(1), time: try row.decode(2)))
        }
        return rows.filter { keys.contains(Key(beacon: $0.beaconID, hash: $0.frameHash, time: $0.timeMicros)) }
    }

    /// The latest value of each beacon's Device Information strings.
    private func upsertDeviceInfo(_ rows: [DeviceInfoRow]) throws(PostgresError) {
        guard !rows.isEmpty else { return }
        // One row per (beacon, name) in a statement: the latest.
        var latest: [String: DeviceInfoRow] = [:]
        for row in rows {
            let key = row.beaconID + "\u{0}" + row.name
            if let known = latest[key], known.timeMicros > row.timeMicros { continue }
            latest[key] = row
        }
        let unique = latest.keys.sorted().compactMap { latest[$0] }
        try connection.query(
            """
            INSERT INTO beaconflow.device_info_state AS d (beacon_id, name, value, site_id, agent_id, read_at)
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
            ON CONFLICT (beacon_id, name) DO UPDATE SET
                value = excluded.value, site_id = excluded.site_id, agent_id = excluded.agent_id, read_at = excluded.read_at
            WHERE excluded.read_at >= d.read_at
            """,
            [
                unique.map(\.beaconID), unique.map(\.name), unique.map(\.value), unique.map(\.siteID),
                unique.map(\.agentID), unique.map { PostgresTimestamp(unixMicros: $0.timeMicros) },
            ])
    }

    /// Writes what the views need of the sites file, replacing what an earlier start wrote: the beacon registry
    /// (labels, and whether keys are configured; never the keys) into `beacon_registry`, each site's timing into
    /// `site_registry` and its zones into `zone_registry`; and forgets the zone states of agents the file no longer
    /// places.
    public func writeRegistry(_ sites: SitesConfiguration) throws(PostgresError) {
        let beacons = sites.beacons
        let placed = sites.sites.flatMap { site in site.agents.filter { $0.zone != nil }.map { (site: site.id, agent: $0.id) } }
        try connection.execute("BEGIN")
        do {
            try connection.query(
                "DELETE FROM beaconflow.beacon_registry WHERE NOT (beacon_id = ANY ($1::text[]))",
                [beacons.map(\.id)])
            try connection.query(
                """
                INSERT INTO beaconflow.beacon_registry (beacon_id, label, identity_key, bthome_bindkey)
                SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::boolean[])
                ON CONFLICT (beacon_id) DO UPDATE SET
                    label = excluded.label, identity_key = excluded.identity_key, bthome_bindkey = excluded.bthome_bindkey
                """,
                [
                    beacons.map(\.id), beacons.map(\.label), beacons.map { $0.identityKey != nil },
                    beacons.map { $0.bthomeBindkey != nil },
                ])
            try connection.query(
                "DELETE FROM beaconflow.site_registry WHERE NOT (site_id = ANY ($1::text[]))", [sites.sites.map(\.id)])
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
            let zones = sites.sites.flatMap { site in site.zones.enumerated().map { (site: site.id, position: $0, zone: $1) } }
            try connection.query("DELETE FROM beaconflow.zone_registry")
            try connection.query(
                """
                INSERT INTO beaconflow.zone_registry (site_id, zone_id, position, capacity, rect)
                SELECT s, z, p, c, CASE WHEN x0 IS NULL THEN NULL ELSE ARRAY[x0, y0, x1, y1] END
                FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::double precision[], $6::double precision[],
                            $7::double precision[], $8::double precision[]) AS r(s, z, p, c, x0, y0, x1, y1)
                """,
                [
                    zones.map(\.site), zones.map(\.zone.id), zones.map { Int32($0.position) }, zones.map { $0.zone.capacity.map(Int32.init(clamping:)) },
                    zones.map { $0.zone.rect?[0] }, zones.map { $0.zone.rect?[1] }, zones.map { $0.zone.rect?[2] }, zones.map { $0.zone.rect?[3] },
                ])
            try connection.query(
                """
                DELETE FROM beaconflow.agent_zone_state z WHERE NOT EXISTS (
                    SELECT 1 FROM unnest($1::text[], $2::text[]) AS p(site_id, agent_id)
                    WHERE p.site_id = z.site_id AND p.agent_id = z.agent_id)
                """,
                [placed.map(\.site), placed.map(\.agent)])
            try connection.execute("COMMIT")
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Visits opened, then visits closed (a close may end a visit opened in the same list), then minute counts.
    private func write(_ changes: [ZoneChange]) throws(PostgresError) {
        guard !changes.isEmpty else { return }
        var opened: [(site: String, zone: String, beacon: String, enter: Int64)] = []
        var closed: [(site: String, beacon: String, enter: Int64, exit: Int64)] = []
        var occupancy: [(site: String, zone: String, minute: Int64, occupants: Int, seconds: Double)] = []
        var agentStates: [(site: String, agent: String, state: AgentZoneState, since: Int64)] = []
        for change in changes {
            switch change {
            case .visitOpened(let site, let zone, let beacon, let enter): opened.append((site, zone, beacon, enter))
            case .visitClosed(let site, let beacon, let enter, let exit): closed.append((site, beacon, enter, exit))
            case .occupancy(let site, let zone, let minute, let occupants, let seconds):
                occupancy.append((site, zone, minute, occupants, seconds))
            case .agentState(let site, let agent, let state, let since): agentStates.append((site, agent, state, since))
            }
        }
        if !agentStates.isEmpty {
            // The last state of each agent (one row may change once per statement); a state reported again (after
            // a restart) keeps the time it began.
            var last: [String: Int] = [:]
            for (index, change) in agentStates.enumerated() { last[change.site + "/" + change.agent] = index }
            agentStates = last.values.sorted().map { agentStates[$0] }
            try connection.query(
                """
                INSERT INTO beaconflow.agent_zone_state AS z (site_id, agent_id, zone_state, since)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
                ON CONFLICT (site_id, agent_id) DO UPDATE SET zone_state = excluded.zone_state,
                    since = CASE WHEN z.zone_state = excluded.zone_state THEN z.since ELSE excluded.since END
                """,
                [
                    agentStates.map(\.site), agentStates.map(\.agent), agentStates.map(\.state.rawValue),
                    agentStates.map { PostgresTimestamp(unixMicros: $0.since) },
                ])
        }
        if !opened.isEmpty {
            try connection.query(
                """
                INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
                ON CONFLICT DO NOTHING
                """,
                [
                    opened.map(\.site), opened.map(\.zone), opened.map(\.beacon),
                    opened.map { PostgresTimestamp(unixMicros: $0.enter) },
                ])
        }
        if !closed.isEmpty {
            try connection.query(
                """
                UPDATE beaconflow.visits_raw v SET exit_ts = c.exit_ts
                FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS c(site_id, beacon_id, enter_ts, exit_ts)
                WHERE v.site_id = c.site_id AND v.beacon_id = c.beacon_id AND v.enter_ts = c.enter_ts
                """,
                [
                    closed.map(\.site), closed.map(\.beacon), closed.map { PostgresTimestamp(unixMicros: $0.enter) },
                    closed.map { PostgresTimestamp(unixMicros: $0.exit) },
                ])
        }
        var hours: [(site: String, zone: String, time: Int64)] = opened.map { ($0.site, $0.zone, $0.enter) }
        hours += occupancy.map { ($0.site, $0.zone, $0.minute) }
        if !occupancy.isEmpty {
            try connection.query(
                """
                INSERT INTO beaconflow.zone_occupancy_minute (site_id, zone_id, bucket, occupants, occupant_seconds)
                SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::double precision[])
                ON CONFLICT (site_id, zone_id, bucket)
                DO UPDATE SET occupants = excluded.occupants, occupant_seconds = excluded.occupant_seconds
                """,
                [
                    occupancy.map(\.site), occupancy.map(\.zone), occupancy.map { PostgresTimestamp(unixMicros: $0.minute) },
                    occupancy.map { Int32(clamping: $0.occupants) }, occupancy.map(\.seconds),
                ])
        }
        // The stored hourly rollup of every hour whose minutes or visits changed.
        if !hours.isEmpty {
            try connection.query(
                "SELECT beaconflow.refresh_zone_hours($1, $2, $3)",
                [hours.map(\.site), hours.map(\.zone), hours.map { PostgresTimestamp(unixMicros: $0.time) }])
        }
    }

    /// Keeps a refused batch whole, with why. A refused batch that names its agent and sequence (bad timestamps,
    /// rows PostgreSQL would not take) counts as done for the acknowledgement, in the same transaction: it is
    /// kept here, and an agent resending it forever would gain nothing. Returns the acknowledgement it moves.
    public func recordRejection(
        topic: String, payload: [UInt8], reason: String, message: String, header: BatchHeader? = nil
    ) throws(PostgresError) -> [AgentKey: UInt64] {
        var key: AgentKey?
        if let header {
            key = AgentKey(site: header.siteID, agent: header.agentID)
            if let key, !loadedAgents.contains(key) { try loadProgress(key) }
        }
        let savedTracker = tracker
        try connection.execute("BEGIN")
        do {
            try connection.query(
                """
                INSERT INTO beaconflow.rejected_batches (topic, reason, detail, payload, payload_bytes, site_id, agent_id, sequence)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                """,
                [
                    String(topic.prefix(1000)), reason, message, PostgresBytes(Array(payload.prefix(Self.rejectedPayloadBytes))),
                    Int32(clamping: payload.count), header?.siteID, header?.agentID, header.map { Int64(bitPattern: $0.sequence) },
                ])
            var acknowledgements: [AgentKey: UInt64] = [:]
            if let header, let key {
                let before = tracker.committedThrough(key)
                let through = tracker.committed(
                    key, sequence: header.sequence, firstUnacknowledged: header.firstUnacknowledgedSequence)
                if through != before { try recordProgress([key: through]) }
                // Also when it did not move: a refused batch sent again means the agent lacks the acknowledgement.
                if through > 0 { acknowledgements[key] = through }
            }
            try connection.execute("COMMIT")
            return acknowledgements
        } catch {
            _ = try? connection.execute("ROLLBACK")
            tracker = savedTracker
            throw error
        }
    }

    /// An agent's status message: online or not, its rates and spool, its clock offset, its last error.
    public func recordStatus(_ agent: AgentKey, _ status: AgentStatus, clockOffsetMillis: Double?) throws(PostgresError) {
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

    /// Inserts the `batches` rows; returns the indices of the batches that were not there yet.
    private func insertRecords(_ batches: [DecodedBatch]) throws(PostgresError) -> Set<Int> {
        let inserted = try connection.query(
            """
            INSERT INTO beaconflow.batches (site_id, agent_id, sequence, boot_id, agent_clock, sightings, content_digest)
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::integer[], $7::bigint[])
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
    /// of sightings or content: not a redelivery (that says the same) but an agent that reused a sequence.
    /// Returns how each differs, by index.
    private func reusedSequences(_ batches: [DecodedBatch], fresh: Set<Int>) throws(PostgresError) -> [Int: String] {
        let repeated = batches.indices.filter { !fresh.contains($0) }
        guard !repeated.isEmpty else { return [:] }
        let candidates = repeated.map { batches[$0] }
        var reused: [Int: String] = [:]
        for row in try connection.query(
            """
            SELECT v.i, b.boot_id, b.sightings, v.boot, v.n, b.agent_clock = v.clock,
                   b.content_digest IS NULL OR b.content_digest = v.digest
            FROM unnest($1::integer[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[], $7::integer[],
                        $8::bigint[])
                AS v(i, site, agent, seq, boot, clock, n, digest)
            JOIN beaconflow.batches b ON b.site_id = v.site AND b.agent_id = v.agent AND b.sequence = v.seq
            WHERE b.boot_id <> v.boot OR b.sightings <> v.n OR b.agent_clock IS DISTINCT FROM v.clock
               OR b.content_digest <> v.digest
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
            let sameTime = try row.decode(5, as: Bool?.self) ?? false
            let sameContent = try row.decode(6, as: Bool.self)
            reused[index] =
                "sequence \(batches[index].sequence) is committed with boot id \(row[1] ?? "?") and \(row[2] ?? "?") sightings"
                + (sameTime ? "" : " sealed at another time") + (sameContent ? "" : " of other content")
                + "; this batch has boot id \(row[3] ?? "?") and \(row[4] ?? "?")"
        }
        return reused
    }

    /// Each agent's committed-through sequence and last batch time, kept only ever growing.
    private func recordProgress(_ through: [AgentKey: UInt64]) throws(PostgresError) {
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

    /// Restores an agent's progress from the database: its committed-through and the batches committed above it.
    private func loadProgress(_ key: AgentKey) throws(PostgresError) {
        let rows = try connection.query(
            "SELECT committed_through FROM beaconflow.agent_state WHERE site_id = $1 AND agent_id = $2",
            [key.site, key.agent])
        // Read like wire input: a value no sequence can have (an edited row) counts as no progress.
        let stored = try rows.first.map { (row) throws(PostgresError) in try row.decode(0, as: Int64.self) } ?? 0
        let through = (0...Int64(BatchReader.maximumSequence)).contains(stored) ? UInt64(stored) : 0
        let floor = max(through, tracker.committedThrough(key))
        let above = try connection.query(
            """
            SELECT sequence FROM beaconflow.batches WHERE site_id = $1 AND agent_id = $2 AND sequence > $3
            ORDER BY sequence LIMIT 100000
            """, [key.site, key.agent, Int64(bitPattern: floor)]
        ).map { (row) throws(PostgresError) in try row.decode(0, as: UInt64.self) }
        tracker.restore(key, through: floor, above: above)
        loadedAgents.insert(key)
    }

    /// Rows per statement when many rows go at once (a burst of new beacons): bounds the arrays built for
    /// `unnest`, which would otherwise hold every row several times over.
    static let rowsPerStatement = 5_000

    private func upsertHealth(_ all: [BeaconHealth]) throws(PostgresError) {
        var start = 0
        while start < all.count {
            let end = min(start + Self.rowsPerStatement, all.count)
            try upsertHealthRows(all[start..<end])
            start = end
        }
    }

    private func upsertHealthRows(_ rows: ArraySlice<BeaconHealth>) throws(PostgresError) {
        try connection.query(
            """
            INSERT INTO beaconflow.beacon_state AS s (beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day,
                est_days_left, temperature_c, reboots_7d, status, battery_pct, battery_trend_pct_per_day, kind, first_seen,
                address, address_random, advertising_event, url)
            SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::real[], $6::real[],
                $7::real[], $8::integer[], $9::text[], $10::real[], $11::real[], $12::text[], $13::timestamptz[],
                $14::macaddr[], $15::boolean[], $16::smallint[], $17::text[])
            ON CONFLICT (beacon_id) DO UPDATE SET
                site_id = excluded.site_id,
                last_seen = greatest(s.last_seen, excluded.last_seen),
                battery_mv = coalesce(excluded.battery_mv, s.battery_mv),
                battery_trend_mv_per_day = coalesce(excluded.battery_trend_mv_per_day, s.battery_trend_mv_per_day),
                est_days_left = coalesce(excluded.est_days_left, s.est_days_left),
                temperature_c = coalesce(excluded.temperature_c, s.temperature_c),
                reboots_7d = excluded.reboots_7d,
                status = excluded.status,
                battery_pct = coalesce(excluded.battery_pct, s.battery_pct),
                battery_trend_pct_per_day = coalesce(excluded.battery_trend_pct_per_day, s.battery_trend_pct_per_day),
                kind = coalesce(excluded.kind, s.kind),
                first_seen = least(s.first_seen, excluded.first_seen),
                -- How it was heard: from the newest sighting (another instance may have written a newer one).
                address = CASE WHEN \(Self.newerHearing) THEN excluded.address ELSE s.address END,
                address_random = CASE WHEN \(Self.newerHearing) THEN excluded.address_random ELSE s.address_random END,
                advertising_event = CASE WHEN \(Self.newerHearing) THEN excluded.advertising_event ELSE s.advertising_event END,
                url = coalesce(excluded.url, s.url)
            """,
            [
                rows.map(\.beaconID), rows.map(\.siteID), rows.map { PostgresTimestamp(unixMicros: $0.lastSeenMicros) },
                rows.map(\.batteryMillivolts), rows.map(\.batteryTrendMillivoltsPerDay), rows.map(\.estimatedDaysLeft),
                rows.map(\.temperatureCelsius), rows.map(\.rebootsIn7Days), rows.map(\.status.rawValue),
                rows.map(\.batteryPercent), rows.map(\.batteryTrendPercentPerDay), rows.map(\.kind),
                rows.map { PostgresTimestamp(unixMicros: $0.firstSeenMicros) },
                rows.map { $0.heardAs?.address.map { DeviceAddress(value: $0, kind: .public).description } },
                rows.map { $0.heardAs?.addressIsRandom }, rows.map { $0.heardAs?.advertisingEvent.map { Int16($0) } },
                rows.map(\.url),
            ])
    }

    /// The row being upserted was heard, and later than the stored one (or the stored one never was).
    private static let newerHearing =
        "excluded.address_random IS NOT NULL AND (s.address_random IS NULL OR excluded.last_seen >= s.last_seen)"


    private func ensurePartitions(for batches: [DecodedBatch]) throws(PostgresError) {
        var days: Set<Int64> = []
        for batch in batches {
            let offset = pipeline.clocks.offset(AgentKey(site: batch.siteID, agent: batch.agentID))
            for sighting in batch.sightings {
                days.insert((sighting.timeMicros - offset).floorDivided(by: 86_400_000_000))
            }
            for read in batch.characteristicReads {
                days.insert((read.timeMicros - offset).floorDivided(by: 86_400_000_000))
            }
        }
        for day in days.subtracting(partitionedDays).sorted() {
            try connection.query("SELECT beaconflow.ensure_partitions($1, 1)", [PostgresDate(unixDay: day)])
            partitionedDays.insert(day)
        }
    }
}

/// The wall clock, Unix microseconds.
public func wallClockMicros() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1000
}

extension Int64 {
    /// Division rounding toward negative infinity (days before 1970 stay on the right day).
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor < 0) ? quotient - 1 : quotient
    }
}
