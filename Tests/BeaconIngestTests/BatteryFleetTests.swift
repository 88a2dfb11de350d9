import AccuracyHarness
import Testing
import WorkQueue

/// Battery forecasts on a short simulated fleet: charge counting with the cell's own curve against the voltage's
/// trend the views use today, on the same transmissions.
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
    }
}
