import LibPQ

// The tables the writer copies rows into, each with its columns and how a row fills them.

extension StoredPack {
    /// `sighting_packs`: a pack a row, keyed by its dictionaries.
    public static let copyTable = CopyTable<StoredPack>(
        "beaconflow.sighting_packs",
        [
            .init("ts") { PostgresTimestamp(unixMicros: $0.pack.startMicros) },
            .init("source_key") { $0.sourceKey },
            .init("beacon_key") { $0.beaconKey },
            .init("tx_power") { $0.pack.powerAt1mDbm.map(Int16.init) },
            .init("readings", array: { $0.pack.readings }),
        ])
}

extension TelemetryRow {
    /// The temporary table of `TransmissionStore.telemetry`, where a group's rows wait to be checked against stored
    /// transmissions.
    static let copyTable = CopyTable<TelemetryRow>(
        "pg_temp.telemetry_incoming",
        [
            .init("ts") { PostgresTimestamp(unixMicros: $0.timeMicros) },
            .init("beacon_id") { $0.beaconID },
            .init("battery_mv") { $0.batteryMillivolts },
            .init("temperature_c") { $0.temperatureCelsius.map(Float.init) },
            .init("adv_count") { Int64($0.advertisingCount) },
            .init("uptime_s") { $0.uptimeSeconds },
            .init("site_id") { $0.siteID },
            .init("agent_id") { $0.agentID },
        ])
}

extension SensorReadingRow {
    /// A temporary table like `sensor_readings_raw` with each transmission's tolerance, where a group's readings
    /// wait to be checked against stored ones.
    static let copyTable = CopyTable<SensorReadingRow>(
        "pg_temp.sensor_incoming",
        [
            .init("ts") { PostgresTimestamp(unixMicros: $0.timeMicros) },
            .init("site_id") { $0.siteID },
            .init("agent_id") { $0.agentID },
            .init("beacon_id") { $0.beaconID },
            .init("quantity") { $0.reading.quantity },
            .init("value") { $0.reading.value },
            .init("unit") { $0.reading.unit },
            .init("frame_hash") { $0.frameHash },
            .init("tolerance_us") { $0.toleranceMicros },
        ])
}
