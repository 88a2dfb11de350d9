import BeaconBatteries
@testable import BeaconIngest
import BeaconSimulation
import BeaconWire
import Testing
import WorkQueue

/// A beacon's battery state saved and restored (`FleetHealth.takeToSave`, `restore`): an ingest that restarts, or
/// another taking the site over, forecasts as the one that heard the beacon throughout.
@Suite struct BatteryStateTests {
    typealias Beacon = BatteryForecastTests.Beacon
    let forecasts = BatteryForecastTests()
    var beaconID: String { forecasts.beaconID }

    /// The battery parts of a beacon's health: what a restored state must give exactly.
    func battery(_ health: BeaconHealth?) -> [String] {
        guard let health else { return [] }
        return [
            "\(health.estimatedDaysLeft as Double?)", "\(health.forecast as BatteryForecast?)", "\(health.batteryTrendMillivoltsPerDay as Double?)",
            "\(health.rebootsIn7Days)", "\(health.status)",
        ]
    }

    static let day = 24
    /// Warm days and frosty nights.
    static func celsius(_ hour: Int) -> Double { hour % 24 < 12 ? 18 : -2 }

    /// Ten days of a coin cell, with a reboot on day 8, and what its ingest saved of it.
    func tenDays(_ beacon: inout Beacon) -> (health: FleetHealth, saved: [SavedBatteryState]) {
        var health = [forecasts.bothMethods[0]]
        forecasts.run(&beacon, hours: 8 * Self.day, celsius: Self.celsius, into: &health)
        beacon.count = 0
        beacon.uptime = 0
        forecasts.run(&beacon, hours: 2 * Self.day, from: 8 * Self.day, celsius: Self.celsius, into: &health)
        let saved = health[0].takeToSave()
        return (health[0], saved)
    }

    /// A second instance restored from what the first saved by day 10 forecasts as the first to day 20; one that
    /// starts afresh does not.
    @Test func aRestoredStateForecastsAsIfTheIngestNeverStopped() throws {
        var beacon = Beacon(chargeLeft: 0.35, seed: 21)
        let (first, saved) = tenDays(&beacon)
        #expect(saved.map(\.beaconID) == [beaconID])
        let bytes = try #require(saved.first?.bytes.count)
        #expect(bytes < 2_500, "\(bytes) bytes")
        var restored = forecasts.bothMethods[0]
        #expect(restored.restore(saved) == 0)
        var all = [first, restored, forecasts.bothMethods[0]]
        forecasts.run(&beacon, hours: 10 * Self.day, from: 10 * Self.day, celsius: Self.celsius, into: &all)
        let throughout = all[0].health(of: beaconID)
        #expect(throughout?.forecast?.method == .chargeCounting && throughout?.rebootsIn7Days == 0)
        #expect(battery(all[1].health(of: beaconID)) == battery(throughout))
        let afresh = all[2].health(of: beaconID)
        #expect(battery(afresh) != battery(throughout))
        #expect(afresh?.forecast?.cellSinceMicros == forecasts.start + Int64(10 * Self.day) * BatteryForecastTests.hour)
        #expect(all[1].health(of: beaconID)?.forecast?.cellSinceMicros == forecasts.start)
    }

    /// A state cut short, of another version or with any byte changed is counted or read as values in range: never
    /// a trap, and a beacon whose state could not be read starts afresh.
    @Test func aDamagedStateIsCountedAndItsBeaconStartsAfresh() async throws {
        // Seconds of computation (a curve fitted for each changed byte): on a thread of its own.
        try await onThread { try Self().damagedStates() }
    }

    func damagedStates() throws {
        var beacon = Beacon(chargeLeft: 0.5, seed: 22)
        let (_, saved) = tenDays(&beacon)
        let state = try #require(saved.first)
        let next = beacon.row(forecasts.start + Int64(10 * Self.day) * BatteryForecastTests.hour, beaconID: beaconID, celsius: 18)
        for length in 0..<state.bytes.count {
            var cut = state
            cut.bytes = Array(state.bytes.prefix(length))
            var health = forecasts.bothMethods[0]
            #expect(health.restore([cut]) == 1, "cut to \(length) bytes")
        }
        var otherVersion = state
        otherVersion.bytes[0] = 4
        var health = forecasts.bothMethods[0]
        #expect(health.restore([otherVersion]) == 1)
        health.telemetry(next, rebooted: false)
        #expect(health.health(of: beaconID)?.forecast?.cellSinceMicros == next.timeMicros)
        for index in state.bytes.indices {
            var changed = state
            changed.bytes[index] ^= 0xFF
            var health = forecasts.bothMethods[0]
            _ = health.restore([changed])
            health.telemetry(next, rebooted: false)
            #expect(health.health(of: beaconID) != nil)
        }
    }

    /// States saved before the cell's own sag was kept (version 2: the same without the voltage as read and the
    /// sag's sums) and before the season's course was (version 1: without its 81 bytes too) are read, and their
    /// beacon goes on counting from them; what they lack is learned again from the readings that follow.
    @Test(arguments: [UInt8(1), 2])
    func aStateOfAnEarlierVersionIsRead(version: UInt8) throws {
        var beacon = Beacon(chargeLeft: 0.5, seed: 24)
        let (_, saved) = tenDays(&beacon)
        var state = try #require(saved.first)
        #expect(state.bytes[0] == 3)
        let sag = 9 + 8 * CellSag.sumCount
        state.bytes = [version] + state.bytes.dropFirst().dropLast(version == 1 ? sag + 81 : sag)
        var health = forecasts.bothMethods[0]
        #expect(health.restore([state]) == 0)
        let next = beacon.row(forecasts.start + Int64(10 * Self.day) * BatteryForecastTests.hour, beaconID: beaconID, celsius: 18)
        health.telemetry(next, rebooted: false)
        #expect(health.health(of: beaconID)?.forecast?.cellSinceMicros == forecasts.start)
    }

    /// A beacon first heard in a transaction rolled back takes the restored state again when heard next; once
    /// committed, the restored state is let go.
    @Test func aStateTakenInARolledBackTransactionIsTakenAgain() throws {
        var beacon = Beacon(chargeLeft: 0.5, seed: 23)
        let (_, saved) = tenDays(&beacon)
        var health = forecasts.bothMethods[0]
        #expect(health.restore(saved) == 0)
        let next = beacon.row(forecasts.start + Int64(10 * Self.day) * BatteryForecastTests.hour, beaconID: beaconID, celsius: 18)
        health.beginTransaction()
        health.telemetry(next, rebooted: false)
        #expect(health.health(of: beaconID)?.forecast?.cellSinceMicros == forecasts.start)
        health.rollbackTransaction()
        #expect(health.health(of: beaconID) == nil)
        health.beginTransaction()
        health.telemetry(next, rebooted: false)
        health.commitTransaction()
        #expect(health.health(of: beaconID)?.forecast?.cellSinceMicros == forecasts.start)
        #expect(health.restoring.isEmpty)
    }

    /// A beacon held here with newer news than the saved state keeps its own.
    @Test func aNewerStateHeldHereIsKept() throws {
        var beacon = Beacon(chargeLeft: 0.5, seed: 24)
        let (_, saved) = tenDays(&beacon)
        var health = forecasts.bothMethods[0]
        let next = beacon.row(forecasts.start + Int64(10 * Self.day) * BatteryForecastTests.hour, beaconID: beaconID, celsius: 18)
        health.telemetry(next, rebooted: false)
        #expect(health.restore(saved) == 0)
        #expect(health.health(of: beaconID)?.forecast?.cellSinceMicros == next.timeMicros)
    }
}
