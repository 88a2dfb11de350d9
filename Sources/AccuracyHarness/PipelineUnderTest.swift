import BeaconAgent
import BeaconIngest
import BeaconMessaging
import Foundation
import LibPQ
import LocalServers
import Logging
import WorkQueue

/// What a scored run plays its agents into: a throwaway mosquitto, a database of its own on the given server and
/// the ingest between them, in this process, counting the last minutes when it stops (the data ends with the run).
struct PipelineUnderTest {
    let broker: MosquittoServer
    let conninfo: String
    let ingest: Ingest
    let task: Task<Void, Error>
    var address: BrokerAddress { BrokerAddress(host: "127.0.0.1", port: broker.port) }

    /// Starts it and waits until the ingest has connected to both (at most 30 s); `name` goes into the database's.
    static func start(sites: SitesConfiguration, database server: PostgresServer, name: String, logger: Logger) async throws -> PipelineUnderTest {
        let broker = try MosquittoServer()
        let databaseName = "\(name.replacingOccurrences(of: "-", with: "_"))_\(UInt32.random(in: 0...UInt32.max))"
        try await onThread { try PostgresConnection(server.conninfo).execute("CREATE DATABASE \(databaseName)") }
        let conninfo = "host=127.0.0.1 port=\(server.port) user=postgres dbname=\(databaseName) connect_timeout=5"
        var mqtt = BrokerAddress(host: "127.0.0.1", port: broker.port).clientConfiguration(clientID: "accuracy-ingest", tls: nil)
        mqtt.reconnectDelayMinimum = .milliseconds(50)
        var configuration = IngestConfiguration(mqtt: mqtt, database: conninfo, sites: sites)
        configuration.finishZonesAtStop = true
        let ingest = Ingest(configuration: configuration, logger: logger)
        let run = PipelineUnderTest(broker: broker, conninfo: conninfo, ingest: ingest, task: Task { try await ingest.run() })
        let connected = ContinuousClock.now + .seconds(30)
        while !ingest.statistics.mqttConnected || !ingest.statistics.databaseConnected {
            guard ContinuousClock.now < connected else {
                ingest.requestStop()
                throw HarnessError("the ingest did not connect within 30 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return run
    }

    /// Stops the ingest (what is queued committed, the last minutes counted) and waits for it.
    func finish() async throws {
        ingest.requestStop()
        try await task.value
    }

    /// A site's stored positions (`beacon_position_history`): beacon, time (s), x, y, error_m.
    func positions(site: String) async throws -> [(beacon: String, time: Double, x: Double, y: Double, errorM: Double)] {
        try await onThread { [conninfo] in
            try PostgresConnection(conninfo).query(
                """
                SELECT beacon_id, extract(epoch FROM ts), x::float8, y::float8, error_m::float8
                FROM beaconflow.beacon_position_history WHERE site_id = $1 ORDER BY 1, 2
                """,
                [site]
            ).map { row in (try row.decode(0), try row.decode(1), try row.decode(2), try row.decode(3), try row.decode(4)) }
        }
    }

    /// A site's `visits` and `zone_occupancy` rows, every beacon it stored, and the sighting and telemetry rows it
    /// stored under each address id (`mac:`).
    func views(site: String) async throws -> (
        visits: [AccuracyScore.Visit], minutes: [AccuracyScore.ZoneMinute], beacons: Set<String>, addressRows: [String: Int]
    ) {
        try await onThread { [conninfo] in
            let connection = try PostgresConnection(conninfo)
            let visits = try connection.query(
                "SELECT beacon_id, zone_id, extract(epoch FROM enter_ts), extract(epoch FROM exit_ts) FROM beaconflow.visits WHERE site_id = $1",
                [site]
            ).map { row in
                AccuracyScore.Visit(
                    beaconID: try row.decode(0), zone: try row.decode(1), enter: try row.decode(2), exit: try row.decode(3, as: Double?.self))
            }
            let minutes = try connection.query(
                "SELECT zone_id, extract(epoch FROM bucket), occupants FROM beaconflow.zone_occupancy WHERE site_id = $1", [site]
            ).map { row in
                AccuracyScore.ZoneMinute(zone: try row.decode(0), minuteStart: try row.decode(1), occupants: try row.decode(2))
            }
            // Every beacon the site stored (sightings, telemetry, visits), not only those with visits.
            let beacons = try connection.query("SELECT beacon_id FROM beaconflow.beacons WHERE site_id = $1", [site])
                .map { try $0.decode(0, as: String.self) }
            var addressRows: [String: Int] = [:]
            for view in ["sightings", "telemetry"] {
                for row in try connection.query(
                    "SELECT beacon_id, count(*) FROM beaconflow.\(view) WHERE site_id = $1 AND beacon_id LIKE 'mac:%' GROUP BY 1", [site])
                {
                    addressRows[try row.decode(0), default: 0] += Int(try row.decode(1, as: Int64.self))
                }
            }
            return (visits, minutes, Set(beacons), addressRows)
        }
    }
}
