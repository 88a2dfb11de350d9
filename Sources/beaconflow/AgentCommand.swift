import ArgumentParser
import BeaconAgent
import Foundation
import Logging
import Mosquitto
import ServiceLifecycle
import Synchronization

struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run an edge agent: read adverts, batch them, spool them to disk, publish them over MQTT.",
        discussion: """
            Every batch is written to the spool before it is published and removed only when the ingest's
            retained acknowledgement (beaconflow/v1/<site>/<agent>/ack) covers it, so nothing is lost while the
            broker or the ingest is away. SIGTERM or Ctrl-C stops intake, seals the open batch and flushes the
            spool; what is not acknowledged goes out on the next start.

            Sources:
              hci:hci0       scan with a Bluetooth adapter (needs CAP_NET_RAW and CAP_NET_ADMIN); BT 5 extended
                             scanning when the controller supports it, legacy otherwise; --record keeps a btsnoop
              btsnoop:PATH   replay a btsnoop capture with its timestamps (--speed max|1|N)
              pcap:PATH      replay a pcap/pcapng capture (link type 201 or 187)

            Exit status: 0 done (a replay fully acknowledged, or stopped by a signal); 64 bad arguments;
            66 the source failed (e.g. no such capture); 69 MQTT client setup failed; 73 the spool cannot be
            opened or written; 75 a replay ended with batches still unacknowledged after --drain-timeout
            (they stay in the spool).

            Examples:
              beaconflow agent --site hq --agent hq-a1 --source btsnoop:capture.log --broker mqtt://127.0.0.1:1883
              beaconflow agent --site hq --agent hq-a1 --source pcap:day.pcapng --speed max \\
                --broker mqtts://agent-hq-a1@broker.example:8883 --ca-file ca.pem --password-file /etc/beaconflow/mqtt.pw
            """
    )

    @Option(help: "Site id ([a-z0-9-]+).") var site: String
    @Option(help: "Agent id ([a-z0-9-]+), unique within the site.") var agent: String
    @Option(help: "Where adverts come from: hci:hciN, btsnoop:PATH or pcap:PATH.") var source: String
    @Option(help: "Broker URL: mqtt://[user@]host[:port] or mqtts://... (TLS).") var broker = "mqtt://127.0.0.1:1883"
    @Option(help: "CA certificate file (PEM) for mqtts://; default: the system's CAs.") var caFile: String?
    @Option(help: "Client certificate (PEM) for TLS client authentication.") var certFile: String?
    @Option(help: "Client key (PEM) for --cert-file.") var keyFile: String?
    @Option(help: "File whose first line is the MQTT password (keeps it out of the process list).")
    var passwordFile: String?
    @Option(help: "Spool directory; default .beaconflow/spool/<site>-<agent>.") var spool: String?
    @Option(help: "Largest spool size in MiB; the oldest batches are dropped (and counted) beyond it.")
    var spoolMaxMb = 256
    @Option(help: "When the spool is flushed to disk: always (every batch), periodic (every second) or never.")
    var fsync = "always"
    @Option(help: "Replay speed: max, or a factor of real time (1 = the capture's own pace).") var speed = "1"
    @Option(help: "A batch is sent when it holds this many sightings...") var batchMaxSightings = 1000
    @Option(help: "...or when its first sighting is this old, in milliseconds.") var batchMaxAgeMs = 1000
    @Option(help: "Batches published and awaiting acknowledgement at most.") var maxInFlight = 16
    @Option(help: "Seconds to wait for an acknowledgement before resending from the oldest batch.")
    var ackTimeout = 30
    @Option(help: "After a replay ends, seconds to wait for the last acknowledgements.") var drainTimeout = 30
    @Option(help: "Keep only beacons whose id or address starts with this (repeatable).") var allow: [String] = []
    @Option(help: "Drop beacons whose id or address starts with this (repeatable).") var deny: [String] = []
    @Flag(help: "Also report devices that send no beacon or sensor frame.") var includeUnknownDevices = false
    @Option(help: "File holding the site's key (hex) for pseudonymising device addresses.")
    var pseudonymKeyFile: String?
    @Flag(help: "hci: active scanning (scan requests, so scan responses arrive too); passive by default.")
    var active = false
    @Option(help: "hci: scan interval in milliseconds (2.5-10240).") var scanIntervalMs = 100.0
    @Option(help: "hci: scan window in milliseconds, at most the interval (equal: scan continuously).")
    var scanWindowMs = 100.0
    @Option(help: "hci: restart scanning when no advert arrived for this many seconds.") var watchdog = 60
    @Option(help: "hci: also write every HCI packet to this btsnoop (datalink 1002) file.") var record: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "beaconflow.agent")
        let configuration: AgentConfiguration
        let advertSource: any AdvertSource
        switch Result(catching: { () throws(ConfigurationError) in (try makeConfiguration(), try makeSource(logger: logger)) }) {
        case .success(let (made, madeSource)):
            configuration = made
            advertSource = madeSource
        case .failure(let error):
            throw ValidationError(error.message)
        }

        let agent = Agent(configuration: configuration, source: advertSource, logger: logger)
        let service = AgentService(agent: agent)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
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
                metadata: ["pending_batches": "\(pending)"])
            throw ExitCode(75)
        case .sourceFailed(let message)?:
            logger.error("Source failed", metadata: ["error": "\(message)"])
            throw ExitCode(66)
        }
    }

    func makeConfiguration() throws(ConfigurationError) -> AgentConfiguration {
        var address = try BrokerAddress(url: broker)
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw ConfigurationError("cannot read --password-file \(passwordFile)")
            }
            address.password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        var configuration = try AgentConfiguration(
            siteID: site, agentID: agent, broker: address,
            spoolDirectory: spool ?? ".beaconflow/spool/\(site)-\(agent)")
        if caFile != nil || certFile != nil || keyFile != nil {
            guard address.useTLS else { throw ConfigurationError("--ca-file/--cert-file/--key-file need an mqtts:// broker") }
            configuration.tls = MQTTClient.TLS(caFile: caFile, certificateFile: certFile, keyFile: keyFile)
        }
        guard spoolMaxMb >= 1 else { throw ConfigurationError("--spool-max-mb must be at least 1") }
        configuration.spool.maximumBytes = spoolMaxMb << 20
        configuration.spool.segmentBytes = min(4 << 20, max(64 << 10, configuration.spool.maximumBytes / 8))
        switch fsync {
        case "always": configuration.spool.fsync = .always
        case "periodic": configuration.spool.fsync = .periodic
        case "never": configuration.spool.fsync = .never
        default: throw ConfigurationError("--fsync must be always, periodic or never, not '\(fsync)'")
        }
        guard (1...100_000).contains(batchMaxSightings) else {
            throw ConfigurationError("--batch-max-sightings must be 1-100000")
        }
        guard (10...600_000).contains(batchMaxAgeMs) else { throw ConfigurationError("--batch-max-age-ms must be 10-600000") }
        guard (1...1000).contains(maxInFlight) else { throw ConfigurationError("--max-in-flight must be 1-1000") }
        guard ackTimeout >= 1, drainTimeout >= 0 else { throw ConfigurationError("timeouts must be positive") }
        configuration.batch.maximumSightings = batchMaxSightings
        configuration.batch.maximumAgeNanoseconds = UInt64(batchMaxAgeMs) * 1_000_000
        configuration.maximumInFlight = maxInFlight
        configuration.acknowledgementTimeout = .seconds(ackTimeout)
        configuration.drainTimeout = .seconds(drainTimeout)
        configuration.extractor.allow = allow
        configuration.extractor.deny = deny
        configuration.extractor.includeUnknownDevices = includeUnknownDevices
        if let pseudonymKeyFile {
            guard let text = try? String(contentsOfFile: pseudonymKeyFile, encoding: .utf8),
                let key = hexBytes(text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count >= 16
            else {
                throw ConfigurationError("--pseudonym-key-file must hold at least 16 bytes in hex")
            }
            configuration.extractor.pseudonymKey = key
        }
        return configuration
    }

    func makeSource(logger: Logger) throws(ConfigurationError) -> any AdvertSource {
        guard let colon = source.firstIndex(of: ":") else {
            throw ConfigurationError("--source must be hci:hciN, btsnoop:PATH or pcap:PATH, not '\(source)'")
        }
        let kind = source[..<colon]
        let argument = String(source[source.index(after: colon)...])
        guard let replaySpeed = ReplaySpeed(speed) else {
            throw ConfigurationError("--speed must be max or a positive number, not '\(speed)'")
        }
        switch kind {
        case "btsnoop", "pcap":
            guard !argument.isEmpty else { throw ConfigurationError("--source \(kind): needs a file path") }
            return CaptureReplaySource(path: argument, speed: replaySpeed)
        case "hci":
            var source = HCIScanSource(
                device: argument,
                parameters: try ScanParameters(
                    active: active, intervalMilliseconds: scanIntervalMs, windowMilliseconds: scanWindowMs),
                logger: logger)
            guard watchdog >= 1 else { throw ConfigurationError("--watchdog must be at least 1 second") }
            source.watchdogTimeout = .seconds(watchdog)
            source.recordPath = record
            return source
        case "sim":
            throw ConfigurationError("--source sim: is not available in this version; use hci:, btsnoop: or pcap:")
        default:
            throw ConfigurationError("--source kind '\(kind)' is not hci, btsnoop or pcap")
        }
    }
}

/// Runs the agent under swift-service-lifecycle: a graceful shutdown (SIGTERM, SIGINT) asks it to stop.
final class AgentService: Service, Sendable {
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

func hexBytes(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<(index + 2)], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return bytes
}
