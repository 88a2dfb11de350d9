import Mosquitto

/// Everything `beaconflow ingest` runs with.
public struct IngestConfiguration: Sendable {
    /// The broker, and in `mqtt.failover` the other independent brokers of the deployment: the ingest holds a
    /// connection to each of them (it does not fail over), so that it hears an agent on whichever one it uses.
    public var mqtt: MQTTClient.Configuration
    /// libpq conninfo or `postgresql://` URI.
    public var database: String
    public var sites: SitesConfiguration
    /// Where `sites` was read from: SIGHUP reads it again (`Ingest.requestReload`); nil, a reload is refused.
    public var sitesPath: String?
    /// With a name, the batch subscriptions are shared (`$share/<name>/...`): the broker hands each batch to one
    /// of the group's subscribers. Instances share sites without it (only a site's owner subscribes to it).
    public var sharedSubscriptionGroup: String?
    /// How often the instance looks at the others on the database and claims or hands over sites (`SiteShare`):
    /// it bounds how long a site freed by a stopped instance waits for a new owner.
    public var rebalanceInterval: Duration = .seconds(1)
    /// How long a site's lease lasts without renewal (`LeaseKeeper`; renewed four times per lease): a frozen or
    /// cut-off instance's sites are claimed by another within about this long, plus `rebalanceInterval`.
    public var leaseDuration: Duration = .seconds(8)
    /// Leases are renewed on a session and thread of their own whatever the writer is doing, but not for a writer
    /// thread that has not turned for this long (stuck, not busy): its sites then go to another instance.
    public var writerStallBound: Duration = .seconds(60)
    /// A site of the sites file that no instance has served for this long makes `/healthz` unhealthy and
    /// `beaconflow_ingest_sites_unserved` count it.
    public var unservedSiteBound: Duration = .seconds(15)
    /// Whether the broker keeps the ingest's session (its subscriptions and the batches queued for it) for a day
    /// after a disconnect: for a client id that stays the same across restarts.
    public var persistentSession = true
    /// Messages waiting for the writer at most; beyond it they are deferred (not acknowledged, so the agents
    /// send them again): intake pauses while PostgreSQL is away.
    public var queueCapacity = 512
    /// Batches committed in one transaction at most, when the queue is deep.
    public var maximumGroup = 64
    /// Sightings each agent's batches may bring a second (`SightingBudget`).
    public var agentSightingsPerSecond = SightingBudget.defaultPerSecond
    /// Sightings committed in one transaction at most (a batch with more goes alone). Below it, the writer keeps
    /// each transaction near an eighth of `leaseDuration` from the measured cost of a sighting (`CommitPace`), so
    /// that its work between statements stays far below the session's idle-in-transaction timeout (the lease) on
    /// a slow or busy machine too.
    public var maximumGroupSightings = 100_000
    /// Beacons committed in one transaction at most (the batches' dictionary entries summed; a batch with more
    /// goes alone): a transaction's undo journal keeps the state each beacon had before it (about 1.3 kB each), so
    /// a backlog of a large fleet goes in several transactions instead of one journal of tens of thousands of
    /// beacons.
    public var maximumGroupBeacons = 10_000
    public var reconnectDelayMinimum: Duration = .milliseconds(200)
    public var reconnectDelayMaximum: Duration = .seconds(10)
    public var health = FleetHealth.Configuration()
    /// See `IngestPipeline.maximumBeacons`.
    public var maximumBeacons = 200_000
    public var intakeFutureToleranceMicros: Int64 = 300_000_000
    /// How far this instance's clock may differ from the database's before it says so and is unhealthy. Times are
    /// judged by the database's clock whatever the difference (`IngestClock`).
    public var clockTolerance: Duration = .seconds(2)
    /// How often the writer compares this instance's clock with the database's (and at each connection).
    public var clockCheckInterval: Duration = .seconds(10)
    /// How often the writer makes the coming days' partitions and drops those past retention. Expired partitions
    /// are first dropped one interval after start, so that a short run (a replay of old captures, a test) keeps
    /// what it wrote.
    public var partitionMaintenanceInterval: Duration = .seconds(3600)
    /// How often the writer compacts the closed minutes of the sites it serves (`compaction_lag_minutes` in
    /// `beaconflow.settings` says which minutes are closed).
    public var compactionInterval: Duration = .seconds(300)
    /// At a graceful stop, count the minutes begun, apply the readings still waiting for a silent agent and end
    /// the open visits at their beacons' last readings, as when the site ends with the run (the demo). Off for a
    /// service: a restart goes on counting.
    public var finishZonesAtStop = false
    /// Live presence over MQTT (and Home Assistant discovery); nil: none.
    public var presence: PresenceConfiguration?

    public init(mqtt: MQTTClient.Configuration, database: String, sites: SitesConfiguration) {
        self.mqtt = mqtt
        self.database = database
        self.sites = sites
    }

}

/// Counts since the start, for `/healthz`, the demo's progress line and tests.
public struct IngestStatistics: Sendable, Equatable {
    public var batchesCommitted = 0
    public var batchesDuplicate = 0
    public var batchesRejected = 0
    public var batchesDeferred = 0
    /// Batches kept out by a condition of the database (`IngestEvent.batchHeld`): not acknowledged, sent again.
    public var batchesHeld = 0
    /// Agents whose batches wait for such a condition to clear now.
    public var agentsHeld = 0
    /// The database's clock minus this instance's, as last measured.
    public var clockOffsetSeconds = 0.0
    /// Whether that difference is beyond `IngestConfiguration.clockTolerance`.
    public var clockSkewed = false
    public var sightingsCommitted = 0
    public var telemetryCommitted = 0
    public var sensorReadingsCommitted = 0
    /// Readings that arrived after their site let their agent go: stored, but no zone moved for them.
    public var lateReadings = 0
    /// From the arrival of the newest batch of the last group to its commit.
    public var lagSeconds = 0.0
    public var transactions = 0
    public var databaseConnected = false
    public var databaseReconnects = 0
    /// Of the brokers given, how many are connected now.
    public var brokersConnected = 0
    /// Connected to at least one of the brokers.
    public var mqttConnected: Bool { brokersConnected > 0 }
    /// Sites this instance serves now (claimed on the database).
    public var sitesServed = 0
    /// Sites of the sites file that no instance has served for longer than `unservedSiteBound`, as this instance
    /// sees them.
    public var sitesUnserved = 0
    /// Sites this instance served that another instance took over (its lease had lapsed).
    public var sitesLost = 0
    /// Sites this instance claimed that another instance had served before.
    public var sitesTakenOver = 0
    /// Sites this instance handed over (to make room for another instance, or at its stop).
    public var sitesHandedOver = 0
    /// Batches for a site this instance does not serve (any more): not acknowledged, so the agent sends them
    /// again and the site's owner takes them.
    public var batchesNotServed = 0
    /// Reads of the sites file asked for by SIGHUP and finished (applied, unchanged or refused).
    public var sitesFileReads = 0

    /// Every count by its name (snake_case): the fields of `/healthz` and of the log line at the stop.
    public var fields: [(name: String, value: String)] {
        [
            ("mqtt_connected", "\(mqttConnected)"), ("database_connected", "\(databaseConnected)"),
            ("batches_committed", "\(batchesCommitted)"), ("batches_duplicate", "\(batchesDuplicate)"),
            ("batches_rejected", "\(batchesRejected)"), ("batches_deferred", "\(batchesDeferred)"),
            ("batches_held", "\(batchesHeld)"), ("agents_held", "\(agentsHeld)"),
            ("clock_offset_seconds", "\(clockOffsetSeconds)"), ("clock_skewed", "\(clockSkewed)"),
            ("batches_not_served", "\(batchesNotServed)"), ("sightings_committed", "\(sightingsCommitted)"),
            ("telemetry_committed", "\(telemetryCommitted)"), ("sensor_readings_committed", "\(sensorReadingsCommitted)"),
            ("late_readings", "\(lateReadings)"), ("lag_seconds", "\(lagSeconds)"), ("transactions", "\(transactions)"),
            ("database_reconnects", "\(databaseReconnects)"), ("brokers_connected", "\(brokersConnected)"),
            ("sites_served", "\(sitesServed)"), ("sites_unserved", "\(sitesUnserved)"), ("sites_lost", "\(sitesLost)"),
            ("sites_taken_over", "\(sitesTakenOver)"), ("sites_handed_over", "\(sitesHandedOver)"),
            ("sites_file_reads", "\(sitesFileReads)"),
        ]
    }
}
