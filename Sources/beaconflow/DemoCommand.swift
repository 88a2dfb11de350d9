import AccuracyHarness
import ArgumentParser
import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconSimulation
import CommandLineSupport
import Dispatch
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import Reporting
import ServiceLifecycle
import Synchronization
import WorkQueue

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole pipeline on this machine: simulated agents, mosquitto, the ingest, PostgreSQL.",
        discussion: """
            Starts mosquitto and a throwaway PostgreSQL cluster on free loopback ports under --directory \
            (./.beaconflow), or uses --broker and --database when given, then 36 simulated agents (3 sites × 4 zones × 3 agents) hearing about 200 beacons of \
            every type in real time, and the ingest between them. Shows progress every 2 s (adverts/s heard by the \
            agents, batches and rows committed, the ingest's lag), then stops the agents, lets the ingest commit \
            everything, prints the report (as `beaconflow report` does) and the psql command to explore the views.

            Ctrl-C stops everything at any point and leaves no process behind. --keep leaves mosquitto, \
            PostgreSQL and the console running afterwards (for psql, mosquitto_sub, Grafana and the browser: their \
            addresses are printed, the console's link unchanged); `beaconflow demo --stop` stops them, and the next `beaconflow demo` stops them and starts afresh. Needs \
            mosquitto and PostgreSQL installed (scripts/install-deps).

            Examples:
              beaconflow demo
              beaconflow demo --duration 300 --keep
              beaconflow demo --stop
            """
    )

    @Option(help: "Seconds of simulated traffic.") var duration = 60
    @Flag(help: "Leave mosquitto, PostgreSQL and the console running afterwards.") var keep = false
    @Flag(help: "Stop the servers an earlier --keep left running under --directory, and exit.") var stop = false
    @Option(help: "Where the servers, their data and the agents' spools go.") var directory = ".beaconflow"
    @Option(help: "Seed of the simulated deployment.") var seed: UInt64 = 7
    @Option(help: "Use this broker (mqtt://[user:password@]host[:port], or mqtts://... with the system's CAs) instead of starting one.")
    var broker: String?
    @Option(help: "Use this database (libpq URI or conninfo) instead of starting one; its beaconflow schema is migrated.")
    var database: String?
    @Option(help: "Where the demo's web console listens while it runs: HOST:PORT (port 0 takes a free one), or 'none'.")
    var consoleListen = "127.0.0.1:0"
    @Option(help: "Log level of the pipeline's own logs.") var logLevel: Logger.Level = .error

    func run() async throws {
        guard duration > 0 else { throw ValidationError("--duration must be at least 1 second") }
        if stop {
            let home = try makeSharedDirectory(directory)
            let stopped = try await stopLeftovers(in: home)
            say(stopped > 0 ? "Stopped the \(stopped) server(s) a demo left running under \(home)." : "No demo server runs under \(home).")
            return
        }
        let consoleAddress: MetricsListenAddress?
        do { consoleAddress = try MetricsListenAddress.parse(consoleListen) } catch {
            throw ValidationError("--console-listen must be HOST:PORT or 'none', not '\(consoleListen)'")
        }
        let level = logLevel
        var givenBroker: BrokerAddress?
        if let broker {
            switch Result(catching: { () throws(ConfigurationError) in try BrokerAddress(url: broker) }) {
            case .success(let address): givenBroker = address
            case .failure(let error): throw ValidationError(error.message)
            }
        }
        guard (broker != nil || MosquittoServer.executable != nil), (database != nil || PostgresServer.binaries != nil) else {
            FileHandle.standardError.write(Data("beaconflow demo: needs mosquitto and PostgreSQL (scripts/install-deps), or --broker and --database\n".utf8))
            throw ExitCode(69)
        }
        bootstrapLogging(level: level)
        let logger = Logger(label: "beaconflow.demo")
        let interrupted = InterruptFlag()
        let signalSources = interrupted.watchSignals()
        signal(SIGPIPE, SIG_IGN)
        defer { signalSources.forEach { $0.cancel() } }

        let home = try makeSharedDirectory(directory)
        _ = try await stopLeftovers(in: home)
        var servers = DemoServers()
        defer {
            servers.stopUnlessKept()
            if !keep { try? FileManager.default.removeItem(atPath: home + "/spool") }
        }
        let brokerAddress: BrokerAddress
        if let givenBroker {
            brokerAddress = givenBroker
        } else {
            say("Starting mosquitto under \(home) ...")
            let server = try MosquittoServer(directory: home + "/mosquitto", ownProcessGroup: true)
            servers.broker = server
            brokerAddress = BrokerAddress(host: "127.0.0.1", port: server.port)
            say("Broker: mqtt://127.0.0.1:\(server.port) (mosquitto_sub -h 127.0.0.1 -p \(server.port) -t 'beaconflow/#' -v)")
        }
        let conninfo: String
        if let database {
            conninfo = database
        } else {
            say("Starting PostgreSQL under \(home) ...")
            let server = try await PostgresServer.start(directory: home + "/postgres", ownProcessGroup: true)
            servers.database = server
            conninfo = server.conninfo
        }

        let start = Int64(Date().timeIntervalSince1970)
        let scenario = try Scenario.parse(DemoScenario.yaml(seed: seed, start: start, durationSeconds: duration + 5))
        let simulator = try Simulator(scenario)
        let sites = try SitesConfiguration.forScenario(scenario, beaconIDs: simulator.beaconIDs, method: .chosen)

        var mqtt = brokerAddress.clientConfiguration(
            clientID: "demo-ingest", tls: try brokerAddress.tls(caFile: nil, certificateFile: nil, keyFile: nil))
        mqtt.reconnectDelayMinimum = .milliseconds(50)
        var ingestConfiguration = IngestConfiguration(mqtt: mqtt, database: conninfo, sites: sites)
        ingestConfiguration.finishZonesAtStop = true
        let ingest = Ingest(configuration: ingestConfiguration, logger: logger)
        var agents: [Agent] = []
        for site in scenario.sites {
            for agent in site.agents {
                var configuration = try AgentConfiguration(
                    siteID: site.id, agentID: agent.id, broker: brokerAddress,
                    spoolDirectory: home + "/spool/\(agent.id)")
                configuration.statusInterval = .seconds(2)
                // At the end the agents wait for every batch to be acknowledged: on a busy machine the ingest may
                // be reclaiming a site (after a reconnect) when the run ends. Ends as soon as all are acknowledged.
                configuration.drainTimeout = .seconds(120)
                // On loopback an acknowledgement comes within milliseconds: a batch sent before its site was
                // served is sent again within the run, not at the drain's end.
                configuration.acknowledgementTimeout = .seconds(5)
                let source = SimulatorSource(simulator: simulator, site: site.id, agent: agent.id, speed: .factor(1))
                agents.append(Agent(configuration: configuration, source: source, logger: logger))
            }
        }
        say("Running \(agents.count) simulated agents at \(scenario.sites.count) sites with \(scenario.beacons.count) beacons for \(duration) s (Ctrl-C stops) ...")
        // Stopped in reverse order: the agents first (they hand over what they hold), then the ingest (it commits
        // what they sent).
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: IngestService(ingest: ingest), successTerminationBehavior: .gracefullyShutdownGroup),
            .init(
                service: DemoAgentsService(agents: agents, ingest: ingest, duration: duration, conninfo: conninfo),
                successTerminationBehavior: .gracefullyShutdownGroup),
        ]
        let consoleToken = ConsoleCommand.newToken()
        let consoleListened = DemoConsoleAddress()
        if let consoleAddress {
            let console = DemoConsoleService(
                ingest: ingest, conninfo: conninfo, ownDatabase: servers.database != nil, host: consoleAddress.host,
                port: consoleAddress.port, token: consoleToken, address: consoleListened, say: { say($0) }, logger: logger)
            services.append(.init(service: console, successTerminationBehavior: .ignore))
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        if interrupted.isSet { return }

        var report = try await onThread { try Report.load(PostgresConnection(conninfo), limit: 5) }
        // The agents just said goodbye because the demo stopped them: not news, but said.
        let stopped = report.agents.filter { $0.state == "offline" }.count
        report.agents.removeAll { $0.state == "offline" }
        say("")
        say(report.text)
        if stopped > 0 {
            say("(The agents the demo just stopped are offline now and left out above; `beaconflow report` lists them.)")
        }
        let startedDatabasePort = servers.database?.port
        let brokerPort = servers.broker?.port
        if keep, let consoleAddress, let listened = consoleListened.listened {
            do {
                servers.console = try keepConsole(
                    in: home, host: consoleAddress.host, port: listened.port, conninfo: listened.conninfo, token: consoleToken)
            } catch {
                say("The console could not be kept (\(error)); `beaconflow console` starts one.")
            }
        }
        if keep, servers.broker != nil || servers.database != nil || servers.console != nil {
            servers.keep(in: home)
            say("The servers the demo started are still running (pids in \(home)/servers.pid); `beaconflow demo --stop` stops them.")
            if let port = brokerPort { say("  broker: mqtt://127.0.0.1:\(port)") }
            if let listened = consoleListened.listened, servers.keptConsole {
                let host = consoleAddress.map { $0.host.contains(":") ? "[\($0.host)]" : $0.host } ?? "127.0.0.1"
                say("  console: http://\(host):\(listened.port)/login?token=\(consoleToken) (the same link; its log in \(home)/console.log)")
            }
        }
        if let port = startedDatabasePort {
            say(keep ? "Explore the views:" : "Explore the views next time with --keep, then:")
            say("  psql \"host=127.0.0.1 port=\(port) user=postgres dbname=postgres\" -c 'SELECT * FROM beaconflow.zone_occupancy_hourly'")
        } else {
            say("Explore the views with psql on your --database, e.g. SELECT * FROM beaconflow.zone_occupancy_hourly")
        }
    }

    /// A console like the demo's, as a process of its own that outlives the demo: at the address it listened on
    /// and with its token (in a file only this user reads), so that the link printed stays good.
    private func keepConsole(in home: String, host: String, port: Int, conninfo: String, token: String) throws -> ChildProcess {
        let tokenFile = home + "/console.token"
        guard FileManager.default.createFile(atPath: tokenFile, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ConfigurationError("cannot write \(tokenFile)")
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return try ChildProcess(
            executable,
            ["console", "--database", conninfo, "--listen", "\(host.contains(":") ? "[\(host)]" : host):\(port)", "--token-file", tokenFile],
            standardOutputPath: home + "/console.log", standardErrorPath: home + "/console.log", newProcessGroup: true)
    }

    /// Stops servers a previous `--keep` left running here, and removes what the last run left; returns how many
    /// servers it stopped.
    private func stopLeftovers(in home: String) async throws -> Int {
        let pidFile = home + "/servers.pid"
        var stopped = 0
        if let text = try? String(contentsOfFile: pidFile, encoding: .utf8) {
            for pid in text.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) where pid > 1 && kill(pid, 0) == 0 {
                kill(pid, SIGINT)
                for _ in 0..<200 where kill(pid, 0) == 0 { try await Task.sleep(for: .milliseconds(50)) }
                stopped += 1
            }
        }
        for leftover in ["servers.pid", "mosquitto", "postgres", "spool", "console.token", "console.log"] {
            try? FileManager.default.removeItem(atPath: home + "/" + leftover)
        }
        return stopped
    }
}

/// A line on standard output, at once (progress, when piped); a reader gone (`| head`) is no reason to leave
/// servers behind, so write errors are ignored (SIGPIPE is).
private func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
}

/// The demo's agents, once the ingest serves every site, for `duration` seconds with a progress line every 2 s; a
/// graceful shutdown (Ctrl-C) ends it early. It returns when every agent has stopped.
private struct DemoAgentsService: Service, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "demo agents" }

    let agents: [Agent]
    let ingest: Ingest
    let duration: Int
    let conninfo: String

    func run() async throws {
        // Until the ingest serves every site: a batch sent before its site is claimed reaches no subscriber, and
        // waits for the agent to send it again. A busy machine may take a while to start PostgreSQL's schema.
        let deadline = ContinuousClock.now + .seconds(120)
        let sites = ingest.configuration.sites.sites.count
        var ready: Bool {
            ingest.statistics.mqttConnected && ingest.statistics.databaseConnected && ingest.statistics.sitesServed == sites
        }
        while !ready, ContinuousClock.now < deadline, !Task.isShuttingDownGracefully {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if !ready, !Task.isShuttingDownGracefully {
            say("The ingest serves \(ingest.statistics.sitesServed) of \(sites) sites after 120 s; starting the agents anyway ...")
        }
        await withTaskGroup(of: Void.self) { group in
            for agent in agents { group.addTask { _ = try? await agent.run() } }
            await withGracefulShutdownHandler {
                await showProgress()
            } onGracefulShutdown: {
                for agent in agents { agent.requestStop() }
            }
            if !Task.isShuttingDownGracefully { say("Stopping the agents; the ingest commits what they sent ...") }
            for agent in agents { agent.requestStop() }
            await group.waitForAll()
        }
    }

    private func showProgress() async {
        let began = ContinuousClock.now
        var nextReport = began + .seconds(2)
        while ContinuousClock.now - began < .seconds(duration), !Task.isShuttingDownGracefully {
            let wakeUp = nextReport
            _ = try? await cancelWhenGracefulShutdown { try await Task.sleep(until: wakeUp, clock: .continuous) }
            if Task.isShuttingDownGracefully {
                say("Interrupted: stopping ...")
                return
            }
            nextReport = nextReport + .seconds(2)
            let advertsPerSecond = try? await onThread {
                try PostgresConnection(conninfo).query(
                    "SELECT coalesce(sum(adverts_per_s), 0) FROM beaconflow.agent_health WHERE online")
            }.first.flatMap { try? $0.decode(0, as: Double.self) }
            let statistics = ingest.statistics
            let elapsed = Int((ContinuousClock.now - began).components.seconds)
            say(
                String(
                    format: "%4d s  adverts/s %7.0f  batches %6d  rows %9d  lag %.2f s", elapsed, advertsPerSecond ?? 0,
                    statistics.batchesCommitted, statistics.sightingsCommitted, statistics.lagSeconds))
        }
    }
}

/// The demo's servers: stopped when the demo ends, unless kept.
private struct DemoServers {
    var broker: MosquittoServer?
    var database: PostgresServer?
    /// A console started to outlive the demo (`--keep`).
    var console: ChildProcess?
    private(set) var keptConsole = false

    /// Leaves them running, their pids in `servers.pid` (the console's first: `--stop` stops it before the database
    /// it reads).
    mutating func keep(in home: String) {
        console?.detach()
        keptConsole = console != nil
        let pids = [console?.pid, broker?.leaveRunning(), database?.leaveRunning()].compactMap { $0 }
        try? pids.map(String.init).joined(separator: " ").appending("\n").write(
            toFile: home + "/servers.pid", atomically: true, encoding: .utf8)
        broker = nil
        database = nil
        console = nil
    }

    mutating func stopUnlessKept() {
        console = nil
        broker?.stop()
        database?.stop()
        broker = nil
        database = nil
    }
}

/// Set by SIGINT or SIGTERM, which no longer end the process at once: the demo stops its parts in order.
final class InterruptFlag: Sendable {
    private let state = Mutex(false)

    var isSet: Bool { state.withLock { $0 } }

    /// Routes SIGINT and SIGTERM here; keep the returned sources for as long as they should work.
    func watchSignals() -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in state.withLock { $0 = true } }
            source.resume()
            return source
        }
    }
}

