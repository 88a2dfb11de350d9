import MetricFamilies

/// Every metric family the agent reports on `/metrics`.
public enum AgentMetrics {
    static let adverts = MetricFamily(
        "beaconflow_agent_adverts_total", .counter, help: "Advertising reports received from the source (adverts per second is its rate).")
    static let advertsSkipped = MetricFamily(
        "beaconflow_agent_adverts_skipped_total", .counter, labels: ["reason"],
        help: "Adverts not turned into sightings, by reason.")
    static let sightings = MetricFamily(
        "beaconflow_agent_sightings_total", .counter, help: "Sightings added to batches.")
    static let batches = MetricFamily(
        "beaconflow_agent_batches_total", .counter, help: "Batches sealed and written to the spool.")
    static let publishes = MetricFamily(
        "beaconflow_agent_publishes_total", .counter, help: "Batch publications to the broker, resends included.")
    static let acknowledged = MetricFamily(
        "beaconflow_agent_batches_acknowledged_total", .counter, help: "Batches an ingest acknowledged (then removed from the spool).")
    static let refusedBatches = MetricFamily(
        "beaconflow_agent_batches_refused_total", .counter, labels: ["reason"],
        help: "Batches an ingest refused, by the reason it gave.")
    static let refusedAcknowledgements = MetricFamily(
        "beaconflow_agent_acknowledgements_refused_total", .counter,
        help: "Acknowledgements not believed: beyond the newest batch sealed, or not an acknowledgement.")
    static let acknowledgementTimeouts = MetricFamily(
        "beaconflow_agent_acknowledgement_timeouts_total", .counter,
        help: "Acknowledgements that did not come within the timeout; the agent then resends from its oldest batch.")
    static let dropped = MetricFamily(
        "beaconflow_agent_spool_dropped_batches_total", .counter, help: "Batches dropped unacknowledged because the spool was full.")
    static let spoolBytes = MetricFamily(
        "beaconflow_agent_spool_bytes", .gauge, help: "Bytes the spool holds on disk.")
    static let spoolPending = MetricFamily(
        "beaconflow_agent_spool_pending_batches", .gauge, help: "Batches in the spool not acknowledged yet.")
    static let brokerConnected = MetricFamily(
        "beaconflow_agent_broker_connected", .gauge, help: "1 while connected to the broker, else 0.")
    static let scanning = MetricFamily(
        "beaconflow_agent_scanning", .gauge, help: "1 while the adapter scans (hci source only), else 0.")
    static let scanRestarts = MetricFamily(
        "beaconflow_agent_scan_restarts_total", .counter,
        help: "Scans restarted by the agent: after the watchdog's silence, or after another program changed the scan.")
    static let scanInterruptions = MetricFamily(
        "beaconflow_agent_scan_interruptions_total", .counter, help: "Scans another program stopped or changed.")
    static let adapterLosses = MetricFamily(
        "beaconflow_agent_adapter_losses_total", .counter, help: "Times the adapter went away (unplugged, powered off, reset).")
    static let gattPollFailures = MetricFamily(
        "beaconflow_agent_gatt_poll_failures_total", .counter, help: "GATT polls that failed (connection or read).")

    public static let all: [MetricFamily] = [
        adverts, advertsSkipped, sightings, batches, publishes, acknowledged, refusedBatches, refusedAcknowledgements,
        acknowledgementTimeouts, dropped, spoolBytes, spoolPending, brokerConnected, scanning, scanRestarts,
        scanInterruptions, adapterLosses, gattPollFailures,
    ]
}
