import BeaconIngest
import Benchmark
import Foundation
import LibPQ
import LocalServers
import Logging
import WebConsole

/// The console's document read from a large deployment in a throwaway PostgreSQL: `siteCount` sites of twelve zones
/// with a receiver each, `beaconsPerSite` beacons each (a third of them outdoors), every beacon present with a
/// battery forecast and `visitsPerBeacon` closed visits behind it, and ten forecast nights a site. The registry is
/// written by the ingest's own writer from a sites file; the beacons' state and history by SQL, as the ingest
/// would leave them.
let siteCount = 50
let beaconsPerSite = 200
let zonesPerSite = 12
let visitsPerBeacon = 100

let sitesText = """
    sites:
    \((0..<siteCount).map { site in
        """
          - id: site-\(site)
            zones: [\((0..<zonesPerSite).map { "{id: zone-\($0)}" }.joined(separator: ", "))]
            agents: [\((0..<zonesPerSite).map { "{id: site-\(site)-agent-\($0), zone: zone-\($0)}" }.joined(separator: ", "))]
        """
    }.joined(separator: "\n"))
    beacons:
    \((0..<siteCount * beaconsPerSite).map { "  - {id: \"beacon-\($0)\", label: \"asset \($0)\", outdoors: \($0 % 3 == 0)}" }.joined(separator: "\n"))
    """

final class Deployment: @unchecked Sendable {
    let database: PostgresServer
    /// A session as the console opens it.
    let console: PostgresConnection
    /// A session with the server's own settings.
    let plain: PostgresConnection

    init() async throws {
        database = try await PostgresServer.start()
        let connection = try PostgresConnection(database.conninfo)
        try Migrator.migrate(connection, logger: Logger(label: "bench"))
        try BatchWriter(connection: connection).writeRegistry(try SitesConfiguration.parse(sitesText))
        let beacons = siteCount * beaconsPerSite
        try connection.execute(
            """
            INSERT INTO beaconflow.beacon_state (beacon_id, site_id, last_seen, battery_mv, est_days_left, status,
                battery_pct, days_left_low, days_left_high, replace_by, forecast, coldest_carried_c, first_seen)
            SELECT 'beacon-' || b, 'site-' || (b / \(beaconsPerSite)), now(), 2600 + b % 400, 20 + b % 600, 'ok',
                   b % 100, 15 + b % 500, 25 + b % 700, now() + make_interval(days => 20 + b % 600), 'charge_counting',
                   -20 + b % 25, now() - interval '1 year'
            FROM generate_series(0, \(beacons - 1)) b;
            INSERT INTO beaconflow.beacon_live_zone (site_id, beacon_id, zone_id, enter_ts)
            SELECT 'site-' || (b / \(beaconsPerSite)), 'beacon-' || b, 'zone-' || (b % \(zonesPerSite)), now() - interval '5 minutes'
            FROM generate_series(0, \(beacons - 1)) b;
            INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts, exit_ts)
            SELECT 'site-' || (b / \(beaconsPerSite)), 'zone-' || ((b + k) % \(zonesPerSite)), 'beacon-' || b,
                   now() - make_interval(hours => 7 * k), now() - make_interval(hours => 7 * k) + interval '1 hour'
            FROM generate_series(0, \(beacons - 1)) b, generate_series(1, \(visitsPerBeacon)) k;
            INSERT INTO beaconflow.night_forecasts (site_id, night, low_c)
            SELECT 'site-' || s, current_date + d, -5 - d FROM generate_series(0, \(siteCount - 1)) s, generate_series(0, 9) d;
            """)
        try connection.execute("VACUUM ANALYZE")
        console = try ConsoleSnapshots.open(database.conninfo)
        plain = try PostgresConnection(database.conninfo)
    }
}

nonisolated(unsafe) var deployment: Deployment!

let benchmarks: @Sendable () -> Void = {
    let setup: @Sendable () async throws -> Void = {
        if deployment == nil { deployment = try await Deployment() }
    }
    // Each benchmark runs in its own process, which fills its own database and stops it at the end.
    let teardown: @Sendable () async throws -> Void = { await deployment?.database.stopAndWait() }
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(30), maxIterations: 20,
        setup: setup, teardown: teardown)

    Benchmark("Console document, 50 sites, 10k beacons", configuration: configuration) { _ in
        blackHole(try ConsoleSnapshots.document(on: deployment.console))
    }
    Benchmark("Console document, 50 sites, 10k beacons, the server's own settings", configuration: configuration) { _ in
        blackHole(try ConsoleSnapshots.document(on: deployment.plain))
    }
}
