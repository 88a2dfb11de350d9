import BeaconBatteries
@testable import BeaconIngest
import BeaconSimulation
import BeaconWire
import Testing

/// `beacon_health`'s battery forecast: TLM beacons forecast from their counters and voltage, with an interval and a
/// date to replace them by, not flagged by a cold night; beacons with a voltage or percent only keep the trend.
@Suite struct BatteryForecastTests {
    static let hour: Int64 = 3_600_000_000
    let start: Int64 = 1_767_225_600_000_000
    let beaconID = "eddystone:0102030405060708090a:0000000000a1"

    /// A CR2032 beacon advertising every 200 ms, its TLM heard once an hour.
    struct Beacon {
        var cell: SimulatedCell
        var count = 0.0
        var uptime = 0.0

        init(chargeLeft: Double, seed: UInt64) {
            var random = SeededGenerator(seed: seed)
            cell = SimulatedCell(chemistry: .cr2032, transmitPowerDbm: 0, chargeLeft: chargeLeft, random: &random)
            // Running on this cell since it was fitted, without a reboot.
            uptime = cell.usedMilliampHours * 3.6e6 / (cell.chargePerAdvertMicrocoulombs / 0.2 + cell.sleepMicroamps)
            count = uptime / 0.2
        }

        mutating func hour() {
            cell.use(seconds: 3600, adverts: 3600 / 0.2)
            count += 3600 / 0.2
            uptime += 3600
        }

        func row(_ time: Int64, beaconID: String, celsius: Double) -> TelemetryRow {
            TelemetryRow(
                timeMicros: time, siteID: "hq", agentID: "hq-a1", beaconID: beaconID,
                batteryMillivolts: Int32((cell.loadedVolts(celsius: celsius) * 1000).rounded()), temperatureCelsius: celsius,
                advertisingCount: UInt32(count), uptimeSeconds: uptime)
        }

        /// Hours until the beacon stops at `celsius`.
        func hoursLeft(celsius: Double) -> Int {
            var future = self
            var hours = 0
            while future.cell.powers(celsius: celsius), hours < 24 * 3650 {
                future.hour()
                hours += 1
            }
            return hours
        }
    }

    /// The health of the beacon fed `hours` of TLM, charge counting and the trend side by side.
    func run(_ beacon: inout Beacon, hours: Int, from first: Int = 0, celsius: (Int) -> Double, into health: inout [FleetHealth]) {
        for index in first..<(first + hours) {
            beacon.hour()
            let row = beacon.row(start + Int64(index) * Self.hour, beaconID: beaconID, celsius: celsius(index))
            for part in health.indices { health[part].telemetry(row, rebooted: false) }
        }
    }

    /// Charge counting, and the trend as it was: a straight line in volts, flagged at 2400 mV.
    var bothMethods: [FleetHealth] {
        var trend = FleetHealth.Configuration()
        trend.chargeCounting = false
        trend.trendOnCurve = false
        trend.lowBatteryMillivolts = 2400
        var counting = FleetHealth()
        counting.batteries[beaconID] = BatteryDescription(chemistry: .cr2032)
        return [counting, FleetHealth(configuration: trend)]
    }

    @Test func aTLMBeaconIsForecastFromItsCountersWithAnIntervalAndADateToReplaceItBy() throws {
        var beacon = Beacon(chargeLeft: 0.5, seed: 3)
        var health = bothMethods
        run(&beacon, hours: 20 * 24, celsius: { _ in 21 }, into: &health)
        let counted = try #require(health[0].health(of: beaconID))
        let forecast = try #require(counted.forecast)
        #expect(forecast.method == .chargeCounting)
        let days = try #require(counted.estimatedDaysLeft)
        let low = try #require(forecast.daysLeftLow)
        let high = try #require(forecast.daysLeftHigh)
        #expect(low <= days && days <= high)
        let truth = Double(beacon.hoursLeft(celsius: 21)) / 24
        #expect(low <= truth && truth <= high, "\(low)-\(high) against \(truth)")
        #expect(abs(days - truth) < 0.35 * truth, "\(days) against \(truth)")
        let lastReading = start + Int64(20 * 24 - 1) * Self.hour
        #expect(forecast.replaceByMicros == lastReading + FleetHealth.micros(days: low))
        #expect(forecast.cellSinceMicros == start)
        #expect(try #require(forecast.chargeLeft) > 0.2)
        #expect(counted.status == .ok)
        // The trend, on the same transmissions: on the plateau it has no idea (a flat or rising slope), or a wrong one.
        let trend = try #require(health[1].health(of: beaconID))
        #expect(trend.forecast?.method ?? .voltageTrend == .voltageTrend)
        #expect(trend.estimatedDaysLeft.map { abs($0 - truth) > abs(days - truth) } ?? true)
    }

    @Test func theCutoffIsTheBeaconsBrownOut() throws {
        var beacon = Beacon(chargeLeft: 0.3, seed: 4)
        var higher = FleetHealth.Configuration()
        higher.cutoffMillivolts = 2400
        var health = [FleetHealth(), FleetHealth(configuration: higher)]
        run(&beacon, hours: 5 * 24, celsius: { _ in 21 }, into: &health)
        let atDefault = try #require(health[0].health(of: beaconID)?.estimatedDaysLeft)
        let atHigher = try #require(health[1].health(of: beaconID)?.estimatedDaysLeft)
        // A radio that browns out at 2.4 V under load stops well before the cell is spent.
        #expect(atHigher < 0.8 * atDefault, "\(atHigher) against \(atDefault)")
    }

    @Test func aColdNightDoesNotFlagACellWithMonthsLeftButItsLastWeeksDo() throws {
        var beacon = Beacon(chargeLeft: 0.6, seed: 5)
        var voltageOnly = FleetHealth.Configuration()
        voltageOnly.chargeCounting = false
        var health = bothMethods + [FleetHealth(configuration: voltageOnly)]
        // Two weeks indoors, then a night at -18 °C: a coin cell on its plateau reads under 2.4 V under load, and
        // still runs.
        run(&beacon, hours: 14 * 24, celsius: { _ in 21 }, into: &health)
        run(&beacon, hours: 8, from: 14 * 24, celsius: { _ in -18 }, into: &health)
        let coldReading = try #require(beacon.row(0, beaconID: beaconID, celsius: -18).batteryMillivolts)
        #expect(coldReading < 2400 && coldReading > 2000, "\(coldReading)")
        #expect(health[1].health(of: beaconID)?.status == .lowBattery)
        // A beacon reporting that voltage alone is flagged only nearer its end (2200 mV).
        #expect(coldReading > 2200 && health[2].health(of: beaconID)?.status == .ok)
        let cold = try #require(health[0].health(of: beaconID))
        #expect(cold.status == .ok, "\(cold)")
        // Months left indoors; fewer should such nights come again (the cold end of the week's temperatures).
        let truth = Double(beacon.hoursLeft(celsius: 21)) / 24
        #expect(truth > 60 && cold.estimatedDaysLeft.map { $0 > 30 } == true, "\(cold) truth \(truth)")
        // Back indoors until three weeks are left: flagged, a week or more before the end.
        let left = beacon.hoursLeft(celsius: 21)
        run(&beacon, hours: left - 21 * 24, from: 14 * 24 + 8, celsius: { _ in 21 }, into: &health)
        let end = try #require(health[0].health(of: beaconID))
        #expect(end.status == .lowBattery, "\(end)")
        #expect(abs(try #require(end.estimatedDaysLeft) - 21) < 7, "\(end)")
    }

    @Test func aFreshCellStartsTheForecastAgain() throws {
        var beacon = Beacon(chargeLeft: 0.15, seed: 7)
        var health = bothMethods
        run(&beacon, hours: 5 * 24, celsius: { _ in 21 }, into: &health)
        let before = try #require(health[0].health(of: beaconID)?.forecast)
        // A technician fits a fresh cell: the beacon boots again.
        var random = SeededGenerator(seed: 8)
        beacon.cell = SimulatedCell(chemistry: .cr2032, transmitPowerDbm: 0, chargeLeft: 1, random: &random)
        beacon.count = 0
        beacon.uptime = 0
        run(&beacon, hours: 1, from: 5 * 24, celsius: { _ in 21 }, into: &health)
        let after = try #require(health[0].health(of: beaconID)?.forecast)
        #expect(after.cellSinceMicros == start + Int64(5 * 24) * Self.hour)
        let freshLeft = try #require(after.chargeLeft)
        let oldLeft = try #require(before.chargeLeft)
        #expect(freshLeft > 0.95 && oldLeft < 0.3)
        #expect(after.replaceByMicros > before.replaceByMicros + 100 * 86_400_000_000)
    }

    @Test func beaconsWithAVoltageOrAPercentOnlyKeepTheTrend() throws {
        var straight = FleetHealth.Configuration()
        straight.trendOnCurve = false
        var health = FleetHealth(configuration: straight)
        for day in 0..<7 {
            let time = start + Int64(day) * 24 * Self.hour
            health.reading(SensorReading(quantity: "battery_voltage", value: 3000 - Double(day) * 10, unit: SensorUnit.millivolt), beaconID: "ruuvi", siteID: "hq", timeMicros: time)
            health.reading(SensorReading(quantity: "battery", value: 90 - Double(day), unit: SensorUnit.percent), beaconID: "bthome", siteID: "hq", timeMicros: time)
        }
        let voltage = try #require(health.health(of: "ruuvi")?.forecast)
        #expect(voltage.method == .voltageTrend && voltage.daysLeftLow == nil)
        // In a straight line, 2940 mV falling 10 mV a day: 94 days to 2000 mV.
        #expect(abs(Double(voltage.replaceByMicros - (start + 6 * 24 * Self.hour)) / 86_400_000_000 - 94) < 1)
        // 84 % falling 1 % a day: 84 days to 0 %.
        let percent = try #require(health.health(of: "bthome"))
        #expect(percent.forecast?.method == .percentTrend)
        #expect(abs(try #require(percent.estimatedDaysLeft) - 84) < 1)
    }

    @Test func aVoltageAboveItsCurveHasNoForecastAlongIt() throws {
        // 3.3 V falling 10 mV a day: above a coin cell's curve (a cell of another chemistry), so no share to follow.
        var health = FleetHealth()
        for day in 0..<7 {
            health.reading(
                SensorReading(quantity: "battery_voltage", value: 3300 - Double(day) * 10, unit: SensorUnit.millivolt), beaconID: "ruuvi",
                siteID: "hq", timeMicros: start + Int64(day) * 24 * Self.hour)
        }
        let beacon = try #require(health.health(of: "ruuvi"))
        #expect(beacon.batteryTrendMillivoltsPerDay.map { abs($0 + 10) < 0.5 } == true)
        #expect(beacon.estimatedDaysLeft == nil && beacon.status == .ok)
    }

    @Test(arguments: [0.6, 0.9])
    func aVoltageReadInTheColdIsTakenOnTheCurveUnderLoadThere(chargeLeft: Double) throws {
        // A coin cell in a fridge at 4 °C, its beacon reporting its voltage and temperature (Ruuvi, ATC/pvvx): under
        // a burst it reads 200-300 mV below its voltage at rest, as it will when it stops.
        var beacon = Beacon(chargeLeft: chargeLeft, seed: 5)
        var straight = FleetHealth.Configuration()
        straight.trendOnCurve = false
        var health = [FleetHealth(), FleetHealth(configuration: straight)]
        for hour in 0..<(7 * 24) {
            beacon.hour()
            let time = start + Int64(hour) * Self.hour
            let millivolts = (beacon.cell.loadedVolts(celsius: 4) * 1000).rounded()
            for part in health.indices {
                health[part].reading(SensorReading(quantity: "temperature", value: 4, unit: SensorUnit.celsius), beaconID: "ruuvi", siteID: "hq", timeMicros: time)
                health[part].reading(
                    SensorReading(quantity: "battery_voltage", value: millivolts, unit: SensorUnit.millivolt), beaconID: "ruuvi", siteID: "hq", timeMicros: time)
            }
        }
        let truth = Double(beacon.hoursLeft(celsius: 4)) / 24
        let onCurve = try #require(health[0].health(of: "ruuvi")?.estimatedDaysLeft)
        #expect(abs(onCurve - truth) < 0.25 * truth, "\(onCurve) against \(truth)")
        let line = try #require(health[1].health(of: "ruuvi")?.estimatedDaysLeft)
        #expect(abs(line - truth) > 2 * abs(onCurve - truth), "\(line) against \(truth)")
    }

    @Test(arguments: [0.3, 0.45, 0.6])
    func aVoltageAloneIsExtrapolatedAlongItsChemistrysCurve(chargeLeft: Double) throws {
        // A coin cell whose beacon reports its voltage alone (Ruuvi, ATC/pvvx), a week of it an hour at a time.
        var beacon = Beacon(chargeLeft: chargeLeft, seed: 5)
        var straight = FleetHealth.Configuration()
        straight.trendOnCurve = false
        var health = [FleetHealth(), FleetHealth(configuration: straight)]
        for part in health.indices { health[part].batteries["ruuvi"] = BatteryDescription(chemistry: .cr2032) }
        for hour in 0..<(7 * 24) {
            beacon.hour()
            let millivolts = (beacon.cell.loadedVolts(celsius: 21) * 1000).rounded()
            for part in health.indices {
                health[part].reading(
                    SensorReading(quantity: "battery_voltage", value: millivolts, unit: SensorUnit.millivolt), beaconID: "ruuvi", siteID: "hq",
                    timeMicros: start + Int64(hour) * Self.hour)
            }
        }
        let truth = Double(beacon.hoursLeft(celsius: 21)) / 24
        let onCurve = try #require(health[0].health(of: "ruuvi")?.estimatedDaysLeft)
        #expect(abs(onCurve - truth) < 0.4 * truth, "\(onCurve) against \(truth)")
        // A straight line in volts takes the plateau's slow fall for the rest of the cell's life.
        let line = try #require(health[1].health(of: "ruuvi")?.estimatedDaysLeft)
        #expect(abs(line - truth) > 2 * abs(onCurve - truth), "\(line) against \(truth)")
    }
}
