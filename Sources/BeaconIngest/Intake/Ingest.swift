import BeaconMessaging
import BeaconWire
import Dispatch
import Foundation
import LibPQ
import Logging
import Metrics
import Mosquitto
import Synchronization
import WorkQueue

/// The ingest: an MQTT subscription on libmosquitto's thread, a bounded queue, and one writer thread that owns
/// the PostgreSQL connection. The writer validates, commits (several queued batches per transaction), then
/// publishes each agent's retained acknowledgement. When PostgreSQL goes away it reconnects with backoff and
/// stops taking from the queue, so intake pauses and acknowledgements stop; nothing is dropped that the agents
/// do not still hold.
public final class Ingest: Sendable {
    /// A message taken in, with its topic parsed once (nil: not an agent's topic).
    private enum Item: Sendable {
        case batch(topic: String, agentTopics: AgentTopics?, payload: [UInt8], receivedAtMicros: Int64)
        case status(topic: String, agentTopics: AgentTopics?, payload: [UInt8], receivedAtMicros: Int64, retained: Bool)

        /// Whose turn it is (`FairTurns`): the agent of the topic, or the topic itself when it names none.
        var turnKey: String {
            switch self {
            case .batch(let topic, let agentTopics, _, _), .status(let topic, let agentTopics, _, _, _):
                agentTopics.map { $0.site + "/" + $0.agent } ?? topic
            }
        }
    }

    public let configuration: IngestConfiguration
    let logger: Logger
    let stopRequested = Mutex(false)
    let reloads: Mutex<SitesReloads>
    /// Live presence, when configured: used on the writer thread only; `presenceEvents` is what the brokers' threads
    /// tell it.
    let presence: Mutex<PresencePublisher?>
    let presenceEvents = Mutex(PresenceEvents())
    /// Metrics, statistics and logs of what happens.
    let instruments: IngestInstruments
    /// The database's clock, by which every time is judged.
    public let clock = IngestClock()
    private let noticesSent = Mutex(IntervalLimiter(interval: .seconds(10)))

    public init(configuration: IngestConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        instruments = IngestInstruments(logger: logger)
        reloads = Mutex(SitesReloads(latest: configuration.sites))
        presence = Mutex(configuration.presence.map { PresencePublisher(sites: configuration.sites, configuration: $0) })
    }

    public var statistics: IngestStatistics { instruments.statistics }

    /// For `/healthz`: healthy while both the broker and PostgreSQL are connected, every site of the sites file is
    /// served by some instance (or has not been unserved for `unservedSiteBound`), this instance's clock agrees
    /// with the database's within `clockTolerance` and no agent's batches are held back by a condition of the
    /// database; the counts as JSON.
    public var health: (healthy: Bool, json: String) {
        let s = statistics
        let healthy = s.mqttConnected && s.databaseConnected && s.sitesUnserved == 0 && !s.clockSkewed && s.agentsHeld == 0
        let json = "{" + ([("healthy", "\(healthy)")] + s.fields).map { "\"\($0.name)\": \($0.value)" }.joined(separator: ", ") + "}"
        return (healthy, json)
    }

    /// Asks `run()` to stop: intake stops, what is queued is committed and acknowledged, then it returns.
    public func requestStop() { stopRequested.withLock { $0 = true } }

    /// Reads the sites file again (SIGHUP), on a thread of its own, for the writer to apply between two
    /// transactions; a file that does not load is refused and the running sites kept. Applied once PostgreSQL is
    /// connected.
    public func requestReload() { startReadingSitesFile() }

    private var shouldStop: Bool { stopRequested.withLock { $0 } }

    /// Runs until `requestStop()`. Throws only when the MQTT client cannot be set up.
    public func run() async throws {
        let queue = BlockingQueue<Item>(capacity: configuration.queueCapacity)
        var mqtt = configuration.mqtt
        // Subscriptions and queued batches survive an ingest restart for this long (a client id of its own only).
        if configuration.persistentSession { mqtt.sessionExpirySeconds = max(mqtt.sessionExpirySeconds, 86_400) }
        if configuration.presence != nil {
            mqtt.will = MQTTClient.Will(topic: PresenceTopics.availability, payload: PresenceTopics.offline, retain: true)
        }
        let client = try BrokerConnections(mqtt, logger: logger)
        // A site's topics are subscribed once it is claimed. A session the broker kept may hold any of them.
        for site in configuration.sites.sites {
            for filter in SiteCoordinator.subscriptionFilters(site: site.id, group: configuration.sharedSubscriptionGroup) {
                try client.unsubscribe(topic: filter)
            }
        }

        let forwarders = client.clients.map { single in
            Task { [self] in
                let broker = single.currentBroker
                for await event in single.events {
                    if presenceEvent(event, client: single) { continue }
                    switch event {
                    case .message(let topic, let payload, let retained):
                        let kind: AgentTopicKind = topic.hasSuffix("/status") ? .status : .batch
                        if retained, kind == .batch {
                            instruments.record(.retainedBatchIgnored(topic: topic))
                            continue
                        }
                        let now = clock.nowMicros()
                        let agentTopics = AgentTopics(parsing: topic, kind: kind)
                        let item: Item =
                            kind == .status
                            ? .status(topic: topic, agentTopics: agentTopics, payload: payload, receivedAtMicros: now, retained: retained)
                            : .batch(topic: topic, agentTopics: agentTopics, payload: payload, receivedAtMicros: now)
                        if !queue.push(item, dropWhenFull: true), kind == .batch { instruments.record(.batchDeferred) }
                    case .connected:
                        instruments.record(.brokersConnected(client.connectedCount))
                        logger.info("Connected to the broker", metadata: ["broker": "\(broker)"])
                    case .disconnected(let reason):
                        instruments.record(.brokersConnected(client.connectedCount))
                        logger.warning("Broker connection lost", metadata: ["broker": "\(broker)", "reason": "\(reason)"])
                    case .published:
                        break
                    }
                }
            }
        }
        client.start()
        logger.info(
            "Ingest started", metadata: ["instance": "\(configuration.mqtt.clientID)", "sites": "\(configuration.sites.sites.count)"])

        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread { [self] in
                runWriter(queue: queue, client: client)
                continuation.resume()
            }
        }
        if configuration.presence != nil {
            // The others (if any) say online again when they see it.
            try? client.publish(topic: PresenceTopics.availability, payload: PresenceTopics.offline, qos: 1, retain: true)
        }
        client.stop()
        for forwarder in forwarders {
            forwarder.cancel()
            _ = await forwarder.result
        }
        logger.info("Ingest stopped", metadata: Logger.Metadata(uniqueKeysWithValues: statistics.fields.map { ($0.name, .string($0.value)) }))
    }

    // MARK: - The writer thread

    /// Executes what `WriterMachine` says, one action at a time, and tells it what came of each. A lost connection
    /// is handled here only: the writer's pipeline waits for the next connection, and the machine ends the turn.
    private func runWriter(queue: BlockingQueue<Item>, client: BrokerConnections) {
        /// The sites file in force: the configuration's, then what each reload applied.
        var sites = configuration.sites
        var intake = BatchIntake(sites: sites)
        intake.futureToleranceMicros = configuration.intakeFutureToleranceMicros
        var clocks = ClockComparison(toleranceMicros: configuration.clockTolerance.microseconds)
        var coordinator = SiteCoordinator(configuration: configuration, client: client, instruments: instruments)
        var statuses = StatusIntake(sites: sites, instruments: instruments)
        var pace = CommitPace(maximum: configuration.maximumGroupSightings, target: configuration.leaseDuration / 8)
        var budgets = AgentBudgets(sightings: SightingBudget(perSecond: configuration.agentSightingsPerSecond))
        var schedule = WriterSchedule(
            rebalanceInterval: configuration.rebalanceInterval,
            partitionMaintenanceInterval: configuration.partitionMaintenanceInterval,
            compactionInterval: configuration.compactionInterval, now: .now)
        schedule.clockCheckInterval = configuration.clockCheckInterval
        var machine = WriterMachine<Item>(
            schedule: schedule,
            backoff: .init(minimum: configuration.reconnectDelayMinimum, maximum: configuration.reconnectDelayMaximum),
            maximumGroup: configuration.maximumGroup, finishZonesAtStop: configuration.finishZonesAtStop)
        /// The connected writer; while there is none, the state derived from the batches waits in `detached`.
        var writer: BatchWriter?
        var detached: IngestPipeline? = newPipeline()
        func connectionLost(_ error: PostgresError) {
            instruments.record(.databaseLost(error))
            detached = writer?.pipeline
            writer = nil
            machine.didLoseConnection()
        }
        while true {
            if shouldStop { machine.stop() }
            if let loaded = reloads.withLock({ reloads in defer { reloads.pending = nil }; return reloads.pending }) {
                machine.sitesRead(loaded)
            }
            let action = machine.next(now: .now)
            switch action {
            case .closeQueue:
                queue.close()
                continue
            case .wait(let until):
                sleep(until: until)
                continue
            case .connect(let migrate):
                switch connect(pipeline: detached ?? newPipeline(), sites: sites, migrate: migrate) {
                case .success(let connected):
                    writer = connected
                    detached = nil
                    machine.didConnect()
                case .failure(let error):
                    let delay = machine.didFailToConnect(now: .now)
                    if !machine.stopRequested {
                        logger.warning("PostgreSQL unavailable; intake paused", metadata: ["error": "\(error)", "retry_in": "\(delay)"])
                    } else {
                        logger.error(
                            "Stopping without PostgreSQL; unacknowledged batches stay with the agents",
                            metadata: ["queued": "\(machine.backlog.count)", "error": "\(error)"])
                    }
                }
                continue
            case .exitWithoutDatabase:
                return
            default:
                break
            }
            guard let active = writer else { continue }
            /// Runs one step; a lost connection ends the turn, other errors are the statement's.
            func step<Value>(_ failure: Logger.Message, _ work: () throws(PostgresError) -> Value) -> Value? {
                switch Result(catching: work) {
                case .success(let value):
                    return value
                case .failure(let error) where error.isConnectionFailure:
                    connectionLost(error)
                case .failure(let error):
                    instruments.record(.statementError(error, failure))
                }
                return nil
            }
            switch action {
            case .beginTurn:
                presencePublish(active, client: client)
                if let failure = active.leaseFailure {
                    connectionLost(failure)
                    continue
                }
                coordinator.sitesLost(active.leasesTurned(), active)
            case .applySites(let loaded):
                let change = SitesChange(from: sites, to: loaded)
                // In memory first (the pipeline goes with the writer if the connection drops), then the database.
                sites = loaded
                intake.sites = loaded
                statuses = StatusIntake(sites: loaded, instruments: instruments)
                coordinator.sites = loaded
                presence.withLock { $0?.reconfigure(sites: loaded) }
                active.reconfigure(sites: loaded, restarting: change.restarted)
                _ = step("The sites file could not be applied") { () throws(PostgresError) in
                    try coordinator.handOver(active.servedSites.intersection(change.handedOver), active)
                    try active.writeRegistry(loaded)
                    try active.publish(sitesDigest: loaded.digest)
                }
            case .compareClocks:
                if let reading = step("The database's clock could not be read", { () throws(PostgresError) in try active.readServerClock() }) {
                    let change = clocks.measured(
                        localBeforeMicros: reading.localBeforeMicros, databaseMicros: reading.databaseMicros,
                        localAfterMicros: reading.localAfterMicros)
                    clock.set(offsetMicros: clocks.offsetMicros)
                    instruments.record(.clockCompared(offsetMicros: clocks.offsetMicros, skewed: clocks.skewed, change))
                }
            case .rebalance:
                if let more = step("Sites could not be shared out", { () throws(PostgresError) in try coordinator.rebalance(active) }) {
                    machine.didRebalance(moreToClaim: more)
                }
            case .take(let timeout):
                // What is waiting, one agent's message at a time: a batch taken with a flood from one credential
                // waits for one of the flood's batches, not for all of them.
                let taken = FairTurns.interleave(queue.popAll(timeout: timeout)) { $0.turnKey }
                instruments.record(.queueDepth(taken.count))
                machine.didTake(taken)
            case .dropExpiredPartitions:
                if let dropped = step("Expired partitions could not be dropped", { () throws(PostgresError) in try active.dropExpiredPartitions() }) {
                    logger.info("Expired partitions dropped", metadata: ["dropped": "\(dropped)"])
                }
            case .makePartitionsAhead:
                if let made = step("Partitions ahead could not be made", { () throws(PostgresError) in try active.makePartitionsAhead() }) {
                    logger.info("Partitions ahead made", metadata: ["made": "\(made)"])
                }
            case .compactPacks:
                if let written = step("Compaction failed", { () throws(PostgresError) in try active.compactPacks() }), written > 0 {
                    logger.info("Closed minutes compacted", metadata: ["packs_written": "\(written)"])
                }
            case .foldBatches:
                if let folded = step("Folding acknowledged batches failed", { () throws(PostgresError) in try active.foldBatches() }), folded > 0 {
                    logger.info("Acknowledged batches folded", metadata: ["batches": "\(folded)"])
                }
            case .advanceZones:
                // Agents gone idle stop holding their site's decisions back even when no batch arrives.
                if let changes = step("Zone changes could not be written", { () throws(PostgresError) in try active.advanceZones() }) {
                    zonesChanged(changes)
                }
                coordinator.sitesLost(active.takeSitesLost(), active)
            case .process(let group):
                switch process(
                    group, writer: active, intake: intake, statuses: statuses, client: client, coordinator: &coordinator,
                    pace: &pace, budgets: &budgets)
                {
                case .success: machine.didProcess(group.count)
                case .failure(let error): connectionLost(error)
                }
            case .finishZones:
                // A site lost on the way (a lease that lapsed while the machine stalled) is claimed again if free,
                // so that its last minutes are counted.
                _ = step("Sites could not be shared out") { () throws(PostgresError) in try coordinator.rebalance(active) }
                if writer == nil { continue }
                if case .failure(let error) = Result(catching: { () throws(PostgresError) in try active.advanceZones(finish: true) }) {
                    logger.error("Could not count the last minutes", metadata: ["error": "\(error)"])
                }
            case .handOverAndExit:
                // The sites go to the other instances at once, rather than when this session ends.
                _ = step("Sites could not be handed over") { () throws(PostgresError) in
                    try coordinator.handOver(active.servedSites, active)
                }
                active.leaveInstances()
                return
            case .closeQueue, .wait, .connect, .exitWithoutDatabase:
                break
            }
        }
    }

    private func newPipeline() -> IngestPipeline {
        var pipeline = IngestPipeline(sites: configuration.sites, health: configuration.health)
        pipeline.maximumBeacons = configuration.maximumBeacons
        return pipeline
    }

    /// Connects, migrating the schema first on the first connection only (a reconnect finds it in place), and
    /// joins the instances that share the sites. The writer serves no site until `rebalance` claims some: a site's
    /// zone state lives in one process, so each site has one owner, the session holding its advisory lock. The
    /// locks go with the session, when the process or its connection does, and the other instances take the
    /// sites over.
    private func connect(pipeline: IngestPipeline, sites: SitesConfiguration, migrate: Bool) -> Result<BatchWriter, PostgresError> {
        Result { () throws(PostgresError) in
            let connection = try PostgresConnection(configuration.database)
            if migrate { try Migrator.migrate(connection, logger: logger) }
            let writer = BatchWriter(connection: connection, pipeline: pipeline, servedSites: [], clock: clock)
            try writer.joinInstances(
                instance: configuration.mqtt.clientID, leaseDuration: configuration.leaseDuration, sitesDigest: sites.digest,
                conninfo: configuration.database, writerStallBound: configuration.writerStallBound)
            do throws(PostgresError) {
                try writer.makePartitionsAhead()
            } catch where !error.isConnectionFailure {
                // Batches that need a day without a partition wait for it; the others go in.
                instruments.record(.statementError(error, "Partitions ahead could not be made"))
            }
            try writer.writeRegistry(sites)
            instruments.record(.databaseConnected)
            return writer
        }
    }

    /// Validates and commits one group of messages; fails only when the connection is lost (the group is then
    /// retried whole on the next connection: what committed is recognised as duplicate).
    private func process(
        _ items: [Item], writer: BatchWriter, intake: BatchIntake, statuses: StatusIntake, client: BrokerConnections,
        coordinator: inout SiteCoordinator, pace: inout CommitPace, budgets: inout AgentBudgets
    ) -> Result<Void, PostgresError> {
        Result { () throws(PostgresError) in
            var accepted: [AcceptedBatch] = []
            var newestReceived: Int64 = 0
            for item in items {
                switch item {
                case .status(_, let agentTopics, _, _, _) where isServedElsewhere(agentTopics, writer: writer, sites: intake.sites):
                    break
                case .batch(_, let agentTopics, _, _) where isServedElsewhere(agentTopics, writer: writer, sites: intake.sites):
                    // Claimed by another instance since it was queued: the agent sends it again, to the owner.
                    instruments.record(.batchesNotServed(1))
                case .status(let topic, let agentTopics, let payload, let receivedAt, let retained):
                    do throws(PostgresError) {
                        try statuses.record(
                            topic: topic, agentTopics: agentTopics, payload: payload, receivedAtMicros: receivedAt,
                            retained: retained, writer: writer)
                    } catch where !error.isConnectionFailure {
                        instruments.record(.statementError(error, "An agent status could not be recorded"))
                    }
                case .batch(let topic, let agentTopics, let payload, let receivedAt):
                    newestReceived = max(newestReceived, receivedAt)
                    switch intake.check(topic: topic, parsed: agentTopics, payload: payload, nowMicros: clock.nowMicros()) {
                    case .success(let batch):
                        let agent = AgentKey(site: batch.siteID, agent: batch.agentID)
                        let now = ContinuousClock.now
                        // Past its agent's budget of new days or sightings: it waits with the agent, which sends it
                        // again. Days first: a day admitted stays free for the batch's resend.
                        guard budgets.days.admit(agent, days: writer.daysWithoutKnownPartition(batch), now: now),
                            budgets.sightings.admit(agent, sightings: batch.sightings.count, now: now)
                        else {
                            instruments.record(.batchDeferred)
                            continue
                        }
                        accepted.append(AcceptedBatch(batch: batch, topic: topic, agentTopics: agentTopics, payload: payload))
                    case .failure(let failure):
                        do throws(PostgresError) {
                            try reject(
                                topic: topic, agentTopics: agentTopics, payload: payload, failure.rejection,
                                header: failure.header, sequence: failure.sequence, writer: writer, client: client)
                        } catch where !error.isConnectionFailure {
                            instruments.record(.statementError(error, "A rejected batch could not be recorded"))
                        }
                    }
                }
            }
            for range in Self.commitGroups(
                sightings: accepted.map(\.batch.sightings.count), beacons: accepted.map(\.batch.beaconEntries),
                maximumBatches: configuration.maximumGroup, maximumSightings: pace.sightingsLimit,
                maximumBeacons: configuration.maximumGroupBeacons)
            {
                let started = ContinuousClock.now
                do throws(PostgresError) {
                    try commit(Array(accepted[range]), writer: writer, client: client)
                } catch {
                    pace.transactionLost()
                    throw error
                }
                pace.committed(sightings: accepted[range].reduce(0) { $0 + $1.batch.sightings.count }, took: .now - started)
                coordinator.sitesLost(writer.takeSitesLost(), writer)
            }
            if newestReceived > 0 {
                instruments.record(.lag(seconds: Double(clock.nowMicros() - newestReceived) / 1e6))
            }
        }
    }

    /// Consecutive groups of batches, one transaction each: at most `maximumBatches` batches, `maximumSightings`
    /// sightings and `maximumBeacons` beacon entries (a batch with more goes alone).
    static func commitGroups(
        sightings: [Int], beacons: [Int], maximumBatches: Int, maximumSightings: Int, maximumBeacons: Int
    ) -> [Range<Int>] {
        var groups: [Range<Int>] = []
        var start = 0
        while start < sightings.count {
            var end = start + 1
            var total = sightings[start]
            var entries = beacons[start]
            while end < min(start + maximumBatches, sightings.count), total + sightings[end] <= maximumSightings,
                entries + beacons[end] <= maximumBeacons
            {
                total += sightings[end]
                entries += beacons[end]
                end += 1
            }
            groups.append(start..<end)
            start = end
        }
        return groups
    }

    /// Whether the topic is of a site of the sites file that this instance does not serve (now): its owner
    /// records it. A topic of no known site is this instance's to refuse.
    private func isServedElsewhere(_ agentTopics: AgentTopics?, writer: BatchWriter, sites: SitesConfiguration) -> Bool {
        guard let site = agentTopics?.site else { return false }
        return !writer.servedSites.contains(site) && sites.sites.contains { $0.id == site }
    }

    private struct AcceptedBatch {
        var batch: DecodedBatch
        var topic: String
        var agentTopics: AgentTopics?
        var payload: [UInt8]
    }

    private func commit(_ group: [AcceptedBatch], writer: BatchWriter, client: BrokerConnections) throws(PostgresError) {
        let started = DispatchTime.now().uptimeNanoseconds
        let result: BatchWriter.GroupResult
        do {
            result = try writer.commit(group.map(\.batch))
        } catch where !error.isConnectionFailure && group.count > 1 {
            // One batch the database refuses must not hold back the others: commit them one by one.
            for batch in group { try commit([batch], writer: writer, client: client) }
            return
        } catch where !error.isConnectionFailure && !error.isAboutTheData {
            // A condition of the database, not of the batch: it waits, unacknowledged, and commits once it clears.
            let header = group[0].batch.header
            instruments.record(.batchHeld(topic: group[0].topic, agent: AgentKey(site: header.siteID, agent: header.agentID), error))
            return
        } catch where !error.isConnectionFailure {
            do throws(PostgresError) {
                try reject(
                    topic: group[0].topic, agentTopics: group[0].agentTopics, payload: group[0].payload,
                    Rejection(.refusedByDatabase, error.description), header: group[0].batch.header, writer: writer,
                    client: client)
            } catch where !error.isConnectionFailure {
                instruments.record(.statementError(error, "A rejected batch could not be recorded"))
            }
            return
        }
        var counts = IngestEvent.CommittedGroup(
            agents: Set(group.map { AgentKey(site: $0.batch.siteID, agent: $0.batch.agentID) }), telemetry: result.telemetryRows,
            sensorReadings: result.sensorReadingRows, lateReadings: result.lateReadings,
            evictedBeacons: result.evictedBeacons, newlyCloned: result.newlyCloned, undecodableFrames: result.undecodableFrames,
            nanoseconds: Int64(DispatchTime.now().uptimeNanoseconds - started))
        for (outcome, accepted) in zip(result.outcomes, group) {
            switch outcome {
            case .committed(let sightings):
                counts.committed += 1
                counts.sightings += sightings
            case .duplicate:
                counts.duplicates += 1
            case .notServed:
                // Taken over since it was queued: the agent sends it again, to the new owner.
                counts.notServed += 1
            case .sequenceReused(let difference):
                // Not a redelivery: kept with the reason, so that it is seen (the committed batch stays).
                do throws(PostgresError) {
                    try reject(
                        topic: accepted.topic, agentTopics: accepted.agentTopics, payload: accepted.payload,
                        Rejection(.sequenceReused, difference), header: accepted.batch.header, writer: writer, client: client)
                } catch where !error.isConnectionFailure {
                    instruments.record(.statementError(error, "A rejected batch could not be recorded"))
                }
            }
        }
        instruments.record(.groupCommitted(counts))
        publish(result.acknowledgements, client: client)
        zonesChanged(result.zoneChanges, health: result.healthChanges)
    }

    /// Publishes each agent's retained "committed through N" (only after the commit that made it true).
    private func publish(_ acknowledgements: [AgentKey: UInt64], client: BrokerConnections) {
        for (agent, through) in acknowledgements {
            do {
                try client.publish(
                    topic: AgentTopics(site: agent.site, agent: agent.agent).ack,
                    payload: Acknowledgement(committedThrough: through).payload, qos: 1, retain: true)
            } catch {
                // The next commit for this agent acknowledges again; until then the agent waits or resends.
                logger.warning("Acknowledgement not published", metadata: ["agent": "\(agent.agent)", "error": "\(error)"])
            }
        }
    }

    /// Records a refused batch, acknowledges it when its header allows, and tells the agent; `sequence` is the
    /// batch's when its header was readable but does not allow acknowledging.
    private func reject(
        topic: String, agentTopics: AgentTopics?, payload: [UInt8], _ rejection: Rejection, header: BatchHeader?,
        sequence: UInt64? = nil, writer: BatchWriter, client: BrokerConnections
    ) throws(PostgresError) {
        let acknowledgements = try writer.recordRejection(
            topic: topic, payload: payload, reason: rejection.reason.rawValue, message: rejection.message, header: header)
        instruments.record(.batchRejected(topic: topic, rejection))
        publish(acknowledgements, client: client)
        if let topics = agentTopics {
            notify(topics, rejection, sequence: header?.sequence ?? sequence, acknowledged: !acknowledgements.isEmpty, client: client)
        }
    }

    /// Tells the agent why its batch was refused, at most once per agent and reason per 10 s
    /// (an agent resends what is not acknowledged, and one notice says as much as a hundred).
    private func notify(
        _ topics: AgentTopics, _ rejection: Rejection, sequence: UInt64?, acknowledged: Bool, client: BrokerConnections
    ) {
        let due = noticesSent.withLock { sent in
            sent.isDue(topics.site + "/" + topics.agent + " " + rejection.reason.rawValue, now: ContinuousClock.now)
        }
        guard due else { return }
        let notice = RejectionNotice(sequence: sequence, rejection: rejection, acknowledged: acknowledged)
        do {
            try client.publish(topic: topics.rejection, payload: notice.payload, qos: 1)
        } catch {
            logger.warning("Rejection notice not published", metadata: ["agent": "\(topics.agent)", "error": "\(error)"])
        }
    }

    private func sleep(until deadline: ContinuousClock.Instant) {
        // In short steps, so that a stop request is seen.
        while ContinuousClock.now < deadline, !shouldStop { Thread.sleep(forTimeInterval: 0.05) }
    }
}

