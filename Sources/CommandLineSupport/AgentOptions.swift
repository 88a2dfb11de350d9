import ArgumentParser
import BeaconAgent
import BeaconMessaging
import Foundation
import Logging
import MetricsEndpoint
import Mosquitto
import ServiceLifecycle
import Synchronization

/// The agent's command line: every option of `beaconflow agent` and `beaconflow-agent`, and running the agent they
/// describe.
public struct AgentOptions: ParsableArguments {
    public init() {}

    /// The command's abstract.
    public static let abstract = "Run an edge agent: read adverts, batch them, spool them to disk, publish them over MQTT."

    /// The command's discussion, its examples run as `command` (`beaconflow agent` or `beaconflow-agent`); with
    /// `simulated`, the simulator's `sim:` source among the sources.
    public static func discussion(command: String, simulated: Bool) -> String {
        let simulatedSource = "\n  sim:SCENARIO   play this agent's part of a simulated site (see `beaconflow simulate --help`)"
        return """
            Every batch is written to the spool before it is published and removed only when the ingest's \
            retained acknowledgement (beaconflow/v1/<site>/<agent>/ack) covers it, so nothing is lost while the \
            broker or the ingest is away. SIGTERM or Ctrl-C stops intake, seals the open batch, flushes the \
            spool and, while connected, waits up to 3 s for its acknowledgement; what is not acknowledged goes \
            out on the next start.

            Sources:
              hci:hci0       scan with a Bluetooth adapter (needs CAP_NET_RAW and CAP_NET_ADMIN); BT 5 extended
                             scanning when the controller supports it, legacy otherwise; --record keeps a btsnoop
              btsnoop:PATH   replay a btsnoop capture with its timestamps (--speed max|1|N)\(simulated ? simulatedSource : "")
              pcap:PATH      replay a pcap/pcapng capture (link type 201 or 187)

            With a password file and no user in --broker the agent logs in as <site>/<agent>, the user name the \
            shipped broker ACL expects.

            Exit status: 0 done (a replay fully acknowledged, or stopped by a signal); 64 bad arguments; \
            66 the source failed (e.g. no such capture); 69 MQTT client setup failed; 73 the spool cannot be \
            opened or written; 75 a replay ended with batches still unacknowledged after --drain-timeout \
            (they stay in the spool).

            Examples:
              \(command) --site hq --agent hq-a1 \\
                --source btsnoop:examples/mixed-beacons.btsnoop \\
                --broker mqtt://127.0.0.1:1883
              \(command) --site hq --agent hq-a2 \\
                --source pcap:examples/mixed-beacons.pcapng --speed max \\
                --broker mqtts://broker.example:8883 --ca-file /etc/beaconflow/ca.pem \\
                --password-file /etc/beaconflow/mqtt.pw
              \(command) --config /etc/beaconflow/agent.yaml \\
                --source pcap:examples/mixed-beacons.pcapng --speed max
            """
    }

    @Option(help: "A YAML file with any of these settings, keys in snake_case (site, broker, spool_max_mb, ...); options given here override it.")
    var config: String?
    @Option(help: "Site id ([a-z0-9-]+).") var site: String?
    @Option(help: "Agent id ([a-z0-9-]+), unique within the site.") var agent: String?
    @Option(help: "Where adverts come from: hci:hciN, btsnoop:PATH, pcap:PATH, or recording:PATH (the rows of a recording this agent heard: docs/recordings.md) (beaconflow agent also sim:SCENARIO).")
    var source: String?
    @OptionGroup(title: "Broker") var brokerOptions: BrokerOptions
    @Option(help: "Spool directory; default .beaconflow/spool/<site>-<agent>.") var spool: String?
    @Option(help: "Largest spool size in MiB (default 256); the oldest batches are dropped (and counted) beyond it.")
    var spoolMaxMb: Int?
    @Option(help: "When the spool is flushed to disk (default always): always after every batch, periodic every second, never leaves it to the kernel (a process crash loses nothing, a power cut may).")
    var fsync: FsyncMode?
    @Option(help: "Replay speed: max, or a factor of real time (default 1, the capture's own pace).") var speed: ReplaySpeed?
    @Option(help: "A batch is sent when it holds this many sightings (default 1000)...") var batchMaxSightings: Int?
    @Option(help: "...or when its first sighting is this old, in milliseconds (default 1000).") var batchMaxAgeMs: Int?
    @Option(help: "The batch format sent: 3 (the default) compresses each batch's body, sends capture times to the millisecond and a beacon's address only when the ingest may not know it; 2 compresses it with times to the microsecond and every address, for an ingest that reads up to version 2; 1 sends it as it is, for an ingest that reads only version 1.")
    var wireFormat: Int?
    @Option(help: "Batches published and awaiting acknowledgement at most (default 16).") var maxInFlight: Int?
    @Option(help: "Seconds to wait for an acknowledgement before resending from the oldest batch (default 30).")
    var ackTimeout: Int?
    @Option(help: "After a replay ends, seconds to wait for the last acknowledgements (default 30).")
    var drainTimeout: Int?
    @Flag(help: "Replay the capture from its first report. By default a replay that ran before with this spool resumes after what the spool holds of the same capture (a restarted or repeated replay adds nothing).")
    var replayFromStart = false
    @Option(help: "Keep only beacons whose id or address starts with this (repeatable).") var allow: [String] = []
    @Option(help: "Drop beacons whose id or address starts with this (repeatable).") var deny: [String] = []
    @Flag(inversion: .prefixedNo, help: "Also report devices that send no beacon or sensor frame (default no).")
    var includeUnknownDevices: Bool?
    @Flag(inversion: .prefixedNo, help: "Also report devices that advertise from a resolvable private address (phones, watches), for the ingest to resolve with the registry's irk keys (default no).")
    var privateAddresses: Bool?
    @Option(help: "File holding the site's key (hex) for pseudonymising device addresses.")
    var pseudonymKeyFile: String?
    @Flag(inversion: .prefixedNo, help: "hci: active scanning (scan requests, so scan responses arrive too); default passive.")
    var active: Bool?
    @Option(help: "hci: scan interval in milliseconds, 2.5-10240 (default 100).") var scanIntervalMs: Double?
    @Option(help: "hci: scan window in milliseconds, at most the interval (default 100: scan continuously).")
    var scanWindowMs: Double?
    @Option(help: "hci: restart scanning when no advert arrived for this many seconds (default 60).") var watchdog: Int?
    @Option(help: "hci: also write every HCI packet to this btsnoop (datalink 1002) file.") var record: String?
    @Option(help: "Read Battery Level and Device Information over GATT from this device every --gatt-poll-hours: AA:BB:CC:DD:EE:FF, /random for a random address (repeatable).")
    var gattPoll: [String] = []
    @Option(help: "Hours between GATT polls (default 6).") var gattPollHours: Double?
    @Option(help: "Seconds to wait for each GATT answer before the poll counts as failed, 1-30 (default 30, ATT's own limit).")
    var gattTimeout: Int?
    @Option(help: "Seconds before a failed GATT poll is tried again, doubling with each failure in a row up to --gatt-poll-hours (default 30).")
    var gattRetry: Int?
    @Option(help: "Also read this characteristic (16-bit UUID in hex, such as 2A6E for Temperature) in every GATT poll, from whichever service holds it; numeric ones the ingest knows become sensor readings, the others device information in hex (repeatable).")
    var gattRead: [String] = []
    @Option(help: "Where /metrics (Prometheus: docs/metrics.md) and /healthz (200 while connected to the broker and, with an hci source, scanning) listen: HOST:PORT, [IPv6]:PORT, or 'none' (the default).")
    var metricsListen: String?
    @Option(help: "Log level (default info).") var logLevel: Logger.Level?
    @Option(help: "Log lines as 'text' (the default), 'json' (one object per line) or 'logfmt', for Loki, Elasticsearch or Vector.")
    var logFormat: LogFormat = .text

    /// Runs the agent; `extraSource` makes the sources of a kind beyond hci, btsnoop and pcap.
    public func run(extraSource: ExtraSourceKind? = nil) async throws {
        bootstrapLogging(level: logLevel ?? .info, format: logFormat)
        let logger = Logger(label: "beaconflow.agent")
        let configuration: AgentConfiguration
        let advertSource: any AdvertSource
        let gattPoller: GATTPoller?
        let metrics: MetricsListenAddress?
        switch Result(catching: { () throws(ConfigurationError) in
            (try agentConfiguration(), try makeSource(logger: logger, extra: extraSource), try makeGATTPoller(logger: logger),
             try MetricsListenAddress.parse(metricsListen ?? "none"))
        }) {
        case .success(let (made, madeSource, madePoller, madeMetrics)):
            configuration = made
            advertSource = madeSource
            gattPoller = madePoller
            metrics = madeMetrics
        case .failure(let error):
            throw ValidationError(error.message)
        }

        // Before the agent makes its counters, so that they report here.
        let registry = metrics.map { _ in MetricsListenAddress.bootstrapRegistry(families: AgentMetrics.all) }
        let agent = Agent(configuration: configuration, source: advertSource, gattPoller: gattPoller, logger: logger)
        var endpoint: MetricsEndpoint?
        if let metrics, let registry {
            do {
                let scan = (advertSource as? HCIScanSource)?.status
                endpoint = try metrics.serve(registry, logger: logger) {
                    let health = agent.health
                    let scanning = scan.map { #","scanning":\#($0.isScanning)"# } ?? ""
                    return MetricsEndpoint.Health(
                        healthy: health.brokerConnected && scan?.isScanning != false,
                        json: #"{"broker_connected":\#(health.brokerConnected),"pending_batches":\#(health.pendingBatches),"spool_bytes":\#(health.spoolBytes)\#(scanning)}"#)
                }
            } catch {
                throw ValidationError("\(error)")
            }
        }
        let service = AgentService(agent: agent)
        do {
            try await runUntilSignalled(service, metrics: endpoint, logger: logger)
        } catch let error as SpoolError {
            logger.critical("Spool unusable", metadata: ["error": "\(error)"])
            throw ExitCode(73)
        } catch let error as MQTTError {
            logger.critical("MQTT client setup failed", metadata: ["error": "\(error)"])
            throw ExitCode(69)
        }
        switch service.outcome {
        case .finished?, .stopped?, nil:
            return
        case .undelivered(let pending)?:
            logger.error(
                "Batches still unacknowledged at exit; they stay in the spool and are sent on the next start",
                metadata: ["pending_batches": .stringConvertible(pending)])
            throw ExitCode(75)
        case .sourceFailed(let message)?:
            logger.error("Source failed", metadata: ["error": "\(message)"])
            throw ExitCode(66)
        }
    }
}

/// Runs the agent under swift-service-lifecycle: a graceful shutdown (SIGTERM, SIGINT) asks it to stop.
final class AgentService: Service, Sendable, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "agent" }

    let agent: Agent
    private let result = Mutex<Agent.Outcome?>(nil)

    init(agent: Agent) {
        self.agent = agent
    }

    var outcome: Agent.Outcome? { result.withLock { $0 } }

    func run() async throws {
        let agent = self.agent
        let outcome = try await withGracefulShutdownHandler {
            try await agent.run()
        } onGracefulShutdown: {
            agent.requestStop()
        }
        result.withLock { $0 = outcome }
    }
}
