import ArgumentParser
import Foundation
import LibPQ
import Reporting

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Print occupancy, the longest dwells, and the beacons and agents that need attention.",
        discussion: """
            Reads the public views only (a role granted beaconflow_reader is enough). Occupancy per zone is the \
            newest counted minute of each site ("now"), the average and the peak over the 24 hours before it, so a replay of old \
            captures reports its own day. Beacons needing attention are low_battery, rebooting or stale, with the \
            forecast days left; agents needing attention are offline, or online but silent.

            Examples:
              beaconflow report --database postgresql://grafana@127.0.0.1/beaconflow
              beaconflow report --database "host=/run/postgresql dbname=beaconflow" \\
                --site hq --json
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(help: "Only this site.") var site: String?
    @Option(help: "Rows at most in each of the dwell, beacon and agent lists; the report says how many each left out.") var limit = 10
    @Flag(help: "One JSON object instead of tables.") var json = false

    func run() throws {
        do {
            let report = try Report.load(try PostgresConnection(databaseOptions.database), site: site, limit: max(1, limit))
            print(json ? report.json : report.text, terminator: json ? "\n" : "")
        } catch {
            FileHandle.standardError.write(Data("beaconflow report: \(error)\n".utf8))
            throw ExitCode((error as? PostgresError)?.isConnectionFailure == true ? 69 : 1)
        }
    }
}
