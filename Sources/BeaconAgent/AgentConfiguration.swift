import BeaconWire
import Foundation
import Mosquitto

/// The MQTT topics of one agent (a contract: docs/wire-format.md).
public struct AgentTopics: Sendable, Hashable {
    public var batch: String
    public var status: String
    public var ack: String

    public init(site: String, agent: String) {
        let base = "beaconflow/v1/\(site)/\(agent)/"
        batch = base + "batch"
        status = base + "status"
        ack = base + "ack"
    }
}

/// A broker address from `mqtt://[user[:password]@]host[:port]` or `mqtts://...` (TLS, port 8883 by default).
public struct BrokerAddress: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var useTLS: Bool
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, useTLS: Bool = false, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.username = username
        self.password = password
    }

    /// Parses a broker URL; the error names what is wrong without repeating a password.
    public init(url text: String) throws(ConfigurationError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme else {
            throw ConfigurationError("broker URL is not a URL; expected mqtt://host:port or mqtts://host:port")
        }
        switch scheme {
        case "mqtt": useTLS = false
        case "mqtts": useTLS = true
        default: throw ConfigurationError("broker URL scheme '\(scheme)' is not mqtt or mqtts")
        }
        guard let host = components.host, !host.isEmpty else {
            throw ConfigurationError("broker URL has no host")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        port = components.port ?? (useTLS ? 8883 : 1883)
        guard (1...65535).contains(port) else { throw ConfigurationError("broker port \(port) is out of range") }
        username = components.user?.removingPercentEncoding
        password = components.password?.removingPercentEncoding
    }

    /// Takes the password from the first line of a file (which keeps it out of the process list).
    public mutating func readPassword(file path: String) throws(ConfigurationError) {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else {
            let code = errno
            throw ConfigurationError(
                "cannot read the password file \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        close(descriptor)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("the password file \(path) is not UTF-8 text")
        }
        password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }

    /// The URL without the password, for logs and messages.
    public var redacted: String {
        let user = username.map { "\($0)@" } ?? ""
        return "\(useTLS ? "mqtts" : "mqtt")://\(user)\(host):\(port)"
    }
}

/// A configuration mistake, said so that the user can fix it.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Everything `beaconflow agent` runs with.
public struct AgentConfiguration: Sendable {
    public var siteID: String
    public var agentID: String
    public var broker: BrokerAddress
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
        if broker.useTLS { tls = MQTTClient.TLS() }
    }

    public var topics: AgentTopics { AgentTopics(site: siteID, agent: agentID) }

    /// Site and agent ids are `[a-z0-9-]+`: they are MQTT topic levels and SQL keys.
    static func validateIdentifier(_ value: String, _ what: String) throws(ConfigurationError) {
        guard isValidIdentifier(value) else {
            throw ConfigurationError("\(what) '\(value)' must be 1-64 characters of a-z, 0-9 and '-'")
        }
    }
}
