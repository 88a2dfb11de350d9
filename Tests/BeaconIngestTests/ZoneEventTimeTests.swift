import Testing

@testable import BeaconIngest

/// A site's event time as a value of its own: the watermark each interleaving of agents' batches allows.
@Suite struct ZoneEventTimeTests {
    typealias EventTime = SiteZoneTracker.EventTime
    let second: Int64 = 1_000_000
    let start: Int64 = 1_767_225_600_000_000
    let rules = ZoneRules()
    let lag = ZoneRules().historyLagMicros

    func readings(_ seconds: [Int64], beacon: String = "b") -> [SiteZoneTracker.BeaconReading] {
        seconds.map { SiteZoneTracker.BeaconReading(beaconID: beacon, timeMicros: start + $0 * second, rssi: -60) }
    }

    @Test func theWatermarkWaitsForEveryAgentsFirstBatchThenForTheSlowest() {
        var time = EventTime(agents: ["a1", "a2"])
        time.add(readings([1, 2, 3]), agentNumber: 0)
        time.progressed("a1", newestMicros: start + 3 * second, arrivalMicros: start + 3 * second)
        // a2 has sent nothing yet, within the first batch's wait: nothing moves.
        #expect(time.advance(nowMicros: start + 4 * second, rules: rules, countingLagMicros: lag) == nil)
        time.add(readings([1]), agentNumber: 1)
        time.progressed("a2", newestMicros: start + 1 * second, arrivalMicros: start + 4 * second)
        #expect(time.advance(nowMicros: start + 5 * second, rules: rules, countingLagMicros: lag) == start + 1 * second)
        let ready = time.takeReady(through: time.watermarkMicros)
        // In order of time, then agent: a1's and a2's readings at 1 s.
        #expect(ready.map(\.agentNumber) == [0, 1])
        #expect(time.pending.count == 2)
        // Behind the watermark: late, not queued.
        time.add(readings([0]), agentNumber: 1)
        #expect(time.lateReadings == 1 && time.pending.count == 2)
    }

    @Test func tooManyReadingsWaitingLetTheSlowestAgentGo() {
        var time = EventTime(agents: ["a1", "a2"])
        time.maximumPending = 3
        time.add(readings([1, 2, 3, 4]), agentNumber: 0)
        time.progressed("a1", newestMicros: start + 4 * second, arrivalMicros: start + 4 * second)
        time.progressed("a2", newestMicros: start, arrivalMicros: start + 4 * second)
        #expect(time.advance(nowMicros: start + 5 * second, rules: rules, countingLagMicros: lag) == start + 4 * second)
        #expect(time.takeReady(through: time.watermarkMicros).count == 4)
    }

    @Test func aDarkSiteGoesOnByTheIngestsClockUpToTwoMinutesPastTheCountingLag() {
        var time = EventTime(agents: ["a1"])
        time.progressed("a1", newestMicros: start, arrivalMicros: start)
        // Silent past the lateness by 10 s: the watermark is 10 s past the newest reading.
        let silent = start + rules.allowedLatenessMicros + 10 * second
        #expect(time.advance(nowMicros: silent, rules: rules, countingLagMicros: lag) == start + 10 * second)
        #expect(time.state(of: "a1", nowMicros: silent, newest: start, rules: rules).state == .letGo)
        // An hour later: no further than the counting lag and two minutes.
        let bound = start + lag + 120 * second
        #expect(time.advance(nowMicros: start + 3_600 * second, rules: rules, countingLagMicros: lag) == bound)
        #expect(time.advance(nowMicros: start + 7_200 * second, rules: rules, countingLagMicros: lag) == nil)
    }

    @Test func agentStatesAreReportedOncePerChange() {
        var time = EventTime(agents: ["a1", "a2"])
        time.progressed("a1", newestMicros: start, arrivalMicros: start)
        let first = time.stateChanges(site: "hq", agentIDs: ["a1", "a2"], nowMicros: start, rules: rules)
        #expect(first.count == 2)
        #expect(time.stateChanges(site: "hq", agentIDs: ["a1", "a2"], nowMicros: start + second, rules: rules).isEmpty)
        // a2 never heard past the first batch's wait: let go, once.
        let later = time.stateChanges(site: "hq", agentIDs: ["a1", "a2"], nowMicros: start + 31 * second, rules: rules)
        #expect(later.contains { if case .agentState(_, "a2", .letGo, _) = $0 { true } else { false } })
    }
}
