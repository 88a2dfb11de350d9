import BeaconBatteries
import BeaconIngest
import BeaconSimulation
import BeaconWire
import Foundation

/// A simulated fleet's batteries over months, and how well battery forecasts knew their ends: the ingest's fleet
/// health (`FleetHealth`) forecasting from charge counting and the voltage curve, the same with the outdoor sites'
/// night forecasts read as `battery_replacements` reads them, the trend of the voltage the ingest used before
/// (its Theil-Sen slope in a straight line to 2000 mV, flagged at 2400 mV), the trend the ingest now gives a beacon
/// without TLM counters (the same slope along the chemistry's curve), each fed the fleet's TLM, and the trend of a
/// percent (to 0 %) fed what a beacon that reports only a percent would send (`reportedPercent`), scored against
/// when each cell really stopped its beacon.
///
/// Each beacon has a cell of a chemistry (half CR2032, a quarter CR2477, 15 % two lithium AA, 10 % a CR2032 the
/// sites file does not name), a transmit power, an advertising interval (100 ms to 1 s) and a place: indoors
/// (21 °C, ±1.5 °C a day), a cold room (12 °C, ±3 °C a day, ±4 °C a year) or outdoors, where the temperature is
/// one of ten weather stations' recorded year (`OutdoorWeather`), from a day of it drawn for the beacon; its cell
/// starts with 10-100 % of its charge (a fleet's cells are of all ages). A share of beacons get a fresh cell at a
/// random time (their counters restart, or for half of them go on), and every beacon reboots about once in 100
/// days. Deterministic for its seed.
///
/// Beside the fleet, `restartedShare` more beacons are alike but for their counters, which restarted at a random
/// time of their cell's use before the forecasts first heard them (a reboot on a used cell: a configuration
/// change, a watchdog, a cold night): the counted charge leaves out what the cell gave before. They are scored in
/// their group alone (`restartedGroup`), so that the fleet's figures stay those of cells counted from their start.
public struct BatteryFleet: Sendable {
    public var beacons = 200
    public var days = 300
    public var seed: UInt64 = 1
    /// The share of beacons whose cell is swapped during the run.
    public var swapShare = 0.05
    /// The share of beacons, beside `beacons`, first heard with counters restarted on a used cell.
    public var restartedShare = 0.1
    /// The group the beacons with counters restarted before first heard are scored in.
    public static let restartedGroup = "counters restarted before first heard"
    /// How often a beacon's TLM reaches the forecasts, seconds (real beacons send it every few seconds; an hour
    /// keeps months of a fleet in seconds of computing, and the forecasts need no more).
    public var telemetryIntervalSeconds = 3600.0
    /// A forecast flags its cell for replacement when it leaves fewer days than this: `FleetHealth`'s
    /// `lowBatteryDays`, whose `low_battery` status is the flag.
    public var flagDays: Double { FleetHealth.Configuration().lowBatteryDays }
    /// When the run starts, Unix µs: each TLM transmission is dated this much plus its second into the run (and
    /// 2 ms for each beacon before it).
    public var startMicros: Int64 = 1_735_689_600_000_000
    /// How many nights the sites' weather forecasts cover, from the day each is issued.
    public var nightForecastNights = 10

    public init() {}

    /// What the run tells an observer, beacon by beacon: a beacon and the cell the sites file names for it (nil for
    /// one it does not name), each TLM transmission as the beacon sends it, and the charge-counting forecast's
    /// `beacon_health` after the beacon's last transmission.
    public struct Observer {
        public var beacon: (_ beaconID: String, _ named: BatteryDescription?) -> Void = { _, _ in }
        public var transmission: (_ beaconID: String, _ micros: Int64, _ tlm: EddystoneTLM) -> Void = { _, _, _ in }
        public var finished: (_ health: BeaconHealth?) -> Void = { _ in }

        public init() {}
    }

    /// The id of the fleet's beacon `index`: an Eddystone-UID, as its identity frames give it.
    public static func beaconID(_ index: Int) -> String {
        EddystoneUID(txPower: 0, namespace: namespace, instance: instance(index)).beaconID
    }

    static let namespace: [UInt8] = [0xF1, 0xEE, 0x70, 0, 0, 0, 0, 0, 0, 0x01]

    static func instance(_ index: Int) -> [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: UInt64(index) >> (8 * (5 - $0))) }
    }

    /// The scores of one method on one chemistry (or all).
    public struct Score: Sendable {
        public var method: String
        /// A chemistry as the sites file names it, a place, or "all".
        public var group: String
        /// |forecast − truth| / truth on the days 15-90 days remained; |forecast − truth| (days) on those fewer
        /// than 15 remained.
        public var relativeErrors: [Double] = []
        public var shortErrors: [Double] = []
        /// Days some cell had no forecast at all (15-90 days left).
        public var daysWithout = 0
        /// Cells that stopped their beacon within the run, at least two weeks after the forecasts first heard them.
        public var cellsEnded = 0
        /// Cells first flagged less than 7 days before their end, or never.
        public var flaggedLate = 0
        /// Of them, those stopped by a cold night with at least `chargeLeftInTheCold` of their charge left: cells
        /// that run again once it is warmer.
        public var flaggedLateInTheCold = 0
        /// For each of those, how much warmer the night that stopped it was than the coldest night it carried as
        /// forecast a week before its end (`coldest_carried_c`), °C: above 0, the stop came at a night the forecast
        /// said it would carry.
        public var coldStopsMisjudged: [Double] = []
        /// Beacon-days flagged while more than twice `flagDays` remained.
        public var falseFlagDays = 0
        /// Swaps a reading can show (the new cell reads at least as far above the old one as the forecast's rule
        /// asks: `BatteryLife.swapRiseVolts` when the counters restart, `swapRiseWithoutRebootVolts` when they go
        /// on), those of them found at the first transmission after, and the swaps no reading can show (a cell
        /// barely used, swapped for a fresh one).
        public var swaps = 0
        public var swapsFoundAtOnce = 0
        public var swapsHidden = 0

        public init(method: String, group: String) {
            self.method = method
            self.group = group
        }

        /// Another run's scores of the same method and chemistry added to these.
        public mutating func add(_ other: Score) {
            relativeErrors += other.relativeErrors
            shortErrors += other.shortErrors
            daysWithout += other.daysWithout
            cellsEnded += other.cellsEnded
            flaggedLate += other.flaggedLate
            flaggedLateInTheCold += other.flaggedLateInTheCold
            coldStopsMisjudged += other.coldStopsMisjudged
            falseFlagDays += other.falseFlagDays
            swaps += other.swaps
            swapsFoundAtOnce += other.swapsFoundAtOnce
            swapsHidden += other.swapsHidden
        }

        public var medianRelativeError: Double? { AccuracyScore.median(relativeErrors) }
        public var medianShortError: Double? { AccuracyScore.median(shortErrors) }
    }

    private struct Beacon {
        var chemistry: BatteryChemistry
        var named: Bool
        var transmitPowerDbm: Double
        var intervalSeconds: Double
        var place: Int
        var phase: Double
        /// Outdoors: the weather station, and the day of its record the run starts on.
        var station: Int
        var recordDay: Double
        var swapAtDay: Double?
        var swapKeepsCounters: Bool
        var rebootDays: [Double]
    }

    /// Runs the fleet; the scores of both methods per chemistry, per place, then over all.
    public func run(observer: Observer = Observer()) -> [Score] {
        var random = SeededGenerator(seed: seed)
        var scores: [String: Score] = [:]
        var place = ""
        var restarted = false
        func score(_ method: String, _ chemistry: String, _ update: (inout Score) -> Void) {
            for key in restarted ? [Self.restartedGroup] : [chemistry, place, "all"] {
                var entry = scores[method + "/" + key] ?? Score(method: method, group: key)
                update(&entry)
                scores[method + "/" + key] = entry
            }
        }
        let restartedBeacons = Int((Double(beacons) * restartedShare).rounded())
        for index in 0..<(beacons + restartedBeacons) {
            restarted = index >= beacons
            // The restarted beacons draw from a generator of their own: the fleet's beacons stay as they are.
            if index == beacons { random = SeededGenerator(seed: seed &* 0x2545_F491 &+ 0x5EED) }
            let beacon = makeBeacon(&random)
            let name = beacon.named ? beacon.chemistry.rawValue : "unnamed cr2032"
            place = Self.placeNames[beacon.place]
            var cell = SimulatedCell(
                chemistry: beacon.chemistry, transmitPowerDbm: beacon.transmitPowerDbm,
                chargeLeft: Double.random(in: 0.1...1, using: &random), random: &random)
            let beaconID = Self.beaconID(index)
            var counting = FleetHealth()
            if beacon.named {
                counting.batteries[beaconID] = BatteryDescription(chemistry: beacon.chemistry, transmitPowerDbm: beacon.transmitPowerDbm)
            }
            observer.beacon(beaconID, counting.batteries[beaconID])
            defer { observer.finished(counting.health(of: beaconID)) }
            var trendConfiguration = FleetHealth.Configuration()
            trendConfiguration.chargeCounting = false
            var onCurve = FleetHealth(configuration: trendConfiguration)
            if beacon.named {
                onCurve.batteries[beaconID] = BatteryDescription(chemistry: beacon.chemistry, transmitPowerDbm: beacon.transmitPowerDbm)
            }
            // The trend as the ingest had it before: a straight line in volts, flagged at 2400 mV.
            var straightConfiguration = trendConfiguration
            straightConfiguration.trendOnCurve = false
            straightConfiguration.lowBatteryMillivolts = 2400
            var trend = FleetHealth(configuration: straightConfiguration)
            var percentOnly = FleetHealth(configuration: trendConfiguration)
            var cellEnd = end(of: cell, beacon: beacon, fromSecond: 0)
            /// When the forecasts first heard the cell now in the beacon.
            var cellStart = 0.0
            // The beacon has run on this cell since it was fitted: its counters say how long (a reboot since
            // restarts them; none before the run).
            let perSecond = (cell.chargePerAdvertMicrocoulombs / beacon.intervalSeconds + cell.sleepMicroamps) / 3.6e6
            var uptime = cell.usedMilliampHours / perSecond
            if restarted { uptime *= Double.random(in: 0..<1, using: &random) }
            var advertisingCount = uptime / beacon.intervalSeconds
            var flaggedSince: [String: Double] = [:]
            /// The coldest night the cell carried, as forecast at the last daily score at least a week before its end.
            var coldestCarriedAWeekBefore: Double?
            var swapped = false
            var nextReboot = 0
            let step = telemetryIntervalSeconds
            let runSeconds = Double(days) * 86_400
            var second = 0.0
            var awaitingSwap = false
            var swapShows = false
            while second < runSeconds, second < cellEnd {
                second += step
                let celsius = temperature(beacon, second: second)
                cell.use(seconds: step, adverts: step / beacon.intervalSeconds)
                advertisingCount += step / beacon.intervalSeconds
                uptime += step
                if nextReboot < beacon.rebootDays.count, second >= beacon.rebootDays[nextReboot] * 86_400 {
                    nextReboot += 1
                    advertisingCount = 0
                    uptime = 0
                }
                if !swapped, let day = beacon.swapAtDay, second >= day * 86_400 {
                    swapped = true
                    let oldVolts = cell.loadedVolts(celsius: celsius)
                    cell = SimulatedCell(chemistry: beacon.chemistry, transmitPowerDbm: beacon.transmitPowerDbm, chargeLeft: 1, random: &random)
                    swapShows = cell.loadedVolts(celsius: celsius) - oldVolts
                        >= (beacon.swapKeepsCounters ? BatteryLife.swapRiseWithoutRebootVolts : BatteryLife.swapRiseVolts)
                    cellEnd = end(of: cell, beacon: beacon, fromSecond: second)
                    cellStart = second
                    if !beacon.swapKeepsCounters {
                        advertisingCount = 0
                        uptime = 0
                    }
                    awaitingSwap = true
                    flaggedSince = [:]
                    coldestCarriedAWeekBefore = nil
                }
                // As the beacon sends it: millivolts, 1/256 °C, whole adverts and tenths of a second.
                let tlm = EddystoneTLM(
                    batteryMillivolts: UInt16(max(1, min(65_535, (cell.loadedVolts(celsius: celsius) * 1000).rounded()))),
                    temperatureRaw: Int16(max(-32_767, min(32_767, (celsius * 256).rounded()))),
                    advertisingCount: UInt32(min(advertisingCount, 4e9)), uptimeTenths: UInt32(min(uptime * 10, 4e9)))
                // Each beacon 2 ms after the one before: no two send at once.
                let micros = startMicros + Int64(second * 1_000_000) + Int64(index) * 2_000
                observer.transmission(beaconID, micros, tlm)
                let row = TelemetryRow(
                    timeMicros: micros, siteID: "fleet", agentID: "fleet", beaconID: beaconID,
                    batteryMillivolts: tlm.batteryMillivolts.map(Int32.init), temperatureCelsius: tlm.temperatureCelsius,
                    advertisingCount: tlm.advertisingCount, uptimeSeconds: tlm.uptimeSeconds)
                counting.telemetry(row, rebooted: false)
                trend.telemetry(row, rebooted: false)
                onCurve.telemetry(row, rebooted: false)
                percentOnly.reading(
                    SensorReading(quantity: "battery", value: Self.reportedPercent(millivolts: Double(tlm.batteryMillivolts ?? 0), beacon.chemistry), unit: SensorUnit.percent),
                    beaconID: beaconID, siteID: "fleet", timeMicros: micros)
                if awaitingSwap {
                    let found = counting.health(of: beaconID)?.forecast?.cellSinceMicros == micros
                    score("charge-and-voltage", name) {
                        if swapShows {
                            $0.swaps += 1
                            $0.swapsFoundAtOnce += found ? 1 : 0
                        } else {
                            $0.swapsHidden += 1
                        }
                    }
                    awaitingSwap = false
                }
                // Scored once a day.
                guard Int(second) % 86_400 < Int(step) else { continue }
                let truth = (cellEnd - second) / 86_400
                let health = counting.health(of: beaconID)
                let old = trend.health(of: beaconID)
                let percent = percentOnly.health(of: beaconID)
                let curve = onCurve.health(of: beaconID)
                if cellEnd - second >= 7 * 86_400 { coldestCarriedAWeekBefore = health?.forecast?.coldestCarriedCelsius }
                // The cold night `battery_replacements` gives from the site's night forecasts (outdoors only).
                let coldNight = beacon.place == 2
                    ? health?.forecast?.coldestCarriedCelsius.flatMap { firstColdNight(beacon, index: index, day: second / 86_400, carried: $0) } : nil
                let forecasts: [(String, Double?, Bool)] = [
                    ("charge-and-voltage", health?.estimatedDaysLeft, health?.status == .lowBattery),
                    (
                        Self.withNightForecasts, coldNight.map { night in health?.estimatedDaysLeft.map { min($0, night) } ?? night } ?? health?.estimatedDaysLeft,
                        health?.status == .lowBattery || coldNight != nil
                    ),
                    ("voltage-trend", old?.estimatedDaysLeft, old?.status == .lowBattery),
                    (Self.percentTrend, percent?.estimatedDaysLeft, percent?.status == .lowBattery),
                    (Self.voltageOnCurve, curve?.estimatedDaysLeft, curve?.status == .lowBattery),
                ]
                for (method, forecast, flagged) in forecasts {
                    score(method, name) { entry in
                        if (15...90).contains(truth) {
                            if let forecast { entry.relativeErrors.append(abs(forecast - truth) / truth) } else { entry.daysWithout += 1 }
                        } else if truth < 15, let forecast {
                            entry.shortErrors.append(abs(forecast - truth))
                        }
                        if flagged, truth > 2 * flagDays { entry.falseFlagDays += 1 }
                    }
                    if flagged { flaggedSince[method] = flaggedSince[method] ?? second }
                }
            }
            // A cell that stopped its beacon within the run: first flagged at least 7 days before?
            // Cells that ended within two weeks of being first heard are left out: a week's notice is not theirs to
            // give.
            if cellEnd <= runSeconds, cellEnd - cellStart >= 14 * 86_400 {
                for method in ["charge-and-voltage", Self.withNightForecasts, "voltage-trend", Self.percentTrend, Self.voltageOnCurve] {
                    score(method, name) { entry in
                        entry.cellsEnded += 1
                        if (flaggedSince[method].map { cellEnd - $0 < 7 * 86_400 } ?? true) {
                            entry.flaggedLate += 1
                            if cell.chargeLeft >= Self.chargeLeftInTheCold {
                                entry.flaggedLateInTheCold += 1
                                if method == "charge-and-voltage", let coldest = coldestCarriedAWeekBefore {
                                    entry.coldStopsMisjudged.append(temperature(beacon, second: cellEnd) - coldest)
                                }
                            }
                        }
                    }
                }
            }
        }
        return scores.values.sorted { ($0.method, $0.group) < ($1.method, $1.group) }
    }

    private func makeBeacon(_ random: inout SeededGenerator) -> Beacon {
        let draw = Double.random(in: 0..<1, using: &random)
        let chemistry: BatteryChemistry = draw < 0.5 ? .cr2032 : draw < 0.75 ? .cr2477 : draw < 0.9 ? .lithiumAA2 : .cr2032
        let intervals = chemistry == .lithiumAA2 ? [0.1, 0.1, 0.2] : chemistry == .cr2477 ? [0.1, 0.2, 0.35] : [0.1, 0.2, 0.35, 0.5, 1.0]
        let place = Int.random(in: 0..<3, using: &random)
        let station = place == 2 ? Int.random(in: 0..<OutdoorWeather.recorded.stations.count, using: &random) : 0
        let recordDay = place == 2 ? Double(Int.random(in: 0..<OutdoorWeather.recorded.days[station].count, using: &random)) : 0
        return Beacon(
            chemistry: chemistry, named: draw < 0.9, transmitPowerDbm: [-8, -4, 0, 4].randomElement(using: &random)!,
            intervalSeconds: intervals.randomElement(using: &random)!, place: place, phase: Double.random(in: 0..<1, using: &random),
            station: station, recordDay: recordDay, swapAtDay: Double.random(in: 0..<1, using: &random) < swapShare ? Double.random(in: 10..<Double(days - 10), using: &random) : nil,
            swapKeepsCounters: Bool.random(using: &random),
            rebootDays: (0..<(days / 100 + 1)).map { _ in Double.random(in: 0..<Double(days), using: &random) }.sorted())
    }

    /// The trend of the voltage alone as the ingest extrapolates it for a beacon without TLM counters: as the share of
    /// charge it reads on the chemistry's curve.
    public static let voltageOnCurve = "voltage-on-curve"

    /// The trend of the percent a beacon that reports only a percent sends (BTHome, GATT Battery Level).
    public static let percentTrend = "percent-trend"

    /// The percent a beacon reporting only a percent sends for a reading of `millivolts` under a burst: the share of
    /// charge that voltage reads on its chemistry's curve at rest (as firmware maps its own reading), in whole
    /// percent (BTHome's battery object).
    static func reportedPercent(millivolts: Double, _ chemistry: BatteryChemistry) -> Double {
        (100 * chemistry.chargeLeft(volts: millivolts / 1000)).rounded()
    }

    /// The charge-counting forecast with the site's night forecasts read as `battery_replacements` reads them: the
    /// cell flagged, and its days left ended, at the first forecast night at or below its `coldest_carried_c`.
    public static let withNightForecasts = "charge-and-voltage, night forecasts"

    /// The first of the nights (`nightForecastNights`) a weather forecast issued on `day` of the run covers whose
    /// low is at or below `carried`, as days from `day` to that night's low; nil when none is. The forecast of each
    /// night is its recorded low off by an error that shrinks as the night comes nearer: a standard normal drawn
    /// once for the night, times 0.9 °C + 0.4 °C a day ahead (a published verification of minimum-temperature
    /// forecasts: a mean absolute error of 1.0 °C a day ahead to 2.3 °C five days ahead, taken on beyond).
    private func firstColdNight(_ beacon: Beacon, index: Int, day: Double, carried: Double) -> Double? {
        let record = OutdoorWeather.recorded.days[beacon.station]
        let today = Int(day.rounded(.down))
        for night in today..<(today + nightForecastNights) {
            var draw = SeededGenerator(seed: seed &* 0x9E37_79B9 &+ UInt64(index) &* 1_000_003 &+ UInt64(night))
            let ahead = max(0, Double(night) + 0.25 - day)
            let forecast = record[(Int(beacon.recordDay) + night) % record.count].lowest + (0.9 + 0.4 * ahead) * draw.gaussian()
            if forecast <= carried { return ahead }
        }
        return nil
    }

    /// A cell that stops with at least this share of its charge left was stopped by the cold.
    public static let chargeLeftInTheCold = 0.1

    /// The places' names, as the scores group them.
    static let placeNames = ["indoors", "cold room", "outdoors"]

    /// The temperature at the beacon's place, °C.
    private func temperature(_ beacon: Beacon, second: Double) -> Double {
        let day = second / 86_400
        let daily = sin(2 * .pi * (day + beacon.phase))
        let yearly = cos(2 * .pi * (day / 365 + beacon.phase))
        switch beacon.place {
        case 0: return 21 + 1.5 * daily
        case 1: return 12 + 3 * daily + 4 * yearly
        default: return OutdoorWeather.recorded.celsius(station: beacon.station, day: beacon.recordDay + day)
        }
    }

    /// When `cell` stops the beacon (seconds into the run), followed from `fromSecond` a step at a time; at most
    /// five years on.
    private func end(of cell: SimulatedCell, beacon: Beacon, fromSecond start: Double) -> Double {
        var cell = cell
        var second = start
        let step = telemetryIntervalSeconds
        while second < start + 5 * 365 * 86_400 {
            second += step
            cell.use(seconds: step, adverts: step / beacon.intervalSeconds)
            if !cell.powers(celsius: temperature(beacon, second: second)) { return second }
        }
        return .infinity
    }
}
