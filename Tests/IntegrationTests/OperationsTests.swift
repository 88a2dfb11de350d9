import BeaconAgent
import BeaconIngest
import Foundation
import LibPQ
import LocalServers
import MetricFamilies
import MetricsEndpoint
import Prometheus
import Synchronization
import TestServers
import Testing

@Suite struct MetricsEndpointTests {
    @Test func servesMetricsHealthAndNothingElse() throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(name: "beaconflow_test_total", labels: [("outcome", "committed")]).increment(by: Int64(3))
        let healthy = Mutex(false)
        let endpoint = try MetricsEndpoint(host: "127.0.0.1", port: 0, registry: registry) {
            MetricsEndpoint.Health(healthy: healthy.withLock { $0 }, json: #"{"healthy": false}"#)
        }
        defer { endpoint.stop() }
        let metrics = try httpGet(port: endpoint.port, path: "/metrics")
        #expect(metrics.status == "HTTP/1.1 200 OK")
        #expect(metrics.body.contains(#"beaconflow_test_total{outcome="committed"} 3"#))
        #expect(try httpGet(port: endpoint.port, path: "/healthz").status == "HTTP/1.1 503 Service Unavailable")
        healthy.withLock { $0 = true }
        #expect(try httpGet(port: endpoint.port, path: "/healthz").status == "HTTP/1.1 200 OK")
        #expect(try httpGet(port: endpoint.port, path: "/other").status == "HTTP/1.1 404 Not Found")
    }

    /// A client that sends a byte at a time holds nobody else up, and is cut off after the client timeout.
    @Test func aSlowClientDoesNotBlockOthers() throws {
        let endpoint = try MetricsEndpoint(host: "127.0.0.1", port: 0, registry: PrometheusCollectorRegistry()) {
            MetricsEndpoint.Health(healthy: true, json: "{}")
        }
        defer { endpoint.stop() }
        let slow = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(slow) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(endpoint.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // Before connecting: the server's time for the client starts when it accepts, which cannot be earlier, and
        // a loaded machine may pause this thread between the connection and the next line.
        let started = ContinuousClock.now
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(slow, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        var byte: UInt8 = 0x47  // "G"
        _ = send(slow, &byte, 1, 0)
        let healthz = try httpGet(port: endpoint.port, path: "/healthz")
        #expect(healthz.status == "HTTP/1.1 200 OK")
        // Not held up by the slow client, which the server waits on for 2 s (room left for a loaded machine).
        #expect(ContinuousClock.now - started < .milliseconds(1_900))
        // Still trickling, the slow client is closed once its time is up.
        var closedAfter: Duration?
        for _ in 0..<100 {
            _ = send(slow, &byte, 1, Int32(MSG_NOSIGNAL))
            // The server's end: nothing to read until it closes (end of file) or resets.
            var descriptor = pollfd(fd: slow, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 100) > 0 {
                var scratch = [UInt8](repeating: 0, count: 256)
                if recv(slow, &scratch, scratch.count, 0) <= 0 {
                    closedAfter = ContinuousClock.now - started
                    break
                }
            }
        }
        let after = try #require(closedAfter)
        #expect(after >= .seconds(2) && after < .seconds(8), "\(after)")
    }

    /// A hundred clients trickling a byte every half second, more than the endpoint serves at once, never turn a
    /// scraper away: each new client sheds the slowest, and every request is answered.
    @Test func aCrowdOfSlowClientsNeverKeepsAScraperOut() throws {
        let endpoint = try MetricsEndpoint(host: "127.0.0.1", port: 0, registry: PrometheusCollectorRegistry()) {
            MetricsEndpoint.Health(healthy: true, json: "{}")
        }
        defer { endpoint.stop() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(endpoint.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var slow: [Int32] = []
        defer { for descriptor in slow { close(descriptor) } }
        var byte: UInt8 = 0x47  // "G"
        var answered = 0
        var slowest = Duration.zero
        for round in 0..<8 {
            let roundStarted = ContinuousClock.now
            // Slow clients keep arriving, as an attacker's would, and those connected send one more byte.
            for _ in 0..<(round < 4 ? 25 : 0) {
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                try #require(connected == 0)
                slow.append(descriptor)
            }
            for descriptor in slow { _ = send(descriptor, &byte, 1, Int32(MSG_NOSIGNAL)) }
            for _ in 0..<3 {
                let started = ContinuousClock.now
                let healthz = try httpGet(port: endpoint.port, path: "/healthz")
                slowest = max(slowest, ContinuousClock.now - started)
                if healthz.status == "HTTP/1.1 200 OK" { answered += 1 }
            }
            let left = .milliseconds(500) - (ContinuousClock.now - roundStarted)
            if left > .zero { Thread.sleep(forTimeInterval: Double(left.components.attoseconds) / 1e18 + Double(left.components.seconds)) }
        }
        #expect(answered == 24, "\(answered) of 24 answered")
        // Never held up to the slow clients' 2 s timeout (with room for a loaded machine).
        #expect(slowest < .seconds(5), "\(slowest)")
    }

    @Test func aTakenPortIsAClearError() throws {
        let first = try MetricsEndpoint(host: "127.0.0.1", port: 0, registry: PrometheusCollectorRegistry()) {
            MetricsEndpoint.Health(healthy: true, json: "{}")
        }
        defer { first.stop() }
        #expect(throws: MetricsEndpoint.Failure.self) {
            _ = try MetricsEndpoint(host: "127.0.0.1", port: first.port, registry: PrometheusCollectorRegistry()) {
                MetricsEndpoint.Health(healthy: true, json: "{}")
            }
        }
    }
}

@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"), .timeLimit(.minutes(5)))
struct IngestCommandTests {
    /// A scrape as Prometheus wants it: `promtool check metrics` passes (every family has its HELP and TYPE, names
    /// as the conventions ask), every family is one of `families`, the build or the process, and the process's
    /// figures are there.
    func expectWellFormed(_ exposition: String, families: [MetricFamily]) async throws {
        let known = Set((families + ProcessMetrics.all + [BuildInfo.family]).map(\.name))
        let described = exposition.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.map { String($0.split(separator: " ")[2]) }
        #expect(Set(described).isSubset(of: known), "families not in the catalogue: \(Set(described).subtracting(known))")
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"] {
            #expect(exposition.contains("\n\(name) "), "\(name) missing")
        }
        guard let promtool = findExecutable("promtool") else { return }
        let work = try makeTemporaryDirectory(prefix: "scrape")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try exposition.write(toFile: work + "/metrics", atomically: true, encoding: .utf8)
        let check = try await runProgram("/bin/sh", ["-c", #"exec "$0" check metrics < "$1""#, promtool, work + "/metrics"])
        #expect(check.status == 0, "promtool check metrics: \(check.output)\(check.errors)")
    }

    @Test func theCommandsRunTheWholePipelineServeMetricsAndStopOnSIGTERM() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "ingest-command")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let port = try freeLoopbackPort()
        let ingest = try ChildProcess(
            executable,
            [
                "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
                "--metrics-listen", "127.0.0.1:\(port)",
            ], standardErrorPath: work + "/ingest.log")
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, (try? httpGet(port: port, path: "/healthz").status) != "HTTP/1.1 200 OK" {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try httpGet(port: port, path: "/healthz").body.contains(#""database_connected": true"#))

        let agent = try ChildProcess(
            executable,
            [
                "agent", "--site", "hq", "--agent", "hq-a1", "--source", "btsnoop:\(exampleFile("mixed-beacons.btsnoop"))",
                "--speed", "max", "--broker", broker.url, "--spool", work + "/spool", "--ack-timeout", "2",
            ], standardErrorPath: work + "/agent.log")
        // The agent exits 0 only when the ingest has acknowledged every batch, which it does after the commit.
        let agentStatus = await agent.exit()
        let agentLog = (try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? ""
        #expect(agentStatus == 0, "agent log: \(agentLog)")
        #expect(!agentLog.contains("Serving /metrics"), "the agent serves /metrics only when asked")
        let metrics = try httpGet(port: port, path: "/metrics").body
        #expect(metrics.contains(#"beaconflow_ingest_batches_total{outcome="committed"}"#))
        #expect(metrics.contains("beaconflow_ingest_sightings_total"))
        #expect(metrics.contains("beaconflow_ingest_database_connected 1"))
        #expect(metrics.contains("beaconflow_ingest_brokers_connected 1"))
        #expect(metrics.contains(#"beaconflow_build_info{version="\#(BuildInfo.version)"} 1"#))
        try await expectWellFormed(metrics, families: IngestMetrics.all)

        ingest.terminate(SIGTERM)
        let status = await ingest.exit()
        let log = (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? ""
        #expect(status == 0, "ingest log: \(log)")
        #expect(log.contains("Ingest stopped"))
        #expect(!log.contains("password"))
    }

    /// The agent's /metrics and /healthz (off unless asked for): a live simulated source through a real broker
    /// and ingest; the counters move, the spool empties as batches are acknowledged, /healthz follows the broker.
    @Test func theAgentServesMetricsWhenAsked() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "agent-metrics")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let ingest = try ChildProcess(
            executable, ["ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo, "--metrics-listen", "none"],
            standardErrorPath: work + "/ingest.log")
        let port = try freeLoopbackPort()
        let agent = try ChildProcess(
            executable,
            [
                "agent", "--site", "hq", "--agent", "hq-a1", "--source", "sim:" + deployDirectory + "/scenarios/demo.yaml",
                "--broker", broker.url, "--spool", work + "/spool", "--metrics-listen", "127.0.0.1:\(port)",
                "--ack-timeout", "2",  // the batches sent before the ingest claimed the site go again soon
            ], standardErrorPath: work + "/agent.log")
        func metric(_ name: String, in text: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        var metrics = ""
        // Three batches take a few seconds alone; a loaded machine can starve the simulated source for much longer.
        let deadline = ContinuousClock.now + .seconds(80)
        while ContinuousClock.now < deadline {
            metrics = (try? httpGet(port: port, path: "/metrics").body) ?? ""
            if (metric("beaconflow_agent_batches_acknowledged_total", in: metrics) ?? 0) >= 3 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let log = { (try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? "" }
        #expect((metric("beaconflow_agent_batches_acknowledged_total", in: metrics) ?? 0) >= 3, "\(metrics)\n\(log())")
        #expect((metric("beaconflow_agent_publishes_total", in: metrics) ?? 0) >= (metric("beaconflow_agent_batches_acknowledged_total", in: metrics) ?? 0))
        #expect((metric("beaconflow_agent_adverts_total", in: metrics) ?? 0) > 0)
        #expect(metric("beaconflow_agent_spool_bytes", in: metrics) != nil)
        #expect(metric("beaconflow_agent_broker_connected", in: metrics) == 1)
        try await expectWellFormed(metrics, families: AgentMetrics.all)
        let health = try httpGet(port: port, path: "/healthz")
        #expect(health.status == "HTTP/1.1 200 OK" && health.body.contains(#""broker_connected":true"#), "\(health)")
        // Without the broker: unhealthy, and the batches wait in the spool.
        broker.stop()
        let brokerGone = ContinuousClock.now + .seconds(20)
        var unhealthy = try httpGet(port: port, path: "/healthz")
        while ContinuousClock.now < brokerGone, unhealthy.status == "HTTP/1.1 200 OK" {
            try await Task.sleep(for: .milliseconds(200))
            unhealthy = try httpGet(port: port, path: "/healthz")
        }
        #expect(unhealthy.status == "HTTP/1.1 503 Service Unavailable" && unhealthy.body.contains(#""broker_connected":false"#), "\(unhealthy)")
        try await Task.sleep(for: .seconds(2))
        let withoutBroker = try httpGet(port: port, path: "/metrics").body
        #expect((metric("beaconflow_agent_spool_pending_batches", in: withoutBroker) ?? 0) > 0)
        #expect(metric("beaconflow_agent_broker_connected", in: withoutBroker) == 0)
        agent.terminate(SIGTERM)
        ingest.terminate(SIGTERM)
        #expect(log().contains("Serving /metrics"))
    }

    @Test func aBadSitesFileIsNamedAndExits64() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "ingest-command")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try "sites:\n  - id: HQ\n".write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let process = try ChildProcess(executable, ["ingest", "--sites", work + "/sites.yaml"], standardErrorPath: work + "/log")
        _ = await process.exit()
        #expect(process.exitCode == 64)
        let log = (try? String(contentsOfFile: work + "/log", encoding: .utf8)) ?? ""
        #expect(log.contains("sites[0].id"), "\(log)")
        #expect(log.contains("Usage: beaconflow ingest "), "the ingest's usage, not the root's: \(log)")
        try "sites:\n  - id: hq\n    zonse: []\n".write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let typo = try ChildProcess(executable, ["ingest", "--sites", work + "/sites.yaml"], standardErrorPath: work + "/typo")
        _ = await typo.exit()
        #expect(typo.exitCode == 64)
        let typoLog = (try? String(contentsOfFile: work + "/typo", encoding: .utf8)) ?? ""
        #expect(typoLog.contains("sites[0]: unknown key 'zonse' (did you mean 'zones'?)"), "\(typoLog)")
    }

    /// Values that used to trap (exit 132): a clear error instead.
    @Test func extremeArgumentsAreErrorsNotTraps() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "extreme-arguments")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let decode = try ChildProcess(
            executable, ["decode", "--hex", "0201", "--unix-time", "9223372036854775807"], standardErrorPath: work + "/decode.log")
        _ = await decode.exit()
        #expect(decode.exitCode == 64)
        #expect(((try? String(contentsOfFile: work + "/decode.log", encoding: .utf8)) ?? "").contains("--unix-time must be between"))
        let agent = try ChildProcess(
            executable,
            ["agent", "--site", "hq", "--agent", "hq-a1", "--source", "btsnoop:" + work, "--broker", "mqtt://127.0.0.1:1", "--spool", work + "/spool"],
            standardErrorPath: work + "/agent.log")
        _ = await agent.exit()
        #expect(agent.exitCode == 66)
        #expect(((try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? "").contains("is a directory: give a capture file"))
    }

    /// A sites file of aliases that expand a billionfold, or nested 100,000 levels deep, ends the ingest with
    /// status 64 and the reason, in moments: no memory exhausted, no stack overflow.
    @Test func aHostileSitesFileIsAClearErrorNotACrash() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "hostile-sites")
        defer { try? FileManager.default.removeItem(atPath: work) }
        var bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for level in 1..<9 {
            bomb.append("a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]")
        }
        bomb.append("sites: *a8")
        let files = [
            ("bomb", bomb.joined(separator: "\n"), "expands to more than"),
            ("deep", "sites: " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000), "nested more than"),
        ]
        for (name, text, reason) in files {
            try text.write(toFile: "\(work)/\(name).yaml", atomically: true, encoding: .utf8)
            let started = ContinuousClock.now
            let process = try ChildProcess(
                executable, ["ingest", "--sites", "\(work)/\(name).yaml", "--broker", "mqtt://127.0.0.1:1", "--database", "host=127.0.0.1 port=1"],
                standardErrorPath: "\(work)/\(name).log")
            _ = await process.exit()
            let log = (try? String(contentsOfFile: "\(work)/\(name).log", encoding: .utf8)) ?? ""
            #expect(process.exitCode == 64, "\(name): \(log)")
            #expect(log.contains(reason), "\(name): \(log)")
            // Well under a second alone; the bound leaves room for a loaded machine, where a billionfold
            // expansion would still take hours.
            #expect(ContinuousClock.now - started < .seconds(60))
        }
    }

    /// A connection string libpq cannot parse is named without printing it: it may hold a password.
    /// `--log-format json` and `logfmt`: every line of an ingest that cannot reach its database (two hosts, so
    /// libpq's error has a line per host) is one record with the time, level, logger and a constant message, its
    /// data in fields (in JSON, counts as numbers); the database's error is one field of one line.
    @Test(arguments: ["json", "logfmt"])
    func structuredLogsAreOneRecordPerLine(format: String) async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let work = try makeTemporaryDirectory(prefix: "log-format")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let closed = try freeLoopbackPort()
        let ingest = try ChildProcess(
            executable,
            [
                "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--metrics-listen", "none",
                "--database", "host=127.0.0.1,::1 port=\(closed) dbname=none user=none connect_timeout=2", "--log-format", format,
            ], standardErrorPath: work + "/ingest.log")
        let log = { (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? "" }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, !log().contains("Connected to the broker") || !log().contains("PostgreSQL") {
            try await Task.sleep(for: .milliseconds(100))
        }
        ingest.terminate(SIGTERM)
        _ = await ingest.exit()
        let lines = log().split(separator: "\n").map(String.init)
        #expect(lines.count >= 3, "\(log())")
        var records: [[String: String]] = []
        for line in lines {
            if format == "json" {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "not one JSON object: \(line)")
                // Counts are numbers, text is strings.
                if object?["msg"] as? String == "Ingest started" {
                    #expect(object?["sites"] is NSNumber && !(object?["sites"] is String), "\(line)")
                    #expect(object?["instance"] is String, "\(line)")
                }
                records.append((object ?? [:]).mapValues { "\($0)" })
            } else {
                let pair = #/([a-z_]+)=("(?:[^"\\]|\\.)*"|[^ "=]+)(?: |$)/#
                let pairs = line.matches(of: pair)
                #expect(pairs.map { $0.output.0.count }.reduce(0, +) == line.count, "not logfmt: \(line)")
                records.append(Dictionary(pairs.map { (String($0.output.1), String($0.output.2)) }, uniquingKeysWith: { $1 }))
            }
        }
        for record in records {
            #expect(["ts", "level", "logger", "msg"].allSatisfy { record[$0] != nil }, "\(record)")
            #expect(record["ts"]?.hasSuffix("Z") == true && record["logger"] == "beaconflow.ingest", "\(record)")
        }
        let failure = records.first { ($0["error"] ?? "").contains("127.0.0.1") }
        #expect(failure?["error"]?.contains("::1") == true, "both hosts' failures in one field: \(log())")
    }

    @Test func aBadConnectionStringIsNamedWithoutItsPassword() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "bad-conninfo")
        defer { try? FileManager.default.removeItem(atPath: work) }
        for (command, database) in [("report", "host=localhost password=s3cret-value foo"), ("migrate", "postgresql://u:s3cret-value@h/db?sslmode")] {
            let process = try ChildProcess(executable, [command, "--database", database], standardErrorPath: work + "/\(command).log")
            _ = await process.exit()
            #expect(process.exitCode == 64)
            let log = (try? String(contentsOfFile: work + "/\(command).log", encoding: .utf8)) ?? ""
            #expect(log.contains("--database: ") && !log.contains("s3cret"), "\(log)")
        }
    }
}

@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"), .timeLimit(.minutes(5)),
    .serialized)
struct DemoCommandTests {
    /// Processes whose command line mentions `directory` (the demo's servers run from it).
    func processes(under directory: String) -> [String] {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.filter { Int($0) != nil } ?? []
        return pids.compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                let line = String(bytes: data.map { $0 == 0 ? 32 : $0 }, encoding: .utf8), line.contains(directory)
            else { return nil }
            return "\(pid): \(line)"
        }
    }

    @Test func theDemoReportsEverySiteAndZoneAndLeavesNoProcessBehind() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "demo")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let demo = try ChildProcess(
            executable, ["demo", "--duration", "20", "--directory", work + "/state", "--log-level", "info"],
            standardOutputPath: work + "/out.txt", standardErrorPath: work + "/err.txt")
        let status = await demo.exit()
        let output = (try? String(contentsOfFile: work + "/out.txt", encoding: .utf8)) ?? ""
        let log = (try? String(contentsOfFile: work + "/err.txt", encoding: .utf8))?.suffix(3000) ?? ""
        #expect(demo.exitCode == 0, "status \(status); \(output.suffix(2000)) \(log)")
        let occupancy = output.components(separatedBy: "Occupancy per zone").last?.components(separatedBy: "Longest dwells").first ?? ""
        let rows = occupancy.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        for (site, zones) in [
            ("hq", ["lobby", "lab", "office", "canteen"]), ("warehouse", ["dock", "aisle-a", "aisle-b", "packing"]),
            ("clinic", ["reception", "ward", "imaging", "pharmacy"]),
        ] {
            for zone in zones {
                let row = rows.first { $0.count >= 3 && $0[0] == site && $0[1] == zone }
                #expect(row != nil, "\(site)/\(zone) missing from the report:\n\(occupancy)\n\(log)")
                #expect(Int(row?[2] ?? "") ?? 0 > 0, "nobody in \(site)/\(zone) now:\n\(occupancy)")
            }
        }
        // Every dwell row has as many columns as the header names.
        let dwells = output.components(separatedBy: "Longest dwells").last?.components(separatedBy: "Beacons needing").first ?? ""
        let dwellLines = dwells.split(separator: "\n").map(String.init)
        #expect(dwellLines.first?.split(separator: " ").last == "visit", "\(dwells)")
        let visits = dwellLines.dropFirst(2).filter { !$0.hasPrefix("(") }.compactMap { $0.split(separator: " ").last }
        #expect(!visits.isEmpty && visits.allSatisfy { $0 == "open" || $0 == "ended" }, "\(dwells)")
        #expect(output.contains("rows"), "progress lines: \(output.prefix(1000))")
        #expect(processes(under: work).isEmpty, "left behind: \(processes(under: work))")
    }

    /// As root, in a directory the postgres user cannot reach (a private parent, as `mktemp -d` makes), the demo
    /// stops at once and names the directory to open, leaving no process behind.
    @Test(.enabled(if: getuid() == 0, "PostgreSQL changes user only under root"))
    func aDirectoryThePostgresUserCannotReachIsNamed() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "demo")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let closed = work + "/private"
        try FileManager.default.createDirectory(atPath: closed, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let demo = try ChildProcess(
            executable, ["demo", "--duration", "5", "--directory", closed + "/state"],
            standardOutputPath: work + "/out.txt", standardErrorPath: work + "/err.txt")
        _ = await demo.exit()
        let output = ((try? String(contentsOfFile: work + "/out.txt", encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: work + "/err.txt", encoding: .utf8)) ?? "")
        #expect(demo.exitCode != 0)
        #expect(output.contains("cannot reach \(closed)/state/postgres: \(closed) has mode 700"), "\(output.suffix(2000))")
        #expect(processes(under: work).isEmpty, "left behind: \(processes(under: work))")
    }

    /// With --broker and --database the demo starts no server and leaves the given ones running.
    @Test func theDemoUsesTheGivenServers() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "demo")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let demo = try ChildProcess(
            executable,
            ["demo", "--duration", "10", "--directory", work + "/state", "--broker", broker.url, "--database", database.conninfo],
            standardOutputPath: work + "/out.txt", standardErrorPath: work + "/err.txt")
        _ = await demo.exit()
        let output = (try? String(contentsOfFile: work + "/out.txt", encoding: .utf8)) ?? ""
        #expect(demo.exitCode == 0, "\(output.suffix(1500))")
        #expect(!output.contains("Starting"), "\(output.prefix(500))")
        #expect(output.contains("Occupancy per zone") && output.contains("warehouse"), "\(output.suffix(3000))")
        #expect(!FileManager.default.fileExists(atPath: work + "/state/postgres"))
        let connection = try PostgresConnection(database.conninfo)
        #expect(Int(try connection.query("SELECT count(*) FROM beaconflow.agent_health")[0][0] ?? "") == 36)
        #expect(processes(under: work).isEmpty)
    }

    @Test func ctrlCStopsEverything() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "demo")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let demo = try ChildProcess(
            executable, ["demo", "--duration", "120", "--directory", work + "/state"],
            standardOutputPath: work + "/out.txt", standardErrorPath: work + "/err.txt")
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline,
            !((try? String(contentsOfFile: work + "/out.txt", encoding: .utf8)) ?? "").contains("adverts/s")
        {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(!processes(under: work).filter { !$0.contains("beaconflow") }.isEmpty, "the servers run")
        kill(demo.pid, SIGINT)
        let started = ContinuousClock.now
        _ = await demo.exit()
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(((try? String(contentsOfFile: work + "/out.txt", encoding: .utf8)) ?? "").contains("Interrupted"))
        #expect(processes(under: work).isEmpty, "left behind: \(processes(under: work))")
    }
}
