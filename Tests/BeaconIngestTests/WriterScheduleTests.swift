@testable import BeaconIngest
import Testing

@Suite struct WriterScheduleTests {
    let start = ContinuousClock.now

    func schedule() -> WriterSchedule {
        WriterSchedule(
            rebalanceInterval: .seconds(1), partitionMaintenanceInterval: .seconds(3600), compactionInterval: .seconds(300),
            now: start)
    }

    @Test func aNewConnectionClaimsSitesFirstWhateverTheBacklog() {
        var schedule = schedule()
        #expect(!schedule.dueBeforeIntake(now: start, backlogEmpty: false, stopping: false).rebalance)
        schedule.connected()
        #expect(schedule.dueBeforeIntake(now: start, backlogEmpty: false, stopping: false).rebalance)
        // Once: the next turn waits for the interval and an empty backlog.
        #expect(!schedule.dueBeforeIntake(now: start, backlogEmpty: true, stopping: false).rebalance)
    }

    /// A connection lost while stopping (a stalled transaction ended by the server, say): the new one claims the
    /// sites again, or what is queued and the last minutes would have no site to be committed for.
    @Test func aConnectionMadeWhileStoppingClaimsSitesToo() {
        var schedule = schedule()
        schedule.connected()
        #expect(schedule.dueBeforeIntake(now: start, backlogEmpty: true, stopping: true).rebalance)
        #expect(!schedule.dueBeforeIntake(now: start + .seconds(2), backlogEmpty: true, stopping: true).rebalance)
    }

    @Test func sitesAreSharedOutOnlyWhenIdleAndNotWhileStopping() {
        var schedule = schedule()
        let later = start + .seconds(2)
        #expect(!schedule.dueBeforeIntake(now: later, backlogEmpty: false, stopping: false).rebalance)
        #expect(!schedule.dueBeforeIntake(now: later, backlogEmpty: true, stopping: true).rebalance)
        #expect(schedule.dueBeforeIntake(now: later, backlogEmpty: true, stopping: false).rebalance)
        #expect(!schedule.dueBeforeIntake(now: later + .milliseconds(500), backlogEmpty: true, stopping: false).rebalance)
    }

    @Test func zonesMoveEverySecondPacksAreCompactedEveryFiveMinutesAndPartitionsAreKeptHourly() {
        var schedule = schedule()
        #expect(schedule.dueAfterIntake(now: start + .milliseconds(900)) == .init())
        #expect(schedule.dueAfterIntake(now: start + .seconds(1)) == .init(advanceZones: true))
        #expect(schedule.dueAfterIntake(now: start + .milliseconds(1500)) == .init())
        #expect(schedule.dueAfterIntake(now: start + .seconds(300)) == .init(compactPacks: true, advanceZones: true))
        #expect(schedule.dueAfterIntake(now: start + .seconds(301)) == .init(advanceZones: true))
        #expect(schedule.dueAfterIntake(now: start + .seconds(3600)) == .init(maintainPartitions: true, compactPacks: true, advanceZones: true))
    }

    /// The clocks are compared before anything queued is judged on a new connection, then every ten seconds
    /// whatever the backlog: a clock that jumps while batches keep coming is seen within the interval.
    @Test func clocksAreComparedAtEachConnectionThenEveryTenSecondsWhateverTheBacklog() {
        var schedule = schedule()
        func compares(_ at: Duration) -> Bool {
            schedule.dueBeforeIntake(now: start + at, backlogEmpty: false, stopping: false).compareClocks
        }
        #expect(!compares(.seconds(1)))
        schedule.connected()
        #expect(compares(.seconds(1)))
        #expect(!compares(.seconds(2)))
        #expect(!compares(.seconds(10)))
        #expect(compares(.seconds(11)))
        #expect(!compares(.seconds(12)))
    }

    /// Sites left to claim after a rebalance's budget are claimed at the next turn, after one group of the
    /// backlog: a site waiting for its claim must not wait for the backlog to empty (under load it may not).
    @Test func sitesLeftToClaimAreClaimedAtTheNextTurnWhateverTheBacklog() {
        var schedule = schedule()
        #expect(schedule.dueBeforeIntake(now: start + .seconds(1), backlogEmpty: true, stopping: false).rebalance)
        schedule.moreToClaim()
        #expect(schedule.dueBeforeIntake(now: start + .milliseconds(1100), backlogEmpty: false, stopping: false).rebalance)
        #expect(!schedule.dueBeforeIntake(now: start + .milliseconds(1200), backlogEmpty: false, stopping: false).rebalance)
        schedule.moreToClaim()
        #expect(!schedule.dueBeforeIntake(now: start + .milliseconds(1300), backlogEmpty: false, stopping: true).rebalance)
    }
}
