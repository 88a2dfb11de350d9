import BeaconMessaging
import BeaconWire

/// The checks a batch passes before it reaches the database. Pure: the caller gives the time.
public struct BatchIntake: Sendable {
    public var sites: SitesConfiguration
    public var maximumBytes = BatchReader.maximumBytes
    /// How far beyond the ingest's clock a sighting may lie (agent clocks drift; a few minutes is generous).
    public var futureToleranceMicros: Int64 = 300_000_000
    /// Sightings before this are refused: an agent without a real-time clock that has not synchronised yet
    /// reports times near 1970. Default 2010-01-01 (replays of old captures remain welcome).
    public var earliestMicros: Int64 = 1_262_304_000_000_000

    public init(sites: SitesConfiguration) {
        self.sites = sites
    }

    /// A refused batch, with its header when that was valid and names a known agent on its own topic: its
    /// sequence can then be acknowledged (the batch is kept in `rejected_batches`), so that the agent moves on.
    public struct Failure: Error, Sendable {
        public var rejection: Rejection
        public var header: BatchHeader?
        /// The batch's sequence when its header could be read, acknowledgeable or not (to tell the agent).
        public var sequence: UInt64?

        init(_ reason: RejectionReason, _ message: String, header: BatchHeader? = nil, sequence: UInt64? = nil) {
            rejection = Rejection(reason, message)
            self.header = header
            self.sequence = header?.sequence ?? sequence
        }
    }

    public func check(topic: String, payload: [UInt8], nowMicros: Int64) -> Result<DecodedBatch, Failure> {
        check(topic: topic, parsed: AgentTopics(parsing: topic, kind: .batch), payload: payload, nowMicros: nowMicros)
    }

    /// The same, for a topic already parsed where it arrived (nil: not an agent's batch topic).
    public func check(topic: String, parsed: AgentTopics?, payload: [UInt8], nowMicros: Int64) -> Result<DecodedBatch, Failure> {
        guard let topics = parsed else {
            return .failure(Failure(.wrongTopic, "topic '\(escapedForLog(topic.prefix(200)))' is not beaconflow/v1/<site>/<agent>/batch"))
        }
        let (site, agent) = (topics.site, topics.agent)
        guard payload.count <= maximumBytes else {
            return .failure(Failure(.tooLarge, "batch is \(payload.count) bytes, the limit is \(maximumBytes)"))
        }
        let batch: DecodedBatch
        switch Result(catching: { () throws(BatchError) in try BatchReader.decode(payload) }) {
        case .success(let decoded):
            batch = decoded
        case .failure(let error):
            let reason: RejectionReason =
                switch error.code {
                case .unsupportedVersion: .unsupportedVersion
                case .tooLarge: .tooLarge
                default: .undecodable
                }
            let header = error.header.flatMap { header in
                header.siteID == site && header.agentID == agent && sites.agent(site: site, agent: agent) != nil ? header : nil
            }
            return .failure(Failure(reason, error.description, header: header, sequence: error.header?.sequence))
        }
        guard batch.siteID == site, batch.agentID == agent else {
            return .failure(
                Failure(
                    .topicMismatch,
                    "batch from site '\(batch.siteID.prefix(64))' agent '\(batch.agentID.prefix(64))' on the topic of site '\(site)' agent '\(agent)'",
                    sequence: batch.header.sequence))
        }
        guard sites.agent(site: site, agent: agent) != nil else {
            return .failure(
                Failure(.unknownAgent, "the sites file has no agent '\(agent)' in site '\(site)'", sequence: batch.header.sequence))
        }
        let times = batch.sightings.lazy.map(\.timeMicros) + batch.characteristicReads.lazy.map(\.timeMicros)
        if let latest = times.max(), latest > nowMicros + futureToleranceMicros {
            return .failure(
                Failure(
                    .badTimestamp,
                    "a sighting is \((latest - nowMicros) / 1_000_000) s ahead of the ingest's clock (tolerance \(futureToleranceMicros / 1_000_000) s)",
                    header: batch.header))
        }
        if let earliest = times.min(), earliest < earliestMicros {
            return .failure(
                Failure(
                    .badTimestamp,
                    "a sighting is dated \((earliestMicros - earliest) / 1_000_000) s before the earliest accepted time: the agent's clock is not set",
                    header: batch.header))
        }
        return .success(batch)
    }
}

/// Lets one event per key through per interval (the ingest's notices to agents), keeping at most `capacity`
/// keys: when full, keys quiet for an interval are forgotten, and a new key waits if none is.
public struct IntervalLimiter: Sendable {
    public var interval: Duration
    public var capacity: Int
    private var lastPassed: [String: ContinuousClock.Instant] = [:]

    public init(interval: Duration, capacity: Int = 10_000) {
        self.interval = interval
        self.capacity = capacity
    }

    public mutating func isDue(_ key: String, now: ContinuousClock.Instant) -> Bool {
        if let last = lastPassed[key], now - last < interval { return false }
        if lastPassed[key] == nil, lastPassed.count >= capacity {
            lastPassed = lastPassed.filter { now - $0.value < interval }
            guard lastPassed.count < capacity else { return false }
        }
        lastPassed[key] = now
        return true
    }
}
