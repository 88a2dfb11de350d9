/// When the writer thread does its periodic work, apart from committing what is queued: a pure state machine over
/// the time it is given. Each turn of the writer asks `dueBeforeIntake` (then takes from the queue when its backlog
/// is empty) and `dueAfterIntake`; a step returned counts as done at that time.
struct WriterSchedule {
    var rebalanceInterval: Duration
    var partitionMaintenanceInterval: Duration
    /// Closed minutes of the served sites are compacted this often.
    var compactionInterval: Duration
    /// Zone decisions that only time moves (agents gone idle) are made this often.
    var zoneTickInterval: Duration = .seconds(1)
    /// This instance's clock is compared with the database's this often, and at each connection.
    var clockCheckInterval: Duration = .seconds(10)

    private var lastRebalance: ContinuousClock.Instant
    private var lastPartitionMaintenance: ContinuousClock.Instant
    private var lastCompaction: ContinuousClock.Instant
    private var lastZoneTick: ContinuousClock.Instant
    private var lastClockCheck: ContinuousClock.Instant
    /// Set at each connection: the sites are claimed before anything queued is processed.
    private var claimPending = false
    /// Set when a rebalance stopped with sites left to claim: the next turn goes on, whatever the backlog and the
    /// interval.
    private var claimsRemain = false
    /// Set at each connection: the clocks are compared before anything queued is judged.
    private var clockCheckPending = false

    init(
        rebalanceInterval: Duration, partitionMaintenanceInterval: Duration, compactionInterval: Duration,
        now: ContinuousClock.Instant
    ) {
        self.rebalanceInterval = rebalanceInterval
        self.partitionMaintenanceInterval = partitionMaintenanceInterval
        self.compactionInterval = compactionInterval
        lastCompaction = now
        lastRebalance = now
        lastPartitionMaintenance = now
        lastZoneTick = now
        lastClockCheck = now
    }

    struct BeforeIntake: Equatable {
        /// Compare this instance's clock with the database's: at each connection, then every `clockCheckInterval`.
        var compareClocks = false
        /// Look at the other instances, claim and hand over sites: at each connection (also while stopping: what is
        /// queued still needs its sites to be committed), then when idle and not stopping.
        var rebalance = false
    }

    struct AfterIntake: Equatable {
        var maintainPartitions = false
        var compactPacks = false
        var advanceZones = false
    }

    /// A rebalance stopped with sites left to claim (`SiteCoordinator.claimBudget`).
    mutating func moreToClaim() { claimsRemain = true }

    /// A new database connection: its sites are claimed first.
    mutating func connected() {
        claimPending = true
        clockCheckPending = true
    }

    mutating func dueBeforeIntake(now: ContinuousClock.Instant, backlogEmpty: Bool, stopping: Bool) -> BeforeIntake {
        var due = BeforeIntake()
        if clockCheckPending || now - lastClockCheck >= clockCheckInterval {
            lastClockCheck = now
            clockCheckPending = false
            due.compareClocks = true
        }
        if claimPending || (!stopping && (claimsRemain || (backlogEmpty && now - lastRebalance >= rebalanceInterval))) {
            lastRebalance = now
            claimPending = false
            claimsRemain = false
            due.rebalance = true
        }
        return due
    }

    mutating func dueAfterIntake(now: ContinuousClock.Instant) -> AfterIntake {
        var due = AfterIntake()
        if now - lastPartitionMaintenance >= partitionMaintenanceInterval {
            lastPartitionMaintenance = now
            due.maintainPartitions = true
        }
        if now - lastCompaction >= compactionInterval {
            lastCompaction = now
            due.compactPacks = true
        }
        if now - lastZoneTick >= zoneTickInterval {
            lastZoneTick = now
            due.advanceZones = true
        }
        return due
    }
}
