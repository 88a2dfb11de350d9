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

/// Everything `beaconflow ingest` runs with.
public struct IngestConfiguration: Sendable {
    /// The broker, and in `mqtt.failover` the other independent brokers of the deployment: the ingest holds a
    /// connection to each of them (it does not fail over), so that it hears an agent on whichever one it uses.
    public var mqtt: MQTTClient.Configuration
    /// libpq conninfo or `postgresql://` URI.
    public var database: String
    public var sites: SitesConfiguration
    /// With a name, the batch subscriptions are shared (`$share/<name>/...`): the broker hands each batch to one
    /// of the group's subscribers. Instances share sites without it (only a site's owner subscribes to it).
    public var sharedSubscriptionGroup: String?
    /// How often the instance looks at the others on the database and claims or hands over sites (`SiteShare`):
    /// it bounds how long a site freed by a stopped instance waits for a new owner.
    public var rebalanceInterval: Duration = .seconds(1)
    /// How long a site's lease lasts without renewal (`SiteLeases`; renewed four times per lease): a frozen or
    /// cut-off instance's sites are claimed by another within about this long, plus `rebalanceInterval`.
    public var leaseDuration: Duration = .seconds(8)
    /// A site of the sites file that no instance has served for this long makes `/healthz` unhealthy and
    /// `beaconflow_ingest_sites_unserved` count it.
    public var unservedSiteBound: Duration = .seconds(15)
    /// Whether the broker keeps the ingest's session (its subscriptions and the batches queued for it) for a day
    /// after a disconnect: for a client id that stays the same across restarts.
    public var persistentSession = true
    /// Messages waiting for the writer at most; beyond it they are deferred (not acknowledged, so the agents
    /// send them again): intake pauses while PostgreSQL is away.
    public var queueCapacity = 512
    /// Batches committed in one transaction at most, when the queue is deep.
    public var maximumGroup = 64
    /// Sightings committed in one transaction at most (a batch with more goes alone): a transaction's work between
    /// its statements stays far below the writer session's idle-in-transaction timeout (`leaseDuration`).
    public var maximumGroupSightings = 100_000
    public var reconnectDelayMinimum: Duration = .milliseconds(200)
    public var reconnectDelayMaximum: Duration = .seconds(10)
    public var health = FleetHealth.Configuration()
    /// See `IngestPipeline.maximumBeacons`.
    public var maximumBeacons = 200_000
    public var intakeFutureToleranceMicros: Int64 = 300_000_000
    /// How often the writer makes the coming days' partitions and drops those past retention. Expired partitions
    /// are first dropped one interval after start, so that a short run (a replay of old captures, a test) keeps
    /// what it wrote.
    public var partitionMaintenanceInterval: Duration = .seconds(3600)
    /// At a graceful stop, count the minutes begun, apply the readings still waiting for a silent agent and end
    /// the open visits at their beacons' last readings, as when the site ends with the run (the demo). Off for a
    /// service: a restart goes on counting.
    public var finishZonesAtStop = false
    /// Live presence over MQTT (and Home Assistant discovery); nil: none.
    public var presence: PresenceConfiguration?

    public init(mqtt: MQTTClient.Configuration, database: String, sites: SitesConfiguration) {
        self.mqtt = mqtt
        self.database = database
        self.sites = sites
    }

}

/// Counts since the start, for `/healthz`, the demo's progress line and tests.
public struct IngestStatistics: Sendable, Equatable {
    public var batchesCommitted = 0
    public var batchesDuplicate = 0
    public var batchesRejected = 0
    public var batchesDeferred = 0
    public var sightingsCommitted = 0
    public var telemetryCommitted = 0
    public var sensorReadingsCommitted = 0
    /// Readings that arrived after their site let their agent go: stored, but no zone moved for them.
    public var lateReadings = 0
    /// From the arrival of the newest batch of the last group to its commit.
    public var lagSeconds = 0.0
    public var transactions = 0
    public var databaseConnected = false
    public var databaseReconnects = 0
    /// Of the brokers given, how many are connected now.
    public var brokersConnected = 0
    /// Connected to at least one of the brokers.
    public var mqttConnected: Bool { brokersConnected > 0 }
    /// Sites this instance serves now (claimed on the database).
    public var sitesServed = 0
    /// Sites of the sites file that no instance has served for longer than `unservedSiteBound`, as this instance
    /// sees them.
    public var sitesUnserved = 0
    /// Sites this instance served that another instance took over (its lease had lapsed).
    public var sitesLost = 0
    /// Sites this instance claimed that another instance had served before.
    public var sitesTakenOver = 0
    /// Sites this instance handed over (to make room for another instance, or at its stop).
    public var sitesHandedOver = 0
    /// Batches for a site this instance does not serve (any more): not acknowledged, so the agent sends them
    /// again and the site's owner takes them.
    public var batchesNotServed = 0
}

/// The ingest: an MQTT subscription on libmosquitto's thread, a bounded queue, and one writer thread that owns
/// the PostgreSQL connection. The writer validates, commits (several queued batches per transaction), then
/// publishes each agent's retained acknowledgement. When PostgreSQL goes away it reconnects with backoff and
/// stops taking from the queue, so intake pauses and acknowledgements stop; nothing is dropped that the agents
/// do not still hold.
public final class Ingest: Sendable {
    private enum Item: Sendable {
        case batch(topic: String, payload: [UInt8], receivedAtMicros: Int64)
        case status(topic: String, payload: [UInt8], receivedAtMicros: Int64, retained: Bool)
    }

    public let configuration: IngestConfiguration
    let logger: Logger
    let stopRequested = Mutex(false)
    /// Live presence, when configured: used on the writer thread only; `presenceEvents` is what the brokers' threads
    /// tell it.
    let presence: Mutex<PresencePublisher?>
    let presenceEvents = Mutex(PresenceEvents())
    private let statisticsState = Mutex(IngestStatistics())

    private let batchCounters = Dictionary(
        uniqueKeysWithValues: ["committed", "duplicate", "rejected", "deferred", "not_served", "retained_ignored"].map {
            ($0, Counter(label: "beaconflow_ingest_batches_total", dimensions: [("outcome", $0)]))
        })
    private let rejectionCounters = Dictionary(
        uniqueKeysWithValues: RejectionReason.allCases.map {
            ($0, Counter(label: "beaconflow_ingest_rejected_batches_total", dimensions: [("reason", $0.rawValue)]))
        })
    private let sightingsCounter = Counter(label: "beaconflow_ingest_sightings_total")
    private let telemetryCounter = Counter(label: "beaconflow_ingest_telemetry_total")
    private let sensorReadingsCounter = Counter(label: "beaconflow_ingest_sensor_readings_total")
    /// Beacons and reasons already logged as undecodable (each is logged once per run; all are counted).
    private let reportedUndecodable = Mutex(Set<String>())
    private let noticesSent = Mutex(IntervalLimiter(interval: .seconds(10)))
    private let lateReadingsCounter = Counter(label: "beaconflow_ingest_late_readings_total")
    private let evictedBeaconsCounter = Counter(label: "beaconflow_ingest_beacons_evicted_total")
    private let reconnectCounter = Counter(label: "beaconflow_ingest_database_reconnects_total")
    /// Status messages not used: not on a known agent's status topic, or not a valid status.
    private let statusesIgnoredCounter = Counter(label: "beaconflow_ingest_statuses_ignored_total")
    /// Statements PostgreSQL refused for their data (not the connection): the batch or status is set aside.
    private let statementErrorsCounter = Counter(label: "beaconflow_ingest_statement_errors_total")
    private let commitTimer = Timer(label: "beaconflow_ingest_commit_seconds")
    private let queueGauge = Gauge(label: "beaconflow_ingest_queue_depth")
    private let lagGauge = Gauge(label: "beaconflow_ingest_lag_seconds")
    private let brokersGauge = Gauge(label: "beaconflow_ingest_brokers_connected")
    /// Sites claimed, of those the ones another instance had served before, and sites handed over.
    private let siteClaimsCounter = Counter(label: "beaconflow_ingest_site_claims_total")
    private let takenOverCounter = Counter(label: "beaconflow_ingest_sites_taken_over_total")
    private let handedOverCounter = Counter(label: "beaconflow_ingest_sites_handed_over_total")
    private let sitesServedGauge = Gauge(label: "beaconflow_ingest_sites_served")
    private let sitesUnservedGauge = Gauge(label: "beaconflow_ingest_sites_unserved")
    private let sitesLostCounter = Counter(label: "beaconflow_ingest_sites_lost_total")
    /// Zone checkpoints read back damaged or out of range: their sites resumed without them.
    private let unusableCheckpointsCounter = Counter(label: "beaconflow_ingest_unusable_checkpoints_total")

    public init(configuration: IngestConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        presence = Mutex(configuration.presence.map { PresencePublisher(sites: configuration.sites, configuration: $0) })
    }

    public var statistics: IngestStatistics { statisticsState.withLock { $0 } }

    /// For `/healthz`: healthy while both the broker and PostgreSQL are connected and every site of the sites
    /// file is served by some instance (or has not been unserved for `unservedSiteBound`); the counts as JSON.
    public var health: (healthy: Bool, json: String) {
        let s = statistics
        let healthy = s.mqttConnected && s.databaseConnected && s.sitesUnserved == 0
        let json = """
            {"healthy": \(healthy), "mqtt_connected": \(s.mqttConnected), \
            "database_connected": \(s.databaseConnected), "batches_committed": \(s.batchesCommitted), \
            "batches_duplicate": \(s.batchesDuplicate), "batches_rejected": \(s.batchesRejected), \
            "batches_deferred": \(s.batchesDeferred), "sightings_committed": \(s.sightingsCommitted), \
            "database_reconnects": \(s.databaseReconnects), "brokers_connected": \(s.brokersConnected), \
            "sites_served": \(s.sitesServed), "sites_unserved": \(s.sitesUnserved)}
            """
        return (healthy, json)
    }

    /// Asks `run()` to stop: intake stops, what is queued is committed and acknowledged, then it returns.
    public func requestStop() { stopRequested.withLock { $0 = true } }

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
            for filter in subscriptionFilters(site: site.id) { try client.unsubscribe(topic: filter) }
        }

        let forwarders = client.clients.map { single in
            Task { [self] in
                let broker = single.currentBroker
                for await event in single.events {
                    if presenceEvent(event, client: single) { continue }
                    switch event {
                    case .message(let topic, _, let retained) where retained && !topic.hasSuffix("/status"):
                        // Agents never retain batches: one kept by the broker would come back at every restart.
                        batchCounters["retained_ignored"]?.increment()
                        logger.warning("Retained batch ignored", metadata: ["topic": "\(escapedForLog(topic.prefix(200)))"])
                    case .message(let topic, let payload, let retained):
                        let now = wallClockMicros()
                        let item: Item =
                            topic.hasSuffix("/status")
                            ? .status(topic: topic, payload: payload, receivedAtMicros: now, retained: retained)
                            : .batch(topic: topic, payload: payload, receivedAtMicros: now)
                        if !queue.push(item, dropWhenFull: true), case .batch = item {
                            // Not acknowledged: the agent still holds it and sends it again.
                            batchCounters["deferred"]?.increment()
                            statisticsState.withLock { $0.batchesDeferred += 1 }
                        }
                    case .connected:
                        brokerConnectionsChanged(client)
                        logger.info("Connected to the broker", metadata: ["broker": "\(broker)"])
                    case .disconnected(let reason):
                        brokerConnectionsChanged(client)
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
        logger.info("Ingest stopped", metadata: ["statistics": "\(statistics)"])
    }

    // MARK: - The writer thread

    private func runWriter(queue: BlockingQueue<Item>, client: BrokerConnections) {
        var intake = BatchIntake(sites: configuration.sites)
        intake.futureToleranceMicros = configuration.intakeFutureToleranceMicros
        let backoff = WriterLink<BatchWriter, IngestPipeline>.Backoff(
            minimum: configuration.reconnectDelayMinimum, maximum: configuration.reconnectDelayMaximum)
        var link = WriterLink<BatchWriter, IngestPipeline>.start(newPipeline(), backoff: backoff)
        var subscriptions = SiteSubscriptions(ingest: self, client: client)
        var backlog: [Item] = []
        var stopping = false
        var lastZoneTick = ContinuousClock.now
        var lastPartitionMaintenance = ContinuousClock.now
        var lastRebalance = ContinuousClock.now
        var lastRenewal = ContinuousClock.now
        var unserved = UnservedSites(bound: configuration.unservedSiteBound)
        /// Set at each connection: the sites are claimed before anything queued is processed.
        var claimPending = false
        while true {
            if !stopping, shouldStop {
                // Stop intake; what is queued is still committed and acknowledged.
                stopping = true
                queue.close()
            }
            if let (state, firstConnection) = link.pendingConnection {
                switch connect(pipeline: state, migrate: firstConnection) {
                case .success(let connected):
                    link.didConnect(connected)
                    claimPending = true
                case .failure(let error):
                    if stopping {
                        logger.error(
                            "Stopping without PostgreSQL; unacknowledged batches stay with the agents",
                            metadata: ["queued": "\(backlog.count)", "error": "\(error)"])
                        return
                    }
                    let delay = link.didFailToConnect(backoff: backoff)
                    logger.warning(
                        "PostgreSQL unavailable; intake paused", metadata: ["error": "\(error)", "retry_in": "\(delay)"])
                    sleep(delay)
                    continue
                }
            }
            guard let active = link.writer else { continue }
            presencePublish(active, client: client)
            /// Runs one step; a lost connection hands the state back to `link`, other errors are the statement's.
            func step<Value>(
                _ failure: Logger.Message, _ work: () throws(PostgresError) -> Value
            ) -> Value? {
                switch Result(catching: work) {
                case .success(let value):
                    return value
                case .failure(let error) where error.isConnectionFailure:
                    lostConnection(error)
                    link.didLoseConnection(keeping: active.pipeline, backoff: backoff)
                case .failure(let error):
                    statementError(error, failure)
                }
                return nil
            }
            if let interval = active.leaseRenewalInterval, ContinuousClock.now - lastRenewal >= interval {
                // Whatever the backlog: a lease not renewed is taken over.
                lastRenewal = .now
                if let lost = step("Site leases could not be renewed", { () throws(PostgresError) in try active.renewLeases() }) {
                    sitesLost(lost, active, subscriptions: &subscriptions)
                }
                if link.writer == nil { continue }
            }
            if !stopping, claimPending || (backlog.isEmpty && ContinuousClock.now - lastRebalance >= configuration.rebalanceInterval) {
                lastRebalance = .now
                claimPending = false
                _ = step("Sites could not be shared out") { () throws(PostgresError) in
                    try rebalance(active, subscriptions: &subscriptions, unserved: &unserved)
                }
                if link.writer == nil { continue }
            }
            if backlog.isEmpty {
                backlog = queue.popAll(timeout: stopping ? 0 : 0.1)
                queueGauge.record(backlog.count)
                if backlog.isEmpty, stopping {
                    if configuration.finishZonesAtStop {
                        if case .failure(let error) = Result(catching: { () throws(PostgresError) in try active.advanceZones(finish: true) }) {
                            logger.error("Could not count the last minutes", metadata: ["error": "\(error)"])
                        }
                    }
                    // The sites go to the other instances at once, rather than when this session ends.
                    _ = step("Sites could not be handed over") { () throws(PostgresError) in
                        try handOver(active.servedSites, active, subscriptions: &subscriptions)
                        try active.leaveInstances()
                    }
                    return
                }
            }
            if ContinuousClock.now - lastPartitionMaintenance >= configuration.partitionMaintenanceInterval {
                lastPartitionMaintenance = .now
                if let counts = step("Partition maintenance failed", { () throws(PostgresError) in
                    try active.maintainPartitions(dropExpired: true)
                }) {
                    logger.info("Partitions maintained", metadata: ["made": "\(counts.made)", "dropped": "\(counts.dropped)"])
                }
                if link.writer == nil { continue }
            }
            if ContinuousClock.now - lastZoneTick >= .seconds(1) {
                // Agents gone idle stop holding their site's decisions back even when no batch arrives.
                lastZoneTick = .now
                if let changes = step("Zone changes could not be written", { () throws(PostgresError) in try active.advanceZones() }) {
                    zonesChanged(changes)
                }
                sitesLost(active.takeSitesLost(), active, subscriptions: &subscriptions)
                if link.writer == nil { continue }
            }
            if backlog.isEmpty { continue }
            let group = Array(backlog.prefix(configuration.maximumGroup))
            switch process(group, writer: active, intake: intake, client: client, subscriptions: &subscriptions) {
            case .success:
                backlog.removeFirst(group.count)
            case .failure(let error):
                lostConnection(error)
                link.didLoseConnection(keeping: active.pipeline, backoff: backoff)
            }
        }
    }

    /// The topic filters of a site's batches and statuses, as this instance subscribes to them.
    private func subscriptionFilters(site: String) -> [String] {
        let batches = AgentTopics.siteFilter(site: site, kind: .batch)
        return [
            configuration.sharedSubscriptionGroup.map { "$share/\($0)/\(batches)" } ?? batches,
            AgentTopics.siteFilter(site: site, kind: .status),
        ]
    }

    /// The sites whose topics the instance is subscribed to, kept equal to the sites its writer serves. Across a
    /// lost PostgreSQL connection they stay subscribed (intake pauses) until the next connection's claims.
    private struct SiteSubscriptions {
        let ingest: Ingest
        let client: BrokerConnections
        var sites: Set<String> = []

        mutating func match(_ served: Set<String>) throws(MQTTError) {
            for site in sites.subtracting(served).sorted() {
                for filter in ingest.subscriptionFilters(site: site) { try client.unsubscribe(topic: filter) }
                sites.remove(site)
            }
            for site in served.subtracting(sites).sorted() {
                for filter in ingest.subscriptionFilters(site: site) { try client.subscribe(topic: filter, qos: 1) }
                sites.insert(site)
            }
        }
    }

    /// Claims and hands over sites as `SiteShare` says, then subscribes to the topics of the sites served (and
    /// only those).
    private func rebalance(
        _ writer: BatchWriter, subscriptions: inout SiteSubscriptions, unserved: inout UnservedSites
    ) throws(PostgresError) {
        let sites = configuration.sites.sites.map(\.id)
        let instance = configuration.mqtt.clientID
        let (others, free, notServed) = try writer.observeInstances(sites: sites)
        let overdue = unserved.observe(unserved: notServed, now: .now)
        for site in overdue.newlyOverdue.sorted() {
            logger.error(
                "No ingest instance serves a site", metadata: ["site": "\(site)", "for_longer_than": "\(unserved.bound)"])
        }
        statisticsState.withLock { $0.sitesUnserved = overdue.count }
        sitesUnservedGauge.record(overdue.count)
        let share = SiteShare.plan(instance: instance, sites: sites, owned: writer.servedSites, others: others, free: free)
        if !share.release.isEmpty {
            try handOver(Set(share.release), writer, subscriptions: &subscriptions)
        }
        var claimed: [String] = []
        var takenOver = 0
        var resumption = ZoneResumption()
        for site in share.claim where claimed.count < share.claimLimit {
            // Subscribed before the read-back, which may take a while: the agents' batches sent meanwhile wait in
            // the queue instead of reaching no subscriber.
            guard let claim = try writer.claim(site: site, leased: { match(subscriptions: &subscriptions, writer.servedSites.union([site])) })
            else { continue }
            claimed.append(site)
            if claim.takenOver { takenOver += 1 }
            resumption.restoredSites += claim.resumption.restoredSites
            resumption.replayedSightings += claim.resumption.replayedSightings
            resumption.unusableCheckpoints += claim.resumption.unusableCheckpoints
        }
        // Also after a reconnect that claimed none of the sites subscribed before.
        match(subscriptions: &subscriptions, writer.servedSites)
        guard !claimed.isEmpty else { return }
        siteClaimsCounter.increment(by: claimed.count)
        takenOverCounter.increment(by: takenOver)
        statisticsState.withLock { $0.sitesTakenOver += takenOver }
        servedSitesChanged(writer.servedSites.count)
        unusableCheckpointsCounter.increment(by: resumption.unusableCheckpoints.count)
        for (site, error) in resumption.unusableCheckpoints {
            logger.warning(
                "A zone checkpoint could not be used; the site resumes from its open visits",
                metadata: ["site": "\(site)", "error": "\(error)"])
        }
        logger.info(
            "Sites claimed",
            metadata: [
                "sites": "\(claimed.sorted().joined(separator: " "))", "taken_over": "\(takenOver)",
                "sites_from_checkpoints": "\(resumption.restoredSites)",
                "sightings_replayed": "\(resumption.replayedSightings)", "serving": "\(writer.servedSites.count)",
                "other_instances": "\(others.count)",
            ])
    }

    /// Unsubscribes from the sites' topics, then hands them over on the database (`BatchWriter.release`).
    private func handOver(
        _ sites: Set<String>, _ writer: BatchWriter, subscriptions: inout SiteSubscriptions
    ) throws(PostgresError) {
        guard !sites.isEmpty else { return }
        match(subscriptions: &subscriptions, writer.servedSites.subtracting(sites))
        for site in sites.sorted() { try writer.release(site: site) }
        handedOverCounter.increment(by: sites.count)
        statisticsState.withLock { $0.sitesHandedOver += sites.count }
        servedSitesChanged(writer.servedSites.count)
        logger.info(
            "Sites handed over",
            metadata: ["sites": "\(sites.sorted().joined(separator: " "))", "serving": "\(writer.servedSites.count)"])
    }

    /// Sites whose leases another instance took over (this one was frozen or cut off for longer than a lease):
    /// nothing more is written for them here, and their topics are left to the new owner.
    private func sitesLost(_ sites: Set<String>, _ writer: BatchWriter, subscriptions: inout SiteSubscriptions) {
        guard !sites.isEmpty else { return }
        match(subscriptions: &subscriptions, writer.servedSites)
        sitesLostCounter.increment(by: sites.count)
        statisticsState.withLock { $0.sitesLost += sites.count }
        servedSitesChanged(writer.servedSites.count)
        logger.warning(
            "Sites taken over by another instance; their leases had lapsed",
            metadata: ["sites": "\(sites.sorted().joined(separator: " "))", "serving": "\(writer.servedSites.count)"])
    }

    private func match(subscriptions: inout SiteSubscriptions, _ served: Set<String>) {
        do {
            try subscriptions.match(served)
        } catch {
            // libmosquitto refuses only for a bad topic or when out of memory; the next claim tries again.
            logger.error("Site subscriptions could not be changed", metadata: ["error": "\(error)"])
        }
    }

    private func servedSitesChanged(_ count: Int) {
        statisticsState.withLock { $0.sitesServed = count }
        sitesServedGauge.record(count)
    }

    private func newPipeline() -> IngestPipeline {
        var pipeline = IngestPipeline(sites: configuration.sites, health: configuration.health)
        pipeline.maximumBeacons = configuration.maximumBeacons
        return pipeline
    }

    private func brokerConnectionsChanged(_ connections: BrokerConnections) {
        let connected = connections.connectedCount
        statisticsState.withLock { $0.brokersConnected = connected }
        brokersGauge.record(connected)
    }

    /// PostgreSQL refused a statement for its data: retrying it cannot help, so it is counted, logged and left.
    private func statementError(_ error: PostgresError, _ message: Logger.Message) {
        statementErrorsCounter.increment()
        logger.error(message, metadata: ["error": "\(escapedForLog(error.description))"])
    }

    /// The writer's session is gone, and with it the locks of the sites it served.
    private func lostConnection(_ error: PostgresError) {
        statisticsState.withLock {
            $0.databaseConnected = false
            $0.databaseReconnects += 1
        }
        servedSitesChanged(0)
        reconnectCounter.increment()
        logger.warning("PostgreSQL connection lost; reconnecting", metadata: ["error": "\(error)"])
    }

    /// Connects, migrating the schema first on the first connection only (a reconnect finds it in place), and
    /// joins the instances that share the sites. The writer serves no site until `rebalance` claims some: a site's
    /// zone state lives in one process, so each site has one owner, the session holding its advisory lock. The
    /// locks go with the session, when the process or its connection does, and the other instances take the
    /// sites over.
    private func connect(pipeline: IngestPipeline, migrate: Bool) -> Result<BatchWriter, PostgresError> {
        Result { () throws(PostgresError) in
            let connection = try PostgresConnection(configuration.database)
            if migrate { try Migrator.migrate(connection, logger: logger) }
            let writer = BatchWriter(connection: connection, pipeline: pipeline, servedSites: [])
            try writer.joinInstances(instance: configuration.mqtt.clientID, leaseDuration: configuration.leaseDuration)
            try writer.maintainPartitions(dropExpired: false)
            try writer.writeRegistry(configuration.sites)
            statisticsState.withLock { $0.databaseConnected = true }
            logger.info("Connected to PostgreSQL", metadata: ["schema_version": "\(Migrator.latestVersion)"])
            return writer
        }
    }

    /// Validates and commits one group of messages; fails only when the connection is lost (the group is then
    /// retried whole on the next connection: what committed is recognised as duplicate).
    private func process(
        _ items: [Item], writer: BatchWriter, intake: BatchIntake, client: BrokerConnections,
        subscriptions: inout SiteSubscriptions
    ) -> Result<Void, PostgresError> {
        Result { () throws(PostgresError) in
            var accepted: [AcceptedBatch] = []
            var newestReceived: Int64 = 0
            for item in items {
                switch item {
                case .status(let topic, _, _, _) where isServedElsewhere(topic: topic, kind: .status, writer: writer):
                    break
                case .batch(let topic, _, _) where isServedElsewhere(topic: topic, kind: .batch, writer: writer):
                    // Claimed by another instance since it was queued: the agent sends it again, to the owner.
                    batchCounters["not_served"]?.increment()
                    statisticsState.withLock { $0.batchesNotServed += 1 }
                case .status(let topic, let payload, let receivedAt, let retained):
                    do throws(PostgresError) {
                        try recordStatus(
                            topic: topic, payload: payload, receivedAtMicros: receivedAt, retained: retained, writer: writer)
                    } catch where !error.isConnectionFailure {
                        statementError(error, "An agent status could not be recorded")
                    }
                case .batch(let topic, let payload, let receivedAt):
                    newestReceived = max(newestReceived, receivedAt)
                    switch intake.check(topic: topic, payload: payload, nowMicros: wallClockMicros()) {
                    case .success(let batch):
                        accepted.append(AcceptedBatch(batch: batch, topic: topic, payload: payload))
                    case .failure(let failure):
                        do throws(PostgresError) {
                            try reject(
                                topic: topic, payload: payload, failure.rejection, header: failure.header,
                                sequence: failure.sequence, writer: writer, client: client)
                        } catch where !error.isConnectionFailure {
                            statementError(error, "A rejected batch could not be recorded")
                        }
                    }
                }
            }
            for range in Self.commitGroups(
                sightings: accepted.map(\.batch.sightings.count), maximumBatches: configuration.maximumGroup,
                maximumSightings: configuration.maximumGroupSightings)
            {
                try commit(Array(accepted[range]), writer: writer, client: client)
                sitesLost(writer.takeSitesLost(), writer, subscriptions: &subscriptions)
            }
            if newestReceived > 0 {
                let lag = Double(wallClockMicros() - newestReceived) / 1e6
                lagGauge.record(lag)
                statisticsState.withLock { $0.lagSeconds = lag }
            }
        }
    }

    /// Consecutive groups of batches, one transaction each: at most `maximumBatches` batches and
    /// `maximumSightings` sightings (a batch with more goes alone).
    static func commitGroups(sightings: [Int], maximumBatches: Int, maximumSightings: Int) -> [Range<Int>] {
        var groups: [Range<Int>] = []
        var start = 0
        while start < sightings.count {
            var end = start + 1
            var total = sightings[start]
            while end < min(start + maximumBatches, sightings.count), total + sightings[end] <= maximumSightings {
                total += sightings[end]
                end += 1
            }
            groups.append(start..<end)
            start = end
        }
        return groups
    }

    /// Whether the topic is of a site of the sites file that this instance does not serve (now): its owner
    /// records it. A topic of no known site is this instance's to refuse.
    private func isServedElsewhere(topic: String, kind: AgentTopicKind, writer: BatchWriter) -> Bool {
        guard let site = AgentTopics(parsing: topic, kind: kind)?.site else { return false }
        return !writer.servedSites.contains(site) && configuration.sites.sites.contains { $0.id == site }
    }

    private struct AcceptedBatch {
        var batch: DecodedBatch
        var topic: String
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
        } catch where !error.isConnectionFailure {
            do throws(PostgresError) {
                try reject(
                    topic: group[0].topic, payload: group[0].payload, Rejection(.refusedByDatabase, error.description),
                    header: group[0].batch.header, writer: writer, client: client)
            } catch where !error.isConnectionFailure {
                statementError(error, "A rejected batch could not be recorded")
            }
            return
        }
        commitTimer.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
        var committed = 0
        var duplicates = 0
        var notServed = 0
        var rows = 0
        for (outcome, accepted) in zip(result.outcomes, group) {
            switch outcome {
            case .committed(let sightings):
                committed += 1
                rows += sightings
            case .duplicate:
                duplicates += 1
            case .notServed:
                // Taken over since it was queued: the agent sends it again, to the new owner.
                notServed += 1
            case .sequenceReused(let difference):
                // Not a redelivery: kept with the reason, so that it is seen (the committed batch stays).
                do throws(PostgresError) {
                    try reject(
                        topic: accepted.topic, payload: accepted.payload, Rejection(.sequenceReused, difference),
                        header: accepted.batch.header, writer: writer, client: client)
                } catch where !error.isConnectionFailure {
                    statementError(error, "A rejected batch could not be recorded")
                }
            }
        }
        batchCounters["committed"]?.increment(by: committed)
        batchCounters["duplicate"]?.increment(by: duplicates)
        batchCounters["not_served"]?.increment(by: notServed)
        sightingsCounter.increment(by: rows)
        telemetryCounter.increment(by: result.telemetryRows)
        sensorReadingsCounter.increment(by: result.sensorReadingRows)
        for frame in result.undecodableFrames {
            Counter(label: "beaconflow_ingest_undecodable_frames_total", dimensions: [("reason", frame.reason)]).increment()
            let first = reportedUndecodable.withLock { reported in
                reported.count < 10_000 && reported.insert(frame.beaconID + " " + frame.reason).inserted
            }
            if first {
                logger.warning(
                    "A data frame could not be decoded; its readings are not stored",
                    metadata: ["beacon": "\(frame.beaconID)", "reason": "\(frame.reason)", "error": "\(frame.message)"])
            }
        }
        lateReadingsCounter.increment(by: result.lateReadings)
        evictedBeaconsCounter.increment(by: result.evictedBeacons)
        statisticsState.withLock {
            $0.lateReadings += result.lateReadings
            $0.telemetryCommitted += result.telemetryRows
            $0.sensorReadingsCommitted += result.sensorReadingRows
            $0.batchesCommitted += committed
            $0.batchesDuplicate += duplicates
            $0.batchesNotServed += notServed
            $0.sightingsCommitted += rows
            $0.transactions += 1
        }
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
        topic: String, payload: [UInt8], _ rejection: Rejection, header: BatchHeader?, sequence: UInt64? = nil,
        writer: BatchWriter, client: BrokerConnections
    ) throws(PostgresError) {
        logger.warning(
            "Batch rejected",
            metadata: [
                "topic": "\(escapedForLog(topic.prefix(200)))", "reason": "\(rejection.reason.rawValue)",
                "error": "\(escapedForLog(rejection.message))",
            ])
        let acknowledgements = try writer.recordRejection(
            topic: topic, payload: payload, reason: rejection.reason.rawValue, message: rejection.message, header: header)
        count(rejection: rejection.reason)
        publish(acknowledgements, client: client)
        if let topics = AgentTopics(parsing: topic, kind: .batch) {
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

    private func count(rejection reason: RejectionReason) {
        rejectionCounters[reason]?.increment()
        batchCounters["rejected"]?.increment()
        statisticsState.withLock { $0.batchesRejected += 1 }
    }

    private func recordStatus(
        topic: String, payload: [UInt8], receivedAtMicros: Int64, retained: Bool, writer: BatchWriter
    ) throws(PostgresError) {
        guard let topics = AgentTopics(parsing: topic, kind: .status),
            configuration.sites.agent(site: topics.site, agent: topics.agent) != nil
        else {
            statusesIgnoredCounter.increment()
            logger.debug("Status message ignored", metadata: ["topic": "\(escapedForLog(topic.prefix(200)))"])
            return
        }
        let status: AgentStatus
        do {
            status = try AgentStatus(json: payload)
        } catch {
            statusesIgnoredCounter.increment()
            logger.warning("Status message ignored", metadata: ["topic": "\(escapedForLog(topic))", "error": "\(error)"])
            return
        }
        let agent = AgentKey(site: topics.site, agent: topics.agent)
        var offsetMillis: Double?
        var stale = false
        writer.updatePipeline { pipeline in
            if let clock = status.clockMicros {
                stale = !pipeline.clocks.isNewest(agent, statusClockMicros: clock)
                if !stale, status.online {
                    pipeline.clocks.observe(agent, agentClockMicros: clock, receivedAtMicros: receivedAtMicros, retained: retained)
                }
            }
            offsetMillis = pipeline.clocks.estimateMicros(agent).map { Double($0) / 1000 }
        }
        guard !stale else {
            statusesIgnoredCounter.increment()
            logger.debug("Older status ignored", metadata: ["topic": "\(escapedForLog(topic))"])
            return
        }
        try writer.recordStatus(agent, status, clockOffsetMillis: offsetMillis)
    }

    private func sleep(_ duration: Duration) {
        // In short steps, so that a stop request is seen.
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline, !shouldStop { Thread.sleep(forTimeInterval: 0.05) }
    }
}

/// The ingest's connections, one per broker of the deployment: subscriptions go to every broker, and so do
/// acknowledgements and rejection notices, to those connected now (an acknowledgement is retained and published
/// again at the agent's next commit; one queued for a broker that is gone would wait in memory).
final class BrokerConnections: Sendable {
    let clients: [MQTTClient]

    /// A client for `configuration`'s broker and one for each of its `failover` brokers.
    init(_ configuration: MQTTClient.Configuration, logger: Logger) throws(MQTTError) {
        let brokers = [MQTTClient.Endpoint(host: configuration.host, port: configuration.port)] + configuration.failover
        clients = try brokers.map { broker throws(MQTTError) in
            var single = configuration
            single.host = broker.host
            single.port = broker.port
            single.failover = []
            return try MQTTClient(single, logger: logger)
        }
    }

    var connectedCount: Int { clients.count { $0.isConnected } }

    func subscribe(topic: String, qos: Int32) throws(MQTTError) {
        for client in clients { try client.subscribe(topic: topic, qos: qos) }
    }

    func unsubscribe(topic: String) throws(MQTTError) {
        for client in clients { try client.unsubscribe(topic: topic) }
    }

    /// Publishes to every connected broker; throws the last failure when it reached none.
    func publish(topic: String, payload: [UInt8], qos: Int32, retain: Bool = false) throws(MQTTError) {
        var failure = MQTTError("publish", message: "no broker is connected")
        var published = false
        for client in clients where client.isConnected || clients.count == 1 {
            do {
                try client.publish(topic: topic, payload: payload, qos: qos, retain: retain)
                published = true
            } catch { failure = error }
        }
        if !published { throw failure }
    }

    func start() { for client in clients { client.start() } }
    func stop() { for client in clients { client.stop() } }
}
