import BeaconWire
import Foundation

/// The ingest's retained acknowledgement on `ack`, `{"committed_through": N}`: every batch of the agent through
/// sequence N is in the database.
public struct Acknowledgement: Codable, Equatable, Sendable {
    public var committedThrough: UInt64

    public init(committedThrough: UInt64) {
        self.committedThrough = committedThrough
    }

    enum CodingKeys: String, CodingKey {
        case committedThrough = "committed_through"
    }

    public var payload: [UInt8] { encodedPayload(self) }

    /// The acknowledgement in a message, or nil when it is not one (at most 256 bytes).
    public init?(payload: [UInt8]) {
        guard payload.count <= 256, let decoded = try? JSONDecoder().decode(Self.self, from: Data(payload)) else { return nil }
        self = decoded
    }
}

/// Why a batch was refused: a bounded set, used as the metrics label, stored in `rejected_batches.reason` and
/// sent to the agent in a `RejectionNotice`.
public enum RejectionReason: String, Sendable, CaseIterable, Codable {
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

/// A refused batch: the reason and a message that names the problem.
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: RejectionReason
    public var message: String

    public init(_ reason: RejectionReason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { "\(reason.rawValue): \(message)" }
}

/// What the ingest tells an agent on `rejection` when it refuses one of its batches, so that the reason is seen
/// at the edge (the agent logs it and shows it in its status), not only in the ingest's log.
public struct RejectionNotice: Codable, Equatable, Sendable {
    /// The batch's sequence, when its header could be read.
    public var sequence: UInt64?
    /// A `RejectionReason` raw value; an agent older than the ingest may meet one it does not know.
    public var reason: String
    public var detail: String
    /// The batch is kept in `rejected_batches` and acknowledged, so the agent drops it; otherwise the agent keeps
    /// it and sends it again until the cause is fixed (an agent missing from the sites file, for one).
    public var acknowledged: Bool

    public init(sequence: UInt64?, rejection: Rejection, acknowledged: Bool) {
        self.sequence = sequence
        reason = rejection.reason.rawValue
        detail = String(rejection.message.prefix(Self.maximumDetail))
        self.acknowledged = acknowledged
    }

    static let maximumDetail = 1000

    public var payload: [UInt8] { encodedPayload(self) }

    /// The notice in a message, or nil when it is not one (at most 4 KiB).
    public init?(payload: [UInt8]) {
        guard payload.count <= 4096, let decoded = try? JSONDecoder().decode(Self.self, from: Data(payload)) else { return nil }
        self = decoded
        detail = String(detail.prefix(Self.maximumDetail))
    }

    /// The reason as a bounded metrics label: a known reason, or `other`.
    public var reasonLabel: String { RejectionReason(rawValue: reason)?.rawValue ?? "other" }
}

/// An agent's status on `status` (retained), and the last will the broker publishes in its place: JSON whose
/// field names are a contract (docs/wire-format.md). The ingest checks each field it reads: a status is input
/// like a batch.
public struct AgentStatus: Codable, Equatable, Sendable {
    public var online: Bool
    public var siteID: String?
    public var agentID: String?
    /// 16 hex digits, new at every start.
    public var bootID: String?
    /// The agent's wall clock when it sent the status (microseconds since 1970).
    public var clockMicros: Int64?
    public var uptimeSeconds: Double?
    public var advertsPerSecond: Double?
    public var sightings: Int64?
    public var batches: Int64?
    public var lastSequence: Int64?
    public var acknowledgedThrough: Int64?
    public var spoolBatches: Int64?
    public var spoolBytes: Int64?
    public var droppedBatches: Int64?
    /// Batches the ingest refused (each told on `rejection`).
    public var refusedBatches: Int64?
    public var lastError: String?

    public init(online: Bool) {
        self.online = online
    }

    enum CodingKeys: String, CodingKey {
        case online
        case siteID = "site_id"
        case agentID = "agent_id"
        case bootID = "boot_id"
        case clockMicros = "clock_us"
        case uptimeSeconds = "uptime_s"
        case advertsPerSecond = "adverts_per_s"
        case sightings, batches
        case lastSequence = "last_sequence"
        case acknowledgedThrough = "acknowledged_through"
        case spoolBatches = "spool_batches"
        case spoolBytes = "spool_bytes"
        case droppedBatches = "dropped_batches"
        case refusedBatches = "refused_batches"
        case lastError = "last_error"
    }

    /// Why a status message was ignored.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    public static let maximumBytes = 64 * 1024

    /// Reads and checks a status message.
    public init(json payload: [UInt8]) throws(Invalid) {
        guard payload.count <= Self.maximumBytes else {
            throw Invalid(description: "status is \(payload.count) bytes, the limit is \(Self.maximumBytes)")
        }
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(payload))
        } catch let error as Invalid {
            throw error
        } catch {
            throw Invalid(description: "status is not a JSON object")
        }
    }

    public init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<CodingKeys>
        do { container = try decoder.container(keyedBy: CodingKeys.self) } catch { throw Invalid(description: "status is not a JSON object") }
        guard let online = try? container.decode(Bool.self, forKey: .online) else {
            throw Invalid(description: "status has no boolean 'online'")
        }
        self.online = online
        func text(_ key: CodingKeys, limit: Int) throws(Invalid) -> String? {
            guard container.contains(key), (try? container.decodeNil(forKey: key)) != true else { return nil }
            guard let value = try? container.decode(String.self, forKey: key) else {
                throw Invalid(description: "status field '\(key.rawValue)' is not a string")
            }
            return String(value.prefix(limit))
        }
        /// Integers beyond 2^53 are not exact as JSON doubles, so no counter goes beyond.
        func number(_ key: CodingKeys, in range: ClosedRange<Double> = 0...Double(1 << 53)) throws(Invalid) -> Double? {
            guard container.contains(key), (try? container.decodeNil(forKey: key)) != true else { return nil }
            guard let value = try? container.decode(Double.self, forKey: key), range.contains(value) else {
                throw Invalid(
                    description: "status field '\(key.rawValue)' is not a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        siteID = try text(.siteID, limit: 64)
        agentID = try text(.agentID, limit: 64)
        bootID = try text(.bootID, limit: 64)
        clockMicros = try number(.clockMicros, in: 0...Double(BatchReader.latestMicros)).map { Int64($0) }
        uptimeSeconds = try number(.uptimeSeconds)
        advertsPerSecond = try number(.advertsPerSecond, in: 0...10_000_000)
        sightings = try number(.sightings).map { Int64($0) }
        batches = try number(.batches).map { Int64($0) }
        /// Sequences run to 2^62, past what a double holds exactly: read as integers from the text.
        func sequence(_ key: CodingKeys) throws(Invalid) -> Int64? {
            guard container.contains(key), (try? container.decodeNil(forKey: key)) != true else { return nil }
            guard let value = try? container.decode(Int64.self, forKey: key), (0...Int64(BatchReader.maximumSequence)).contains(value)
            else {
                throw Invalid(description: "status field '\(key.rawValue)' is not a whole number from 0 to 2^62")
            }
            return value
        }
        lastSequence = try sequence(.lastSequence)
        acknowledgedThrough = try sequence(.acknowledgedThrough)
        spoolBatches = try number(.spoolBatches).map { Int64($0) }
        spoolBytes = try number(.spoolBytes).map { Int64($0) }
        droppedBatches = try number(.droppedBatches).map { Int64($0) }
        refusedBatches = try number(.refusedBatches).map { Int64($0) }
        lastError = try text(.lastError, limit: 500)
    }

    /// Every field but `last_error` is left out when unknown; `last_error` is always there (null when none).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(online, forKey: .online)
        try container.encodeIfPresent(siteID, forKey: .siteID)
        try container.encodeIfPresent(agentID, forKey: .agentID)
        try container.encodeIfPresent(bootID, forKey: .bootID)
        try container.encodeIfPresent(clockMicros, forKey: .clockMicros)
        try container.encodeIfPresent(uptimeSeconds, forKey: .uptimeSeconds)
        try container.encodeIfPresent(advertsPerSecond, forKey: .advertsPerSecond)
        try container.encodeIfPresent(sightings, forKey: .sightings)
        try container.encodeIfPresent(batches, forKey: .batches)
        try container.encodeIfPresent(lastSequence, forKey: .lastSequence)
        try container.encodeIfPresent(acknowledgedThrough, forKey: .acknowledgedThrough)
        try container.encodeIfPresent(spoolBatches, forKey: .spoolBatches)
        try container.encodeIfPresent(spoolBytes, forKey: .spoolBytes)
        try container.encodeIfPresent(droppedBatches, forKey: .droppedBatches)
        try container.encodeIfPresent(refusedBatches, forKey: .refusedBatches)
        try container.encode(lastError, forKey: .lastError)
    }

    public var payload: [UInt8] { encodedPayload(self) }
}

/// A message as JSON with its keys sorted (the types here always encode).
func encodedPayload(_ message: some Encodable) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return (try? Array(encoder.encode(message))) ?? []
}
