import BeaconMessaging
import BeaconWire
import Foundation
import Logging
import MetricFamilies
import Metrics
import Mosquitto
import SwiftProtobuf

/// The agent's core, confined to one thread: sightings into batches, batches into the spool, spooled batches out
/// through the delivery window, acknowledgements back into the spool, and the periodic status.
///
/// Unchecked `Sendable`: it is created on one thread and then used only by the engine thread it is handed to.
final class AgentEngine: @unchecked Sendable {
    enum Input: Sendable {
        case reports([TimedReport])
        case mqtt(MQTTEvent)
        case sourceEnded(error: String?)
        case characteristicReads(GATTPoller.Result)
    }

    let configuration: AgentConfiguration
    let topics: AgentTopics
    let bootID: UInt64
    private let spool: Spool
    private let client: MQTTClient
    private let logger: Logger
    private var builder: BatchBuilder
    private var extractor: SightingExtractor
    private var window: DeliveryWindow
    private let startedAt = ContinuousClock.now
    private var lastStatus: ContinuousClock.Instant?
    private var lastSync = ContinuousClock.now
    private var lastError: String?
    private(set) var sourceEnded = false
    private(set) var sourceError: String?

    private var advertsSinceStatus = 0
    private var statusWindowStart = ContinuousClock.now
    private var advertsPerSecond = 0.0
    private(set) var batchesWritten = 0
    private(set) var batchesPublished = 0
    private(set) var sightings = 0

    private let advertsCounter = Counter(AgentMetrics.adverts)
    private let sightingsCounter = Counter(AgentMetrics.sightings)
    private let batchesCounter = Counter(AgentMetrics.batches)
    private let publishCounter = Counter(AgentMetrics.publishes)
    private let acknowledgedCounter = Counter(AgentMetrics.acknowledged)
    private let droppedCounter = Counter(AgentMetrics.dropped)
    /// Acknowledgements not believed (beyond the newest batch sealed, or not an acknowledgement at all).
    private let refusedAcknowledgementsCounter = Counter(AgentMetrics.refusedAcknowledgements)
    /// Acknowledgements that did not come within the timeout (the window then resends from the oldest batch).
    private let acknowledgementTimeoutsCounter = Counter(AgentMetrics.acknowledgementTimeouts)
    /// Timeouts in a row after which the agent says that no ingest acknowledges it (once per such stretch).
    static let unacknowledgedWarningTimeouts = 3
    private var warnedUnacknowledged = false
    /// Whether an ingest acknowledged anything since the agent started: if not, the first late acknowledgement is
    /// already worth saying (a site or agent no ingest knows, more often than a slow one).
    private var acknowledgedSinceStart = false
    /// Batches the ingest refused, by the reason it gave.
    private let refusedBatchesCounters = Dictionary(
        uniqueKeysWithValues: (RejectionReason.allCases.map(\.rawValue) + ["other"]).map {
            ($0, Counter(AgentMetrics.refusedBatches, [("reason", $0)]))
        })
    private var refusedBatches = 0
    private let spoolBytesGauge = Gauge(AgentMetrics.spoolBytes)
    private let spoolPendingGauge = Gauge(AgentMetrics.spoolPending)
    private let brokerConnectedGauge = Gauge(AgentMetrics.brokerConnected)
    private let skippedCounters = Dictionary(
        uniqueKeysWithValues: SightingExtractor.Skip.allCases.map {
            ($0, Counter(AgentMetrics.advertsSkipped, [("reason", $0.rawValue)]))
        })
    private var droppedReported = 0
    /// The `first_unacknowledged_sequence` each batch sealed in this run carries, so that a publish knows it
    /// without decoding the batch (one recovered from the spool is decoded once, at its first publish).
    private var sealedFirstUnacknowledged: [UInt64: UInt64] = [:]
    /// A replay being resumed or recorded.
    var replay: ReplayProgress?
    /// Frames waiting for their beacon's identity, and the frames ready for the batch (reused).
    private var hold = IdentityHold()
    private var ready: [IdentityHold.Frame] = []
    /// Report numbers of released frames not added to the batch yet (while one report's frames are added).
    private var unbatched: [Int64] = []

    init(configuration: AgentConfiguration, spool: Spool, client: MQTTClient, bootID: UInt64, logger: Logger) {
        self.configuration = configuration
        self.topics = configuration.topics
        self.spool = spool
        self.client = client
        self.bootID = bootID
        self.logger = logger
        builder = BatchBuilder(
            siteID: configuration.siteID, agentID: configuration.agentID, bootID: bootID,
            configuration: configuration.batch)
        extractor = SightingExtractor(configuration: configuration.extractor)
        window = DeliveryWindow(
            maximumInFlight: configuration.maximumInFlight,
            acknowledgementTimeoutNanoseconds: UInt64(configuration.acknowledgementTimeout.nanoseconds))
        window.acknowledge(through: spool.acknowledgedThrough)
    }

    /// Nothing left to do for a finite source: it ended, and every batch was acknowledged.
    var isDrained: Bool { sourceEnded && builder.isEmpty && spool.pendingCount == 0 }
    var pendingBatches: Int { spool.pendingCount }
    var spoolBytes: Int64 { Int64(spool.byteCount) }
    var isConnected: Bool { window.isConnected }

    func handle(_ input: Input, now: UInt64) {
        switch input {
        case .reports(let reports):
            for timed in reports { add(timed, now: now) }
        case .mqtt(let event):
            handle(event, now: now)
        case .characteristicReads(let result):
            let beacon = extractor.beaconKey(for: result.address, timeMicros: result.timeMicros)
            for reading in result.readings {
                builder.add(
                    CharacteristicRead(
                        beacon: beacon, timeMicros: result.timeMicros, characteristic: reading.characteristic,
                        value: reading.value), nowNanoseconds: now)
            }
        case .sourceEnded(let error):
            sourceEnded = true
            sourceError = error
            if let error { lastError = error }
            releaseHeld()
            seal()
        }
    }

    /// Seals a due batch, flushes the spool when its policy says so, publishes what the window allows, and sends
    /// the status when due.
    func tick(now: UInt64) {
        if builder.isDue(nowNanoseconds: now) { seal() }
        if spool.configuration.fsync == .periodic, ContinuousClock.now - lastSync >= configuration.syncInterval {
            lastSync = ContinuousClock.now
            do { try spool.sync() } catch { record(error: "\(error)") }
        }
        pump(now: now)
        if window.isConnected, lastStatus.map({ ContinuousClock.now - $0 >= configuration.statusInterval }) ?? true {
            publishStatus(online: true)
        }
    }

    /// Stops intake: seals the open batch and flushes the spool.
    func shutDown() {
        releaseHeld()
        seal()
        do { try spool.sync() } catch { record(error: "\(error)") }
    }

    private func add(_ timed: TimedReport, now: UInt64) {
        advertsCounter.increment()
        advertsSinceStatus += 1
        switch extractor.sighting(of: timed.report, timeMicros: timed.timeMicros) {
        case .success(let sighting):
            sightings += 1
            sightingsCounter.increment()
            ready.removeAll(keepingCapacity: true)
            hold.admit(sighting, address: timed.report.address.value, ordinal: timed.ordinal, into: &ready)
            if let ordinal = timed.ordinal { replay?.consumed = ordinal + 1 }
            addToBatch(ready, now: now)
        case .failure(let reason):
            if let ordinal = timed.ordinal { replay?.consumed = ordinal + 1 }
            skippedCounters[reason.skip]?.increment()
            if let error = reason.error {
                logger.debug(
                    "Advert skipped", metadata: ["reason": "\(reason.skip.rawValue)", "error": "\(error)"])
            }
        }
    }

    private func addToBatch(_ frames: [IdentityHold.Frame], now: UInt64) {
        unbatched.removeAll(keepingCapacity: true)
        for frame in frames { if let ordinal = frame.ordinal { unbatched.append(ordinal) } }
        for frame in frames {
            if !builder.fits(frame.sighting) { seal() }
            let full = builder.add(frame.sighting, nowNanoseconds: now)
            if let ordinal = frame.ordinal { unbatched.removeAll { $0 == ordinal } }
            if full { seal() }
        }
    }

    /// Releases the held frames into the batch (the input ended, or the agent stops).
    private func releaseHeld() {
        addToBatch(hold.releaseAll(), now: DispatchTime.now().uptimeNanoseconds)
    }

    private func seal() {
        let sequence = spool.nextSequence
        let firstUnacknowledged = min(spool.firstUnacknowledgedSequence, sequence)
        guard
            let batch = builder.seal(
                sequence: sequence, firstUnacknowledgedSequence: firstUnacknowledged,
                agentClockMicros: Self.wallClockMicros())
        else { return }
        do {
            let bytes = try batch.wireBytes()
            var waiting: [Int64] = []
            if let replay {
                // Before the batch: where the replay resumes whether or not the append below completes.
                waiting = (hold.heldOrdinals + unbatched).sorted()
                try ReplayPosition(
                    input: replay.input, sequence: sequence, reports: replay.consumed, unbatched: waiting,
                    reportsBefore: replay.spooled, unbatchedBefore: replay.spooledUnbatched
                ).write(directory: spool.configuration.directory, durable: spool.configuration.fsync == .always)
            }
            try spool.append(sequence: sequence, payload: bytes)
            sealedFirstUnacknowledged[sequence] = firstUnacknowledged
            if let consumed = replay?.consumed {
                replay?.spooled = consumed
                replay?.spooledUnbatched = waiting
            }
            batchesWritten += 1
            batchesCounter.increment()
        } catch {
            // The batch cannot be kept: count it and say why (the spool error names the file and errno).
            record(error: "batch \(sequence) not spooled: \(error)")
            logger.error("Batch could not be written to the spool", metadata: ["sequence": .stringConvertible(sequence), "error": "\(error)"])
        }
        let dropped = spool.droppedBatches
        if dropped > droppedReported {
            droppedCounter.increment(by: dropped - droppedReported)
            droppedReported = dropped
        }
        spoolBytesGauge.record(spool.byteCount)
        spoolPendingGauge.record(spool.pendingCount)
    }

    private func pump(now: UInt64) {
        let timeoutsBefore = window.timeoutsWithoutAcknowledgement
        let capacity = window.capacity(nowNanoseconds: now)
        if window.timeoutsWithoutAcknowledgement > timeoutsBefore { acknowledgementTimedOut() }
        guard capacity > 0 else { return }
        let batches: [(sequence: UInt64, payload: [UInt8])]
        do {
            batches = try spool.pending(after: window.highestPublished, limit: capacity)
        } catch {
            record(error: "\(error)")
            return
        }
        for batch in batches {
            do {
                let first = min(spool.firstUnacknowledgedSequence, batch.sequence)
                let sealed = sealedFirstUnacknowledged[batch.sequence] ?? Self.firstUnacknowledged(of: batch.payload)
                sealedFirstUnacknowledged[batch.sequence] = sealed
                let payload = Self.updatingFirstUnacknowledged(batch.payload, sealedWith: sealed, to: first)
                try client.publish(topic: topics.batch, payload: payload, qos: 1)
                window.published(batch.sequence, nowNanoseconds: now)
                batchesPublished += 1
                publishCounter.increment()
            } catch {
                record(error: "\(error)")
                return
            }
        }
    }

    /// Counts a late acknowledgement; after a few in a row (the first, when nothing was acknowledged since the
    /// agent started), says once what to check: the broker takes the batches but no ingest commits them (no
    /// ingest running, or none whose sites file lists this site and agent: the ingest's log names a site or agent
    /// it does not know).
    private func acknowledgementTimedOut() {
        acknowledgementTimeoutsCounter.increment()
        let bound = acknowledgedSinceStart ? Self.unacknowledgedWarningTimeouts : 1
        guard !warnedUnacknowledged, window.timeoutsWithoutAcknowledgement >= bound else { return }
        warnedUnacknowledged = true
        logger.warning(
            "No ingest acknowledges this agent's batches; check that an ingest runs on this broker with this site and agent in its sites file (its log names a site or agent it does not know)",
            metadata: [
                "site": "\(configuration.siteID)", "agent": "\(configuration.agentID)", "broker": "\(client.currentBroker)",
                "timeouts": .stringConvertible(window.timeoutsWithoutAcknowledgement),
                "waited_s": .stringConvertible(Double(window.timeoutsWithoutAcknowledgement) * Double(window.acknowledgementTimeoutNanoseconds) / 1e9),
            ])
    }

    /// The `first_unacknowledged_sequence` a spooled batch was sealed with (nil when it does not decode).
    static func firstUnacknowledged(of payload: [UInt8]) -> UInt64? {
        (try? WireBatch(serializedBytes: payload))?.firstUnacknowledgedSequence
    }

    /// A spooled batch as it goes out: when the spool has since dropped or had acknowledged the batches its
    /// `first_unacknowledged_sequence` (`sealed`) named, the field is sent again with the oldest sequence actually
    /// held, so that the ingest does not wait for batches that no longer exist. Protobuf takes the last value of a
    /// non-repeated scalar field, so the field is appended (a few bytes) rather than the batch re-encoded.
    static func updatingFirstUnacknowledged(_ payload: [UInt8], sealedWith sealed: UInt64?, to first: UInt64) -> [UInt8] {
        guard let sealed, sealed < first else { return payload }
        var updated = payload
        updated.append(6 << 3)  // field 6 (first_unacknowledged_sequence), varint
        var value = first
        while value >= 0x80 {
            updated.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        updated.append(UInt8(value))
        return updated
    }

    private func handle(_ event: MQTTEvent, now: UInt64) {
        switch event {
        case .connected(let sessionPresent):
            logger.info(
                "Connected to the broker",
                metadata: ["broker": "\(client.currentBroker)", "session_present": .stringConvertible(sessionPresent)])
            window.connected()
            brokerConnectedGauge.record(1)
            publishStatus(online: true)
            pump(now: now)
        case .disconnected(let reason):
            if window.isConnected {
                logger.warning("Disconnected from the broker", metadata: ["reason": "\(reason)"])
            }
            record(error: "broker: \(reason)")
            window.disconnected()
            brokerConnectedGauge.record(0)
        case .published(_, let reasonCode) where reasonCode >= 0x80:
            record(error: "the broker refused a publish (MQTT reason code \(reasonCode))")
            logger.error("Broker refused a publish", metadata: ["reason_code": .stringConvertible(reasonCode)])
        case .published:
            break
        case .message(let topic, let payload, _) where topic == topics.rejection:
            refused(payload)
        case .message(let topic, let payload, let retained):
            guard topic == topics.ack else { return }
            switch Acknowledgement.action(
                payload: payload, retained: retained, acknowledged: window.acknowledged, nextSequence: spool.nextSequence,
                pending: spool.pendingCount)
            {
            case .none:
                break
            case .acknowledge(let sequence):
                acknowledge(through: sequence, adopting: false, now: now)
            case .adopt(let sequence):
                acknowledge(through: sequence, adopting: true, now: now)
            case .refuse(let reason):
                refusedAcknowledgementsCounter.increment()
                record(error: "acknowledgement refused: \(reason)")
                logger.warning("Acknowledgement refused; nothing deleted", metadata: ["reason": "\(escapedForLog(reason))"])
            }
        }
    }

    /// The ingest refused a batch: said in the log and the status, so that the cause is seen here.
    private func refused(_ payload: [UInt8]) {
        guard let notice = RejectionNotice(payload: payload) else {
            logger.warning("A rejection notice could not be read", metadata: ["bytes": .stringConvertible(payload.count)])
            return
        }
        refusedBatches += 1
        refusedBatchesCounters[notice.reasonLabel]?.increment()
        let batch = notice.sequence.map { "batch \($0)" } ?? "a batch"
        let outcome = notice.acknowledged ? "kept by the ingest and acknowledged" : "kept here and sent again"
        record(error: "the ingest refused \(batch) (\(notice.reason)): \(notice.detail); \(outcome)")
        logger.error(
            "The ingest refused a batch",
            metadata: [
                "sequence": .stringConvertible(notice.sequence.map(String.init) ?? "unknown"), "reason": "\(escapedForLog(notice.reason.prefix(64)))",
                "error": "\(escapedForLog(notice.detail))", "acknowledged": .stringConvertible(notice.acknowledged),
            ])
    }

    private func acknowledge(through sequence: UInt64, adopting: Bool, now: UInt64) {
        acknowledgedSinceStart = true
        do {
            if adopting {
                // Beyond anything this spool wrote: not about these batches (see Spool.adoptAcknowledgement).
                sealedFirstUnacknowledged = [:]
                try spool.adoptAcknowledgement(beyondWritten: sequence) { newSequence, firstUnacknowledged, payload in
                    guard var batch = try? WireBatch(serializedBytes: payload) else { return nil }
                    batch.sequence = newSequence
                    batch.firstUnacknowledgedSequence = firstUnacknowledged
                    return try? batch.serializedBytes()
                }
                window = DeliveryWindow(
                    maximumInFlight: window.maximumInFlight,
                    acknowledgementTimeoutNanoseconds: window.acknowledgementTimeoutNanoseconds)
                window.connected()
            } else {
                let pending = spool.pendingCount
                try spool.acknowledge(through: sequence)
                sealedFirstUnacknowledged = sealedFirstUnacknowledged.filter { $0.key > spool.acknowledgedThrough }
                acknowledgedCounter.increment(by: max(0, pending - spool.pendingCount))
            }
        } catch {
            record(error: "\(error)")
        }
        window.acknowledge(through: sequence)
        if warnedUnacknowledged, window.timeoutsWithoutAcknowledgement == 0 {
            warnedUnacknowledged = false
            logger.info("An ingest acknowledges this agent's batches again", metadata: ["through": .stringConvertible(sequence)])
        }
        spoolBytesGauge.record(spool.byteCount)
        spoolPendingGauge.record(spool.pendingCount)
        pump(now: now)
    }

    /// The last status before a clean disconnect (which suppresses the will); its message id, or nil when not
    /// connected (the broker then already holds the will's offline status) or not sent.
    func publishFinalStatus() -> Int32? {
        window.isConnected ? publishStatus(online: false) : nil
    }

    @discardableResult
    func publishStatus(online: Bool) -> Int32? {
        let elapsed = ContinuousClock.now - statusWindowStart
        if elapsed >= .seconds(1) {
            advertsPerSecond = Double(advertsSinceStatus) / elapsed.seconds
            advertsSinceStatus = 0
            statusWindowStart = ContinuousClock.now
        }
        lastStatus = ContinuousClock.now
        let payload = status(online: online).payload
        do {
            return try client.publish(topic: topics.status, payload: payload, qos: 1, retain: true)
        } catch {
            logger.warning("Status could not be published", metadata: ["error": "\(error)"])
            return nil
        }
    }

    func status(online: Bool) -> AgentStatus {
        var status = AgentStatus(online: online)
        status.siteID = configuration.siteID
        status.agentID = configuration.agentID
        status.bootID = hexString(bootID, digits: 16)
        status.clockMicros = Self.wallClockMicros()
        status.uptimeSeconds = ((ContinuousClock.now - startedAt).seconds * 10).rounded() / 10
        status.advertsPerSecond = (advertsPerSecond * 10).rounded() / 10
        status.sightings = Int64(sightings)
        status.batches = Int64(batchesWritten)
        status.lastSequence = Int64(spool.nextSequence - 1)
        status.acknowledgedThrough = Int64(spool.acknowledgedThrough)
        status.spoolBatches = Int64(spool.pendingCount)
        status.spoolBytes = Int64(spool.byteCount)
        status.droppedBatches = Int64(spool.droppedBatches)
        status.refusedBatches = Int64(refusedBatches)
        status.lastError = lastError
        return status
    }

    private func record(error: String) {
        lastError = error
    }

    static func wallClockMicros() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}
