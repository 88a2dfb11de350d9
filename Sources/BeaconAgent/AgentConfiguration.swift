import BeaconMessaging
import BeaconWire
import Foundation
import Mosquitto

/// Everything `beaconflow agent` runs with.
public struct AgentConfiguration: Sendable {
    public var siteID: String
    public var agentID: String
    public var broker: BrokerAddress
    /// Other independent brokers of the deployment (same TLS and user), tried in turn after `broker` when a
    /// connection fails; the ingest subscribes to all of them.
    public var failoverBrokers: [BrokerAddress] = []
    public var tls: MQTTClient.TLS?
    public var spool: Spool.Configuration
    public var batch = BatchBuilder.Configuration()
    public var extractor = SightingExtractor.Configuration()
    public var maximumInFlight = 16
    public var acknowledgementTimeout: Duration = .seconds(30)
    public var statusInterval: Duration = .seconds(10)
    /// After a finite source (a replay) ends: how long to wait for the last acknowledgements before exiting.
    public var drainTimeout: Duration = .seconds(30)
    /// A replay normally resumes after what the spool holds of the same input; this starts it over.
    public var replayFromStart = false
    /// How often the spool is flushed with `FsyncPolicy.periodic`.
    public var syncInterval: Duration = .seconds(1)
    public var sessionExpirySeconds: UInt32 = 3600

    public init(siteID: String, agentID: String, broker: BrokerAddress, spoolDirectory: String) throws(ConfigurationError) {
        try Self.validateIdentifier(siteID, "site id")
        try Self.validateIdentifier(agentID, "agent id")
        self.siteID = siteID
        self.agentID = agentID
        self.broker = broker
        self.spool = Spool.Configuration(directory: spoolDirectory)
        tls = try broker.tls(caFile: nil, certificateFile: nil, keyFile: nil)
    }

    public var topics: AgentTopics { AgentTopics(site: siteID, agent: agentID) }

    /// Site and agent ids are `[a-z0-9-]+`: they are MQTT topic levels and SQL keys.
    static func validateIdentifier(_ value: String, _ what: String) throws(ConfigurationError) {
        guard isValidIdentifier(value) else {
            throw ConfigurationError("\(what) '\(value)' must be 1-64 characters of a-z, 0-9 and '-'")
        }
    }
}
