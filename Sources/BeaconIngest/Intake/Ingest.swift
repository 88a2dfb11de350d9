import BeaconMessaging
import Foundation
import Logging
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
    enum Item: Sendable {
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
    let stopRequested = StopSignal()
    let reloads: Mutex<SitesReloads>
    /// Live presence, when configured: used on the writer thread only; `presenceEvents` is what the brokers' threads
    /// tell it.
    let presence: Mutex<PresencePublisher?>
    let presenceEvents = Mutex(PresenceEvents())
    /// Metrics, statistics and logs of what happens.
    let instruments: IngestInstruments
    /// The database's clock, by which every time is judged.
    public let clock = IngestClock()
    let noticesSent = Mutex(IntervalLimiter(interval: .seconds(10)))

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
    public func requestStop() { stopRequested.stop() }

    /// Reads the sites file again (SIGHUP), on a thread of its own, for the writer to apply between two
    /// transactions; a file that does not load is refused and the running sites kept. Applied once PostgreSQL is
    /// connected.
    public func requestReload() { startReadingSitesFile() }

    var shouldStop: Bool { stopRequested.isStopped }

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
        // A site's batches are subscribed once it is claimed. A session the broker kept may hold any of them, and
        // the per-site status filters of earlier versions.
        for site in configuration.sites.sites {
            for filter in SiteCoordinator.subscriptionFilters(site: site.id, group: configuration.sharedSubscriptionGroup)
                + [AgentTopics.siteFilter(site: site.id, kind: .status)]
            {
                try client.unsubscribe(topic: filter)
            }
        }
        // Every status, of every site: those of sites served elsewhere are passed over at the writer.
        try client.subscribe(topic: AgentTopics.statusFilter, qos: 1)

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
        await withDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            logger.info(
                "Ingest started", metadata: ["instance": "\(configuration.mqtt.clientID)", "sites": .stringConvertible(configuration.sites.sites.count)])
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread { [self] in
                    var writer = WriterThread(ingest: self, queue: queue, client: client)
                    writer.run()
                    continuation.resume()
                }
            }
            if configuration.presence != nil {
                // The others (if any) say online again when they see it.
                try? client.publish(topic: PresenceTopics.availability, payload: PresenceTopics.offline, qos: 1, retain: true)
            }
            // The brokers' connections end with the writer.
            group.cancelAll()
        }
        for forwarder in forwarders {
            forwarder.cancel()
            _ = await forwarder.result
        }
        logger.info("Ingest stopped", metadata: Logger.Metadata(uniqueKeysWithValues: statistics.fields.map { ($0.name, .string($0.value)) }))
    }

    /// Waits until `deadline`; a stop request ends the wait at once.
    func sleep(until deadline: ContinuousClock.Instant) { stopRequested.wait(until: deadline) }
}

