import BeaconAgent
import BeaconIngest
import Foundation
import LocalServers
import MetricFamilies
import MetricsEndpoint
import TestServers
import Testing

/// The contract documents of docs/ say what the code does: the command-line reference is the commands' own help,
/// the decoded-JSON examples are what `decode` prints, the sites-file example loads, the metrics reference is the
/// code's list of families and nothing names a metric that does not exist.
struct ContractDocumentTests {
    static func read(_ path: String) throws -> String { try String(contentsOfFile: repositoryRoot + "/" + path, encoding: .utf8) }

    /// docs/cli.md is what scripts/generate-cli-doc makes from the built binary now.
    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func theCommandLineReferenceIsCurrent() async throws {
        let work = try makeTemporaryDirectory(prefix: "cli-doc")
        defer { try? FileManager.default.removeItem(atPath: work) }
        var environment = ProcessInfo.processInfo.environment
        environment["BEACONFLOW"] = beaconflowExecutable!
        let made = try await runProgram(repositoryRoot + "/scripts/generate-cli-doc", [work + "/cli.md"], environment: environment)
        #expect(made.status == 0, "\(made.errors)")
        let fresh = try String(contentsOfFile: work + "/cli.md", encoding: .utf8)
        #expect(fresh == (try Self.read("docs/cli.md")), "docs/cli.md is out of date: run scripts/generate-cli-doc")
        for subcommand in ExampleTests.subcommands { #expect(fresh.contains("\n## beaconflow \(subcommand)\n"), "\(subcommand)") }
        #expect(fresh.contains("\n## beaconflow-agent\n"))
    }

    static let metricSections: [(marker: String, families: [MetricFamily])] = [
        ("agent", AgentMetrics.all), ("ingest", IngestMetrics.all), ("process", [BuildInfo.family] + ProcessMetrics.all),
    ]

    /// docs/metrics.md's tables are the families of `AgentMetrics`, `IngestMetrics`, the build and the process, as
    /// the code describes them (with `METRICS_DOC=write` the test writes them instead).
    @Test func theMetricsReferenceIsTheCodesListOfFamilies() throws {
        let path = repositoryRoot + "/docs/metrics.md"
        var text = try String(contentsOfFile: path, encoding: .utf8)
        for (marker, families) in Self.metricSections {
            let rows = families.sorted { $0.name < $1.name }.map { family in
                let labels = family.labels.map { "`\($0)`" }.joined(separator: ", ")
                return "| `\(family.name)` | \(family.kind.rawValue) | \(labels) | \(family.help) |"
            }
            let table = (["| Family | Type | Labels | Help |", "|---|---|---|---|"] + rows).joined(separator: "\n")
            let begin = try #require(text.range(of: "<!-- families: \(marker) -->\n"), "docs/metrics.md has no \(marker) table")
            let end = try #require(text.range(of: "<!-- end -->", range: begin.upperBound..<text.endIndex))
            if ProcessInfo.processInfo.environment["METRICS_DOC"] == "write" {
                text.replaceSubrange(begin.upperBound..<end.lowerBound, with: table + "\n")
            } else {
                #expect(String(text[begin.upperBound..<end.lowerBound]) == table + "\n", "docs/metrics.md's \(marker) table differs: METRICS_DOC=write")
            }
        }
        if ProcessInfo.processInfo.environment["METRICS_DOC"] == "write" { try text.write(toFile: path, atomically: true, encoding: .utf8) }
    }

    /// Every metric the README, docs/, the alerting rules and the dashboards name is one the code makes (a
    /// histogram's `_bucket`, `_sum` and `_count` included).
    @Test func everyMetricNamedAnywhereExists() throws {
        let series = Set(Self.metricSections.flatMap(\.families).flatMap(\.seriesNames))
        // Role names (beaconflow_reader) and table names (beaconflow.sightings) are not metrics.
        let pattern = try Regex(#"\b(beaconflow_(agent|ingest|build)|process)_[a-z0-9_]*[a-z0-9]"#)
        var files = ["README.md", "deploy/prometheus-alerts.yml", "deploy/prometheus-alerts.test.yml"]
        for directory in ["docs", "dashboards"] {
            let found = FileManager.default.enumerator(atPath: repositoryRoot + "/" + directory)?.compactMap { $0 as? String } ?? []
            files += found.filter { $0.hasSuffix(".md") || $0.hasSuffix(".json") || $0.hasSuffix(".yaml") }.map { directory + "/" + $0 }
        }
        var named = 0
        for file in files {
            for match in try Self.read(file).matches(of: pattern) {
                let name = String(match.output[0].substring ?? "")
                let reported = series.contains(name)
                named += 1
                #expect(reported, "\(file) names \(name), which no component reports")
            }
        }
        #expect(named >= 30)
    }

    /// Every `--option` the README and docs/ name is one the commands have (docs/cli.md is their help, checked
    /// above), but for the few of other tools they mention; every key of the example config files is an option of
    /// its command.
    @Test func everyDocumentedOptionExists() throws {
        let reference = try Self.read("docs/cli.md")
        let existing = Set(reference.matches(of: #/--[a-z][a-z0-9-]*/#).map { String($0.output) })
        // Named in the docs for other tools: swift test and build, systemctl, pg_dump, Theengs Gateway.
        let otherTools: Set = ["--filter", "--package-path", "--scratch-path", "--now", "--schema", "--schema-only", "--discovery", "--publish"]
        let documents = ["README.md"] + ((try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? [])
            .filter { $0.hasSuffix(".md") && $0 != "cli.md" }.map { "docs/" + $0 }
        var named = 0
        for document in documents {
            for match in try Self.read(document).matches(of: #/--[a-z][a-z0-9-]*/#) {
                let option = String(match.output)
                named += 1
                let exists = existing.contains(option) || otherTools.contains(option)
                #expect(exists, "\(document) names \(option), which no command has")
            }
        }
        #expect(named >= 100)
        for (file, command) in [("deploy/config/agent.yaml", "agent"), ("deploy/config/ingest.yaml", "ingest")] {
            let section = try #require(reference.components(separatedBy: "\n## beaconflow \(command)\n").dropFirst().first)
                .components(separatedBy: "\n## beaconflow ").first ?? ""
            let options = Set(section.matches(of: #/--[a-z][a-z0-9-]*/#).map { String($0.output) })
            for line in try Self.read(file).split(separator: "\n") where !line.hasPrefix("#") && line.contains(":") {
                let key = String(line.prefix { $0 != ":" })
                let known = options.contains("--" + key.replacingOccurrences(of: "_", with: "-"))
                #expect(known, "\(file): '\(key)' is no option of beaconflow \(command)")
            }
        }
    }

    /// Each JSON example of docs/decoded-json.md is one of the lines the `sh` command before it prints.
    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func theDecodedJSONExamplesAreWhatDecodePrints() async throws {
        let text = try Self.read("docs/decoded-json.md")
        var command: String?
        var printed: [String: [NSDictionary]] = [:]
        var checked = 0
        for block in text.components(separatedBy: "```").enumerated().filter({ $0.offset % 2 == 1 }).map(\.element) {
            let lines = block.split(separator: "\n", omittingEmptySubsequences: false)
            let body = lines.dropFirst().joined(separator: "\n")
            switch lines.first {
            case "sh":
                command = body.trimmingCharacters(in: .whitespacesAndNewlines)
            case "json":
                let line = try #require(command, "a JSON example before any command")
                if printed[line] == nil {
                    let arguments = Array(Example.shellWords(line).dropFirst())
                    let run = try await runProgram(beaconflowExecutable!, arguments, currentDirectory: repositoryRoot)
                    #expect(run.status == 0, "\(line): \(run.errors)")
                    printed[line] = run.output.split(separator: "\n").compactMap {
                        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary
                    }
                }
                let example = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? NSDictionary, "not JSON: \(body)")
                #expect(printed[line]!.contains(example), "\(line) prints no such line:\n\(body)")
                checked += 1
            default:
                continue
            }
        }
        #expect(checked >= 10)
    }

    /// The example of docs/sites-file.md loads, and has what the text around it says.
    @Test func theSitesFileExampleLoads() throws {
        let text = try Self.read("docs/sites-file.md")
        let yaml = try #require(text.components(separatedBy: "```yaml\n").dropFirst().first?.components(separatedBy: "```").first)
        let work = try makeTemporaryDirectory(prefix: "sites-doc")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try yaml.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let sites = try SitesConfiguration.load(path: work + "/sites.yaml")
        #expect(sites.sites.map(\.id) == ["hq"] && sites.sites[0].agents.count == 3 && sites.identities.count == 1)
        #expect(sites.identities.first?.rotationExponent == 10)
        #expect(sites.beacons.map(\.outdoors) == [false, true])
    }

    /// Every file docs/architecture.md's "Where to change what" names exists (a template's folder, for `<Name>`
    /// and `vNNN`), and the types and members each step names are in its files.
    @Test func everyRecipeNamesFilesAndSymbolsThatExist() throws {
        let text = try Self.read("docs/architecture.md")
        let section = try #require(text.components(separatedBy: "## Where to change what").last)
        let steps = section.components(separatedBy: "\n").reduce(into: [String]()) { steps, line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.first?.isNumber == true || trimmed.hasPrefix("- ") || trimmed.hasPrefix("Then ") || steps.isEmpty {
                steps.append(trimmed)
            } else {
                steps[steps.count - 1] += " " + trimmed
            }
        }
        var checked = 0
        for step in steps {
            let quoted = step.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
            let paths = quoted.filter { $0.hasPrefix("Sources/") }
            guard !paths.isEmpty else { continue }
            var sources: [String] = []
            for path in paths {
                if path.contains("<") || path.contains("vNNN") {
                    let folder = (path as NSString).deletingLastPathComponent
                    let files = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/" + folder)
                    #expect(!files.isEmpty, "\(folder) is empty or gone")
                    sources += try files.filter { $0.hasSuffix(".swift") }.map { try Self.read(folder + "/" + $0) }
                } else {
                    #expect(FileManager.default.fileExists(atPath: repositoryRoot + "/" + path), "\(path), named in a recipe, is gone")
                    sources.append((try? Self.read(path)) ?? "")
                }
                checked += 1
            }
            // Names of code: a type or a member (camel case or dotted), not a table's or a key's.
            let symbols = quoted.filter { name in
                !name.contains("/") && name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "_" }
                    && name.contains(where: { $0.isUppercase || $0 == "." })
            }
            for symbol in symbols {
                let last = String(symbol.split(separator: ".").last ?? "")
                #expect(sources.contains { $0.contains(last) }, "\(symbol), named beside \(paths), is not in them")
            }
        }
        #expect(checked >= 15, "\(checked) files checked")
    }
}
