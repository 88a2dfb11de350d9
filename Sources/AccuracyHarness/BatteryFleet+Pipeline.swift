import BeaconAgent
import BeaconBatteries
import BeaconIngest
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import WorkQueue

/// A simulated fleet played through the real pipeline: each TLM transmission, with the Eddystone-UID frame its
/// beacon sends beside it, as a recording (docs/recordings.md) that an agent replays as fast as the pipeline takes
/// it into a throwaway mosquitto, the ingest and PostgreSQL, months of event time in minutes of wall clock. The
/// ingest's `beacon_health` at the end is compared with the harness's own forecast of each beacon after its last
/// transmission (`run`'s figures come from that forecast, fed the same transmissions).
extension BatteryFleet {
    /// How the pipeline's `beacon_health` compared with the harness's forecasts.
    public struct PipelineComparison: Sendable {
        public var beacons = 0
        public var transmissions = 0
        /// Beacons whose stored days left, interval and status are the harness's (to the precision of `real`).
        public var matching = 0
        /// Those that differ, with what each side said.
        public var differing: [String] = []
        /// Beacons with a charge-counting forecast in `beacon_health`.
        public var chargeCounting = 0
        /// Batches the ingest deferred (an agent's budget of sightings a second), sent again after later ones:
        /// their transmissions, older than the beacon's newest, add nothing to its forecast.
        public var batchesDeferred = 0
        /// The TLM transmissions stored (`beaconflow.telemetry`): each once.
        public var telemetryRows = 0
        /// Transmissions the fleet sent that `telemetry` does not hold (at most 20 named: beacon, time, counters).
        public var notStored: [String] = []
        public var notStoredCount = 0
        /// The rows stored under an address id (frames the ingest did not tie to their beacon).
        public var addressRows = 0
        public var seconds = 0.0
    }

    /// The site and agent the fleet is heard at.
    static let site = "fleet"
    static let receiver = "fleet-a1"

    /// Plays the fleet through the pipeline on `server` (a database of its own).
    public func throughPipeline(database server: PostgresServer, logger: Logger) async throws -> PipelineComparison {
        let work = try makeTemporaryDirectory(prefix: "battery-fleet")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let recording = work + "/fleet.csv"
        guard FileManager.default.createFile(atPath: recording, contents: nil), let file = FileHandle(forWritingAtPath: recording) else {
            throw HarnessError("cannot write \(recording)")
        }
        var comparison = PipelineComparison()
        var registry: [String] = []
        var expected: [String: BeaconHealth] = [:]
        var lines = RecordingWriter.header(data: true)
        var observer = Observer()
        observer.beacon = { beaconID, named in
            guard let named else { return }
            registry.append(#"  - {id: "\#(beaconID)", battery: \#(named.chemistry.rawValue), transmit_power_dbm: \#(Int(named.transmitPowerDbm))}"#)
        }
        // Transmissions come beacon by beacon; the recording is in time order.
        var transmissions: [(micros: Int64, beaconID: String, tlm: EddystoneTLM)] = []
        observer.transmission = { beaconID, micros, tlm in transmissions.append((micros, beaconID, tlm)) }
        observer.finished = { health in
            if let health { expected[health.beaconID] = health }
        }
        // Ending today: the days stay within a retention that covers them.
        var fleet = self
        let today = Int64(Date().timeIntervalSince1970) / 86_400
        fleet.startMicros = (today - Int64(days)) * 86_400_000_000
        _ = fleet.run(observer: observer)
        comparison.beacons = expected.count
        comparison.transmissions = transmissions.count
        for entry in transmissions.sorted(by: { $0.micros < $1.micros }) {
            let address = Self.address(of: entry.beaconID)
            let uid = Self.serviceData([0x00, 0xE7] + Self.namespace + Self.instance(of: entry.beaconID) + [0, 0])
            lines += Self.line(entry.micros - 1_000, address, uid) + Self.line(entry.micros, address, Self.serviceData([0x20, 0x00] + entry.tlm.fieldBytes))
            if lines.utf8.count > 1 << 20 {
                file.write(Data(lines.utf8))
                lines = ""
            }
        }
        file.write(Data(lines.utf8))
        try file.close()

        let sites = try SitesConfiguration.parse(
            """
            sites:
              - id: \(Self.site)
                zones: [{id: depot}]
                agents: [{id: \(Self.receiver), zone: depot}]
            beacons:
            \(registry.isEmpty ? "  []" : registry.joined(separator: "\n"))
            """)
        let started = ContinuousClock.now
        let pipeline = try await PipelineUnderTest.start(sites: sites, database: server, name: "battery_fleet", logger: logger)
        defer { pipeline.ingest.requestStop() }
        // Months of history at once: its days' partitions made first and kept (docs/architecture.md), as the
        // schema's owner would for an import; otherwise the agent's budget of new days paces it at 4 a minute.
        let (conninfo, firstDay, lastDay) = (pipeline.conninfo, today - Int64(days), today + 1)
        try await onThread {
            let owner = try PostgresConnection(conninfo)
            try owner.execute("UPDATE beaconflow.settings SET value = '\(days + 7)' WHERE key = 'retention_days'")
            for first in stride(from: firstDay, through: lastDay, by: 62) {
                try owner.query(
                    "SELECT beaconflow.ensure_partitions($1, $2)", [PostgresDate(unixDay: first), Int32(min(62, lastDay - first + 1))])
            }
        }
        var configuration = try AgentConfiguration(
            siteID: Self.site, agentID: Self.receiver, broker: pipeline.address, spoolDirectory: work + "/spool")
        configuration.acknowledgementTimeout = .seconds(5)
        configuration.drainTimeout = .seconds(1200)
        let agent = Agent(
            configuration: configuration, source: RecordingReplaySource(path: recording, receiver: Self.receiver, speed: .maximum, logger: logger),
            logger: logger)
        let outcome = try await agent.run()
        guard outcome == .finished else { throw HarnessError("the fleet's agent ended with \(outcome) before delivering everything") }
        comparison.batchesDeferred = pipeline.ingest.statistics.batchesDeferred
        try await pipeline.finish()
        comparison.seconds = (ContinuousClock.now - started) / .seconds(1)

        let stored = try await onThread {
            try PostgresConnection(conninfo).query(
                "SELECT beacon_id, est_days_left, days_left_low, days_left_high, status, forecast FROM beaconflow.beacon_health WHERE site_id = $1",
                [Self.site]
            ).map { row in
                (
                    try row.decode(0, as: String.self), try row.decode(1, as: Double?.self), try row.decode(2, as: Double?.self),
                    try row.decode(3, as: Double?.self), try row.decode(4, as: String.self), try row.decode(5, as: String?.self)
                )
            }
        }
        comparison.addressRows = try await pipeline.views(site: Self.site).addressRows.values.reduce(0, +)
        let storedTransmissions = try await onThread {
            try PostgresConnection(conninfo).query(
                "SELECT beacon_id, (extract(epoch FROM ts) * 1000000)::int8 FROM beaconflow.telemetry"
            ).map { row in "\(try row.decode(0, as: String.self)) \(try row.decode(1, as: Int64.self))" }
        }
        comparison.telemetryRows = storedTransmissions.count
        let storedKeys = Set(storedTransmissions)
        for entry in transmissions where !storedKeys.contains("\(entry.beaconID) \(entry.micros)") {
            comparison.notStoredCount += 1
            if comparison.notStored.count < 20 {
                comparison.notStored.append(
                    "\(entry.beaconID) at \(entry.micros) µs: \(entry.tlm.batteryMillivolts.map(String.init) ?? "–") mV, count \(entry.tlm.advertisingCount), uptime \(entry.tlm.uptimeSeconds) s")
            }
        }
        func same(_ stored: Double?, _ expected: Double?) -> Bool {
            switch (stored, expected) {
            case (nil, nil): true
            case (let a?, let b?): abs(a - b) <= 1e-5 * max(1, abs(b))
            default: false
            }
        }
        for (beaconID, days, low, high, status, forecast) in stored {
            guard let health = expected[beaconID] else { continue }
            if forecast == BatteryForecast.Method.chargeCounting.rawValue { comparison.chargeCounting += 1 }
            if same(days, health.estimatedDaysLeft), same(low, health.forecast?.daysLeftLow), same(high, health.forecast?.daysLeftHigh),
                status == health.status.rawValue || status == BeaconHealth.Status.stale.rawValue
            {
                comparison.matching += 1
            } else {
                comparison.differing.append(
                    "\(beaconID): stored \(days as Double?) [\(low as Double?), \(high as Double?)] \(status), "
                        + "harness \(health.estimatedDaysLeft as Double?) [\(health.forecast?.daysLeftLow as Double?), \(health.forecast?.daysLeftHigh as Double?)] \(health.status.rawValue)")
            }
        }
        return comparison
    }

    /// A beacon's address: random static, from its instance.
    static func address(of beaconID: String) -> String {
        let bytes = [0xC0] + instance(of: beaconID).suffix(5)
        return bytes.map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    static func instance(of beaconID: String) -> [UInt8] {
        let hex = beaconID.split(separator: ":").last.map(String.init) ?? ""
        return stride(from: 0, to: hex.count, by: 2).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
        }
    }

    /// An Eddystone frame as advertising data: flags, the service's UUID, its service data.
    static func serviceData(_ frame: [UInt8]) -> [UInt8] {
        [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame
    }

    static func line(_ micros: Int64, _ address: String, _ data: [UInt8]) -> String {
        RecordingWriter.line(micros: micros, receiver: receiver, transmitter: address + "/random", rssi: -60, data: data)
    }
}
