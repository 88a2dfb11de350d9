import BeaconMessaging
import BeaconWire
import LibPQ
import Logging
import MetricFamilies
import Metrics
import Synchronization

/// One thing that happened in the ingest. `IngestInstruments.record` counts its metric, updates the statistics and
/// logs it, once.
enum IngestEvent {
    /// The queue was full: not acknowledged, the agent still holds the batch and sends it again.
    case batchDeferred
    /// Agents never retain batches: one kept by the broker would come back at every restart.
    case retainedBatchIgnored(topic: String)
    /// For a site another instance serves (now): the agent sends them again, to the owner.
    case batchesNotServed(Int)
    case groupCommitted(CommittedGroup)
    /// Frames that waited in vain for their address's identity were stored under it, when no batch came to.
    case waitingFramesExpired(stored: Int, waiting: Int)
    case batchRejected(topic: String, Rejection)
    /// Not refused and not acknowledged: a condition of the database (a lock, a limit, a privilege) kept it out.
    /// The agent sends it again; it commits once the condition clears.
    case batchHeld(topic: String, agent: AgentKey, PostgresError)
    /// This instance's clock was compared with the database's.
    case clockCompared(offsetMicros: Int64, skewed: Bool, ClockComparison.Change)
    case statusIgnored(topic: String, StatusIgnored)
    /// The statuses of one agent id come from two running agents (`SharedAgentIDs`): their boot ids.
    case agentIDShared(AgentKey, bootIDs: (String, String))
    /// PostgreSQL refused a statement for its data: retrying cannot help, so it is counted, logged and left.
    case statementError(PostgresError, Logger.Message)
    case databaseConnected
    /// The writer's session is gone, and with it the leases of the sites it served.
    case databaseLost(PostgresError)
    case brokersConnected(Int)
    case sitesServed(Int)
    /// Sites no instance has served for longer than the bound, as this instance sees them; `newlyOverdue` logged.
    case sitesUnserved(count: Int, newlyOverdue: Set<String>, bound: Duration)
    case sitesClaimed(claimed: [String], takenOver: Int, resumption: ZoneResumption, serving: Int, otherInstances: Int)
    case sitesHandedOver(Set<String>, serving: Int)
    /// Taken over by another instance: their leases had lapsed.
    case sitesLost(Set<String>, serving: Int)
    case queueDepth(Int)
    /// SIGHUP read the sites file: applied when `change` is not empty.
    case sitesReloaded(path: String, SitesChange)
    /// SIGHUP found a sites file that does not load: the running sites stay.
    case sitesReloadRefused(path: String?, reason: String)
    /// The live instances whose sites file differs from this one's (by digest), at each look at the instances.
    case sitesFilesCompared(differing: Set<String>, digest: String)
    /// From the arrival of the newest batch of the last group to its commit.
    case lag(seconds: Double)

    enum StatusIgnored {
        /// Not an agent's status topic.
        case notAnAgentTopic
        /// From an agent of a site the sites file does not have (a mistyped `--site`); the nearest site id.
        case unknownSite(site: String, agent: String, nearest: String?)
        /// From an agent its site does not list; the nearest agent id of the site.
        case unknownAgent(site: String, agent: String, nearest: String?)
        case invalid(String)
        /// Older than the newest status of the agent already heard.
        case older
    }

    /// What one transaction committed.
    struct CommittedGroup {
        /// The agents with a batch committed or found duplicate: any of them held before is no longer.
        var agents: Set<AgentKey> = []
        var committed = 0
        var duplicates = 0
        var notServed = 0
        var sightings = 0
        var telemetry = 0
        var sensorReadings = 0
        var lateReadings = 0
        var evictedBeacons = 0
        var framesWaiting = 0
        var framesStoredUnderAddress = 0
        var addressBeaconsMerged = 0
        var newlyCloned: [ClonedBeacon] = []
        var undecodableFrames: [UndecodableFrame] = []
        var nanoseconds: Int64 = 0
    }
}

/// The ingest's metrics, statistics and logs of `IngestEvent`s. Thread-safe: the brokers' threads and the writer
/// thread record.
final class IngestInstruments: Sendable {
    let logger: Logger
    private let statisticsState = Mutex(IngestStatistics())
    private let heldBatches = Mutex(HeldBatches())
    /// Beacons and reasons already logged as undecodable (each is logged once per run; all are counted).
    private let reportedUndecodable = Mutex(Set<String>())

    private let batchCounters = Dictionary(
        uniqueKeysWithValues: IngestMetrics.batchOutcomes.map { ($0, Counter(IngestMetrics.batches, [("outcome", $0)])) })
    private let rejectionCounters = Dictionary(
        uniqueKeysWithValues: RejectionReason.allCases.map {
            ($0, Counter(IngestMetrics.rejectedBatches, [("reason", $0.rawValue)]))
        })
    private let sightingsCounter = Counter(IngestMetrics.sightings)
    private let telemetryCounter = Counter(IngestMetrics.telemetry)
    private let sensorReadingsCounter = Counter(IngestMetrics.sensorReadings)
    private let lateReadingsCounter = Counter(IngestMetrics.lateReadings)
    private let evictedBeaconsCounter = Counter(IngestMetrics.evictedBeacons)
    private let clonedBeaconsCounter = Counter(IngestMetrics.clonedBeacons)
    private let framesWaitingGauge = Gauge(IngestMetrics.framesWaiting)
    private let addressFramesCounter = Counter(IngestMetrics.addressFrames)
    private let addressBeaconsMergedCounter = Counter(IngestMetrics.addressBeaconsMerged)
    private let reconnectCounter = Counter(IngestMetrics.databaseReconnects)
    private let databaseConnectedGauge = Gauge(IngestMetrics.databaseConnected)
    /// Status messages not used: not on a known agent's status topic, or not a valid status.
    private let statusesIgnoredCounter = Counter(IngestMetrics.statusesIgnored)
    /// Agents the sites file does not have, said once an hour each.
    private let unknownAgents = OncePerInterval(interval: .seconds(3600))
    private let agentIDsSharedCounter = Counter(IngestMetrics.agentIDsShared)
    /// Statements PostgreSQL refused for their data (not the connection): the batch or status is set aside.
    private let statementErrorsCounter = Counter(IngestMetrics.statementErrors)
    private let commitTimer = Timer(IngestMetrics.commitSeconds)
    private let queueGauge = Gauge(IngestMetrics.queueDepth)
    private let lagGauge = Gauge(IngestMetrics.lag)
    private let clockOffsetGauge = Gauge(IngestMetrics.clockOffset)
    private let agentsHeldGauge = Gauge(IngestMetrics.agentsHeld)
    private let brokersGauge = Gauge(IngestMetrics.brokersConnected)
    /// Sites claimed, of those the ones another instance had served before, and sites handed over.
    private let siteClaimsCounter = Counter(IngestMetrics.siteClaims)
    private let takenOverCounter = Counter(IngestMetrics.sitesTakenOver)
    private let handedOverCounter = Counter(IngestMetrics.sitesHandedOver)
    private let sitesServedGauge = Gauge(IngestMetrics.sitesServed)
    private let sitesUnservedGauge = Gauge(IngestMetrics.sitesUnserved)
    private let sitesLostCounter = Counter(IngestMetrics.sitesLost)
    /// Zone checkpoints read back damaged or out of range: their sites resumed without them.
    private let unusableCheckpointsCounter = Counter(IngestMetrics.unusableCheckpoints)
    private let unreadableBatteryStatesCounter = Counter(IngestMetrics.unreadableBatteryStates)
    private let sitesFileDiffersGauge = Gauge(IngestMetrics.sitesFileDiffers)
    /// The instances last said to run with another sites file (said again when the set changes).
    private let differingInstances = Mutex(Set<String>())
    private let reloadCounters = Dictionary(
        uniqueKeysWithValues: IngestMetrics.reloadOutcomes.map { ($0, Counter(IngestMetrics.sitesReloads, [("outcome", $0)])) })

    init(logger: Logger) { self.logger = logger }

    var statistics: IngestStatistics { statisticsState.withLock { $0 } }

    func record(_ event: IngestEvent) {
        switch event {
        case .batchDeferred:
            batchCounters["deferred"]?.increment()
            statisticsState.withLock { $0.batchesDeferred += 1 }
        case .retainedBatchIgnored(let topic):
            batchCounters["retained_ignored"]?.increment()
            logger.warning("Retained batch ignored", metadata: ["topic": "\(escapedForLog(topic.prefix(200)))"])
        case .batchesNotServed(let count):
            batchCounters["not_served"]?.increment(by: count)
            statisticsState.withLock { $0.batchesNotServed += count }
        case .groupCommitted(let group):
            record(group)
        case .waitingFramesExpired(let stored, let waiting):
            addressFramesCounter.increment(by: stored)
            framesWaitingGauge.record(waiting)
        case .batchRejected(let topic, let rejection):
            logger.warning(
                "Batch rejected",
                metadata: [
                    "topic": "\(escapedForLog(topic.prefix(200)))", "reason": "\(rejection.reason.rawValue)",
                    "error": "\(escapedForLog(rejection.message))",
                ])
            rejectionCounters[rejection.reason]?.increment()
            batchCounters["rejected"]?.increment()
            statisticsState.withLock { $0.batchesRejected += 1 }
        case .batchHeld(let topic, let agent, let error):
            batchCounters["held"]?.increment()
            let (began, agents) = heldBatches.withLock { held in (held.held(agent, now: .now), held.agents.count) }
            agentsHeldGauge.record(agents)
            statisticsState.withLock {
                $0.batchesHeld += 1
                $0.agentsHeld = agents
            }
            let metadata: Logger.Metadata = [
                "topic": "\(escapedForLog(topic.prefix(200)))", "error": "\(escapedForLog(error.description))",
            ]
            if began {
                logger.error("Batches held back by the database; they commit when the condition clears", metadata: metadata)
            } else {
                logger.debug("Batch held back by the database", metadata: metadata)
            }
        case .clockCompared(let offset, let skewed, let change):
            clockOffsetGauge.record(Double(offset) / 1e6)
            statisticsState.withLock {
                $0.clockOffsetSeconds = Double(offset) / 1e6
                $0.clockSkewed = skewed
            }
            switch change {
            case .becameSkewed:
                logger.error(
                    "This instance's clock differs from the database's; times are judged by the database's",
                    metadata: ["database_minus_instance_s": .stringConvertible(Double(offset) / 1e6)])
            case .cameBack:
                logger.notice(
                    "This instance's clock agrees with the database's again",
                    metadata: ["database_minus_instance_s": .stringConvertible(Double(offset) / 1e6)])
            case .none:
                break
            }
        case .statusIgnored(let topic, let why):
            statusesIgnoredCounter.increment()
            switch why {
            case .notAnAgentTopic:
                logger.debug("Status message ignored", metadata: ["topic": "\(escapedForLog(topic.prefix(200)))"])
            case .unknownSite(let site, let agent, let nearest):
                if unknownAgents.firstTime(site + "/" + agent) {
                    logger.warning(
                        "An agent reports for a site the sites file does not have; its batches are not taken",
                        metadata: [
                            "site": "\(escapedForLog(site.prefix(100)))", "agent": "\(escapedForLog(agent.prefix(100)))",
                            "did_you_mean": "\(nearest ?? "")",
                        ])
                }
            case .unknownAgent(let site, let agent, let nearest):
                if unknownAgents.firstTime(site + "/" + agent) {
                    logger.warning(
                        "An agent its site does not list reports; its batches are not taken",
                        metadata: [
                            "site": "\(site)", "agent": "\(escapedForLog(agent.prefix(100)))", "did_you_mean": "\(nearest ?? "")",
                        ])
                }
            case .invalid(let error):
                logger.warning("Status message ignored", metadata: ["topic": "\(escapedForLog(topic))", "error": "\(error)"])
            case .older:
                logger.debug("Older status ignored", metadata: ["topic": "\(escapedForLog(topic))"])
            }
        case .agentIDShared(let agent, let bootIDs):
            agentIDsSharedCounter.increment()
            logger.error(
                "Two running agents use one agent id; give each its own (a copied SD card or configuration?)",
                metadata: [
                    "site": "\(agent.site)", "agent": "\(agent.agent)", "boot_ids": "\(bootIDs.0), \(bootIDs.1)",
                ])
        case .statementError(let error, let message):
            statementErrorsCounter.increment()
            logger.error(message, metadata: ["error": "\(escapedForLog(error.description))"])
        case .databaseConnected:
            statisticsState.withLock { $0.databaseConnected = true }
            databaseConnectedGauge.record(1)
            logger.info("Connected to PostgreSQL", metadata: ["schema_version": .stringConvertible(Migrator.latestVersion)])
        case .databaseLost(let error):
            statisticsState.withLock {
                $0.databaseConnected = false
                $0.databaseReconnects += 1
            }
            databaseConnectedGauge.record(0)
            record(.sitesServed(0))
            reconnectCounter.increment()
            logger.warning("PostgreSQL connection lost; reconnecting", metadata: ["error": "\(error)"])
        case .brokersConnected(let count):
            statisticsState.withLock { $0.brokersConnected = count }
            brokersGauge.record(count)
        case .sitesServed(let count):
            statisticsState.withLock { $0.sitesServed = count }
            sitesServedGauge.record(count)
        case .sitesUnserved(let count, let newlyOverdue, let bound):
            for site in newlyOverdue.sorted() {
                logger.error("No ingest instance serves a site", metadata: ["site": "\(site)", "for_longer_than": "\(bound)"])
            }
            statisticsState.withLock { $0.sitesUnserved = count }
            sitesUnservedGauge.record(count)
        case .sitesClaimed(let claimed, let takenOver, let resumption, let serving, let otherInstances):
            siteClaimsCounter.increment(by: claimed.count)
            takenOverCounter.increment(by: takenOver)
            statisticsState.withLock { $0.sitesTakenOver += takenOver }
            record(.sitesServed(serving))
            unusableCheckpointsCounter.increment(by: resumption.unusableCheckpoints.count)
            for (site, error) in resumption.unusableCheckpoints {
                logger.warning(
                    "A zone checkpoint could not be used; the site resumes from its open visits",
                    metadata: ["site": "\(site)", "error": "\(error)"])
            }
            unreadableBatteryStatesCounter.increment(by: resumption.unreadableBatteryStates)
            if resumption.unreadableBatteryStates > 0 {
                logger.warning(
                    "Saved battery states could not be read; those beacons' forecasts start afresh",
                    metadata: ["sites": "\(claimed.sorted().joined(separator: " "))", "states": .stringConvertible(resumption.unreadableBatteryStates)])
            }
            logger.info(
                "Sites claimed",
                metadata: [
                    "sites": "\(claimed.sorted().joined(separator: " "))", "taken_over": .stringConvertible(takenOver),
                    "sites_from_checkpoints": .stringConvertible(resumption.restoredSites),
                    "sightings_replayed": .stringConvertible(resumption.replayedSightings), "serving": .stringConvertible(serving),
                    "other_instances": .stringConvertible(otherInstances),
                ])
        case .sitesHandedOver(let sites, let serving):
            handedOverCounter.increment(by: sites.count)
            statisticsState.withLock { $0.sitesHandedOver += sites.count }
            record(.sitesServed(serving))
            logger.info(
                "Sites handed over", metadata: ["sites": "\(sites.sorted().joined(separator: " "))", "serving": .stringConvertible(serving)])
        case .sitesLost(let sites, let serving):
            sitesLostCounter.increment(by: sites.count)
            statisticsState.withLock { $0.sitesLost += sites.count }
            record(.sitesServed(serving))
            logger.warning(
                "Sites taken over by another instance; their leases had lapsed",
                metadata: ["sites": "\(sites.sorted().joined(separator: " "))", "serving": .stringConvertible(serving)])
        case .sitesReloaded(let path, let change):
            reloadCounters[change.isEmpty ? "unchanged" : "applied"]?.increment()
            statisticsState.withLock { $0.sitesFileReads += 1 }
            logger.notice(
                change.isEmpty ? "Sites file read again; nothing changed" : "Sites file read again and applied",
                metadata: [
                    "path": "\(path)", "sites_added": "\(change.added.sorted().joined(separator: " "))",
                    "sites_removed": "\(change.removed.sorted().joined(separator: " "))",
                    "sites_changed": "\(change.changed.sorted().joined(separator: " "))",
                    "registry_changed": .stringConvertible(change.registryChanged),
                ])
        case .sitesFilesCompared(let differing, let digest):
            sitesFileDiffersGauge.record(differing.count)
            let changed = differingInstances.withLock { known in
                defer { known = differing }
                return known != differing
            }
            if changed, !differing.isEmpty {
                logger.warning(
                    "Other ingest instances run with another sites file; each serves its sites by its own file until they match",
                    metadata: ["instances": "\(differing.sorted().joined(separator: " "))", "sites_digest": "\(digest)"])
            } else if changed {
                logger.info("Every ingest instance runs with the same sites file", metadata: ["sites_digest": "\(digest)"])
            }
        case .sitesReloadRefused(let path, let reason):
            reloadCounters["refused"]?.increment()
            statisticsState.withLock { $0.sitesFileReads += 1 }
            logger.error(
                "Sites file refused; the running sites are kept", metadata: ["path": "\(path ?? "none")", "error": "\(reason)"])
        case .queueDepth(let depth):
            queueGauge.record(depth)
        case .lag(let seconds):
            lagGauge.record(seconds)
            statisticsState.withLock { $0.lagSeconds = seconds }
        }
    }

    private func record(_ group: IngestEvent.CommittedGroup) {
        commitTimer.recordNanoseconds(group.nanoseconds)
        let (cleared, held) = heldBatches.withLock { held in (held.committed(group.agents, now: .now), held.agents.count) }
        agentsHeldGauge.record(held)
        if cleared { logger.notice("The database takes the held batches again") }
        batchCounters["committed"]?.increment(by: group.committed)
        batchCounters["duplicate"]?.increment(by: group.duplicates)
        batchCounters["not_served"]?.increment(by: group.notServed)
        sightingsCounter.increment(by: group.sightings)
        telemetryCounter.increment(by: group.telemetry)
        sensorReadingsCounter.increment(by: group.sensorReadings)
        lateReadingsCounter.increment(by: group.lateReadings)
        evictedBeaconsCounter.increment(by: group.evictedBeacons)
        addressFramesCounter.increment(by: group.framesStoredUnderAddress)
        addressBeaconsMergedCounter.increment(by: group.addressBeaconsMerged)
        framesWaitingGauge.record(group.framesWaiting)
        clonedBeaconsCounter.increment(by: group.newlyCloned.count)
        for clone in group.newlyCloned {
            logger.warning(
                "A beacon identity is advertised from two addresses at once",
                metadata: [
                    "beacon": "\(clone.beaconID)", "site": "\(clone.siteID)",
                    "since": "\(RFC3339.format(microseconds: clone.sinceMicros))",
                ])
        }
        for frame in group.undecodableFrames {
            Counter(IngestMetrics.undecodableFrames, [("reason", frame.reason)]).increment()
            let first = reportedUndecodable.withLock { reported in
                reported.count < 10_000 && reported.insert(frame.beaconID + " " + frame.reason).inserted
            }
            if first {
                logger.warning(
                    "A data frame could not be decoded; its readings are not stored",
                    metadata: ["beacon": "\(frame.beaconID)", "reason": "\(frame.reason)", "error": "\(frame.message)"])
            }
        }
        statisticsState.withLock {
            $0.lateReadings += group.lateReadings
            $0.telemetryCommitted += group.telemetry
            $0.sensorReadingsCommitted += group.sensorReadings
            $0.batchesCommitted += group.committed
            $0.batchesDuplicate += group.duplicates
            $0.batchesNotServed += group.notServed
            $0.sightingsCommitted += group.sightings
            $0.transactions += 1
            $0.agentsHeld = held
        }
    }
}

/// Whether something is said for the first time in `interval`, for at most `bound` things (past it they are all
/// forgotten and said again): an agent the sites file does not have reports every 10 s, and is said once an hour.
final class OncePerInterval: Sendable {
    private let said = Mutex<[String: ContinuousClock.Instant]>([:])
    let interval: Duration
    let bound: Int

    init(interval: Duration, bound: Int = 1000) {
        self.interval = interval
        self.bound = bound
    }

    func firstTime(_ key: String, now: ContinuousClock.Instant = .now) -> Bool {
        said.withLock { said in
            if let last = said[key], now - last < interval { return false }
            if said.count >= bound { said.removeAll() }
            said[key] = now
            return true
        }
    }
}
