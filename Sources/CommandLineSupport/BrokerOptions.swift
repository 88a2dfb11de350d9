import ArgumentParser
import BeaconAgent
import BeaconMessaging
import Logging
import Mosquitto

/// The broker and TLS options of the agent and the ingest.
public struct BrokerOptions: ParsableArguments {
    public init() {}

    @Option(help: "Broker URL: mqtt://[user@]host[:port] or mqtts://... (TLS); default mqtt://127.0.0.1:1883. Repeat it for independent brokers of one deployment (same scheme and user): an agent uses one at a time and moves to the next when it fails, an ingest subscribes to all of them. A broker cluster behind one address is one URL.")
    var broker: [String] = []
    @Option(help: "CA certificate file (PEM) for mqtts://; default: the system's CAs.") var caFile: String?
    @Option(help: "Client certificate (PEM) for TLS client authentication.") var certFile: String?
    @Option(help: "Client key (PEM) for --cert-file.") var keyFile: String?
    @Option(help: "File whose first line is the MQTT password (keeps it out of the process list); an empty file is none.")
    var passwordFile: String?

    /// The broker's address with the password read from its file, logging in as `defaultUser` when the URL names
    /// no user and there is a password; and the TLS settings, nil for mqtt://.
    /// The first broker's, as `address`, and the others in `failover`.
    public func resolve(defaultUser: String? = nil) throws(ConfigurationError) -> (
        address: BrokerAddress, failover: [BrokerAddress], tls: MQTTClient.TLS?
    ) {
        var addresses: [BrokerAddress] = []
        for url in broker.isEmpty ? ["mqtt://127.0.0.1:1883"] : broker {
            var address = try BrokerAddress(url: url)
            if let passwordFile, try address.readPassword(file: passwordFile), address.username == nil {
                address.username = defaultUser
            }
            addresses.append(address)
        }
        try BrokerAddress.checkDeployment(addresses)
        let tls = try addresses[0].tls(caFile: caFile, certificateFile: certFile, keyFile: keyFile)
        return (addresses[0], Array(addresses.dropFirst()), tls)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--fsync`: when the agent's spool reaches the disk.
enum FsyncMode: String, CaseIterable, ExpressibleByArgument {
    case always, periodic, never

    var policy: Spool.FsyncPolicy {
        switch self {
        case .always: .always
        case .periodic: .periodic
        case .never: .never
        }
    }
}

extension ReplaySpeed: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public var defaultValueDescription: String { description }
}
