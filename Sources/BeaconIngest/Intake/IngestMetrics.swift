import BeaconMessaging
import MetricFamilies

/// Every metric family the ingest reports on `/metrics`.
public enum IngestMetrics {
    static let batches = MetricFamily(
        "beaconflow_ingest_batches_total", .counter, labels: ["outcome"],
        help: "Batches handled, by outcome: committed, duplicate, rejected, deferred, held, not_served, retained_ignored.")
    static let batchOutcomes = ["committed", "duplicate", "rejected", "deferred", "held", "not_served", "retained_ignored"]
    static let rejectedBatches = MetricFamily(
        "beaconflow_ingest_rejected_batches_total", .counter, labels: ["reason"],
        help: "Batches refused (kept in beaconflow.rejected_batches), by reason.")
    static let sightings = MetricFamily("beaconflow_ingest_sightings_total", .counter, help: "Sightings committed.")
    static let telemetry = MetricFamily(
        "beaconflow_ingest_telemetry_total", .counter, help: "Telemetry rows committed (one per transmission).")
    static let sensorReadings = MetricFamily(
        "beaconflow_ingest_sensor_readings_total", .counter, help: "Sensor readings committed (one per transmission; TLM readings are counted as telemetry).")
    static let lateReadings = MetricFamily(
        "beaconflow_ingest_late_readings_total", .counter,
        help: "Sightings stored but too late for the zone decisions (before a minute already counted).")
    static let evictedBeacons = MetricFamily(
        "beaconflow_ingest_beacons_evicted_total", .counter,
        help: "Beacons whose in-memory state was let go to stay within --max-beacons.")
    static let framesWaiting = MetricFamily(
        "beaconflow_ingest_frames_waiting", .gauge,
        help: "Eddystone URL and TLM frames of device addresses waiting (15 s at most) for an identity frame from the same address.")
    static let addressFrames = MetricFamily(
        "beaconflow_ingest_address_frames_total", .counter,
        help: "Eddystone URL and TLM frames stored under their device address: no identity frame came from it while they waited.")
    static let addressBeaconsMerged = MetricFamily(
        "beaconflow_ingest_address_beacons_merged_total", .counter,
        help: "Beacons stored under their device address whose identity frame came later, within the address's lifetime: their rows were filed under the identity.")
    static let clonedBeacons = MetricFamily(
        "beaconflow_ingest_cloned_beacons_total", .counter,
        help: "Beacon identities found advertised from two addresses at once (a copy of the beacon).")
    static let databaseReconnects = MetricFamily(
        "beaconflow_ingest_database_reconnects_total", .counter, help: "Times the connection to PostgreSQL was lost.")
    static let databaseConnected = MetricFamily(
        "beaconflow_ingest_database_connected", .gauge, help: "1 while connected to PostgreSQL, else 0.")
    static let statusesIgnored = MetricFamily(
        "beaconflow_ingest_statuses_ignored_total", .counter,
        help: "Status messages not used: not on a known agent's status topic, or not a valid status.")
    static let agentIDsShared = MetricFamily(
        "beaconflow_ingest_agent_ids_shared_total", .counter,
        help: "Reports of two running agents using one agent id (their statuses alternating between two boot ids), at most one a minute per agent.")
    static let statementErrors = MetricFamily(
        "beaconflow_ingest_statement_errors_total", .counter,
        help: "Statements PostgreSQL refused for their data; the batch or status is set aside.")
    static let commitSeconds = MetricFamily(
        "beaconflow_ingest_commit_seconds", .histogram, help: "Time to write and commit one group of batches.")
    static let queueDepth = MetricFamily(
        "beaconflow_ingest_queue_depth", .gauge, help: "Batches received and waiting for the writer.")
    static let lag = MetricFamily(
        "beaconflow_ingest_lag_seconds", .gauge, help: "Seconds from the arrival of the newest batch of the last group committed to its commit.")
    static let clockOffset = MetricFamily(
        "beaconflow_ingest_clock_offset_seconds", .gauge,
        help: "The database's clock minus this instance's, as last measured; times are judged by the database's.")
    static let agentsHeld = MetricFamily(
        "beaconflow_ingest_agents_held", .gauge,
        help: "Agents whose batches wait unacknowledged for a condition of the database (a lock, a limit, a privilege) to clear.")
    static let brokersConnected = MetricFamily(
        "beaconflow_ingest_brokers_connected", .gauge, help: "Brokers of --broker connected now.")
    static let siteClaims = MetricFamily(
        "beaconflow_ingest_site_claims_total", .counter, help: "Sites this instance claimed.")
    static let sitesTakenOver = MetricFamily(
        "beaconflow_ingest_sites_taken_over_total", .counter, help: "Sites claimed that another instance had served before.")
    static let sitesHandedOver = MetricFamily(
        "beaconflow_ingest_sites_handed_over_total", .counter, help: "Sites this instance handed to another (rebalancing or stop).")
    static let sitesServed = MetricFamily(
        "beaconflow_ingest_sites_served", .gauge, help: "Sites this instance serves now.")
    static let sitesUnserved = MetricFamily(
        "beaconflow_ingest_sites_unserved", .gauge, help: "Sites of the sites file that no live instance serves, as this instance sees it.")
    static let sitesLost = MetricFamily(
        "beaconflow_ingest_sites_lost_total", .counter, help: "Sites whose lease this instance lost before renewing it.")
    static let unusableCheckpoints = MetricFamily(
        "beaconflow_ingest_unusable_checkpoints_total", .counter,
        help: "Zone checkpoints read back damaged or out of range; their sites resumed without them.")
    static let unreadableBatteryStates = MetricFamily(
        "beaconflow_ingest_unreadable_battery_states_total", .counter,
        help: "Saved battery states read back damaged or of an unknown version; their beacons' forecasts started afresh.")
    static let undecodableFrames = MetricFamily(
        "beaconflow_ingest_undecodable_frames_total", .counter, labels: ["reason"],
        help: "Data frames whose readings could not be read, by reason (authentication_failed, no_bindkey, or the decode error).")
    static let sitesReloads = MetricFamily(
        "beaconflow_ingest_sites_reloads_total", .counter, labels: ["outcome"],
        help: "Sites file reads on SIGHUP, by outcome: applied, unchanged, refused (the file did not load; the running sites stay).")
    static let reloadOutcomes = ["applied", "unchanged", "refused"]
    static let sitesFileDiffers = MetricFamily(
        "beaconflow_ingest_sites_file_differs", .gauge,
        help: "Other live ingest instances whose sites file differs from this one's (by digest); 0 when all match.")
    static let presenceMessages = MetricFamily(
        "beaconflow_ingest_presence_messages_total", .counter, help: "Presence messages published (--presence).")
    static let presenceReplaced = MetricFamily(
        "beaconflow_ingest_presence_messages_replaced_total", .counter,
        help: "Presence messages replaced by a newer one for the same topic before they were sent.")
    static let presenceDropped = MetricFamily(
        "beaconflow_ingest_presence_messages_dropped_total", .counter,
        help: "Presence messages of beacons outside the registry dropped: 10,000 of theirs were waiting already.")
    static let presenceWaiting = MetricFamily(
        "beaconflow_ingest_presence_messages_waiting", .gauge, help: "Presence messages waiting for the publish rate.")

    public static let all: [MetricFamily] = [
        batches, rejectedBatches, sightings, telemetry, sensorReadings, lateReadings, evictedBeacons, framesWaiting, addressFrames,
        addressBeaconsMerged, clonedBeacons, databaseReconnects,
        databaseConnected, statusesIgnored, agentIDsShared, statementErrors, commitSeconds, queueDepth, lag, clockOffset, agentsHeld, brokersConnected, siteClaims,
        sitesTakenOver, sitesHandedOver, sitesServed, sitesUnserved, sitesLost, unusableCheckpoints, unreadableBatteryStates, undecodableFrames, sitesReloads,
        sitesFileDiffers,
        presenceMessages, presenceReplaced, presenceDropped, presenceWaiting,
    ]
}
