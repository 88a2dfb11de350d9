import AccuracyHarness
import Testing
import WorkQueue

/// Battery forecasts on a short simulated fleet: charge counting with the cell's own curve against the voltage's
/// trend the ingest used before, on the same transmissions, and against the targets.
@Suite struct BatteryFleetTests {
    /// (Seconds of computation: on a thread of its own, not the few threads of the cooperative pool.)
    @Test func chargeCountingKnowsTheEndsBetterThanTheVoltagesTrend() async throws {
        let scores = try await onThread {
            var fleet = BatteryFleet()
            fleet.beacons = 16
            fleet.days = 200
            fleet.seed = 7
            fleet.swapShare = 0.25
            return fleet.run()
        }
        let counting = try #require(scores.first { $0.method == "charge-and-voltage" && $0.group == "all" })
        let trend = try #require(scores.first { $0.method == "voltage-trend" && $0.group == "all" })
        #expect(counting.cellsEnded == trend.cellsEnded && counting.cellsEnded > 3)
        let countingError = try #require(counting.medianRelativeError)
        let trendError = try #require(trend.medianRelativeError)
        #expect(countingError < 0.5 * trendError, "\(countingError) against \(trendError)")
        #expect(counting.falseFlagDays <= trend.falseFlagDays)
        #expect(counting.swaps > 0 && counting.swapsFoundAtOnce == counting.swaps)
        // The targets, on this short fleet (16 beacons over 200 days, a quarter of the cells swapped; the figures
        // of fleets of 200 over 300 days are in BENCHMARKS.md): the median error at most a tenth of the life left
        // with 15-90 days left and 3 days under 15, every cell that ended flagged at least a week before, and no
        // cell flagged with months left.
        #expect(countingError <= 0.10, "\(countingError)")
        #expect(try #require(counting.medianShortError) <= 3)
        #expect(counting.flaggedLate == 0 && counting.falseFlagDays == 0)
        // The outdoor cells' forecast nights flag no cell later.
        let nights = try #require(scores.first { $0.method == BatteryFleet.withNightForecasts && $0.group == "all" })
        #expect(nights.flaggedLate <= counting.flaggedLate && nights.cellsEnded == counting.cellsEnded)
    }
}
