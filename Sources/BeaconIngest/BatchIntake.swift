import BeaconWire

/// Why a batch was refused: a bounded set, used as the metrics label and stored in `rejected_batches.reason`.
public enum RejectionReason: String, Sendable, CaseIterable {
    /// The topic is not `beaconflow/v1/<site>/<agent>/batch`.
    case wrongTopic = "wrong_topic"
    case tooLarge = "too_large"
    /// Not a valid batch: not protobuf, inconsistent columns, an invalid field.
    case undecodable
    case unsupportedVersion = "unsupported_version"
    /// The batch names another site or agent than its topic.
    case topicMismatch = "topic_mismatch"
    /// The sites file does not list the agent.
    case unknownAgent = "unknown_agent"
    /// Sighting times in the future beyond the tolerance, or before the agent's clock can have been set.
    case badTimestamp = "bad_timestamp"
    /// PostgreSQL refused the rows (e.g. text it cannot store); the batch alone, its neighbours go in.
    case refusedByDatabase = "database_refused"
    /// The agent's sequence is committed already with other content (boot id, seal time or number of sightings):
    /// the batch is kept here, the committed one stays.
    case sequenceReused = "sequence_reused"
}

/// A refused batch: the reason and a message that names the problem (stored with the raw bytes).
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: RejectionReason
    public var message: String

    public init(_ reason: RejectionReason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { "\(reason.rawValue): \(message)" }
}

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

    /// The site and agent of a `beaconflow/v1/<site>/<agent>/<kind>` topic, when it is one.
    public static func agentTopic(_ topic: String, kind: String) -> (site: String, agent: String)? {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "beaconflow", parts[1] == "v1", parts[4] == kind,
            isValidIdentifier(String(parts[2])), isValidIdentifier(String(parts[3]))
        else { return nil }
        return (String(parts[2]), String(parts[3]))
    }

    /// A refused batch, with its header when that was valid and names a known agent on its own topic: its
    /// sequence can then be acknowledged (the batch is kept in `rejected_batches`), so that the agent moves on.
    public struct Failure: Error, Sendable {
        public var rejection: Rejection
        public var header: BatchHeader?

        init(_ reason: RejectionReason, _ message: String, header: BatchHeader? = nil) {
            rejection = Rejection(reason, message)
            self.header = header
        }
    }

    public func check(topic: String, payload: [UInt8], nowMicros: Int64) -> Result<DecodedBatch, Failure> {
        guard let (site, agent) = Self.agentTopic(topic, kind: "batch") else {
            return .failure(Failure(.wrongTopic, "topic '\(escapedForLog(topic.prefix(200)))' is not beaconflow/v1/<site>/<agent>/batch"))
        }
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
            return .failure(Failure(reason, error.description, header: header))
        }
        guard batch.siteID == site, batch.agentID == agent else {
            return .failure(
                Failure(
                    .topicMismatch,
                    "batch from site '\(batch.siteID.prefix(64))' agent '\(batch.agentID.prefix(64))' on the topic of site '\(site)' agent '\(agent)'"
                ))
        }
        guard sites.agent(site: site, agent: agent) != nil else {
            return .failure(Failure(.unknownAgent, "the sites file has no agent '\(agent)' in site '\(site)'"))
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
