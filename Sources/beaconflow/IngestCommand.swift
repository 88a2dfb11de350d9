import ArgumentParser
import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import CommandLineSupport
import Foundation
import LibPQ
import Logging
import MetricsEndpoint
import Mosquitto
import ServiceLifecycle
import UnixSignals

struct IngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Run the ingest: take batches from MQTT, validate them, and commit them to PostgreSQL exactly once.",
        discussion: """
            Subscribes to the batch and status topics of the sites in the sites file (beaconflow/v1/<site>/+/batch, QoS 1), \
            checks every batch against its topic and the sites file, commits each batch with its (agent, sequence) \
            in one transaction (a redelivered batch adds nothing), then publishes the agent's retained \
            acknowledgement. A refused batch is kept (its first 64 KiB) in beaconflow.rejected_batches with the reason, \
            and the agent is told why on its rejection topic. The schema is migrated at start. While PostgreSQL is away \
            the ingest reconnects with backoff and stops acknowledging; the agents keep their batches until it is back. \
            SIGTERM or Ctrl-C stops intake, commits and acknowledges what is queued, then exits.

            Several instances share one broker, one database and one sites file: they share its sites out among \
            themselves (a site is served by one instance at a time, under a lease in PostgreSQL), take over the sites \
            of an instance that stops or fails within seconds, and say when one runs with another copy of the file. \
            SIGHUP (systemctl reload) reads the sites file again and applies it without a restart.

            Exit status: 0 stopped by a signal; 64 bad arguments or sites file; 69 MQTT client setup failed.

            Examples:
              beaconflow ingest --sites deploy/config/sites.yaml \\
                --broker mqtt://127.0.0.1:1883 --database postgresql://127.0.0.1/beaconflow
              beaconflow ingest --sites /etc/beaconflow/sites.yaml \\
                --broker mqtts://ingest@broker.example:8883 \\
                --ca-file /etc/beaconflow/ca.pem --password-file /etc/beaconflow/mqtt.pw \\
                --database "host=db dbname=beaconflow user=ingest"
            """
    )

    @Option(help: "A YAML file with any of these options, keys in snake_case (sites, broker, database, metrics_listen, ...); options given here override it.")
    var config: String?
    @Option(help: "The sites file (sites, zones, agents, the beacon registry; keys in docs/sites-file.md). SIGHUP (systemctl reload) reads it again and applies it without a restart; a file that does not load is refused and the running one kept.") var sites: String
    @OptionGroup(title: "Broker") var brokerOptions: BrokerOptions
    @Option(
        help: "MQTT client id. Given, the broker keeps its session for a day, holding batches while the ingest is down; each instance needs its own. Default: beaconflow-ingest-<host>-<process id>, unique, with no session kept (agents send again what was not acknowledged)."
    )
    var clientID: String?
    @Option(help: "Share the batch subscriptions with the other subscribers of this group ($share/<group>/...). Instances on the same database share the sites without it. The shipped broker ACL does not grant it: any client may join a group, and the broker drops the share of batches that client may not read.")
    var sharedGroup: String?
    @OptionGroup(title: "Database") var databaseOptions: DatabaseOptions
    @Option(help: "Messages queued for the writer at most; beyond it batches are deferred to the agents' resends.")
    var queueCapacity = 512
    @Option(help: "Batches committed in one transaction at most when the queue is deep.")
    var maxGroup = 64
    @Option(help: "Sightings each agent's batches may bring a second (twice the wire's largest batch at once); beyond it its batches are deferred to its resends.")
    var agentMaxSightingsPerSecond = 20_000
    @Option(help: "Battery level (mV) under load at which a beacon stops working, for the days-left forecasts.")
    var batteryCutoffMv = 2000.0
    @Option(help: "low_battery at or below this level in mV, for beacons without TLM counters (those with them: on days left alone).")
    var lowBatteryMv = 2200.0
    @Option(help: "low_battery at or below this level in percent, for beacons that report only a percent.")
    var lowBatteryPercent = 5.0
    @Option(help: "low_battery when the forecast leaves fewer days than this.") var lowBatteryDays = 30.0
    @Option(help: "Beacons the ingest keeps state for at most; past it those not seen the longest are forgotten and counted, whatever ids arrive.")
    var maxBeacons = 200_000
    @Flag(
        help: "Publish live presence over MQTT, retained: each registry beacon's zone, each zone's occupants, and whether an ingest is publishing (topics in docs/presence.md)."
    )
    var presence = false
    @Flag(help: "With --presence, a topic for every beacon placed in a zone, not only the registry's.") var presenceAllBeacons = false
    @Option(help: "With --presence, messages a second at most (a topic's newer state replaces one still waiting).")
    var presenceRate = 50.0
    @Flag(help: "Home Assistant MQTT discovery (implies --presence): a device per registry beacon and one per site.")
    var homeAssistant = false
    @Option(help: "The Home Assistant discovery prefix.") var homeAssistantPrefix = "homeassistant"
    @Flag(help: "With --home-assistant, binary sensors too: each zone occupied, each registry beacon in each zone of its site.")
    var homeAssistantBinarySensors = false
    @Option(help: "Where /metrics (Prometheus: docs/metrics.md) and /healthz listen: HOST:PORT, [IPv6]:PORT, or 'none'.")
    var metricsListen = "127.0.0.1:9464"
    @Option(help: "Log level.") var logLevel: Logger.Level = .info
    @Option(help: "Log lines as 'text' (the default), 'json' (one object per line) or 'logfmt', for Loki, Elasticsearch or Vector.")
    var logFormat: LogFormat = .text

    /// The checks that need no file. (The database's is its option group's.)
    func validate() throws {
        guard sharedGroup.map({ isValidIdentifier($0) }) ?? true else {
            throw ValidationError("--shared-group must be 1-64 characters of a-z, 0-9 and '-'")
        }
        guard queueCapacity >= 1, maxGroup >= 1 else { throw ValidationError("--queue-capacity and --max-group must be at least 1") }
        guard agentMaxSightingsPerSecond >= 100 else { throw ValidationError("--agent-max-sightings-per-second must be at least 100") }
        guard maxBeacons >= 100 else { throw ValidationError("--max-beacons must be at least 100") }
        _ = try MetricsListenAddress.parse(metricsListen)
        guard (1...10_000).contains(presenceRate) else { throw ValidationError("--presence-rate must be 1-10000 messages a second") }
        let prefixLevels = homeAssistantPrefix.split(separator: "/", omittingEmptySubsequences: false)
        guard !prefixLevels.contains(where: { $0.isEmpty || $0.contains("+") || $0.contains("#") }), homeAssistantPrefix.utf8.count <= 100
        else { throw ValidationError("--home-assistant-prefix must be MQTT topic levels without '+', '#' or empty levels") }
    }

    func configuration() throws(ConfigurationError) -> IngestConfiguration {
        let broker = try brokerOptions.resolve()
        let uniqueClientID = "beaconflow-ingest-\(ProcessInfo.processInfo.hostName.prefix(40))-\(getpid())"
        var mqtt = broker.address.clientConfiguration(clientID: clientID ?? uniqueClientID, tls: broker.tls)
        mqtt.failover = broker.failover.map(\.endpoint)
        let sitesConfiguration: SitesConfiguration
        switch Result(catching: { () throws(SitesError) in try SitesConfiguration.load(path: sites) }) {
        case .success(let loaded): sitesConfiguration = loaded
        case .failure(let error): throw ConfigurationError(error.message)
        }
        var configuration = IngestConfiguration(mqtt: mqtt, database: databaseOptions.database, sites: sitesConfiguration)
        configuration.sitesPath = sites
        configuration.persistentSession = clientID != nil
        configuration.sharedSubscriptionGroup = sharedGroup
        configuration.queueCapacity = queueCapacity
        configuration.maximumGroup = maxGroup
        configuration.agentSightingsPerSecond = agentMaxSightingsPerSecond
        configuration.health.cutoffMillivolts = batteryCutoffMv
        configuration.health.lowBatteryMillivolts = lowBatteryMv
        configuration.health.lowBatteryPercent = lowBatteryPercent
        configuration.health.lowBatteryDays = lowBatteryDays
        configuration.maximumBeacons = maxBeacons
        if presence || homeAssistant {
            var presenceConfiguration = PresenceConfiguration()
            presenceConfiguration.allBeacons = presenceAllBeacons
            presenceConfiguration.messagesPerSecond = presenceRate
            presenceConfiguration.discoveryPrefix = homeAssistant ? homeAssistantPrefix : nil
            presenceConfiguration.discoveryBinarySensors = homeAssistantBinarySensors
            configuration.presence = presenceConfiguration
        }
        return configuration
    }

    func run() async throws {
        MallocArenas.limit(to: MallocArenas.ingest)
        let configuration: IngestConfiguration
        let metrics: MetricsListenAddress?
        switch Result(catching: { () throws(ConfigurationError) in (try self.configuration(), try MetricsListenAddress.parse(metricsListen)) }) {
        case .success(let made): (configuration, metrics) = made
        case .failure(let error): throw ValidationError(error.message)
        }
        bootstrapLogging(level: logLevel, format: logFormat)
        let logger = Logger(label: "beaconflow.ingest")
        // Before the ingest makes its counters, so that they report here.
        let registry = metrics.map { _ in MetricsListenAddress.bootstrapRegistry(families: IngestMetrics.all) }
        let ingest = Ingest(configuration: configuration, logger: logger)
        var endpoint: MetricsEndpoint?
        if let metrics, let registry {
            do {
                endpoint = try metrics.serve(registry, logger: logger) {
                    let (healthy, json) = ingest.health
                    return MetricsEndpoint.Health(healthy: healthy, json: json)
                }
            } catch {
                throw ValidationError("\(error)")
            }
        }
        let service = IngestService(ingest: ingest)
        do {
            try await runUntilSignalled(service, metrics: endpoint, logger: logger)
        } catch let error as MQTTError {
            logger.critical("MQTT client setup failed", metadata: ["error": "\(error)"])
            throw ExitCode(69)
        }
    }
}

/// Runs the ingest under swift-service-lifecycle: a graceful shutdown stops intake, commits, acknowledges.
struct IngestService: Service, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "ingest" }

    let ingest: Ingest

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                // SIGHUP: the sites file is read again and applied between two transactions.
                group.addTask {
                    for await _ in await UnixSignalsSequence(trapping: .sighup) { ingest.requestReload() }
                }
                try await ingest.run()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            ingest.requestStop()
        }
    }
}
