import BeaconWire

/// The MQTT topics between an agent and the ingest, `beaconflow/v1/<site>/<agent>/<kind>` (docs/wire-format.md).
public enum AgentTopicKind: String, Sendable, CaseIterable {
    /// Agent → ingest: one protobuf batch per message, QoS 1.
    case batch
    /// Agent → ingest: the agent's status (JSON, retained; the broker publishes the will in its place).
    case status
    /// Ingest → agent: "committed through N" (JSON, retained).
    case ack
    /// Ingest → agent: why a batch was refused (JSON, not retained).
    case rejection
}

/// The topics of one agent.
public struct AgentTopics: Sendable, Hashable {
    public let site: String
    public let agent: String

    public init(site: String, agent: String) {
        self.site = site
        self.agent = agent
    }

    public static let prefix = "beaconflow/v1"

    public func topic(_ kind: AgentTopicKind) -> String { "\(Self.prefix)/\(site)/\(agent)/\(kind.rawValue)" }
    public var batch: String { topic(.batch) }
    public var status: String { topic(.status) }
    public var ack: String { topic(.ack) }
    public var rejection: String { topic(.rejection) }

    /// The agent of a topic of the given kind, when the topic is one (ids as `isValidIdentifier` allows).
    public init?(parsing topic: String, kind: AgentTopicKind) {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "beaconflow", parts[1] == "v1", parts[4] == kind.rawValue,
            isValidIdentifier(String(parts[2])), isValidIdentifier(String(parts[3]))
        else { return nil }
        self.init(site: String(parts[2]), agent: String(parts[3]))
    }

    /// The filter for one kind of message of every agent of a site (what the ingest subscribes to).
    public static func siteFilter(site: String, kind: AgentTopicKind) -> String { "\(prefix)/\(site)/+/\(kind.rawValue)" }

    /// Every agent's status, of every site: an ingest hears them all, to record its own sites' and to say which
    /// agents report for a site or as an agent its sites file does not have.
    public static let statusFilter = "\(prefix)/+/+/\(AgentTopicKind.status.rawValue)"
}
