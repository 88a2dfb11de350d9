import BeaconAgent
import BeaconPositions
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

/// An example command: where it is written and the command line as written there.
struct Example: Hashable, CustomStringConvertible {
    var origin: String
    var line: String
    var description: String { "\(origin): \(line)" }

    /// The agent's own executable: its examples are `beaconflow agent`'s, run by it.
    static let agentProgram = "beaconflow-agent"

    /// The environment assignments before the program, and the program's words (its name first).
    private var words: (environment: [String: String], program: ArraySlice<String>) {
        var environment: [String: String] = [:]
        var words = Self.shellWords(line)[...]
        while let first = words.first, let equals = first.firstIndex(of: "="), first[..<equals].allSatisfy({ $0.isUppercase || $0 == "_" }) {
            environment[String(first[..<equals])] = String(first[first.index(after: equals)...])
            words = words.dropFirst()
        }
        return (environment, words)
    }

    /// The command's words after `beaconflow` (`agent` and the words after `beaconflow-agent`), and the environment
    /// assignments before it.
    var command: (environment: [String: String], arguments: [String]) {
        let (environment, program) = words
        return (environment, (program.first == Self.agentProgram ? ["agent"] : []) + Array(program.dropFirst()))
    }

    /// Whether it runs `beaconflow-agent` rather than `beaconflow`.
    var runsAgentProgram: Bool { words.program.first == Self.agentProgram }

    var subcommand: String { command.arguments.first ?? "" }

    /// Splits a command line as sh would, for the quoting the examples use (single and double quotes).
    static func shellWords(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character == " " || character == "\t" {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// Logical lines (joined at a trailing `\`) with their `# comment` cut off.
    static func commandLines(_ lines: [Substring]) -> [String] {
        var result: [String] = []
        var pending = ""
        for raw in lines {
            var line = String(raw)
            if let comment = line.range(of: "  #") ?? line.range(of: " # ") { line = String(line[..<comment.lowerBound]) }
            line = line.trimmingCharacters(in: .whitespaces)
            if line.hasSuffix("\\") {
                pending += line.dropLast().trimmingCharacters(in: .whitespaces) + " "
            } else {
                result.append(pending + line)
                pending = ""
            }
        }
        return result.filter { !$0.isEmpty }
    }

    /// The `beaconflow` command lines of the ```sh blocks of a Markdown file.
    static func inMarkdown(_ path: String) throws -> [Example] {
        let text = try String(contentsOfFile: repositoryRoot + "/" + path, encoding: .utf8)
        var examples: [Example] = []
        var block: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                if let lines = block {
                    examples += commandLines(lines).filter { !$0.hasPrefix("scripts/") }.map { Example(origin: path, line: $0) }
                    block = nil
                } else if line == "```sh" {
                    block = []
                }
            } else if block != nil {
                block?.append(line)
            }
        }
        return examples
    }

    /// The lines under "Examples:" in a command's `--help` (one line each: the terminal width is set wide); no
    /// subcommand is `beaconflow --help`.
    static func inHelp(of subcommand: String?, executable: String) async throws -> [Example] {
        var environment = ProcessInfo.processInfo.environment
        environment["COLUMNS"] = "10000"
        let help = try await runProgram(executable, (subcommand.map { [$0] } ?? []) + ["--help"], environment: environment)
        let lines = help.output.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "Examples:") else { return [] }
        let body = lines[(start + 1)...].prefix { !$0.isEmpty }
        let name = URL(fileURLWithPath: executable).lastPathComponent
        return commandLines(Array(body)).map { Example(origin: "\(name) \(subcommand.map { $0 + " " } ?? "")--help", line: $0) }
    }

    /// Files in Markdown ```yaml blocks whose first line names where they live (`# /etc/beaconflow/agent.yaml`).
    static func filesInMarkdown(_ path: String) throws -> [String: String] {
        let text = try String(contentsOfFile: repositoryRoot + "/" + path, encoding: .utf8)
        var files: [String: String] = [:]
        for block in text.components(separatedBy: "```yaml\n").dropFirst() {
            let body = block.components(separatedBy: "```")[0]
            if let first = body.split(separator: "\n").first, first.hasPrefix("# /") {
                files[String(first.dropFirst(2))] = body
            }
        }
        return files
    }
}

/// Every example of the README, docs/ and the `--help` texts runs, as written, against what the repository ships
/// (examples/, deploy/). What an example cannot name here is mapped, and only this: the hosts
/// (`127.0.0.1:1883`, `broker.example:8883`, `127.0.0.1:5432`, `host=db`, `/run/postgresql`) are this test's
/// mosquitto (plain, and TLS as deploy/ configures it), and PostgreSQL; `/etc/beaconflow/` and
/// `/var/lib/beaconflow/` are directories of the test; the environment has `PGPORT` and `PGUSER=postgres` as a
/// user's shell would; the ingest's metrics listen on a free port instead of 9464; and the demo runs 5 s instead of
/// its 60 or 300.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .enabled(if: findExecutable("mosquitto_passwd", extraDirectories: ["/usr/bin"]) != nil, "mosquitto_passwd is not installed"),
    .serialized, .timeLimit(.minutes(10)))
struct ExampleTests {
    static let documents = ["README.md"] + ((try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? [])
        .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    static let subcommands = [
        "agent", "ingest", "decode", "simulate", "accuracy", "calibrate", "recording", "report", "migrate", "demo", "console", "bridge",
    ]

    static func allExamples(executable: String) async throws -> [Example] {
        var examples: [Example] = []
        for document in documents { examples += try Example.inMarkdown(document) }
        for subcommand in [nil] + subcommands { examples += try await Example.inHelp(of: subcommand, executable: executable) }
        examples += try await Example.inHelp(of: nil, executable: try #require(beaconflowAgentExecutable))
        return examples
    }


    /// In an 80-column terminal every example of every `--help` reads as written: no line is longer, so none is
    /// broken inside a command (long commands continue on the next line after a `\`).
    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func theHelpExamplesFitEightyColumns() async throws {
        var checked = 0
        let commands = ([nil] + Self.subcommands.map(Optional.some)).map { (beaconflowExecutable!, $0) } + [(try #require(beaconflowAgentExecutable), nil)]
        for (executable, subcommand) in commands {
            var environment = ProcessInfo.processInfo.environment
            environment["COLUMNS"] = "80"
            let help = try await runProgram(executable, (subcommand.map { [$0] } ?? []) + ["--help"], environment: environment)
            let lines = help.output.split(separator: "\n", omittingEmptySubsequences: false)
            guard let start = lines.firstIndex(of: "Examples:") else { continue }
            let body = lines[(start + 1)...].prefix { !$0.isEmpty }
            for (index, line) in body.enumerated() {
                checked += 1
                let continued = index > 0 && body[body.index(body.startIndex, offsetBy: index - 1)].hasSuffix("\\")
                #expect(line.count <= 80, "beaconflow \(subcommand ?? "") --help: longer than 80 columns: \(line)")
                let command = line.hasPrefix("  ") && !line.hasPrefix("   ") && (line.contains("beaconflow ") || line.contains("beaconflow-agent "))
                #expect(
                    (command && !continued) || (continued && line.hasPrefix("    ")),
                    "beaconflow \(subcommand ?? "") --help: an example broken inside a command: \(line)")
            }
        }
        #expect(checked >= 22)
    }

    /// The collection itself: it finds the examples where they are, and a command nobody runs would fail.
    @Test func theExamplesAreFound() async throws {
        let examples = try await Self.allExamples(executable: try #require(beaconflowExecutable))
        for subcommand in Self.subcommands where subcommand != "simulate" {
            #expect(examples.contains { $0.subcommand == subcommand && $0.origin.hasSuffix("--help") }, "\(subcommand)")
            #expect(examples.contains { $0.subcommand == subcommand && $0.origin == "README.md" }, "\(subcommand)")
        }
        #expect(Example.commandLines(["a \\", "  b   # note", "", "c"]) == ["a b", "c"])
        #expect(Example.shellWords(#"x --database "host=db dbname=b" 'q r'"#) == ["x", "--database", "host=db dbname=b", "q r"])
        #expect(Example(origin: "", line: "PGHOST=/run PGDATABASE=b beaconflow migrate").command.environment == ["PGHOST": "/run", "PGDATABASE": "b"])
        #expect(try Example.filesInMarkdown("README.md").keys.contains("/etc/beaconflow/agent.yaml"))
        #expect(examples.filter { $0.origin == "beaconflow --help" }.count == 3)
        let agentExamples = examples.filter { $0.origin == "beaconflow-agent --help" }
        #expect(agentExamples.count == 3 && agentExamples.allSatisfy { $0.runsAgentProgram && $0.subcommand == "agent" }, "\(agentExamples)")
        #expect(Example(origin: "", line: "beaconflow-agent --site hq").command.arguments == ["agent", "--site", "hq"])
        #expect(!Example(origin: "", line: "beaconflow agent --site hq").runsAgentProgram)
    }

    /// A bridge example with an ingest running: each receiver it names publishes as its firmware does until the
    /// bridge hears it; SIGTERM then stops it cleanly.
    func runBridge(_ example: Example, in world: ExampleWorld, executable: String) async throws {
        let command = world.command(example)
        let arguments = command.arguments
        let format = arguments.firstIndex(of: "--format").map { arguments[$0 + 1] } ?? ""
        let receivers = arguments.indices.filter { arguments[$0] == "--receiver" }.map {
            String(arguments[$0 + 1].split(separator: "=")[0])
        }
        let bridge = try world.start(executable, command)
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: world.broker.port, clientID: "example-receivers")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(configuration, logger: Logger(label: "example-receivers"))
        client.start()
        defer { client.stop() }
        let iBeacon = "e2c56db5-dffb-48d2-b060-d0f5a71096e0"
        func heardAll() -> Bool { receivers.allSatisfy { bridge.errors.contains("receiver=\($0) [beaconflow] A receiver is heard") } }
        let deadline = ContinuousClock.now + .seconds(30)
        while !heardAll(), bridge.process.isRunning, ContinuousClock.now < deadline {
            for receiver in receivers {
                let (topic, payload) =
                    format == "espresense"
                    ? ("espresense/devices/iBeacon:\(iBeacon)-1-2/\(receiver)", #"{"mac":"c12ade547355","id":"iBeacon:\#(iBeacon)-1-2","rssi":-60}"#)
                    : ("home/\(receiver)/BTtoMQTT/C12ADE547355", #"{"id":"C1:2A:DE:54:73:55","rssi":-60,"manufacturerdata":"4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"}"#)
                _ = try? client.publish(topic: topic, payload: Array(payload.utf8), qos: 0)
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(heardAll(), "\(example)\n\(bridge.errors.suffix(3000))")
        bridge.process.terminate(SIGTERM)
        _ = await bridge.process.exit()
        #expect(bridge.process.exitCode == 0, "\(example)\n\(bridge.errors.suffix(3000))")
    }

    @Test func everyExampleRuns() async throws {
        let executable = try #require(beaconflowExecutable)
        var examples: [Example] = []
        for example in try await Self.allExamples(executable: executable) where !examples.contains(where: { $0.line == example.line }) {
            examples.append(example)
        }
        let world = try await ExampleWorld.start()
        defer { world.clean() }

        let agentExecutable = try #require(beaconflowAgentExecutable)
        @Sendable func run(_ example: Example, timeout: Duration = .seconds(300)) async throws -> (status: Int32?, output: String, errors: String) {
            let (environment, arguments) = world.command(example)
            if example.runsAgentProgram {
                return try await world.run(agentExecutable, Array(arguments.dropFirst()), environment: environment, timeout: timeout)
            }
            return try await world.run(executable, arguments, environment: environment, timeout: timeout)
        }

        let bySubcommand = Dictionary(grouping: examples, by: \.subcommand)
        #expect(Set(bySubcommand.keys).isSubset(of: Self.subcommands), "examples no one runs: \(examples.filter { !Self.subcommands.contains($0.subcommand) })")
        // The simulations and accuracy runs use none of the world's servers: they run beside the rest.
        async let simulated: Void = Self.runSimulationsAndAccuracy(
            simulate: bySubcommand["simulate"] ?? [], accuracy: bySubcommand["accuracy"] ?? [], run: run)

        for example in bySubcommand["migrate"] ?? [] {
            let result = try await run(example)
            #expect(result.status == 0, "\(example)\n\(result.errors)")
        }

        // Each ingest with the agents of its broker: an agent's replay ends when the ingest acknowledged it all.
        let agents = bySubcommand["agent"] ?? []
        var agentsRun: Set<Example> = []
        var bridgesRun = 0
        for ingest in bySubcommand["ingest"] ?? [] {
            let secure = ingest.line.contains("mqtts://")
            try world.writePassword(user: "ingest")
            let server = try world.start(executable, world.command(ingest))
            do {
                try await eventuallyTrue("\(ingest) connects to PostgreSQL", timeout: .seconds(60)) {
                    server.errors.contains("Connected to PostgreSQL") || !server.process.isRunning
                }
            } catch {
                Issue.record("\(error)\n\(server.errors.suffix(4000))")
                throw error
            }
            try #require(server.process.isRunning, "\(ingest) exited: \(server.errors.suffix(4000))")
            for agent in agents where world.usesTLS(agent) == secure {
                try world.writePassword(user: "hq/" + world.agentID(agent))
                let result = try await run(agent)
                #expect(result.status == 0, "\(agent)\n\(result.errors.suffix(3000))\ningest:\n\(server.errors.suffix(3000))")
                agentsRun.insert(agent)
            }
            server.process.terminate(SIGTERM)
            let status = await server.process.exit()
            #expect(server.process.exitCode == 0, "\(ingest) exit \(status)\n\(server.errors.suffix(3000))")
        }
        #expect(agentsRun == Set(agents), "agents with no ingest: \(Set(agents).subtracting(agentsRun))")
        // The bridges, with the first plain ingest again: after the agents, whose spools the first one's agents
        // continue (the same ids, in the same place).
        if let ingest = bySubcommand["ingest"]?.first(where: { !$0.line.contains("mqtts://") }) {
            let server = try world.start(executable, world.command(ingest))
            try await eventuallyTrue("\(ingest) serves its sites", timeout: .seconds(60)) { server.errors.contains("Sites claimed") }
            for bridge in bySubcommand["bridge"] ?? [] {
                try await runBridge(bridge, in: world, executable: executable)
                bridgesRun += 1
            }
            server.process.terminate(SIGTERM)
            _ = await server.process.exit()
        }
        #expect(bridgesRun == (bySubcommand["bridge"] ?? []).count, "bridges with no ingest")
        let stored = try world.database.query("SELECT agent_id, count(*) FROM beaconflow.sightings GROUP BY 1 ORDER BY 1")
        #expect(stored.map { $0[0] ?? "" } == ["hq-a1", "hq-a2", "hq-a3"], "\(stored)")

        // A window of the agents' capture, written as a recording that reads back as the rows stored.
        for example in bySubcommand["recording"] ?? [] {
            let result = try await run(example)
            #expect(result.status == 0, "\(example)\n\(result.output)\(result.errors)")
            let arguments = world.command(example).arguments
            let written = try arguments.firstIndex(of: "--output").map { index in
                try String(contentsOfFile: world.directory + "/" + arguments[index + 1], encoding: .utf8)
            } ?? result.output
            var reader = RecordingReader()
            let rows = try RecordingColumns.lines(written).flatMap { try reader.read(line: $0).rows }
            #expect(Set(rows.map(\.receiver)) == ["hq-a1", "hq-a2", "hq-a3"], "\(example)\n\(written.prefix(2000))")
            let beacons = arguments.indices.filter { arguments[$0] == "--beacon" }.map { arguments[$0 + 1] }
            let stored = try world.database.query(
                """
                SELECT count(*) FROM beaconflow.sightings
                WHERE site_id = 'hq' AND ts >= '2025-11-22T08:26:40Z' AND ts < '2025-11-22T08:27:00Z'
                    AND (cardinality($1::text[]) = 0 OR beacon_id = ANY($1)) AND beacon_id NOT LIKE 'eid:%' AND beacon_id NOT LIKE 'anon:%'
                """, [beacons])
            #expect(stored.first?[0] == "\(rows.count)" && rows.count > 0, "\(example): \(rows.count) rows, \(stored) stored")
        }
        for example in bySubcommand["report"] ?? [] {
            let result = try await run(example)
            #expect(result.status == 0 && result.output.contains("hq-a2"), "\(example)\n\(result.output)\(result.errors)")
        }
        // The console answers its login link (the token it logs when it made one, else its token file's) and
        // nothing without it.
        for example in bySubcommand["console"] ?? [] {
            let fileToken = "console-token-of-the-examples"
            try FileManager.default.createDirectory(atPath: world.directory + "/etc/beaconflow", withIntermediateDirectories: true)
            try (fileToken + "\n").write(toFile: world.directory + "/etc/beaconflow/console.token", atomically: true, encoding: .utf8)
            let server = try world.start(executable, world.command(example))
            try await eventuallyTrue("\(example) listens") { server.errors.contains("Console listening") }
            let link = try #require(server.errors.firstMatch(of: /http:\/\/127\.0\.0\.1:(\d+)\/login\?token=([0-9a-f<>a-z ]+)/))
            let port = try #require(Int(link.1))
            let token = example.line.contains("--token-file") ? fileToken : String(link.2)
            #expect(try httpGet(port: port, path: "/api/snapshot").status == "HTTP/1.1 401 Unauthorized")
            #expect(try httpGet(port: port, path: "/login?token=\(token)").status == "HTTP/1.1 303 See Other", "\(example)")
            #expect(try httpGet(port: port, path: "/login?token=wrong-token-of-16").status == "HTTP/1.1 401 Unauthorized")
            server.process.terminate(SIGTERM)
            _ = await server.process.exit()
            #expect(server.process.exitCode == 0, "\(example)\n\(server.errors.suffix(3000))")
        }
        for example in bySubcommand["decode"] ?? [] {
            let result = try await run(example)
            #expect(result.status == 0 && !result.output.isEmpty && !result.output.contains(#""error""#), "\(example)\n\(result.output.prefix(2000))\(result.errors)")
        }
        for example in bySubcommand["calibrate"] ?? [] {
            let result = try await run(example)
            // The sites-file keys of the model, and an offset for each receiver (the office's twelve, the flat's six).
            let lines = result.output.split(separator: "\n")
            #expect(result.status == 0 && lines.contains { $0.hasPrefix("position_path_loss_exponent: ") }, "\(example)\n\(result.errors)")
            let office = example.line.contains("open-office")
            #expect(lines.filter { $0.hasPrefix(office ? "sensor" : "anchor-") }.count == (office ? 12 : 6), "\(result.output)")
            // How much of each zone the walk mapped: one straight walk across the office, a fifth to a third of each
            // quarter; the flat's survey, all of every room.
            let reach = lines.filter { $0.hasPrefix("# quarter-") || $0.hasPrefix("# hall:") || $0.hasPrefix("# kitchen:") || $0.hasPrefix("# bedroom:") || $0.hasPrefix("# living-room:") }
                .compactMap { Double($0.split(separator: " ")[2]) }
            #expect(reach.count == 4 && reach.allSatisfy { office ? (20...35).contains($0) : $0 >= 95 }, "\(result.output)")
            // The radio map it was asked for, readable as the sites file reads it.
            let words = Example.shellWords(example.line)
            if let flag = words.firstIndex(of: "--radio-map") {
                let text = try String(contentsOfFile: world.directory + "/" + words[flag + 1], encoding: .utf8)
                #expect(try RadioMap(csv: text).receivers.count == 6, "\(text.prefix(200))")
            }
        }
        for example in bySubcommand["demo"] ?? [] {
            let result = try await run(example)
            if example.line.contains("--stop") {
                #expect(result.status == 0 && (result.output.contains("Stopped the") || result.output.contains("No demo server runs")), "\(example)\n\(result.output)\(result.errors)")
                continue
            }
            #expect(result.status == 0 && result.output.contains("Occupancy per zone"), "\(example)\n\(result.output.suffix(2000))\(result.errors.suffix(2000))")
            if example.line.contains("--keep") {
                // The servers it left are running, their addresses said; `demo --stop` stops them.
                let pids = try String(contentsOfFile: world.directory + "/.beaconflow/servers.pid", encoding: .utf8)
                    .split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
                #expect(pids.count == 3 && pids.allSatisfy { kill($0, 0) == 0 }, "\(pids)")
                #expect(result.output.contains("  broker: mqtt://127.0.0.1:") && result.output.contains("beaconflow demo --stop"), "\(result.output)")
                // The console stays at the link the demo printed while it ran.
                let links = result.output.split(separator: "\n").compactMap { line in
                    line.range(of: "http://127.0.0.1:").map { String(line[$0.lowerBound...].split(separator: " ")[0]) }
                }
                #expect(links.count == 2 && links[0] == links[1], "\(result.output)")
                if let link = links.last, let port = Int(link.dropFirst("http://127.0.0.1:".count).prefix { $0.isNumber }),
                    let login = link.range(of: "/login").map({ String(link[$0.lowerBound...]) })
                {
                    var answer: (status: String, body: String)?
                    for _ in 0..<50 where answer == nil {
                        answer = try? httpGet(port: port, path: login)
                        if answer == nil { try await Task.sleep(for: .milliseconds(100)) }
                    }
                    #expect(answer?.status.contains("303") == true, "\(String(describing: answer))")
                }
                let stop = try await run(Example(origin: example.origin, line: "beaconflow demo --stop"))
                #expect(stop.status == 0 && stop.output.contains("Stopped the 3 server(s)"), "\(stop.output)\(stop.errors)")
            }
        }
        try await simulated
    }

    /// What `simulate` writes, `accuracy` may score: the simulations first, then the accuracy runs, two at a time.
    static func runSimulationsAndAccuracy(
        simulate: [Example], accuracy: [Example],
        run: @escaping @Sendable (Example, Duration) async throws -> (status: Int32?, output: String, errors: String)
    ) async throws {
        for example in simulate {
            let result = try await run(example, .seconds(400))
            #expect(result.status == 0 && !result.output.isEmpty, "\(example)\n\(result.errors.suffix(3000))")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, example) in accuracy.enumerated() {
                if index >= 2 { try await group.next() }
                group.addTask { try await checkAccuracy(example, result: run(example, .seconds(400))) }
            }
            try await group.waitForAll()
        }
    }

    /// An accuracy run's table names every zone method, in order, or both battery forecasts.
    static func checkAccuracy(_ example: Example, result: (status: Int32?, output: String, errors: String)) {
        #expect(result.status == 0 && !result.output.isEmpty, "\(example)\n\(result.errors.suffix(3000))")
        let rows = result.output.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| preset") && !$0.hasPrefix("| method") }
        if example.line.contains("--preset") {
            let methods = rows.map { $0.split(separator: "|")[1].trimmingCharacters(in: .whitespaces) }
            #expect(methods == ["chosen", "chosen-loudest", "chosen-path", "chosen-crossings", "nearest", "kalman", "kalman-bermuda", "trimmed-mean", "one-euro"], "\(result.output)")
        }
        if example.line.contains("--battery-fleet") {
            // Both forecasts, over all the fleet's cells and per chemistry.
            #expect(rows.contains { $0.hasPrefix("| charge-and-voltage | all |") } && rows.contains { $0.hasPrefix("| voltage-trend | all |") }, "\(result.output)")
        }
    }
}

/// The servers and directories the examples run against.
final class ExampleWorld: @unchecked Sendable {
    let directory: String
    let broker: MosquittoServer
    let secureBroker: MosquittoServer
    let securePort: Int
    let postgres: PostgresServer
    let database: PostgresConnection

    private init(directory: String, broker: MosquittoServer, secure: (MosquittoServer, Int), postgres: PostgresServer) throws {
        self.directory = directory
        self.broker = broker
        (secureBroker, securePort) = secure
        self.postgres = postgres
        database = try PostgresConnection("host=127.0.0.1 port=\(postgres.port) user=postgres dbname=beaconflow connect_timeout=5")
    }

    static func start() async throws -> ExampleWorld {
        let directory = try makeTemporaryDirectory(prefix: "examples")
        for shipped in ["examples", "deploy"] {
            try FileManager.default.createSymbolicLink(atPath: directory + "/" + shipped, withDestinationPath: repositoryRoot + "/" + shipped)
        }
        let broker = try MosquittoServer()
        let secure = try await startShippedBroker(in: directory, users: ["hq/hq-a1", "hq/hq-a2", "hq/hq-a3"])
        let postgres = try await PostgresServer.start()
        // What deploy/postgres-init.sh makes, with the owner that migrates.
        let admin = try PostgresConnection(postgres.conninfo)
        for statement in [
            "CREATE ROLE beaconflow LOGIN", "CREATE DATABASE beaconflow OWNER beaconflow",
            "CREATE ROLE beaconflow_writer NOLOGIN", "CREATE ROLE beaconflow_reader NOLOGIN",
            "CREATE ROLE ingest LOGIN IN ROLE beaconflow_writer", "CREATE ROLE grafana LOGIN IN ROLE beaconflow_reader",
        ] { try admin.execute(statement) }
        let world = try ExampleWorld(directory: directory, broker: broker, secure: secure, postgres: postgres)
        let etc = directory + "/etc/beaconflow"
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: deployDirectory + "/config/sites.yaml", toPath: etc + "/sites.yaml")
        try FileManager.default.copyItem(atPath: directory + "/pki/ca.pem", toPath: etc + "/ca.pem")
        for document in ExampleTests.documents {
            for (path, text) in try Example.filesInMarkdown(document) {
                try world.mapped(text).write(toFile: world.mapped(path), atomically: true, encoding: .utf8)
            }
        }
        return world
    }

    func clean() {
        broker.stop()
        secureBroker.stop()
        postgres.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// An example's text with its hosts and system paths made this test's.
    func mapped(_ text: String) -> String {
        var text = text
        for (placeholder, here) in [
            ("127.0.0.1:1883", "127.0.0.1:\(broker.port)"), ("broker.example:8883", "127.0.0.1:\(securePort)"),
            ("127.0.0.1:5432", "127.0.0.1:\(postgres.port)"), ("host=db ", "host=127.0.0.1 "),
            ("/run/postgresql", postgres.directory), ("/etc/beaconflow/", directory + "/etc/beaconflow/"),
            ("/var/lib/beaconflow/", directory + "/var/lib/beaconflow/"), ("--duration 300", "--duration 5"), ("127.0.0.1:8080", "127.0.0.1:0"),
        ] {
            text = text.replacingOccurrences(of: placeholder, with: here)
        }
        return text
    }

    func command(_ example: Example) -> (environment: [String: String], arguments: [String]) {
        var (environment, arguments) = Example(origin: example.origin, line: mapped(example.line)).command
        if arguments.first == "demo", !arguments.contains("--duration") { arguments += ["--duration", "5"] }
        // The ingest's metrics on a port of their own, not the default 9464 something else on the machine may hold.
        if arguments.first == "ingest", !arguments.contains("--metrics-listen") { arguments += ["--metrics-listen", "127.0.0.1:0"] }
        var merged = ProcessInfo.processInfo.environment
        merged["PGPORT"] = String(postgres.port)
        merged["PGUSER"] = "postgres"
        merged["PGCONNECT_TIMEOUT"] = "5"
        merged.merge(environment) { $1 }
        return (merged, arguments)
    }

    /// The agent an agent example runs as: its `--agent`, or its config file's `agent:`.
    func agentID(_ example: Example) -> String {
        let arguments = command(example).arguments
        if let index = arguments.firstIndex(of: "--agent"), index + 1 < arguments.count { return arguments[index + 1] }
        return configLine(example, key: "agent") ?? ""
    }

    func usesTLS(_ example: Example) -> Bool {
        example.line.contains("mqtts://") || configLine(example, key: "broker")?.hasPrefix("mqtts://") == true
    }

    private func configLine(_ example: Example, key: String) -> String? {
        let arguments = command(example).arguments
        guard let index = arguments.firstIndex(of: "--config"), index + 1 < arguments.count,
            let text = try? String(contentsOfFile: arguments[index + 1], encoding: .utf8)
        else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix(key + ":") }
            .map { $0.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces) }
    }

    /// `/etc/beaconflow/mqtt.pw` as the given user's (the examples share the path; each host has its own file).
    func writePassword(user: String) throws {
        try (shippedPassword(in: directory, user: user) + "\n").write(toFile: directory + "/etc/beaconflow/mqtt.pw", atomically: true, encoding: .utf8)
    }

    func run(
        _ executable: String, _ arguments: [String], environment: [String: String], timeout: Duration
    ) async throws -> (status: Int32?, output: String, errors: String) {
        let started = try start(executable, (environment, arguments))
        let deadline = ContinuousClock.now + timeout
        while started.process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if started.process.isRunning { started.process.terminate(SIGKILL) }
        _ = await started.process.exit()
        return (started.process.exitCode, started.output, started.errors)
    }

    final class Started: Sendable {
        let process: ChildProcess
        let outputPath: String
        init(process: ChildProcess, outputPath: String) {
            self.process = process
            self.outputPath = outputPath
        }
        var output: String { (try? String(contentsOfFile: outputPath + ".out", encoding: .utf8)) ?? "" }
        var errors: String { (try? String(contentsOfFile: outputPath + ".err", encoding: .utf8)) ?? "" }
    }

    private var started = 0

    func start(_ executable: String, _ command: (environment: [String: String], arguments: [String])) throws -> Started {
        started += 1
        let path = directory + "/run-\(started)"
        let process = try startProgram(
            executable, command.arguments, environment: command.environment, currentDirectory: directory,
            standardOutputPath: path + ".out", standardErrorPath: path + ".err")
        return Started(process: process, outputPath: path)
    }

}
