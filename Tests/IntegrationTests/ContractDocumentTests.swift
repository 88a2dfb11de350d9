import BeaconIngest
import Foundation
import LocalServers
import TestServers
import Testing

/// The contract documents of docs/ say what the code does: the command-line reference is the commands' own help,
/// the decoded-JSON examples are what `decode` prints, the sites-file example loads.
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
    }
}
