import ArgumentParser
import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import CommandLineSupport
import Foundation
import Logging
import MetricsEndpoint
import Mosquitto
import ServiceLifecycle
import Synchronization

/// `beaconflow bridge`: receivers that run other firmware as agents of a site.
struct BridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bridge",
        abstract: "Take what receivers of other firmware (Theengs Gateway, OpenMQTTGateway, ESPresense) publish as agents of a site.",
        discussion: """
            Subscribes to their MQTT output on --from (--format theengs: home/+/BTtoMQTT/#, Theengs Gateway and \
            OpenMQTTGateway; espresense: espresense/devices/+/+) and runs one agent for each receiver named by \
            --receiver, as the site's agent of that id: from there on each has its own spool, sequence numbers, \
            acknowledgements and status, as `beaconflow agent` does. Theengs Gateway and OpenMQTTGateway give the \
            advertisements themselves where they publish the advertising data (Theengs Gateway --publish_advdata 1), \
            and beaconflow's decoders decide; ESPresense gives its own names of beacons (iBeacon, AltBeacon, Eddystone \
            UID ids are rebuilt into their frames; other devices are heard by address) and its smoothed RSSI. Their \
            hop from the receiver to the broker is QoS 0: what that hop loses, nothing resends (docs/gateways.md).

            Examples:
              beaconflow bridge --format theengs --site hq \\
                --receiver kitchen=hq-a1 --receiver hall=hq-a2 \\
                --from mqtt://127.0.0.1:1883 --broker mqtt://127.0.0.1:1883
              beaconflow bridge --format espresense --site hq \\
                --receiver living-room=hq-a3 --from mqtt://127.0.0.1:1883 \\
                --broker mqtt://127.0.0.1:1883 --spool /var/lib/beaconflow/bridge
            """)

    @Option(help: "Whose messages: theengs (Theengs Gateway, OpenMQTTGateway) or espresense.")
    var format: PeerGatewayFormat
    @Option(help: "The broker they publish to: mqtt://[user@]host[:port] or mqtts://... (the system's CAs).")
    var from = "mqtt://127.0.0.1:1883"
    @Option(help: "File whose first line is the password for --from.") var fromPasswordFile: String?
    @Option(help: "The topics to subscribe to on --from; default the format's device topics.") var topic: String?
    @Option(help: "Site id of the receivers' agents.") var site: String
    @Option(help: "A receiver (Theengs and OpenMQTTGateway: the gateway's name in the topic; ESPresense: the room) and the agent id it runs as: NAME=AGENT, or NAME for an agent of that id (repeatable).")
    var receiver: [String] = []
    @OptionGroup(title: "Broker of beaconflow (the agents')") var brokerOptions: BrokerOptions
    @Option(help: "Directory of the agents' spools, one each (<site>-<agent>, as `beaconflow agent` keeps its own).")
    var spool = ".beaconflow/spool"
    @Option(help: "Where /metrics (the agents' families of docs/metrics.md, summed over the receivers) and /healthz (200 while every receiver's agent is connected to the broker) listen: HOST:PORT, [IPv6]:PORT, or 'none'.")
    var metricsListen = "none"
    @Option(help: "Log level.") var logLevel: Logger.Level = .info
    @Option(help: "Log lines as 'text' (the default), 'json' (one object per line) or 'logfmt'.")
    var logFormat: LogFormat = .text

    func validate() throws {
        guard !receiver.isEmpty else { throw ValidationError("name at least one --receiver NAME=AGENT") }
        guard Set(routes.map(\.agent)).count == routes.count else { throw ValidationError("each --receiver needs an agent of its own") }
        guard Set(routes.map(\.name)).count == routes.count else { throw ValidationError("a --receiver is named twice") }
        do {
            _ = try MetricsListenAddress.parse(metricsListen)
        } catch {
            throw ValidationError("--metrics-listen must be HOST:PORT, [IPv6]:PORT or 'none', not '\(metricsListen)'")
        }
    }

    /// Each receiver's name and the agent id it runs as.
    var routes: [(name: String, agent: String)] {
        receiver.map { text in
            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
            return (parts[0], parts.count == 2 ? parts[1] : parts[0])
        }
    }

    func run() async throws {
        bootstrapLogging(level: logLevel, format: logFormat)
        let logger = Logger(label: "beaconflow.bridge")
        // Checked by `validate()`: an address, or nil for 'none'.
        let metrics = (try? MetricsListenAddress.parse(metricsListen)) ?? nil
        // Before the agents make their counters, so that they report here.
        let registry = metrics.map { _ in MetricsListenAddress.bootstrapRegistry(families: AgentMetrics.all) }
        var peerBroker: BrokerAddress
        var agents: [String: (source: HandedSource, agent: Agent)] = [:]
        do {
            peerBroker = try BrokerAddress(url: from)
            if let fromPasswordFile { try peerBroker.readPassword(file: fromPasswordFile) }
            for route in routes {
                let broker = try brokerOptions.resolve(defaultUser: "\(site)/\(route.agent)")
                var configuration = try AgentConfiguration(
                    siteID: site, agentID: route.agent, broker: broker.address, spoolDirectory: spool + "/\(site)-\(route.agent)")
                configuration.tls = broker.tls
                configuration.failoverBrokers = broker.failover
                let source = HandedSource(name: "bridge:\(format.rawValue):\(route.name)")
                agents[route.name] = (source, Agent(configuration: configuration, source: source, logger: logger))
            }
        } catch {
            throw ValidationError(error.message)
        }
        let peer = peerBroker.clientConfiguration(
            clientID: "beaconflow-bridge-\(site)", tls: try peerBroker.tls(caFile: nil, certificateFile: nil, keyFile: nil))
        let service = BridgeService(
            format: format, topic: topic ?? format.topicFilter, peer: peer, agents: agents, logger: logger)
        var endpoint: MetricsEndpoint?
        if let metrics, let registry {
            let running = agents.values.map(\.agent)
            do {
                endpoint = try metrics.serve(registry, logger: logger) {
                    let health = running.map(\.health)
                    let connected = health.filter(\.brokerConnected).count
                    return MetricsEndpoint.Health(
                        healthy: connected == health.count,
                        json: #"{"agents":\#(health.count),"agents_connected":\#(connected),"pending_batches":\#(health.reduce(0) { $0 + $1.pendingBatches })}"#)
                }
            } catch {
                throw ValidationError("\(error)")
            }
        }
        do {
            try await runUntilSignalled(service, metrics: endpoint, logger: logger)
        } catch let error as MQTTError {
            logger.critical("MQTT client setup failed", metadata: ["error": "\(error)"])
            throw ExitCode(69)
        }
        let undelivered = service.undelivered
        if !undelivered.isEmpty {
            logger.error(
                "Batches still unacknowledged at exit; they stay in the spools and are sent on the next start",
                metadata: ["agents": "\(undelivered.sorted().joined(separator: ", "))"])
            throw ExitCode(75)
        }
    }
}

extension PeerGatewayFormat: ExpressibleByArgument {}

/// The bridge under swift-service-lifecycle: the subscription to the receivers' messages, each handed to its
/// receiver's agent; at a graceful shutdown the subscription ends first, then each agent sends what it was handed,
/// waits for its acknowledgements (at most its drain timeout) and stops.
final class BridgeService: Service, Sendable, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a password).
    var description: String { "bridge" }

    let format: PeerGatewayFormat
    let topic: String
    let peer: MQTTClient.Configuration
    let agents: [String: (source: HandedSource, agent: Agent)]
    let logger: Logger
    private let undeliveredAgents = Mutex<[String]>([])

    init(format: PeerGatewayFormat, topic: String, peer: MQTTClient.Configuration, agents: [String: (source: HandedSource, agent: Agent)], logger: Logger) {
        self.format = format
        self.topic = topic
        self.peer = peer
        self.agents = agents
        self.logger = logger
    }

    /// The agents that stopped with batches not acknowledged.
    var undelivered: [String] { undeliveredAgents.withLock { $0 } }

    /// Receivers not named by --receiver are said once each, up to this many.
    static let unknownReceiversSaid = 100
    /// Messages that could not be read are said one by one up to this many, then every thousandth.
    static let invalidSaid = 10

    func run() async throws {
        let client = try MQTTClient(peer, logger: logger)
        try client.subscribe(topic: topic, qos: 0)
        await withDiscardingTaskGroup { group in
            for (_, entry) in agents {
                group.addTask {
                    if case .undelivered? = try? await entry.agent.run() {
                        self.undeliveredAgents.withLock { $0.append(entry.agent.configuration.agentID) }
                    }
                }
            }
            group.addTask {
                await withDiscardingTaskGroup { subscription in
                    subscription.addTask { _ = await cancelWhenGracefulShutdown { await client.run() } }
                    // Ends when the client's run does (its events finish).
                    subscription.addTask { await self.forward(client.events) }
                }
                // No more intake: each agent sends what it was handed, waits for its acknowledgements and stops.
                for (_, entry) in self.agents { entry.source.close() }
            }
        }
    }

    /// Hands each device message to its receiver's agent, with the time it arrived.
    private func forward(_ events: AsyncStream<MQTTEvent>) async {
        var heard: Set<String> = []
        var unknown: Set<String> = []
        var invalid = 0
        var dropped = 0
        for await event in events {
            switch event {
            case .connected:
                logger.info("Connected to the receivers' broker", metadata: ["broker": "\(peer.host):\(peer.port)", "topic": "\(topic)"])
            case .disconnected(let reason):
                logger.warning("The receivers' broker connection is lost", metadata: ["reason": "\(reason)"])
            case .message(let topic, let payload, _):
                let message: PeerGatewayMessage
                do {
                    message = try PeerGatewayMessage(topic: topic, payload: payload, format: format)
                } catch where error.code == .otherTopic {
                    continue
                } catch {
                    invalid += 1
                    if invalid <= Self.invalidSaid || invalid % 1000 == 0 {
                        logger.warning(
                            "A receiver's message could not be read",
                            metadata: ["topic": "\(escapedForLog(topic.prefix(200)))", "error": "\(error)", "unreadable": .stringConvertible(invalid)])
                    }
                    continue
                }
                guard let entry = agents[message.receiver] else {
                    if unknown.count < Self.unknownReceiversSaid, unknown.insert(message.receiver).inserted {
                        logger.warning(
                            "A receiver no --receiver names is passed over",
                            metadata: ["receiver": "\(escapedForLog(message.receiver.prefix(100)))"])
                    }
                    continue
                }
                if heard.insert(message.receiver).inserted {
                    logger.info("A receiver is heard", metadata: ["receiver": "\(message.receiver)"])
                }
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                for report in message.reports where !entry.source.hand(TimedReport(timeMicros: now, report: report)) {
                    dropped += 1
                    if dropped == 1 || dropped % 1000 == 0 {
                        logger.warning(
                            "A receiver's agent is behind; its messages are dropped",
                            metadata: ["receiver": "\(message.receiver)", "dropped": .stringConvertible(dropped)])
                    }
                }
            case .published:
                continue
            }
        }
    }
}
