import ArgumentParser
import BeaconMessaging
import CommandLineSupport
import Foundation
import Logging
import ServiceLifecycle
import WebConsole

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Serve the read-only web console: sites and zones with live occupancy, beacons, agents, the pipeline's health.",
        discussion: """
            Reads the public views only: connect as a role granted beaconflow_reader. Every page needs the access \
            token: open the login link logged at start (http://HOST:PORT/login?token=...), which sets a cookie, or \
            send Authorization: Bearer TOKEN. Pages follow the views live (server-sent events). Zones are drawn as a \
            floor layout when the sites file gives each zone a rect, as tiles otherwise. SIGTERM or Ctrl-C stops it.

            Exit status: 0 stopped by a signal; 64 bad arguments or token file; 69 the address cannot be listened on.

            Examples:
              beaconflow console --database postgresql://grafana@127.0.0.1/beaconflow \\
                --listen 127.0.0.1:8080
              beaconflow console \\
                --database "host=/run/postgresql dbname=beaconflow user=grafana" \\
                --listen 127.0.0.1:8080 --token-file /etc/beaconflow/console.token
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(help: "Where the console listens: HOST:PORT or [IPv6]:PORT; port 0 takes a free one.") var listen = "127.0.0.1:8080"
    @Option(help: "A file whose first line is the access token (16 to 200 characters). Default: a new random token at every start.")
    var tokenFile: String?
    @Option(help: "Seconds between reads of the views.") var refresh = 2.0
    @Option(help: "Open connections at most.") var maxConnections = 64
    @Option(help: "Live event streams (open pages) at most; pages beyond it poll every 5 s.") var maxStreams = 32
    @Option(help: "Log level.") var logLevel: Logger.Level = .info
    @Option(help: "Log lines as 'text' (the default), 'json' (one object per line) or 'logfmt', for Loki, Elasticsearch or Vector.")
    var logFormat: LogFormat = .text

    func validate() throws {
        guard (0.5...3600).contains(refresh) else { throw ValidationError("--refresh must be 0.5-3600 seconds") }
        guard (1...10_000).contains(maxConnections), (1...10_000).contains(maxStreams) else {
            throw ValidationError("--max-connections and --max-streams must be 1-10000")
        }
        guard (try? MetricsListenAddress.parse(listen)) ?? nil != nil else {
            throw ValidationError("--listen must be HOST:PORT or [IPv6]:PORT, not '\(listen)'")
        }
    }

    /// The token: the file's first line, or a new one.
    func token() throws(ConfigurationError) -> String {
        guard let tokenFile else { return ConsoleCommand.newToken() }
        guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
            let code = errno
            throw ConfigurationError("cannot read --token-file \(tokenFile): \(String(cString: strerror(code))) (errno \(code))")
        }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard (16...200).contains(line.utf8.count), line.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x3B && $0 != 0x2C }) else {
            throw ConfigurationError("--token-file \(tokenFile): the first line must be 16-200 printable characters without spaces, ';' or ','")
        }
        return line
    }

    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(UInt8.random(in: 0...15, using: &generator), radix: 16) }.joined()
    }

    func run() async throws {
        let token: String
        do { token = try self.token() } catch { throw ValidationError(error.message) }
        guard let address = try? MetricsListenAddress.parse(listen) else { throw ValidationError("--listen: '\(listen)'") }
        bootstrapLogging(level: logLevel, format: logFormat)
        let logger = Logger(label: "beaconflow.console")
        let console = WebConsoleService(
            conninfo: databaseOptions.database, host: address.host, port: address.port, token: token, refresh: .milliseconds(Int64(refresh * 1000)),
            maxConnections: maxConnections, maxStreams: maxStreams, showToken: tokenFile == nil, logger: logger)
        do {
            try await runUntilSignalled(console, metrics: nil, logger: logger)
        } catch where "\(error)".contains("bind") || "\(error)".contains("Address already in use") {
            logger.critical("The console cannot listen", metadata: ["listen": "\(listen)", "error": "\(error)"])
            throw ExitCode(69)
        }
    }
}

/// The console as a service: the views' reader and the HTTP server, which logs where to open it.
struct WebConsoleService: Service, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "web console" }

    let conninfo: String
    let host: String
    let port: Int
    let token: String
    let refresh: Duration
    let maxConnections: Int
    let maxStreams: Int
    /// Whether the login link carries the token (a token nobody else knows: one made at this start).
    let showToken: Bool
    let logger: Logger
    /// Told the login link and the port once the server listens.
    var onListening: @Sendable (_ link: String, _ port: Int) async -> Void = { _, _ in }

    func run() async throws {
        let snapshots = ConsoleSnapshots(conninfo: conninfo, refresh: refresh, logger: logger)
        var configuration = ConsoleServer.Configuration(token: token)
        configuration.host = host
        configuration.port = port
        configuration.maxConnections = maxConnections
        configuration.maxStreams = maxStreams
        let application = ConsoleServer.application(snapshots: snapshots, configuration: configuration, logger: logger) { [self] port in
            let shown = host.contains(":") ? "[\(host)]" : host
            let link = "http://\(shown):\(port)/login?token=\(showToken ? token : "<the token>")"
            logger.info("Console listening", metadata: ["login": "\(link)"])
            await onListening(link, port)
        }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await snapshots.run() }
            // The reads end with the server (a graceful shutdown or a failure).
            defer { group.cancelAll() }
            try await application.run()
        }
    }
}
