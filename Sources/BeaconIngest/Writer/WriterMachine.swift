/// What the ingest's writer thread does next: a pure state machine that owns the thread's control state (where it
/// stands with PostgreSQL and its backoff, the periodic schedule, stopping, the backlog taken from the queue, a
/// sites file read and not applied yet) and answers each call of `next(now:)` with one action. The writer thread
/// executes the action and reports what came of it (`didConnect`, `didTake`, `didLoseConnection`, ...); it does
/// all the I/O and decides nothing about order. The model is postgres-nio's `ConnectionStateMachine`.
///
/// One turn, connected: `beginTurn` (presence, the leases' news), `applySites` when a file was read, then
/// `compareClocks` and `rebalance` when due, `take` when the backlog is empty, then the maintenance due
/// (`dropExpiredPartitions`, `makePartitionsAhead`, `compactPacks`, `foldBatches`, `advanceZones`) and one group
/// of the backlog (`process`). A lost connection ends the turn wherever it is: the next turn connects (at once,
/// then backing off) and claims sites before anything queued is processed. A stop closes the queue first, commits
/// what it holds, then finishes the zones, hands the sites over and exits; a stop without PostgreSQL exits at the
/// first failed attempt, the unacknowledged batches staying with the agents.
struct WriterMachine<Item> {
    enum Action {
        /// Stop intake: what is queued is still committed and acknowledged.
        case closeQueue
        /// Nothing to do before `until` (the next attempt to connect); a stop request ends the wait.
        case wait(until: ContinuousClock.Instant)
        /// Connect, bringing the schema up to date first on the first connection only.
        case connect(migrate: Bool)
        /// Stopping and PostgreSQL cannot be reached: exit, the unacknowledged batches staying with the agents.
        case exitWithoutDatabase
        /// Publish presence and take the leases' news (a lease lost, the leases' session gone).
        case beginTurn
        /// Apply a sites file read since the last turn.
        case applySites(SitesConfiguration)
        case compareClocks
        /// Look at the other instances; claim and hand over sites (`didRebalance`).
        case rebalance
        /// Take what is queued, waiting at most `timeout` seconds (`didTake`).
        case take(timeout: Double)
        case dropExpiredPartitions
        case makePartitionsAhead
        case compactPacks
        case foldBatches
        case advanceZones
        /// Validate and commit one group of the backlog (`didProcess` removes it).
        case process([Item])
        /// Stopping with nothing left: claim what lapsed and count the last minutes.
        case finishZones
        /// Hand every site over and leave the live instances; then exit.
        case handOverAndExit
    }

    enum Connection: Equatable {
        /// The next attempt is due at `retryAt` (nil: at once); `retryDelay` is the wait after it fails.
        case disconnected(retryDelay: Duration, retryAt: ContinuousClock.Instant?, firstConnection: Bool)
        case connected
    }

    struct Backoff: Equatable {
        var minimum: Duration
        var maximum: Duration
    }

    /// Where a connected turn stands.
    private enum Phase: Equatable {
        case start, sites, beforeIntake, rebalance, intake, taking, afterIntake, group, finishing, handingOver
    }

    let backoff: Backoff
    let maximumGroup: Int
    /// Whether a stop counts the last minutes (`finishZones`) before handing the sites over.
    let finishZonesAtStop: Bool
    private(set) var connection: Connection
    private(set) var schedule: WriterSchedule
    private(set) var stopRequested = false
    private(set) var queueClosed = false
    private(set) var backlog: [Item] = []
    private(set) var pendingSites: SitesConfiguration?
    private var phase = Phase.start
    private var rebalanceDue = false
    private var maintenance: [Action] = []
    private var exitDue = false

    init(schedule: WriterSchedule, backoff: Backoff, maximumGroup: Int, finishZonesAtStop: Bool) {
        self.schedule = schedule
        self.backoff = backoff
        self.maximumGroup = maximumGroup
        self.finishZonesAtStop = finishZonesAtStop
        connection = .disconnected(retryDelay: backoff.minimum, retryAt: nil, firstConnection: true)
    }

    // MARK: - Events

    /// `requestStop()` was called.
    mutating func stop() { stopRequested = true }

    /// A sites file was read (SIGHUP); a newer one replaces one not applied yet.
    mutating func sitesRead(_ sites: SitesConfiguration) { pendingSites = sites }

    mutating func didConnect() {
        connection = .connected
        schedule.connected()
        phase = .start
    }

    /// A failed attempt: returns how long until the next, after which the wait doubles up to the maximum;
    /// stopping, the thread exits instead.
    @discardableResult
    mutating func didFailToConnect(now: ContinuousClock.Instant) -> Duration {
        guard case .disconnected(let delay, _, let first) = connection else { return backoff.minimum }
        connection = .disconnected(retryDelay: min(delay * 2, backoff.maximum), retryAt: now + delay, firstConnection: first)
        if stopRequested { exitDue = true }
        return delay
    }

    /// The connection is gone (a statement found it lost, or the leases' session ended): the turn ends here, the
    /// next one connects at once and then backs off. The backlog stays.
    mutating func didLoseConnection() {
        connection = .disconnected(retryDelay: backoff.minimum, retryAt: nil, firstConnection: false)
        phase = .start
        maintenance = []
    }

    /// A rebalance stopped with sites left to claim: the next turn goes on claiming, whatever the backlog.
    mutating func didRebalance(moreToClaim: Bool) {
        if moreToClaim { schedule.moreToClaim() }
    }

    /// What `take` found queued, in the order to process it.
    mutating func didTake(_ items: [Item]) {
        guard phase == .taking else { return }
        backlog = items
        phase = backlog.isEmpty && stopRequested ? .finishing : .afterIntake
    }

    /// The group `process` was given is done (committed, refused or held: it leaves the backlog).
    mutating func didProcess(_ count: Int) {
        backlog.removeFirst(min(count, backlog.count))
    }

    // MARK: - Actions

    mutating func next(now: ContinuousClock.Instant) -> Action {
        if stopRequested, !queueClosed {
            queueClosed = true
            return .closeQueue
        }
        guard case .connected = connection else { return nextWhileDisconnected(now: now) }
        while true {
            switch phase {
            case .start:
                phase = .sites
                return .beginTurn
            case .sites:
                phase = .beforeIntake
                if let sites = pendingSites {
                    pendingSites = nil
                    return .applySites(sites)
                }
            case .beforeIntake:
                let due = schedule.dueBeforeIntake(now: now, backlogEmpty: backlog.isEmpty, stopping: stopRequested)
                rebalanceDue = due.rebalance
                phase = .rebalance
                if due.compareClocks { return .compareClocks }
            case .rebalance:
                phase = .intake
                if rebalanceDue { return .rebalance }
            case .intake:
                guard backlog.isEmpty else {
                    phase = .afterIntake
                    continue
                }
                phase = .taking
                return .take(timeout: stopRequested ? 0 : 0.1)
            case .taking:
                // `didTake` was not called: take again.
                return .take(timeout: stopRequested ? 0 : 0.1)
            case .afterIntake:
                let due = schedule.dueAfterIntake(now: now)
                maintenance = (due.maintainPartitions ? [Action.dropExpiredPartitions, .makePartitionsAhead] : [])
                    + (due.compactPacks ? [.compactPacks, .foldBatches] : []) + (due.advanceZones ? [.advanceZones] : [])
                phase = .group
            case .group:
                if !maintenance.isEmpty { return maintenance.removeFirst() }
                phase = .start
                if !backlog.isEmpty { return .process(Array(backlog.prefix(maximumGroup))) }
            case .finishing:
                phase = .handingOver
                if finishZonesAtStop { return .finishZones }
            case .handingOver:
                return .handOverAndExit
            }
        }
    }

    private mutating func nextWhileDisconnected(now: ContinuousClock.Instant) -> Action {
        guard case .disconnected(_, let retryAt, let first) = connection else { return .beginTurn }
        if exitDue { return .exitWithoutDatabase }
        // Stopping: one attempt at once, to commit what is queued.
        if let retryAt, now < retryAt, !stopRequested { return .wait(until: retryAt) }
        return .connect(migrate: first)
    }
}

extension WriterMachine.Action: Equatable where Item: Equatable {}
