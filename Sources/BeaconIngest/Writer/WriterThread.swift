import LibPQ
import Logging
import WorkQueue

extension Ingest {
    /// The writer thread: executes what `WriterMachine` says, one action at a time, and tells it what came of each.
    /// A lost connection is handled here only (`connectionLost`): the session goes, what it held ends with it
    /// (`WriterState.sessionEnded`), and the machine ends the turn.
    struct WriterThread {
        let ingest: Ingest
        let queue: BlockingQueue<Item>
        let client: BrokerConnections
        var machine: WriterMachine<Item>
        /// The sites file in force: the configuration's, then what each reload applied.
        var sites: SitesConfiguration
        var intake: BatchIntake
        var clocks: ClockComparison
        var coordinator: SiteCoordinator
        var statuses: StatusIntake
        var instanceStatus = InstanceStatus()
        var statusReportedAt = ContinuousClock.now - .seconds(1)
        var pace: CommitPace
        var budgets: AgentBudgets
        /// What the writer holds in memory about the data, across sessions.
        var state: WriterState
        /// The PostgreSQL session, while connected.
        var writer: BatchWriter?

        init(ingest: Ingest, queue: BlockingQueue<Item>, client: BrokerConnections) {
            let configuration = ingest.configuration
            self.ingest = ingest
            self.queue = queue
            self.client = client
            var schedule = WriterSchedule(
                rebalanceInterval: configuration.rebalanceInterval,
                partitionMaintenanceInterval: configuration.partitionMaintenanceInterval,
                compactionInterval: configuration.compactionInterval, now: .now)
            schedule.clockCheckInterval = configuration.clockCheckInterval
            machine = WriterMachine(
                schedule: schedule,
                backoff: .init(minimum: configuration.reconnectDelayMinimum, maximum: configuration.reconnectDelayMaximum),
                maximumGroup: configuration.maximumGroup, finishZonesAtStop: configuration.finishZonesAtStop)
            sites = configuration.sites
            intake = BatchIntake(sites: sites)
            intake.futureToleranceMicros = configuration.intakeFutureToleranceMicros
            clocks = ClockComparison(toleranceMicros: configuration.clockTolerance.microseconds)
            coordinator = SiteCoordinator(configuration: configuration, client: client, instruments: ingest.instruments)
            statuses = StatusIntake(sites: sites, instruments: ingest.instruments)
            pace = CommitPace(maximum: configuration.maximumGroupSightings, target: configuration.leaseDuration / 8)
            budgets = AgentBudgets(sightings: SightingBudget(perSecond: configuration.agentSightingsPerSecond))
            state = WriterState(pipeline: Self.pipeline(configuration), servedSites: [])
        }

        /// Until the machine says to exit.
        mutating func run() {
            while true {
                if ingest.shouldStop { machine.stop() }
                if let loaded = ingest.reloads.withLock({ reloads in defer { reloads.pending = nil }; return reloads.pending }) {
                    machine.sitesRead(loaded)
                }
                switch machine.next(now: .now) {
                case .closeQueue: queue.close()
                case .wait(let until): ingest.sleep(until: until)
                case .connect(let migrate): connect(migrate: migrate)
                case .exitWithoutDatabase: return
                case .beginTurn: beginTurn()
                case .applySites(let loaded): apply(loaded)
                case .compareClocks: compareClocks()
                case .rebalance:
                    if let more = step("Sites could not be shared out", { (this, writer) throws(PostgresError) in
                        try this.coordinator.rebalance(writer, state: &this.state)
                    }) {
                        machine.didRebalance(moreToClaim: more)
                    }
                case .take(let timeout):
                    // What is waiting, one agent's message at a time: a batch taken with a flood from one credential
                    // waits for one of the flood's batches, not for all of them.
                    let taken = FairTurns.interleave(queue.popAll(timeout: timeout)) { $0.turnKey }
                    ingest.instruments.record(.queueDepth(taken.count))
                    machine.didTake(taken)
                case .dropExpiredPartitions:
                    if let dropped = step("Expired partitions could not be dropped", { (_, writer) throws(PostgresError) in try writer.dropExpiredPartitions() }) {
                        ingest.logger.info("Expired partitions dropped", metadata: ["dropped": .stringConvertible(dropped)])
                    }
                case .makePartitionsAhead:
                    if let made = step("Partitions ahead could not be made", { (_, writer) throws(PostgresError) in try writer.makePartitionsAhead() }) {
                        ingest.logger.info("Partitions ahead made", metadata: ["made": .stringConvertible(made)])
                    }
                case .compactPacks:
                    if let written = step("Compaction failed", { (this, writer) throws(PostgresError) in try writer.compactPacks(sites: this.state.servedSites) }), written > 0 {
                        ingest.logger.info("Closed minutes compacted", metadata: ["packs_written": .stringConvertible(written)])
                    }
                case .foldBatches:
                    if let folded = step("Folding acknowledged batches failed", { (this, writer) throws(PostgresError) in
                        try writer.foldBatches(sites: this.state.servedSites)
                    }), folded > 0 {
                        ingest.logger.info("Acknowledged batches folded", metadata: ["batches": .stringConvertible(folded)])
                    }
                case .advanceZones:
                    // Frames that waited in vain for their identity are stored even when no batch arrives.
                    if let expired = step("Waiting frames could not be stored", { (this, writer) throws(PostgresError) in
                        try writer.expireWaitingFrames(state: &this.state)
                    }), expired.stored > 0 {
                        ingest.instruments.record(.waitingFramesExpired(stored: expired.stored, waiting: expired.waiting))
                    }
                    // Agents gone idle stop holding their site's decisions back even when no batch arrives.
                    if let changes = step("Zone changes could not be written", { (this, writer) throws(PostgresError) in
                        try writer.advanceZones(state: &this.state)
                    }) {
                        ingest.zonesChanged(changes)
                    }
                    coordinator.sitesLost(state.takeSitesLost(), servedSites: state.servedSites)
                case .process(let group): process(group)
                case .finishZones: finishZones()
                case .handOverAndExit:
                    // The sites go to the other instances at once, rather than when this session ends.
                    _ = step("Sites could not be handed over") { (this, writer) throws(PostgresError) in
                        try this.coordinator.handOver(this.state.servedSites, writer, state: &this.state)
                    }
                    writer?.leaveInstances()
                    return
                }
            }
        }

        /// Runs one step on the connected writer; a lost connection ends the turn, other errors are the statement's.
        private mutating func step<Value>(
            _ failure: Logger.Message, _ work: (inout WriterThread, BatchWriter) throws(PostgresError) -> Value
        ) -> Value? {
            guard let writer else { return nil }
            switch Result(catching: { () throws(PostgresError) in try work(&self, writer) }) {
            case .success(let value):
                return value
            case .failure(let error) where error.isConnectionFailure:
                connectionLost(error)
            case .failure(let error):
                ingest.instruments.record(.statementError(error, failure))
            }
            return nil
        }

        private mutating func connectionLost(_ error: PostgresError) {
            ingest.instruments.record(.databaseLost(error))
            writer = nil
            state.sessionEnded()
            machine.didLoseConnection()
        }

        /// Connects, migrating the schema first on the first connection only (a reconnect finds it in place), and
        /// joins the instances that share the sites. The writer serves no site until `rebalance` claims some.
        private mutating func connect(migrate: Bool) {
            let configuration = ingest.configuration
            let connected = Result { () throws(PostgresError) in
                let connection = try PostgresConnection(configuration.database)
                if migrate { try Migrator.migrate(connection, logger: ingest.logger) }
                let writer = BatchWriter(connection: connection, clock: ingest.clock)
                try writer.joinInstances(
                    instance: configuration.mqtt.clientID, leaseDuration: configuration.leaseDuration, sitesDigest: sites.digest,
                    conninfo: configuration.database, writerStallBound: configuration.writerStallBound)
                do throws(PostgresError) {
                    try writer.makePartitionsAhead()
                } catch where !error.isConnectionFailure {
                    // Batches that need a day without a partition wait for it; the others go in.
                    ingest.instruments.record(.statementError(error, "Partitions ahead could not be made"))
                }
                try writer.writeRegistry(sites)
                return writer
            }
            switch connected {
            case .success(let connected):
                ingest.instruments.record(.databaseConnected)
                writer = connected
                machine.didConnect()
            case .failure(let error):
                let delay = machine.didFailToConnect(now: .now)
                if machine.stopRequested {
                    ingest.logger.error(
                        "Stopping without PostgreSQL; unacknowledged batches stay with the agents",
                        metadata: ["queued": .stringConvertible(machine.backlog.count), "error": "\(error)"])
                } else {
                    ingest.logger.warning("PostgreSQL unavailable; intake paused", metadata: ["error": "\(error)", "retry_in": "\(delay)"])
                }
            }
        }

        /// Presence, and the leases' news: their session gone (the connection is then lost), or sites taken over.
        private mutating func beginTurn() {
            guard let writer else { return }
            ingest.presencePublish(state, client: client)
            if let failure = writer.leaseFailure {
                connectionLost(failure)
                return
            }
            coordinator.sitesLost(writer.leasesTurned(state: &state), servedSites: state.servedSites)
            // The instance's figures, for `ingest_status`: once a second at most.
            let now = ContinuousClock.now
            if now - statusReportedAt >= .seconds(1) {
                statusReportedAt = now
                writer.report(
                    status: instanceStatus.json(
                        ingest.instruments.statistics, brokers: ingest.configuration.mqtt.failover.count + 1,
                        nowMicros: ingest.clock.nowMicros()))
            }
        }

        /// A sites file read again: in memory first (it stays in force if the connection drops), then the database.
        private mutating func apply(_ loaded: SitesConfiguration) {
            guard writer != nil else { return }
            let change = SitesChange(from: sites, to: loaded)
            sites = loaded
            intake.sites = loaded
            statuses = StatusIntake(sites: loaded, instruments: ingest.instruments)
            coordinator.sites = loaded
            ingest.presence.withLock { $0?.reconfigure(sites: loaded) }
            state.pipeline.reconfigure(sites: loaded, reset: change.restarted)
            _ = step("The sites file could not be applied") { (this, writer) throws(PostgresError) in
                try this.coordinator.handOver(this.state.servedSites.intersection(change.handedOver), writer, state: &this.state)
                try writer.writeRegistry(loaded)
                try writer.publish(sitesDigest: loaded.digest)
            }
        }

        private mutating func compareClocks() {
            guard let reading = step("The database's clock could not be read", { (_, writer) throws(PostgresError) in try writer.readServerClock() })
            else { return }
            let change = clocks.measured(
                localBeforeMicros: reading.localBeforeMicros, databaseMicros: reading.databaseMicros,
                localAfterMicros: reading.localAfterMicros)
            ingest.clock.set(offsetMicros: clocks.offsetMicros)
            ingest.instruments.record(.clockCompared(offsetMicros: clocks.offsetMicros, skewed: clocks.skewed, change))
        }

        private mutating func process(_ group: [Item]) {
            guard let writer else { return }
            switch ingest.process(
                group, writer: writer, state: &state, intake: intake, statuses: statuses, client: client, coordinator: &coordinator, pace: &pace,
                budgets: &budgets)
            {
            case .success: machine.didProcess(group.count)
            case .failure(let error): connectionLost(error)
            }
        }

        /// Stopping: a site lost on the way (a lease that lapsed while the machine stalled) is claimed again if
        /// free, so that its last minutes are counted.
        private mutating func finishZones() {
            _ = step("Sites could not be shared out") { (this, writer) throws(PostgresError) in
                try this.coordinator.rebalance(writer, state: &this.state)
            }
            guard let writer else { return }
            // The end of the data: no identity can come for the frames still waiting.
            if case .failure(let error) = Result(catching: { () throws(PostgresError) in try writer.expireWaitingFrames(state: &state, nowMicros: .max) }) {
                ingest.logger.error("Could not store the frames waiting for their identity", metadata: ["error": "\(error)"])
            }
            if case .failure(let error) = Result(catching: { () throws(PostgresError) in try writer.advanceZones(state: &state, finish: true) }) {
                ingest.logger.error("Could not count the last minutes", metadata: ["error": "\(error)"])
            }
        }

        static func pipeline(_ configuration: IngestConfiguration) -> IngestPipeline {
            var pipeline = IngestPipeline(sites: configuration.sites, health: configuration.health)
            pipeline.maximumBeacons = configuration.maximumBeacons
            return pipeline
        }
    }
}
