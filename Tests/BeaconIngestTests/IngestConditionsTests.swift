@testable import BeaconIngest
import LibPQ
import Testing

/// The conditions of the ingest's own side: its clock against the database's, and batches held back by the
/// database. Neither ever refuses a batch.
@Suite struct IngestConditionsTests {
    @Test func theOffsetIsTheDatabaseClockMinusTheMiddleOfTheRoundTrip() {
        var clocks = ClockComparison(toleranceMicros: 2_000_000)
        let r1 = clocks.measured(localBeforeMicros: 1_000_000, databaseMicros: 601_100_000, localAfterMicros: 1_200_000)
        #expect(r1 == .becameSkewed)
        #expect(clocks.offsetMicros == 600_000_000)
        #expect(clocks.skewed)
        // Still skewed: said once.
        let r2 = clocks.measured(localBeforeMicros: 2_000_000, databaseMicros: 602_000_000, localAfterMicros: 2_000_000)
        #expect(r2 == .none)
        // Back within the tolerance, either way.
        let r3 = clocks.measured(localBeforeMicros: 3_000_000, databaseMicros: 1_500_000, localAfterMicros: 3_000_000)
        #expect(r3 == .cameBack)
        #expect(clocks.offsetMicros == -1_500_000 && !clocks.skewed)
        let r4 = clocks.measured(localBeforeMicros: 3_000_000, databaseMicros: 700_000, localAfterMicros: 3_000_000)
        #expect(r4 == .becameSkewed)
    }

    /// A reading whose round trip was slow (a busy server, a stalled thread) says little about the offset.
    @Test func aSlowReadingIsNotUsed() {
        var clocks = ClockComparison(toleranceMicros: 2_000_000)
        let r5 = clocks.measured(localBeforeMicros: 0, databaseMicros: 100_000_000, localAfterMicros: 600_000)
        #expect(r5 == .none)
        #expect(clocks.offsetMicros == 0 && !clocks.skewed)
        let r6 = clocks.measured(localBeforeMicros: 10, databaseMicros: 100_000_000, localAfterMicros: 5)
        #expect(r6 == .none)
    }

    @Test func theIngestClockAddsTheMeasuredOffset() {
        let clock = IngestClock()
        let before = wallClockMicros()
        clock.set(offsetMicros: -600_000_000)
        let now = clock.nowMicros()
        #expect(now >= before - 600_000_000 && now < before - 590_000_000)
    }

    @Test func heldAgentsClearWhenTheyCommitOrAreNotHeardForLong() {
        let start = ContinuousClock.now
        let a1 = AgentKey(site: "hq", agent: "hq-a1")
        let a2 = AgentKey(site: "hq", agent: "hq-a2")
        var held = HeldBatches()
        let r7 = held.held(a1, now: start)
        #expect(r7)
        let r8 = held.held(a2, now: start + .seconds(1))
        #expect(!r8)
        let r9 = held.held(a1, now: start + .seconds(2))
        #expect(!r9)
        #expect(held.agents == [a1, a2])
        // Another agent's commit clears nothing of these.
        let r10 = held.committed([AgentKey(site: "hq", agent: "hq-a3")], now: start + .seconds(3))
        #expect(!r10)
        let r11 = held.committed([a1], now: start + .seconds(4))
        #expect(!r11)
        #expect(held.agents == [a2])
        // An agent never heard again is forgotten after `forgetAfter`.
        let r12 = held.committed([], now: start + .seconds(90))
        #expect(!r12)
        let r13 = held.committed([], now: start + .seconds(91))
        #expect(r13)
        #expect(held.agents.isEmpty)
        let r14 = held.committed([a1], now: start + .seconds(92))
        #expect(!r14)
    }

    /// What the database refuses for the batch's own data is refused; anything else is the database's state.
    @Test func onlyDataExceptionsAndConstraintViolationsAreAboutTheData() {
        for state in ["22021", "22P05", "23505", "23514"] { #expect(PostgresError("q", sqlState: state, "").isAboutTheData) }
        for state in ["55P03", "54000", "42501", "57014", "40001", "40P01", "XX000", "53100"] {
            #expect(!PostgresError("q", sqlState: state, "").isAboutTheData)
        }
        #expect(!PostgresError("q", "no SQLSTATE").isAboutTheData)
    }
}

/// One credential's new partition days: a bucket per agent, each day charged once.
@Suite struct PartitionDayBudgetTests {
    let start = ContinuousClock.now
    let flood = AgentKey(site: "hq", agent: "hq-a1")
    let other = AgentKey(site: "hq", agent: "hq-a2")

    @Test func anAgentBringsFourNewDaysAtOnceThenFourAMinute() {
        var budget = PartitionDayBudget()
        for day in Int64(0)..<4 {
            let admitted = budget.admit(flood, days: [day], now: start)
            #expect(admitted, "day \(day)")
        }
        let fifth = budget.admit(flood, days: [4], now: start)
        #expect(!fifth)
        // Another agent has a budget of its own.
        let others = budget.admit(other, days: [100], now: start)
        #expect(others)
        let refilled = budget.admit(flood, days: [4], now: start + .seconds(15))
        #expect(refilled)
        let tooSoon = budget.admit(flood, days: [5], now: start + .seconds(16))
        #expect(!tooSoon)
    }

    /// Today's backlog: every batch after the first brings a day already admitted, for any agent, for an hour.
    @Test func aDayAdmittedIsFreeForEveryAgentForAnHour() {
        var budget = PartitionDayBudget()
        let first = budget.admit(flood, days: [7], now: start)
        #expect(first)
        for index in 0..<100 {
            let again = budget.admit(index % 2 == 0 ? flood : other, days: [7], now: start + .milliseconds(Int64(index)))
            #expect(again)
        }
        // An hour on, the day costs a token again: with it and three more the bucket is empty.
        let later = start + .seconds(3601)
        let afterAnHour = budget.admit(flood, days: [7], now: later)
        for day in Int64(10)..<13 { _ = budget.admit(flood, days: [day], now: later) }
        let spent = budget.admit(flood, days: [20], now: later)
        #expect(afterAnHour && !spent)
    }

    /// A batch spanning more days than the burst goes alone once the bucket is full, so it is never stuck.
    @Test func aBatchOfManyDaysGoesOnceTheBucketIsFull() {
        var budget = PartitionDayBudget()
        let wide = budget.admit(flood, days: Set(0..<30), now: start)
        #expect(wide)
        let next = budget.admit(flood, days: [40], now: start)
        #expect(!next)
    }
}

/// One credential's sightings a second: two batches of the wire's largest at once, then the rate.
@Suite struct SightingBudgetTests {
    let start = ContinuousClock.now
    let flood = AgentKey(site: "hq", agent: "hq-a1")
    let other = AgentKey(site: "s2", agent: "s2-a1")

    @Test func anAgentBringsTwoLargestBatchesAtOnceThenItsRate() {
        var budget = SightingBudget(perSecond: 20_000)
        let burst = [budget.admit(flood, sightings: 100_000, now: start), budget.admit(flood, sightings: 100_000, now: start)]
        #expect(burst == [true, true])
        let third = budget.admit(flood, sightings: 100_000, now: start)
        #expect(!third)
        // Another agent, on any site, has a budget of its own.
        let others = budget.admit(other, sightings: 100_000, now: start)
        #expect(others)
        // Five seconds refill a batch of the largest; an agent's ordinary batches go on all the while.
        let tooSoon = budget.admit(flood, sightings: 100_000, now: start + .seconds(4))
        let refilled = budget.admit(flood, sightings: 100_000, now: start + .seconds(5))
        #expect(!tooSoon && refilled)
        var ordinary = SightingBudget(perSecond: 20_000)
        let steady = (0..<600).allSatisfy { ordinary.admit(other, sightings: 1_000, now: start + .milliseconds(Int64($0) * 100)) }
        #expect(steady, "10,000 sightings a second for a minute")
    }

    @Test func aBatchLargerThanTheBurstGoesOnceTheBucketIsFull() {
        var budget = SightingBudget(perSecond: 1_000, burst: 5_000)
        let large = budget.admit(flood, sightings: 8_000, now: start)
        let next = budget.admit(flood, sightings: 1, now: start)
        #expect(large && !next)
    }
}

/// The writer's turns: one message of each agent at a time, each agent's in arrival order.
@Suite struct FairTurnsTests {
    @Test func aFloodFromOneAgentHoldsAnotherBackByOneBatch() {
        let arrived = (1...20).map { "flood \($0)" } + ["quiet 1"] + (21...22).map { "flood \($0)" } + ["quiet 2", "other 1"]
        let ordered = FairTurns.interleave(arrived) { String($0.split(separator: " ")[0]) }
        #expect(ordered.prefix(5) == ["flood 1", "quiet 1", "other 1", "flood 2", "quiet 2"])
        #expect(ordered.filter { $0.hasPrefix("flood") } == (1...22).map { "flood \($0)" })
        #expect(ordered.count == arrived.count)
        #expect(FairTurns.interleave(["a 1", "a 2"]) { String($0.prefix(1)) } == ["a 1", "a 2"])
    }
}

/// Live instances that take no site while one waits free are left out of the share.
@Suite struct IdleInstancesTests {
    let start = ContinuousClock.now

    @Test func anInstanceHoldingNothingWhileASiteWaitsIsLeftOutUntilItHoldsOne() {
        var idle = IdleInstances(patience: .seconds(5), exclusion: .seconds(300))
        let others = ["b": 0, "c": 2]
        // A site free for less than the patience: a new instance has time to take it.
        #expect(idle.observe(others: others, free: ["east"], now: start) == others)
        #expect(idle.observe(others: others, free: ["east"], now: start + .seconds(4)) == others)
        #expect(idle.observe(others: others, free: ["east"], now: start + .seconds(6)) == ["c": 2])
        // Still out once nothing is free, until it holds a site.
        #expect(idle.observe(others: others, free: [], now: start + .seconds(7)) == ["c": 2])
        #expect(idle.observe(others: ["b": 1, "c": 2], free: [], now: start + .seconds(8)) == ["b": 1, "c": 2])
        // A site taken within the patience leaves nobody out.
        #expect(idle.observe(others: ["b": 0, "c": 2], free: ["west"], now: start + .seconds(9)) == ["b": 0, "c": 2])
        #expect(idle.observe(others: ["b": 0, "c": 2], free: [], now: start + .seconds(10)) == ["b": 0, "c": 2])
    }

    @Test func anExclusionEndsAfterItsTime() {
        var idle = IdleInstances(patience: .seconds(5), exclusion: .seconds(300))
        _ = idle.observe(others: ["b": 0], free: ["east"], now: start)
        #expect(idle.observe(others: ["b": 0], free: ["east"], now: start + .seconds(6)).isEmpty)
        #expect(idle.observe(others: ["b": 0], free: [], now: start + .seconds(200)).isEmpty)
        #expect(idle.observe(others: ["b": 0], free: [], now: start + .seconds(307)) == ["b": 0])
    }
}
