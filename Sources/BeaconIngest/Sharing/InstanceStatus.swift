import BeaconWire

/// An instance's own figures as `ingest_status` shows them (v028.sql): its lag, the batches and sightings it
/// committed a second over the last minute (from its totals as they grew), the batches it committed and refused in
/// all, its brokers and its database. Pure: the writer thread feeds it its statistics at its turns.
struct InstanceStatus {
    /// The totals at each turn given, the oldest at most `window` old.
    private var samples: [(micros: Int64, batches: Int, sightings: Int)] = []
    static let window: Int64 = 60_000_000

    /// The status now, as JSON.
    mutating func json(_ statistics: IngestStatistics, brokers: Int, nowMicros: Int64) -> String {
        samples.append((nowMicros, statistics.batchesCommitted, statistics.sightingsCommitted))
        while samples.count > 2, nowMicros - samples[1].micros >= Self.window { samples.removeFirst() }
        var batchesPerSecond = 0.0
        var sightingsPerSecond = 0.0
        if let first = samples.first, let last = samples.last, last.micros > first.micros {
            let seconds = Double(last.micros - first.micros) / 1e6
            batchesPerSecond = Double(last.batches - first.batches) / seconds
            sightingsPerSecond = Double(last.sightings - first.sightings) / seconds
        }
        func rounded(_ value: Double) -> JSONValue { .double((value * 100).rounded() / 100) }
        return JSONValue.object([
            JSONField("lag_s", rounded(statistics.lagSeconds)), JSONField("batches_per_s", rounded(batchesPerSecond)),
            JSONField("sightings_per_s", rounded(sightingsPerSecond)), JSONField("batches_committed", .number(statistics.batchesCommitted)),
            JSONField("batches_rejected", .number(statistics.batchesRejected)), JSONField("brokers_connected", .number(statistics.brokersConnected)),
            JSONField("brokers", .number(brokers)), JSONField("database_connected", .bool(statistics.databaseConnected)),
        ]).text
    }
}
