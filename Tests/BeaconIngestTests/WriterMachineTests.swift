@testable import BeaconIngest
import TestServers
import Testing

/// The writer thread's turns as actions, without a database or a broker: what it does first, how a lost
/// connection, a stop, a reload and a long claim change the order.
@Suite struct WriterMachineTests {
    typealias Machine = WriterMachine<String>
    let start = ContinuousClock.now

    func machine(finishZonesAtStop: Bool = false) -> Machine {
        let schedule = WriterSchedule(
            rebalanceInterval: .seconds(1), partitionMaintenanceInterval: .seconds(3600), compactionInterval: .seconds(300),
            now: start)
        return Machine(
            schedule: schedule, backoff: .init(minimum: .milliseconds(200), maximum: .seconds(1)), maximumGroup: 2,
            finishZonesAtStop: finishZonesAtStop)
    }

    /// Connected at `start`: the first turn's actions up to its take.
    func connected() -> Machine {
        var machine = machine()
        _ = machine.next(now: start)
        machine.didConnect()
        #expect(machine.next(now: start) == .beginTurn)
        #expect(machine.next(now: start) == .compareClocks)
        #expect(machine.next(now: start) == .rebalance)
        return machine
    }

    /// Failed attempts back off by doubling up to the maximum; only the first connection migrates.
    @Test func failedAttemptsBackOffAndOnlyTheFirstConnectionMigrates() {
        var machine = machine()
        var now = start
        var waits: [Duration] = []
        #expect(machine.next(now: now) == .connect(migrate: true))
        for _ in 0..<5 {
            waits.append(machine.didFailToConnect(now: now))
            guard case .wait(let until) = machine.next(now: now) else {
                Issue.record("no wait after a failed attempt")
                return
            }
            now = until
            #expect(machine.next(now: now) == .connect(migrate: true))
        }
        #expect(waits == [.milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        machine.didConnect()
        machine.didLoseConnection()
        // A lost connection is tried again at once, without migrating, and backs off from the minimum.
        #expect(machine.next(now: now) == .connect(migrate: false))
        #expect(machine.didFailToConnect(now: now) == .milliseconds(200))
    }

    /// A connection's first turn compares the clocks and claims sites before it takes anything; a taken backlog
    /// goes a group at a time, one group per turn, and the next take waits for the backlog to be done.
    @Test func aTurnClaimsBeforeItTakesAndProcessesAGroupAtATime() {
        var machine = connected()
        #expect(machine.next(now: start) == .take(timeout: 0.1))
        machine.didTake(["a1", "b1", "a2"])
        #expect(machine.next(now: start) == .process(["a1", "b1"]))
        machine.didProcess(2)
        #expect(machine.next(now: start) == .beginTurn)
        // No rebalance while a backlog waits, and no take; the zones' second is due.
        #expect(machine.next(now: start + .seconds(2)) == .advanceZones)
        #expect(machine.next(now: start + .seconds(2)) == .process(["a2"]))
        machine.didProcess(1)
        #expect(machine.next(now: start + .seconds(2)) == .beginTurn)
        #expect(machine.next(now: start + .seconds(2)) == .rebalance)
        #expect(machine.next(now: start + .seconds(2)) == .take(timeout: 0.1))
    }

    /// A connection lost in the middle of a group (or a lease's session gone at a turn's start) ends the turn:
    /// the next connection claims the sites again before the same group is processed, without taking more.
    @Test func aConnectionLostDuringAGroupClaimsAgainBeforeTheSameGroup() {
        var machine = connected()
        _ = machine.next(now: start)
        machine.didTake(["a1", "b1"])
        #expect(machine.next(now: start) == .process(["a1", "b1"]))
        machine.didLoseConnection()
        #expect(machine.backlog == ["a1", "b1"])
        #expect(machine.next(now: start) == .connect(migrate: false))
        machine.didConnect()
        let turn = (0..<4).map { _ in machine.next(now: start) }
        #expect(turn == [.beginTurn, .compareClocks, .rebalance, .process(["a1", "b1"])])
    }

    /// A stop without PostgreSQL closes the queue, tries once at once (not after the backoff's wait) and exits.
    @Test func aStopWhileDisconnectedTriesOnceAndExits() {
        var machine = machine()
        #expect(machine.next(now: start) == .connect(migrate: true))
        machine.didFailToConnect(now: start)
        #expect(machine.next(now: start) == .wait(until: start + .milliseconds(200)))
        machine.stop()
        #expect(machine.next(now: start) == .closeQueue)
        #expect(machine.next(now: start) == .connect(migrate: true))
        machine.didFailToConnect(now: start)
        #expect(machine.next(now: start) == .exitWithoutDatabase)
    }

    /// A stop closes the queue, commits what is taken, then counts the last minutes and hands the sites over.
    @Test func aStopCommitsWhatIsQueuedThenFinishesAndHandsOver() {
        var machine = machine(finishZonesAtStop: true)
        _ = machine.next(now: start)
        machine.didConnect()
        _ = (0..<3).map { _ in machine.next(now: start) }
        #expect(machine.next(now: start) == .take(timeout: 0.1))
        machine.didTake(["a1"])
        machine.stop()
        #expect(machine.next(now: start) == .closeQueue)
        #expect(machine.next(now: start) == .process(["a1"]))
        machine.didProcess(1)
        // No rebalance while stopping (the connection's claim is done), a take that does not wait.
        #expect(machine.next(now: start + .seconds(2)) == .beginTurn)
        #expect(machine.next(now: start + .seconds(2)) == .take(timeout: 0))
        machine.didTake([])
        #expect(machine.next(now: start + .seconds(2)) == .finishZones)
        #expect(machine.next(now: start + .seconds(2)) == .handOverAndExit)
    }

    /// A sites file read while disconnected is applied at the next connection's first turn, after the leases'
    /// news and before the claims; one read mid-turn waits for the next turn; a newer read replaces an older.
    @Test func aSitesFileIsAppliedAtTheStartOfATurn() throws {
        let first = try SitesConfiguration.parse(testSites)
        let second = try SitesConfiguration.parse(testSites + "\n  - {id: east, zones: [{id: hall}], agents: [{id: east-a1, zone: hall}]}\n")
        var machine = machine()
        machine.sitesRead(first)
        machine.sitesRead(second)
        #expect(machine.next(now: start) == .connect(migrate: true))
        machine.didConnect()
        let turn = (0..<4).map { _ in machine.next(now: start) }
        #expect(turn == [.beginTurn, .applySites(second), .compareClocks, .rebalance])
        machine.sitesRead(first)
        #expect(machine.next(now: start) == .take(timeout: 0.1))
        machine.didTake([])
        #expect(machine.next(now: start) == .beginTurn)
        #expect(machine.next(now: start) == .applySites(first))
    }

    /// Sites left to claim after a rebalance's budget are claimed at the next turn, before the backlog's next
    /// group (a claim longer than its budget never waits for the backlog to empty).
    @Test func sitesLeftToClaimGoBeforeTheNextGroup() {
        var machine = connected()
        machine.didRebalance(moreToClaim: true)
        _ = machine.next(now: start)
        machine.didTake(["a1", "a2", "a3"])
        #expect(machine.next(now: start) == .process(["a1", "a2"]))
        machine.didProcess(2)
        let turn = (0..<3).map { _ in machine.next(now: start + .milliseconds(100)) }
        #expect(turn == [.beginTurn, .rebalance, .process(["a3"])])
    }

    /// The maintenance due comes after the take and before the group: expired days dropped before days made,
    /// compaction before folding, zones every second.
    @Test func maintenanceComesAfterTheTakeInItsOrder() {
        var machine = connected()
        let hour = start + .seconds(3600)
        #expect(machine.next(now: hour) == .take(timeout: 0.1))
        machine.didTake(["a1"])
        let turn = (0..<6).map { _ in machine.next(now: hour) }
        #expect(turn == [.dropExpiredPartitions, .makePartitionsAhead, .compactPacks, .foldBatches, .advanceZones, .process(["a1"])])
    }
}
