import BeaconWire
import Foundation
import LibPQ

/// Commits batches to PostgreSQL exactly once: each batch is one transaction holding its `batches` row and a
/// binary COPY of its sightings. A batch whose (site, agent, sequence) is already there is a redelivery: nothing
/// is written. Blocking: it runs on the writer thread.
public final class BatchWriter {
    public enum Outcome: Sendable, Equatable {
        case committed(rows: Int)
        case duplicate
    }

    private let connection: PostgresConnection
    /// Path-loss exponent per site for the distance estimate (DESIGN §8); 2.5 when the site has none.
    public var pathLossExponents: [String: Double] = [:]
    /// Days whose partitions are known to exist.
    private var partitionedDays: Set<Int64> = []

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    public func commit(_ batch: DecodedBatch) throws(PostgresError) -> Outcome {
        try ensurePartitions(for: batch)
        try connection.execute("BEGIN")
        do {
            let inserted = try connection.query(
                """
                INSERT INTO beaconflow.batches (site_id, agent_id, sequence, boot_id, agent_clock, sightings)
                VALUES ($1, $2, $3, $4, to_timestamp($5::double precision / 1e6), $6)
                ON CONFLICT DO NOTHING RETURNING 1
                """,
                [
                    batch.siteID, batch.agentID, String(batch.sequence), String(Int64(bitPattern: batch.bootID)),
                    String(batch.agentClockMicros), String(batch.sightings.count),
                ])
            guard !inserted.isEmpty else {
                try connection.execute("ROLLBACK")
                return .duplicate
            }
            if !batch.sightings.isEmpty {
                try connection.copy(
                    """
                    COPY beaconflow.sightings_raw (ts, site_id, agent_id, zone_id, beacon_id, rssi, tx_power, distance_m)
                    FROM STDIN (FORMAT binary)
                    """, data: sightingRows(batch))
            }
            try connection.execute("COMMIT")
            return .committed(rows: batch.sightings.count)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    func sightingRows(_ batch: DecodedBatch) -> [UInt8] {
        let exponent = pathLossExponents[batch.siteID] ?? 2.5
        var copy = BinaryCopyWriter(capacity: 64 + batch.sightings.count * 96)
        for sighting in batch.sightings {
            copy.startRow(fields: 8)
            copy.timestamp(unixMicros: sighting.timeMicros)
            copy.text(batch.siteID)
            copy.text(batch.agentID)
            copy.text(nil)
            copy.text(sighting.beacon.beaconID)
            copy.smallint(Int16(sighting.rssi))
            copy.smallint(sighting.beacon.powerAt1mDbm.map(Int16.init))
            copy.real(sighting.beacon.powerAt1mDbm.map { power in
                // Log-distance model: d = 10^((P1m - rssi) / (10 n)).
                Float(pow(10, (Double(power) - Double(sighting.rssi)) / (10 * exponent)))
            })
        }
        return copy.finished()
    }

    private func ensurePartitions(for batch: DecodedBatch) throws(PostgresError) {
        let days = Set(batch.sightings.map { $0.timeMicros.floorDivided(by: 86_400_000_000) })
        for day in days.subtracting(partitionedDays).sorted() {
            let date = Date(timeIntervalSince1970: TimeInterval(day * 86_400))
            let text = ISO8601DateFormatter.string(from: date, timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate])
            try connection.query("SELECT beaconflow.ensure_partitions($1::date, 1)", [text])
            partitionedDays.insert(day)
        }
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (days before 1970 stay on the right day).
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor < 0) ? quotient - 1 : quotient
    }
}
