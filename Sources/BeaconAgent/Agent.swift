import BeaconMessaging
import BeaconWire
import Dispatch
import Foundation
import Logging
import Mosquitto
import Synchronization
import WorkQueue

/// The edge agent: a source thread, an MQTT connection and the engine thread, until the source ends and every
/// batch is acknowledged (a replay), or until `requestStop()` (a signal).
public final class Agent: Sendable {
    public enum Outcome: Sendable, Equatable {
        /// The source ended and the ingest acknowledged every batch.
        case finished
        /// Stopped on request; unacknowledged batches stay in the spool for the next start.
        case stopped(pendingBatches: Int)
        /// The source ended but batches were still unacknowledged when the drain timeout passed.
        case undelivered(pendingBatches: Int)
        /// The source failed (e.g. a missing or malformed capture); what it delivered before was kept.
        case sourceFailed(String)
    }

    /// What `/healthz` reports: whether the broker connection is up, and how much waits in the spool.
    public struct Health: Sendable, Equatable {
        public var brokerConnected = false
        public var pendingBatches = 0
        public var spoolBytes: Int64 = 0
    }

    public let configuration: AgentConfiguration
    private let currentHealth = Mutex(Health())
    /// The engine's state as of its last turn (every 50 ms at most).
    public var health: Health { currentHealth.withLock { $0 } }
    private let source: any AdvertSource
    private let gattPoller: GATTPoller?
    private let logger: Logger
    private let stop = StopSignal()

    public init(
        configuration: AgentConfiguration, source: any AdvertSource, gattPoller: GATTPoller? = nil, logger: Logger
    ) {
        self.configuration = configuration
        self.source = source
        self.gattPoller = gattPoller
        self.logger = logger
    }

    /// Asks the agent to stop intake, seal and flush the open batch, and return.
    public func requestStop() { stop.stop() }

    /// Runs the agent. Throws before anything starts when the spool cannot be opened or the MQTT client cannot
    /// be set up.
    public func run() async throws -> Outcome {
        let spool = try Spool(configuration.spool, logger: logger)
        let bootID = UInt64.random(in: 1...UInt64.max)
        let topics = configuration.topics
        var mqtt = configuration.broker.clientConfiguration(
            clientID: "beaconflow-agent-\(configuration.siteID)-\(configuration.agentID)", tls: configuration.tls)
        mqtt.sessionExpirySeconds = configuration.sessionExpirySeconds
        mqtt.failover = configuration.failoverBrokers.map(\.endpoint)
        // The broker publishes this, retained, if the agent vanishes without a clean disconnect.
        var will = AgentStatus(online: false)
        will.siteID = configuration.siteID
        will.agentID = configuration.agentID
        will.bootID = hexString(bootID, digits: 16)
        will.lastError = "connection lost"
        mqtt.will = MQTTClient.Will(topic: topics.status, payload: will.payload, retain: true)
        let client = try MQTTClient(mqtt, logger: logger)
        let engine = AgentEngine(
            configuration: configuration, spool: spool, client: client, bootID: bootID, logger: logger)
        var source = self.source
        // A capture that cannot be read fails as the source runs, with its own message.
        if let resumable = source as? any ResumableSource, let input = try? resumable.inputIdentity() {
            let start = configuration.replayFromStart
                ? (reports: 0, unbatched: []) : ReplayPosition.resume(input: input, directory: configuration.spool.directory, nextSequence: spool.nextSequence)
            if start.reports > 0 {
                logger.info(
                    "Replay resumes after what the spool holds",
                    metadata: ["reports_skipped": .stringConvertible(start.reports - Int64(start.unbatched.count))])
                source = resumable.starting(at: start.reports, again: start.unbatched)
            }
            engine.replay = ReplayProgress(input: input, consumed: start.reports, spooled: start.reports, spooledUnbatched: start.unbatched)
        }
        return try await run(engine: engine, client: client, source: source)
    }

    private func run(engine: AgentEngine, client: MQTTClient, source: any AdvertSource) async throws -> Outcome {
        let topics = configuration.topics
        let queue = BlockingQueue<AgentEngine.Input>(capacity: 64)
        try client.subscribe(topic: topics.ack, qos: 1)
        try client.subscribe(topic: topics.rejection, qos: 1)
        let forwarder = Task {
            for await event in client.events { queue.pushUrgent(.mqtt(event)) }
        }
        let connection = Task { await client.run() }
        logger.info(
            "Agent started",
            metadata: [
                "site": "\(configuration.siteID)", "agent": "\(configuration.agentID)", "source": "\(source.name)",
                "broker": "\(configuration.broker.redacted)", "boot_id": "\(hexString(engine.bootID, digits: 16))",
            ])

        Thread.detachNewThread { [self] in
            var failure: String?
            do {
                try source.run(deliver: { queue.push(.reports($0)) }, stop: stop)
            } catch {
                failure = "\(error)"
            }
            queue.pushUrgent(.sourceEnded(error: failure))
        }

        if let gattPoller {
            Thread.detachNewThread { [self] in
                gattPoller.run(deliver: { queue.pushUrgent(.characteristicReads($0)) }, stop: stop)
            }
        }

        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            Thread.detachNewThread { [self] in
                let outcome = runEngine(engine, queue: queue)
                // The source and the poller end with the engine.
                stop.stop()
                // A clean disconnect suppresses the will: say offline ourselves, and disconnect once the broker has
                // it.
                if let messageID = engine.publishFinalStatus() {
                    awaitPublished(messageID, queue: queue, within: Self.stopGrace)
                }
                continuation.resume(returning: outcome)
            }
        }
        connection.cancel()
        await connection.value
        forwarder.cancel()
        queue.close()
        return outcome
    }

    /// How long a stopping agent waits for the acknowledgement of what it sealed last, while connected, and for
    /// the broker to take its offline status.
    static let stopGrace: Duration = .seconds(3)

    /// Waits until the broker acknowledges the message, the connection drops or `within` passes.
    private func awaitPublished(_ messageID: Int32, queue: BlockingQueue<AgentEngine.Input>, within: Duration) {
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            let left = deadline - .now
            for input in queue.popAll(timeout: Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18) {
                switch input {
                case .mqtt(.published(messageID, _)), .mqtt(.disconnected): return
                default: continue
                }
            }
        }
    }

    /// The engine thread: inputs and ticks until the source is drained or a stop is requested.
    private func runEngine(_ engine: AgentEngine, queue: BlockingQueue<AgentEngine.Input>) -> Outcome {
        var drainDeadline: UInt64?
        /// Set at the stop request: intake has stopped, and what was sealed last is delivered until then.
        var stopDeadline: UInt64?
        while true {
            let inputs = queue.popAll(timeout: 0.05)
            let now = DispatchTime.now().uptimeNanoseconds
            for input in inputs {
                // After the stop request no advert is taken: it could no longer be sealed.
                if stopDeadline != nil, case .reports = input { continue }
                engine.handle(input, now: now)
            }
            engine.tick(now: now)
            let health = Health(brokerConnected: engine.isConnected, pendingBatches: engine.pendingBatches, spoolBytes: engine.spoolBytes)
            currentHealth.withLock { $0 = health }
            if stop.isStopped {
                if stopDeadline == nil {
                    engine.shutDown()
                    stopDeadline = now + UInt64(Self.stopGrace.nanoseconds)
                }
                // The last batches (the open one, frames held for an identity) go out while the broker is there,
                // for a moment; whatever is not acknowledged stays spooled for the next start.
                guard engine.pendingBatches == 0 || !engine.isConnected || now >= stopDeadline ?? 0 else { continue }
                logger.info("Agent stopped", metadata: ["pending_batches": .stringConvertible(engine.pendingBatches)])
                return .stopped(pendingBatches: engine.pendingBatches)
            }
            guard engine.sourceEnded else { continue }
            if engine.isDrained {
                if let error = engine.sourceError { return .sourceFailed(error) }
                logger.info("Source ended and every batch was acknowledged")
                return .finished
            }
            let deadline = drainDeadline ?? now + UInt64(configuration.drainTimeout.nanoseconds)
            drainDeadline = deadline
            if now >= deadline {
                if let error = engine.sourceError { return .sourceFailed(error) }
                return .undelivered(pendingBatches: engine.pendingBatches)
            }
        }
    }
}
