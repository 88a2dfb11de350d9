import BeaconMessaging
import BeaconWire
import Foundation
import LibPQ

/// The writer's PostgreSQL session: commits batches exactly once. A group of batches is one transaction: their
/// `batches` rows (a (site, agent, sequence) already there is a redelivery and adds nothing), a binary COPY of the
/// new batches' sightings as packs (with the dictionary keys they lack and their per-minute rollups), their
/// telemetry and readings, the zone and fleet-health rows they change, and each agent's committed-through sequence.
/// It keeps no state derived from the batches: every call is handed the writer's `WriterState`, whose changes are
/// rolled back with a transaction that fails. What it keeps belongs to the session: the leases it holds and the
/// days known to have partitions. Blocking: it runs on the writer thread.
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
        /// The sensor readings the group stored (each transmission once), for live presence.
        public var sensorReadings: [SensorReadingRow] = []
        /// Identities the group found advertised from two addresses at once.
        public var newlyCloned: [ClonedBeacon] = []
        /// Address frames waiting for their identity after the group, and those it stored under their address
        /// after all (`AddressWait`).
        public var framesWaiting = 0
        public var framesStoredUnderAddress = 0
        /// Address beacons the group merged into the beacon their address turned out to be (`AddressMerge`).
        public var addressBeaconsMerged = 0
    }

    let connection: PostgresConnection
    /// The time by which arrivals and zones are judged when a call gives none (the database's clock).
    let clock: IngestClock
    private let ledger: BatchLedger
    private let sightingStore: SightingStore
    private let transmissions: TransmissionStore
    private let beaconStates: BeaconStateStore
    let zoneStore: ZoneStore
    private let waitingFrames: WaitingFrameStore
    private let registry: RegistryStore
    private var partitions: PartitionMaintenance
    private let compaction: PackCompaction
    /// The leases of the sites served, once this session has joined the instances sharing them.
    var leases: SiteLeases?
    /// Whether the last registry written deleted what its sites file no longer has.
    public private(set) var registryPruned = false

    public init(connection: PostgresConnection, clock: IngestClock = IngestClock()) {
        self.connection = connection
        self.clock = clock
        ledger = BatchLedger(connection: connection)
        sightingStore = SightingStore(connection: connection)
        transmissions = TransmissionStore(connection: connection)
        beaconStates = BeaconStateStore(connection: connection)
        zoneStore = ZoneStore(connection: connection)
        waitingFrames = WaitingFrameStore(connection: connection)
        registry = RegistryStore(connection: connection)
        partitions = PartitionMaintenance(connection: connection)
        compaction = PackCompaction(connection: connection)
    }

    public func commit(_ batch: DecodedBatch, state: inout WriterState) throws(PostgresError) -> Outcome {
        try commit([batch], state: &state).outcomes[0]
    }

    public func commit(_ batches: [DecodedBatch], state: inout WriterState, nowMicros: Int64? = nil) throws(PostgresError) -> GroupResult {
        try commit(timed: batches.map(state.timed), state: &state, nowMicros: nowMicros)
    }

    /// Commits a group, the days of its event times made first.
    public func commit(timed group: [TimedBatch], state: inout WriterState, nowMicros: Int64? = nil) throws(PostgresError) -> GroupResult {
        guard !group.isEmpty else { return GroupResult(outcomes: [], acknowledgements: [:]) }
        let nowMicros = nowMicros ?? clock.nowMicros()
        let batches = group.map(\.batch)
        try partitions.ensure(days: group.reduce(into: Set<Int64>()) { $0.formUnion($1.days) })
        let agents = Set(batches.map { AgentKey(site: $0.siteID, agent: $0.agentID) })
        for key in agents where !state.loadedAgents.contains(key) {
            try loadProgress(key, state: &state)
        }
        let written = try connection.transaction(with: &state) { (state) throws(PostgresError) -> TransactionEnd<GroupWrite> in
            // Written only while this transaction holds the sites' leases.
            let lost = try hold(Set(batches.map(\.siteID)))
            guard lost.isEmpty else { return .rollback(.sitesLost(lost)) }
            return .commit(.written(try write(group, into: &state, nowMicros: nowMicros)))
        }
        switch written {
        case .sitesLost(let lost):
            lose(lost, state: &state)
            // Taken over since the group was queued: its batches are the new owner's, through the agents' resends.
            let kept = batches.indices.filter { !lost.contains(batches[$0].siteID) }
            var result = try commit(timed: kept.map { group[$0] }, state: &state, nowMicros: nowMicros)
            var outcomes = Array(repeating: Outcome.notServed, count: batches.count)
            for (index, outcome) in zip(kept, result.outcomes) { outcomes[index] = outcome }
            result.outcomes = outcomes
            return result
        case .written(var result):
            // After the commit only this look for other instances' progress can fail: what committed stays.
            // Batches beyond a gap may have been committed by another ingest instance: look before waiting.
            for key in agents where state.tracker.waiting(key) > 0 {
                let old = state.tracker.committedThrough(key)
                try loadProgress(key, state: &state)
                if state.tracker.committedThrough(key) != old { result.acknowledgements[key] = state.tracker.committedThrough(key) }
                if state.tracker.waiting(key) == 0 { state.pipeline.releaseHeldProgress(key, arrivalMicros: nowMicros) }
            }
            return result
        }
    }

    private enum GroupWrite {
        case written(GroupResult)
        case sitesLost(Set<String>)
    }

    /// A group's rows, in the transaction that holds its sites' leases.
    private func write(_ group: [TimedBatch], into state: inout WriterState, nowMicros: Int64) throws(PostgresError) -> GroupResult {
        let batches = group.map(\.batch)
        let fresh = try ledger.insert(batches)
        let reused = try ledger.reusedSequences(batches, fresh: fresh)
        var output = PipelineOutput()
        var outcomes: [Outcome] = []
        var before: [AgentKey: UInt64] = [:]
        var after: [AgentKey: UInt64] = [:]
        /// Agents that sent a batch again: they lack the acknowledgement (a retained one can be lost with the
        /// broker), so it is published again even when it did not move.
        var redelivered: Set<AgentKey> = []
        for (index, batch) in batches.enumerated() {
            let key = AgentKey(site: batch.siteID, agent: batch.agentID)
            if before[key] == nil { before[key] = state.tracker.committedThrough(key) }
            after[key] = state.tracker.committed(
                key, sequence: batch.sequence, firstUnacknowledged: batch.firstUnacknowledgedSequence)
            let inOrder = state.tracker.waiting(key) == 0
            if fresh.contains(index) {
                let batchOutput = state.pipeline.apply(group[index], nowMicros: nowMicros, inOrder: inOrder)
                output.append(batchOutput)
                outcomes.append(.committed(rows: batchOutput.sightings.count))
            } else {
                outcomes.append(reused[index].map(Outcome.sequenceReused) ?? .duplicate)
                redelivered.insert(key)
            }
            if inOrder { state.pipeline.releaseHeldProgress(key, arrivalMicros: nowMicros) }
        }
        let rows = try store(output, state: &state)
        try ledger.recordProgress(after)
        var acknowledgements: [AgentKey: UInt64] = [:]
        for (key, through) in after where through != before[key] || (redelivered.contains(key) && through > 0) {
            acknowledgements[key] = through
        }
        return GroupResult(
            outcomes: outcomes, acknowledgements: acknowledgements, telemetryRows: rows.telemetry.count,
            sensorReadingRows: rows.sensorReadings.count, undecodableFrames: output.undecodableFrames,
            lateReadings: output.lateReadings, evictedBeacons: output.evictedBeacons, zoneChanges: output.zoneChanges,
            healthChanges: rows.health, sensorReadings: rows.sensorReadings, newlyCloned: state.pipeline.health.takeNewlyCloned(),
            framesWaiting: state.pipeline.framesWaiting, framesStoredUnderAddress: output.waitingFrames.storedUnderAddress,
            addressBeaconsMerged: output.addressMerges.count)
    }

    /// What `store` wrote that the callers report: the telemetry and readings new to the database, and the beacons
    /// whose fleet health changed.
    private struct StoredRows {
        var telemetry: [NewTelemetry]
        var sensorReadings: [SensorReadingRow]
        var health: [BeaconHealth]
    }

    /// The rows the pipeline derived, in the caller's transaction: sightings, the telemetry and readings the
    /// database does not hold yet, device information, fleet health, the frames waiting for their identity, zone
    /// changes and the checkpoints due.
    private func store(_ output: PipelineOutput, state: inout WriterState) throws(PostgresError) -> StoredRows {
        try sightingStore.store(output.sightings, keys: &state.keys)
        let stored = try transmissions.storeNew(output.telemetry, TransmissionStore.telemetry)
        state.pipeline.telemetryStored(stored)
        let storedReadings = try transmissions.storeNew(output.sensorReadings, TransmissionStore.sensorReadings)
        state.pipeline.sensorReadingsStored(storedReadings)
        try beaconStates.upsertDeviceInfo(output.deviceInfo)
        let healthChanges = state.pipeline.health.takeChanged()
        try beaconStates.upsertHealth(healthChanges)
        try beaconStates.saveBatteryStates(state.pipeline.health.takeToSave())
        try waitingFrames.write(output.waitingFrames)
        // Before the zone changes, which go on with the address beacons' visits under the beacons' ids.
        try waitingFrames.merge(output.addressMerges)
        try zoneStore.write(output.zoneChanges)
        try zoneStore.save(state.pipeline.takeZoneCheckpoints(sites: state.servedSites))
        return StoredRows(telemetry: stored, sensorReadings: storedReadings, health: healthChanges)
    }

    /// The frames that waited their time for an identity (`AddressWait`) when no batch came to store them, stored
    /// under their addresses in a transaction of their own. Returns how many, and how many still wait.
    public func expireWaitingFrames(state: inout WriterState, nowMicros: Int64? = nil) throws(PostgresError) -> (stored: Int, waiting: Int) {
        guard state.pipeline.framesWaiting > 0 else { return (0, 0) }
        let nowMicros = nowMicros ?? clock.nowMicros()
        var lost: Set<String> = []
        let stored = try state.withTransaction { (state) throws(PostgresError) -> TransactionEnd<Int> in
            let output = state.pipeline.expireWaiting(sites: state.servedSites, nowMicros: nowMicros)
            guard !output.waitingFrames.done.isEmpty else { return .commit(0) }
            return try connection.transaction(deciding: { () throws(PostgresError) -> TransactionEnd<Int> in
                lost = try hold(Set(output.sightings.map(\.siteID)))
                guard lost.isEmpty else { return .rollback(0) }
                // The frames' days have partitions: the batches that brought them made them.
                _ = try store(output, state: &state)
                return .commit(output.waitingFrames.storedUnderAddress)
            })
        }
        lose(lost, state: &state)
        return (stored, state.pipeline.framesWaiting)
    }

    /// Zone decisions that only time moved (agents gone idle), in a transaction of their own; with `finish`, every
    /// reading waiting and every minute begun (the end of the data), the visits ending at their beacons' last
    /// readings.
    /// Sites found taken over meanwhile are forgotten (`takeSitesLost`). Returns the changes committed.
    @discardableResult
    public func advanceZones(state: inout WriterState, nowMicros: Int64? = nil, finish: Bool = false) throws(PostgresError) -> [ZoneChange] {
        let nowMicros = nowMicros ?? clock.nowMicros()
        var lost: Set<String> = []
        let changes = try state.withTransaction { (state) throws(PostgresError) -> TransactionEnd<[ZoneChange]> in
            let changes =
                finish
                ? state.pipeline.finishZones(sites: state.servedSites, closingVisits: true)
                : state.pipeline.advanceZones(sites: state.servedSites, nowMicros: nowMicros)
            // Nothing to write: no database transaction.
            guard !changes.isEmpty else { return .commit([]) }
            return try connection.transaction(deciding: { () throws(PostgresError) -> TransactionEnd<[ZoneChange]> in
                // Written only while this transaction holds the sites' leases; with one taken over, nothing is
                // written and the next tick decides again for the sites still served.
                lost = try hold(Set(changes.map(\.site)))
                guard lost.isEmpty else { return .rollback([]) }
                try zoneStore.write(changes)
                // Past the end of the data the state has counted a part of the last minute: nothing to resume from.
                if !finish { try zoneStore.save(state.pipeline.takeZoneCheckpoints(sites: state.servedSites)) }
                return .commit(changes)
            })
        }
        lose(lost, state: &state)
        return changes
    }

    /// Restores the sites' zone trackers from the checkpoint each site's last transaction with counted minutes
    /// saved and reads back the site's sightings stored after it, so that the zone tables come out as if one
    /// process had served the site throughout. A site that has not counted a minute yet reads back all its
    /// sightings. A site without a usable checkpoint that has counted minutes (a database written before
    /// checkpoints, an edited sites file) resumes from its open visits and last counted minute. What the trackers
    /// held before is dropped: the database is the reference. The frames waiting for their identity at the sites
    /// wait again (`waiting_frames`), and the address beacons stored within their address's lifetime may still be
    /// merged into an identity heard from their address; the battery states saved for the sites' beacons are taken
    /// back (`FleetHealth.restore`). Each page read back counts as a turn of the writer, so
    /// that a long read-back keeps the leases renewed.
    public func resumeZones(sites: Set<String>, state: inout WriterState, nowMicros: Int64? = nil) throws(PostgresError) -> ZoneResumption {
        let nowMicros = nowMicros ?? clock.nowMicros()
        let keeper = leases?.keeper
        let resumer = ZoneResumer(store: zoneStore) { keeper?.writerTurned() }
        let resumption = try resumer.resume(sites: sites, into: &state.pipeline, nowMicros: nowMicros)
        state.pipeline.restoreWaitingFrames(try waitingFrames.frames(sites: sites), nowMicros: nowMicros)
        // Event time: the sites' newest as read back, else the ingest's clock.
        let watermark = state.pipeline.zoneTrackers.filter { sites.contains($0.key) }.map(\.value.watermarkMicros).max() ?? .min
        let newest = watermark == .min ? nowMicros : watermark
        state.pipeline.restoreAddressBeacons(
            try waitingFrames.addressBeacons(sites: sites, sinceMicros: newest - state.pipeline.addressLifetimeMicros))
        var resumed = resumption
        resumed.unreadableBatteryStates = state.pipeline.health.restore(try beaconStates.batteryStates(sites: sites))
        return resumed
    }

    /// Keeps a refused batch whole, with why. A refused batch that names its agent and sequence (bad timestamps,
    /// rows PostgreSQL would not take) counts as done for the acknowledgement, in the same transaction: it is
    /// kept here, and an agent resending it forever would gain nothing. Returns the acknowledgement it moves.
    public func recordRejection(
        topic: String, payload: [UInt8], reason: String, message: String, header: BatchHeader? = nil, state: inout WriterState
    ) throws(PostgresError) -> [AgentKey: UInt64] {
        let key = header.map { AgentKey(site: $0.siteID, agent: $0.agentID) }
        if let key, !state.loadedAgents.contains(key) { try loadProgress(key, state: &state) }
        return try connection.transaction(with: &state) { (state) throws(PostgresError) -> TransactionEnd<[AgentKey: UInt64]> in
            try registry.recordRejection(topic: topic, payload: payload, reason: reason, message: message, header: header)
            var acknowledgements: [AgentKey: UInt64] = [:]
            if let header, let key {
                let before = state.tracker.committedThrough(key)
                let through = state.tracker.committed(
                    key, sequence: header.sequence, firstUnacknowledged: header.firstUnacknowledgedSequence)
                if through != before { try ledger.recordProgress([key: through]) }
                // Also when it did not move: a refused batch sent again means the agent lacks the acknowledgement.
                if through > 0 { acknowledgements[key] = through }
            }
            return .commit(acknowledgements)
        }
    }

    /// An agent's status message: online or not, its rates and spool, its clock offset, its last error.
    public func recordStatus(_ agent: AgentKey, _ status: AgentStatus, clockOffsetMillis: Double?) throws(PostgresError) {
        try registry.recordStatus(agent, status, clockOffsetMillis: clockOffsetMillis)
    }

    /// Writes what the views need of the sites file (`RegistryStore.writeRegistry`), deleting what the file no
    /// longer has only while no other live instance runs with another sites file (a rolling change): until then
    /// `registryPruned` stays false, and `SiteCoordinator` writes it again once the files agree.
    public func writeRegistry(_ sites: SitesConfiguration) throws(PostgresError) {
        let shared = try leases.map { (leases) throws(PostgresError) in
            try registry.anotherSitesFileIsLive(instance: leases.instance, digest: sites.digest)
        } ?? false
        registryPruned = try registry.writeRegistry(sites, pruning: !shared)
    }

    /// Creates the raw tables' daily partitions from today through `partitions_ahead_days` ahead
    /// (`PartitionMaintenance.makeAhead`); returns the number made.
    @discardableResult
    public func makePartitionsAhead() throws(PostgresError) -> Int {
        try partitions.makeAhead()
    }

    /// Drops the raw tables' partitions past retention and the rejected batches as old
    /// (`PartitionMaintenance.dropExpired`); returns the number of partitions dropped.
    @discardableResult
    public func dropExpiredPartitions() throws(PostgresError) -> Int {
        try partitions.dropExpired()
    }

    /// Reads the database's clock between two readings of this instance's (`ServerClock`).
    func readServerClock() throws(PostgresError) -> (localBeforeMicros: Int64, databaseMicros: Int64, localAfterMicros: Int64) {
        try ServerClock(connection: connection).read()
    }

    /// Rewrites the closed minutes of the sites as one pack per source, beacon and minute (`PackCompaction`);
    /// returns the packs written.
    @discardableResult
    public func compactPacks(sites: Set<String>) throws(PostgresError) -> Int {
        try compaction.compact(sites: sites)
    }

    /// Folds the sites' acknowledged batches older than the compaction lag into ranges of consecutive sequences
    /// (`BatchLedger.fold`); returns the batches folded.
    @discardableResult
    public func foldBatches(sites: Set<String>) throws(PostgresError) -> Int {
        try ledger.fold(sites: sites)
    }

    /// Restores an agent's progress from the database: its committed-through and the batches committed above it.
    func loadProgress(_ key: AgentKey, state: inout WriterState) throws(PostgresError) {
        let stored = try ledger.storedProgress(key, atLeast: state.tracker.committedThrough(key))
        state.tracker.restore(key, through: stored.through, above: stored.above)
        state.loadedAgents.insert(key)
    }

    /// The batch's days without a partition (`PartitionMaintenance.daysWithoutPartition`): what a commit of it
    /// would make.
    public func daysWithoutPartition(_ batch: TimedBatch) throws(PostgresError) -> Set<Int64> {
        try partitions.daysWithoutPartition(batch.days)
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
