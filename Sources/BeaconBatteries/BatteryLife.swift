import Foundation

/// What a beacon's battery is and how it is used, as far as the sites file knows: its chemistry, its capacity
/// when the file names one, and the transmit power its adverts go out at.
public struct BatteryDescription: Sendable, Equatable {
    public var chemistry: BatteryChemistry
    public var capacityMilliampHours: Double?
    public var transmitPowerDbm: Double
    /// The voltage under a burst at which the beacon stops (its radio's brown-out), volts.
    public var cutoffVolts = BatteryChemistry.cutoffVolts

    public init(chemistry: BatteryChemistry = .unknown, capacityMilliampHours: Double? = nil, transmitPowerDbm: Double = 0) {
        self.chemistry = chemistry
        self.capacityMilliampHours = capacityMilliampHours
        self.transmitPowerDbm = transmitPowerDbm
    }

    /// The charge one advertising event takes, µC: about 10 µC at 0 dBm for a BLE SoC sending on three channels
    /// at 3 V, 4 % more or less a dB of transmit power (the radio's amplifier), within 5-15 µC.
    public var chargePerAdvertMicrocoulombs: Double { min(15, max(5, 10 * (1 + 0.04 * transmitPowerDbm))) }
    /// What the beacon draws between adverts, µA.
    public static let sleepMicroamps = 2.5
}

/// A beacon's battery life from its Eddystone TLM: a pure state machine fed each transmission (time, voltage,
/// temperature, advertising count and time since boot).
///
/// Charge counting: the counters give the adverts sent and the time awake since boot; with the charge an advert
/// takes (`BatteryDescription`) they give the charge used, summed over reboots, since the cell was fitted. With the
/// cell's nominal capacity that is a share of charge left, good to the spread of capacities (±10 %) and of the
/// charge an advert really takes (±25 %). The voltage, corrected to a burst at 25 °C by the cell's own sag (its
/// chemistry's, as far as pairs of readings at other temperatures show it differs: `CellSag`), is kept
/// a point a day (the median of its hourly means) against the charge counted, and the cell's curve is fitted to
/// those points (`fit`, again each new day and when the day so far moves): where it lies between the chemistry's published curves,
/// an offset of its own, and the share of the cell a counted mAh really takes, drawn towards 1 / capacity. On a coin
/// cell's plateau the counting decides, near its knee the voltage. The days left are the share left above the
/// cutoff at the cold end of the last week's temperatures (the 10th percentile of its 4-hour minima), at the rate
/// the counters say, and never more than the readings' own fall over the last week gives, extrapolated to the cutoff
/// at that cold end. A swapped cell (its voltage up by more than a reboot explains) starts again. What it keeps is
/// bounded: 48 points, 24 hourly means, 42 temperatures and 24 bands' voltages, in single precision, and the sag's
/// 43 sums.
public struct BatteryLife: Sendable {
    /// One forecast.
    public struct Forecast: Sendable, Equatable {
        /// Days until the cell reaches the cutoff, with a 90 % interval.
        public var daysLeft: Double
        public var daysLeftLow: Double
        public var daysLeftHigh: Double
        /// The share of its charge the cell has left.
        public var chargeLeft: Double
        /// The coldest temperature at which the cell, with the charge it has left and its own sag, still reads above
        /// its cutoff under a burst, °C, within `coldestCarriedRange`: a colder night would stop it now.
        public var coldestCarriedCelsius: Double
    }

    /// The bounds of `Forecast.coldestCarriedCelsius`: a cell that carries nights colder than -40 °C reads -40, one
    /// at its cutoff even when warm +60.
    public static let coldestCarriedRange = -40.0...60.0

    public var description: BatteryDescription
    /// When the cell now in the beacon was first heard or found fitted, µs.
    public internal(set) var fittedMicros: Int64?
    /// Swaps found so far.
    public internal(set) var swaps = 0
    /// The newest transmission's time, µs.
    public var lastReadingMicros: Int64? { last?.micros }
    var usedBeforeThisBootMilliampHours = 0.0
    /// The charge counted in this boot when the cell was fitted (a swap without a reboot).
    var bootBaselineMilliampHours = 0.0
    var last: Reading?
    /// Corrected voltages of the last day, an hour's mean each, for a median.
    var recentHours: [(hour: Int32, sum: Float, count: Int32)] = []
    /// The newest corrected voltage in each band of `bandKelvin` from -40 °C (NaN for none): what a swap's rise is
    /// measured against.
    var bandVolts = [Float](repeating: .nan, count: BatteryLife.bandCount)
    static let bandKelvin = 4.0
    /// The cell's voltage against the charge counted, a point a day (the day's median corrected voltage), at most
    /// `maximumPoints` (thinned evenly): what the fit of the cell's curve reads.
    var points: [(counted: Float, volts: Float)] = []
    static let maximumPoints = 24
    /// Hourly means kept (a day's) and 4-hour temperatures kept (a week's).
    static let maximumHours = 24
    static let maximumTemperatures = 42
    /// The coldest temperature of each 4 hours of the last week.
    var coldest: [(bucket: Int32, celsius: Float)] = []
    static let temperatureBucket: Int64 = 4 * 3_600_000_000
    /// The curve fitted to the trajectory (`fit`), refitted when a day's point is added or the day so far has moved
    /// by `refitVolts` since (its median of hourly means: on a plateau, seldom).
    var curve: Curve?
    /// A fitted curve: k, its 90 % interval, where it lies between the published curves, and the charge the cell
    /// gave before its counters started (mAh; none unless its readings show it).
    struct Curve {
        var k: Double
        var kLow: Double
        var kHigh: Double
        var shape: Double
        var usedBefore = 0.0
    }
    var curveToday: Double?
    /// How the newest points of the trajectory fall (`fall(of:)`), measured with each fit: volts a counted mAh,
    /// and the newest point.
    var fall: (voltsPerMilliampHour: Float, counted: Float, volts: Float)?
    static let refitVolts = 0.005
    /// The counted consumption, mAh a day: from the counters' last day, else the description.
    var rateMilliampHoursPerDay: Double?
    /// The course of the place's cold through the year (kept across swaps: it is the place's, not the cell's).
    var season = SeasonalCold()
    /// What following the season's cold adds to the days left at the fit's k, at its high k and at its low k, days:
    /// worked out when a 4-hour bucket closes and when the curve is fitted, and added to each forecast between.
    var seasonDays: (k: Float, kHigh: Float, kLow: Float) = (0, 0, 0)
    /// The cell's own sag against its chemistry's, learned from its readings (`CellSag`).
    var cellSag = CellSag()

    /// The newest transmission, as the forecast uses it.
    public struct Reading: Sendable {
        public var micros: Int64
        /// Corrected to a burst at 25 °C.
        public var volts: Double
        public var celsius: Double
        public var advertisingCount: UInt32
        public var uptimeSeconds: Double
        /// The charge counted in this boot so far, mAh.
        public var bootMilliampHours: Double
        /// The voltage as read, under a burst at `celsius` (nil in a state saved before it was kept).
        public var loadedVolts: Double?

        public init(
            micros: Int64, volts: Double, celsius: Double, advertisingCount: UInt32, uptimeSeconds: Double, bootMilliampHours: Double,
            loadedVolts: Double?
        ) {
            self.micros = micros
            self.volts = volts
            self.celsius = celsius
            self.advertisingCount = advertisingCount
            self.uptimeSeconds = uptimeSeconds
            self.bootMilliampHours = bootMilliampHours
            self.loadedVolts = loadedVolts
        }
    }

    /// How much more a swapped cell's corrected voltage reads than the last reading of the old one, volts: a
    /// reboot leaves the voltage within a few mV.
    public static let swapRiseVolts = 0.04
    /// A swap without a reboot (the counters go on) must show a larger rise. Both rises are measured against the
    /// newest reading in the same band of temperatures (`bandVolts`), else the previous reading when its temperature
    /// was as close, else not at all: the cold's correction is not exact, and a coin cell warming after a frost
    /// reads 100 mV and more above its corrected cold readings.
    public static let swapRiseWithoutRebootVolts = 0.1
    static let day: Int64 = 86_400_000_000

    public init(description: BatteryDescription) {
        self.description = description
    }

    /// One TLM transmission. Returns whether it found the cell swapped. A transmission no newer than the newest
    /// one observed (delivered late: an agent's resent batch, a spool after an outage) adds nothing: the counters
    /// are cumulative, and read out of order they would look like a reboot.
    @discardableResult
    public mutating func observe(
        micros: Int64, millivolts: Double, celsius: Double?, advertisingCount: UInt32, uptimeSeconds: Double
    ) -> Bool {
        if let last, micros <= last.micros { return false }
        let celsius = celsius ?? last?.celsius ?? 25
        let chemistry = description.chemistry
        // The share left by the curve's k when fitted, else by the capacity.
        let guessLeft = max(0, 1 - (totalUsed(boot: last?.bootMilliampHours ?? 0) + (curve?.usedBefore ?? 0)) * (curve?.k ?? 1 / capacity))
        let volts = millivolts / 1000 + sag(celsius: celsius, chargeLeft: guessLeft) - sag(celsius: 25, chargeLeft: guessLeft)
        // A swap's rise is measured on readings corrected by the chemistry's sag alone, which stays put while the
        // cell's own is being learned.
        func byChemistry(_ loaded: Double, _ celsius: Double) -> Double {
            loaded + chemistry.sag(celsius: celsius, chargeLeft: guessLeft) - chemistry.sag(celsius: 25, chargeLeft: guessLeft)
        }
        let reading = byChemistry(millivolts / 1000, celsius)
        let advertCharge = description.chargePerAdvertMicrocoulombs / 3.6e6
        let sleepCharge = BatteryDescription.sleepMicroamps / 3.6e6
        let bootCharge = Double(advertisingCount) * advertCharge + uptimeSeconds * sleepCharge
        // The charge counted up to the newest transmission before this one: the point of its day, should this one
        // start the next (taken before a reboot moves the last boot's charge into the count before it).
        let countedToLast = last.map { totalUsed(boot: $0.bootMilliampHours) }
        var swapped = false
        if let last {
            let rebooted = advertisingCount < last.advertisingCount || uptimeSeconds < last.uptimeSeconds
            let band = bandVolts[Self.band(celsius)]
            let previous = last.loadedVolts.map { byChemistry($0, last.celsius) } ?? last.volts
            let reference = !band.isNaN ? Double(band) : abs(celsius - last.celsius) <= Self.bandKelvin ? previous : nil
            let rise = reference.map { reading - $0 } ?? 0
            if rebooted {
                usedBeforeThisBootMilliampHours += last.bootMilliampHours - bootBaselineMilliampHours
                bootBaselineMilliampHours = 0
                swapped = rise >= Self.swapRiseVolts
            } else {
                swapped = rise >= Self.swapRiseWithoutRebootVolts
            }
            if swapped {
                swaps += 1
                fittedMicros = micros
                usedBeforeThisBootMilliampHours = 0
                bootBaselineMilliampHours = rebooted ? 0 : bootCharge
                recentHours = []
                bandVolts = bandVolts.map { _ in .nan }
                points = []
                curve = nil
                cellSag = CellSag()
            } else if let before = last.loadedVolts, micros - last.micros <= CellSag.pairMicros {
                cellSag.add(from: (before, last.celsius), to: (millivolts / 1000, celsius), chemistry: chemistry, chargeLeft: guessLeft)
            }
            if !swapped, !rebooted, micros > last.micros, bootCharge >= last.bootMilliampHours {
                // The counters' own rate, smoothed over about a day.
                let days = Double(micros - last.micros) / Double(Self.day)
                let rate = (bootCharge - last.bootMilliampHours) / days
                let weight = min(1, days)
                rateMilliampHoursPerDay = rateMilliampHoursPerDay.map { $0 + (rate - $0) * weight } ?? rate
            }
        } else {
            fittedMicros = micros
            // A cell first heard has been in use since the counters started, unless it was swapped without a reboot.
        }
        var newPoint = false
        if let last, let countedToLast, !swapped, micros / Self.day != last.micros / Self.day, let volts = median(ofDay: last.micros / Self.day) {
            // The day is over: its point.
            addPoint(counted: countedToLast, volts: volts)
            newPoint = true
        }
        last = Reading(micros: micros, volts: volts, celsius: celsius, advertisingCount: advertisingCount, uptimeSeconds: uptimeSeconds, bootMilliampHours: bootCharge,
            loadedVolts: millivolts / 1000)
        let hour = Int32(truncatingIfNeeded: micros / Self.hour)
        if let index = recentHours.indices.last, recentHours[index].hour == hour {
            recentHours[index].sum += Float(volts)
            recentHours[index].count += 1
        } else {
            recentHours.append((hour, Float(volts), 1))
        }
        bandVolts[Self.band(celsius)] = Float(reading)
        recentHours.removeAll { hour - $0.hour >= Int32(Self.maximumHours) }
        let bucket = Int32(truncatingIfNeeded: micros / Self.temperatureBucket)
        // The season's days are worked out again when a 4-hour bucket closes or the curve is refitted.
        var seasonDue = false
        if let index = coldest.indices.last, coldest[index].bucket == bucket {
            coldest[index].celsius = min(coldest[index].celsius, Float(celsius))
        } else {
            if let closed = coldest.last {
                season.add(bucket: closed.bucket, celsius: Double(closed.celsius))
                seasonDue = true
            }
            coldest.append((bucket, Float(celsius)))
        }
        coldest.removeAll { Int64(bucket - $0.bucket) * Self.temperatureBucket >= 7 * Self.day }
        let today = median(ofDay: micros / Self.day)
        if newPoint || swapped || curve == nil || abs((today ?? 0) - (curveToday ?? 0)) >= Self.refitVolts {
            refit(today: today)
            seasonDue = true
        }
        if seasonDue { followSeason() }
        return swapped
    }

    static let hour: Int64 = 3_600_000_000

    /// The cell's sag under a burst at `celsius`, volts: its chemistry's, as far as the cell's own differs.
    func sag(celsius: Double, chargeLeft: Double) -> Double {
        let own = cellSag.fitted
        return description.chemistry.sag(celsius: celsius, chargeLeft: chargeLeft, scale: own.scale, coldness: own.coldness)
    }

    /// The band of temperatures `celsius` falls in.
    static func band(_ celsius: Double) -> Int {
        Int(min(Double(bandCount - 1), max(0, ((celsius + 40) / bandKelvin).rounded(.down))))
    }

    /// The median of the hourly mean voltages of a day, or nil when none were heard in it.
    func median(ofDay day: Int64) -> Double? {
        Self.quantile(0.5, ofAtMost: recentHours.count) { values in
            var count = 0
            for hour in recentHours where Int64(hour.hour) * Self.hour / Self.day == day {
                values[count] = Double(hour.sum) / Double(hour.count)
                count += 1
            }
            return count
        }
    }

    /// The points a day, and the day so far as one more.
    var trajectory: [(counted: Double, volts: Double)] {
        let days = points.map { (counted: Double($0.counted), volts: Double($0.volts)) }
        guard let last, let today = median(ofDay: last.micros / Self.day) else { return days }
        return days + [(countedWithSelfDischarge, today)]
    }

    /// The charge counted since the cell was fitted, with its self-discharge since, mAh.
    private var countedWithSelfDischarge: Double {
        guard let last, let fitted = fittedMicros else { return 0 }
        let elapsedYears = Double(last.micros - fitted) / Double(Self.day) / 365
        return totalUsed(boot: last.bootMilliampHours) + capacity * description.chemistry.selfDischargePerYear * elapsedYears
    }

    /// The charge the cell has given since it was full: counted and self-discharged, with what the fit finds it
    /// gave before its counters started.
    private var countedFromFull: Double { countedWithSelfDischarge + (curve?.usedBefore ?? 0) }

    private mutating func addPoint(counted: Double, volts: Double) {
        points.append((Float(counted), Float(volts)))
        if points.count > 2 * Self.maximumPoints {
            // Every other one, the newest kept.
            points = points.enumerated().filter { ($0.offset - points.count + 1) % 2 == 0 }.map(\.element)
        }
    }

    /// The capacity taken as the cell's, mAh.
    var capacity: Double { description.capacityMilliampHours ?? description.chemistry.nominalMilliampHours }

    /// The charge counted since the cell was fitted, mAh (this boot's as given).
    private func totalUsed(boot: Double) -> Double {
        usedBeforeThisBootMilliampHours + max(0, boot - bootBaselineMilliampHours)
    }

    /// The forecast as of the newest transmission; nil before one.
    public func forecast() -> Forecast? {
        guard let last, let fit = curve else { return nil }
        let cold = coldEnd
        let cutoff = Self.cutoffChargeLeft(
            description.chemistry, celsius: cold, shape: fit.shape, cutoffVolts: description.cutoffVolts, sag: cellSag.fitted)
        let counted = countedFromFull
        let perDay = dailyUse(last)
        func days(_ k: Double, _ season: Float) -> Double {
            max(0, (1 - k * counted - cutoff) / (max(1e-12, k) * perDay) + Double(season))
        }
        let chargeLeft = max(0, 1 - fit.k * counted)
        let own = cellSag.fitted
        let coldest = description.chemistry.coldestCarried(
            chargeLeft: chargeLeft, shape: fit.shape, cutoffVolts: description.cutoffVolts, scale: own.scale, coldness: own.coldness)
        var forecast = Forecast(
            daysLeft: days(fit.k, seasonDays.k), daysLeftLow: days(fit.kHigh, seasonDays.kHigh), daysLeftHigh: days(fit.kLow, seasonDays.kLow),
            chargeLeft: chargeLeft,
            coldestCarriedCelsius: min(Self.coldestCarriedRange.upperBound, max(Self.coldestCarriedRange.lowerBound, coldest)))
        if let falling = daysByTheFall(cold: cold, perDay: perDay, k: fit.k), falling < forecast.daysLeft {
            forecast.daysLeft = falling
            forecast.daysLeftLow = min(forecast.daysLeftLow, falling)
        }
        return forecast
    }

    /// Fits the cell's curve to the trajectory and measures the fall of its newest points: both change only with it.
    mutating func refit(today: Double?) {
        let trajectory = self.trajectory
        curve = Self.fit(
            trajectory, chemistry: description.chemistry, capacity: capacity, priorSpread: priorSpread, sagScale: cellSag.fitted.scale,
            previous: curve?.k, startKnown: swaps > 0)
        curveToday = today
        fall = Self.fall(of: trajectory.suffix(Self.fallPoints))
    }

    /// The least-squares slope of `recent` (volts a counted mAh) and its newest point; nil under four points or
    /// when they span no charge.
    static func fall(of recent: ArraySlice<(counted: Double, volts: Double)>) -> (voltsPerMilliampHour: Float, counted: Float, volts: Float)? {
        guard recent.count >= 4, let first = recent.first, let newest = recent.last, newest.counted > first.counted else { return nil }
        let count = Double(recent.count)
        let meanCounted = recent.reduce(0) { $0 + $1.counted } / count
        let meanVolts = recent.reduce(0) { $0 + $1.volts } / count
        var spread = 0.0
        var covariance = 0.0
        for point in recent {
            spread += (point.counted - meanCounted) * (point.counted - meanCounted)
            covariance += (point.counted - meanCounted) * (point.volts - meanVolts)
        }
        return (Float(covariance / spread), Float(newest.counted), Float(newest.volts))
    }

    /// The days until the reading at the week's cold end falls to the cutoff at the pace the trajectory's newest
    /// points fall: nil while they do not fall. Near the end a cell's readings fall day after day whatever its curve
    /// was fitted to, and the fall only steepens.
    func daysByTheFall(cold: Double, perDay: Double, k: Double) -> Double? {
        guard let fall else { return nil }
        let perDayVolts = -Double(fall.voltsPerMilliampHour) * perDay
        guard perDayVolts > Self.fallVoltsPerDay else { return nil }
        let left = max(0, 1 - k * (Double(fall.counted) + (curve?.usedBefore ?? 0)))
        let loaded = Double(fall.volts) - sag(celsius: cold, chargeLeft: left) + sag(celsius: 25, chargeLeft: left)
        return max(0, (loaded - description.cutoffVolts) / perDayVolts)
    }

    /// The newest points the fall is measured over: a week's and today's (further apart once the points have been
    /// thinned, which a cell heard for 48 days and more has).
    static let fallPoints = 8
    /// A fall slower than this, volts a day, is a plateau's noise.
    static let fallVoltsPerDay = 0.002

    /// The cold end of the last week: the 10th percentile of its 4-hour minima, °C (25 °C before any).
    var coldEnd: Double {
        Self.quantile(0.1, ofAtMost: coldest.count) { values in
            for (index, cold) in coldest.enumerated() { values[index] = Double(cold.celsius) }
            return coldest.count
        } ?? 25
    }

    /// The charge used a day, counted and self-discharged, mAh: before a day of counting, this boot's average.
    func dailyUse(_ last: Reading) -> Double {
        let rate = rateMilliampHoursPerDay
            ?? (last.uptimeSeconds > 0 ? last.bootMilliampHours / (last.uptimeSeconds / 86_400) : BatteryDescription.sleepMicroamps * 86_400 / 3.6e6)
        return rate + capacity * description.chemistry.selfDischargePerYear / 365
    }

    /// Works out `seasonDays`: for each k of the fit, the first day whose cold (the week's cold end, shifted by the
    /// season's course from now) the charge left by then cannot carry, less the days left at the week's cold end.
    mutating func followSeason() {
        seasonDays = (0, 0, 0)
        guard let last, let fit = curve, let course = season.course(), course.amplitude >= Self.seasonAmplitude else { return }
        let chemistry = description.chemistry
        let cutoffVolts = description.cutoffVolts
        let own = cellSag.fitted
        let cold = coldEnd
        let counted = countedFromFull
        let perDay = dailyUse(last)
        let today = Double(last.micros) / Double(Self.day)
        // The cutoffs at the week's cold end and at the coldest and warmest the season's course will bring.
        let range = course.shiftRange(fromDay: today)
        let cutoffs = [cold, cold + range.lowerBound, cold + range.upperBound].map {
            Self.cutoffChargeLeft(chemistry, celsius: $0, shape: fit.shape, cutoffVolts: cutoffVolts, sag: own)
        }
        func offset(_ k: Double) -> Float {
            let use = max(1e-12, k) * perDay
            let left = 1 - k * counted
            let flat = max(0, (left - cutoffs[0]) / use)
            // Between the day the coldest nights of the course would stop it and the day the warmest would, and
            // within a year of the first: by then the coldest nights have come round.
            let earliest = max(0, (left - cutoffs[1]) / use)
            let latest = min(max(0, (left - cutoffs[2]) / use), earliest + SeasonalCold.year)
            func stops(_ day: Double) -> Bool {
                chemistry.coldestCarried(
                    chargeLeft: left - use * day, shape: fit.shape, cutoffVolts: cutoffVolts, scale: own.scale, coldness: own.coldness)
                    > cold + course.shift(fromDay: today, days: day)
            }
            // A week at a time (the season moves slowly), then a day at a time within the week it stops in.
            var day = earliest
            while day < latest, !stops(min(latest, day + 7)) { day += 7 }
            while day < latest, !stops(day) { day += 1 }
            return Float(min(day, latest) - flat)
        }
        seasonDays = (offset(fit.k), offset(fit.kHigh), offset(fit.kLow))
    }

    /// A cycle of the place's cold smaller than this (°C) is not followed: indoors, and too few readings to show one.
    static let seasonAmplitude = 1.0

    /// How far the charge a counted mAh really takes of the cell may lie from 1 / capacity, relative (1σ): the
    /// spreads of capacities (±10 %) and of the charge an advert really takes (±25 %) make 15 %; taken as 30 %,
    /// which let the cell's own curve weigh more on the fleet seeds kept for choosing; 50 % for a cell not known.
    var priorSpread: Double {
        description.chemistry == .unknown && description.capacityMilliampHours == nil ? 0.5 : 0.3
    }

    /// A reading's voltage against its curve, volts: the resolution, the cold's correction, and how a cell's curve
    /// departs from both published ones.
    static let voltsSpread = 0.015

    /// The cell's curve fitted to its trajectory: k, the share of the cell a counted mAh takes, and where its curve
    /// lies between the published ones, by least squares with the counting's prior on k; k's 90 % interval where
    /// the cost rises by 2.71. `previous` is the k of the fit before. Unless the cell's start is known (a swap was
    /// seen), its counters may have restarted on a used cell: where the fit from a full cell leaves the readings
    /// unexplained, a share of the cell already used when the counting began is fitted too, and kept when it
    /// lowers the cost by more than `usedBeforePenalty`.
    static func fit(
        _ points: [(counted: Double, volts: Double)], chemistry: BatteryChemistry, capacity: Double, priorSpread: Double,
        sagScale: Double = 1, previous: Double? = nil, startKnown: Bool = true
    ) -> Curve {
        let prior = 1 / capacity
        let priorSigma = prior * priorSpread
        // A cell's curve may lie above or below both published ones by tens of mV: an offset, fitted with them
        // (for each k and shape the least-squares offset, drawn towards none).
        let offsetSigma = 0.02
        let curves = BatteryChemistry.curves(chemistry)
        let weight = 1 / (voltsSpread * voltsSpread)
        // The share of the cell used before the counting began.
        var before = 0.0
        // For one k, each point's residual is `base - span * shape` (the curve runs linearly between the published
        // ones): worked out once a k, then every shape costs a pass over the points.
        var bases = [Double](repeating: 0, count: points.count)
        var spans = [Double](repeating: 0, count: points.count)
        func prepare(_ k: Double) {
            for (index, point) in points.enumerated() {
                // The readings are corrected to a burst at 25 °C: the curve less the sag there.
                let left = min(1, max(0, 1 - before - k * point.counted))
                let low = BatteryChemistry.interpolate(curves.0, at: left)
                bases[index] = point.volts - low + chemistry.sag(celsius: 25, chargeLeft: left, scale: sagScale)
                spans[index] = BatteryChemistry.interpolate(curves.1, at: left) - low
            }
        }
        func cost(_ k: Double, _ shape: Double) -> Double {
            var sum = 0.0
            for index in bases.indices { sum += bases[index] - spans[index] * shape }
            let offset = sum * weight / (Double(points.count) * weight + 1 / (offsetSigma * offsetSigma))
            var total = ((k - prior) / priorSigma) * ((k - prior) / priorSigma) + (offset / offsetSigma) * (offset / offsetSigma)
            for index in bases.indices {
                let residual = bases[index] - spans[index] * shape - offset
                total += residual * residual * weight
            }
            return total
        }
        // Coarse over k from half to twice the prior, then k in steps of 2 % around the best for every shape. Near a
        // knee the readings pin the charge left more finely than either step, and the valley of the cost may lie
        // between the grid's points: the k of the fit before, and the k at which the newest reading sits on the
        // middle curve, are tried too.
        let shapes = stride(from: 0.0, through: 1.0, by: 0.1).map { $0 }
        func coarse() -> (cost: Double, k: Double, shape: Double) {
            var best = (cost: Double.infinity, k: prior, shape: 0.5)
            var seeds = stride(from: 0.5, through: 2.0, by: 0.1).map { $0 * prior }
            if let previous { seeds.append(previous) }
            if let newest = points.last, newest.counted > 0 {
                var left = chemistry.chargeLeft(volts: newest.volts + chemistry.sag(celsius: 25, chargeLeft: 0.5, scale: sagScale))
                left = chemistry.chargeLeft(volts: newest.volts + chemistry.sag(celsius: 25, chargeLeft: left, scale: sagScale))
                seeds.append((1 - before - left) / newest.counted)
            }
            for k in seeds where k >= 0.5 * prior && k <= 2 * prior {
                prepare(k)
                for shape in shapes {
                    let value = cost(k, shape)
                    if value < best.cost { best = (value, k, shape) }
                }
            }
            return best
        }
        var best = coarse()
        if !startKnown, best.cost > usedBeforePenalty {
            var used: (fit: (cost: Double, k: Double, shape: Double), share: Double)?
            for share in stride(from: 0.1, through: 0.9, by: 0.1) {
                before = share
                let fitted = coarse()
                if fitted.cost < used?.fit.cost ?? .infinity { used = (fitted, share) }
            }
            before = 0
            if let used, used.fit.cost + usedBeforePenalty < best.cost {
                best = used.fit
                before = used.share
            }
        }
        let ks = (-12...12).map { best.k + Double($0) * 0.02 * prior }.filter { $0 > 0 }
        var profile = [Double](repeating: .infinity, count: ks.count)
        for (index, k) in ks.enumerated() {
            prepare(k)
            for shape in shapes {
                let value = cost(k, shape)
                profile[index] = min(profile[index], value)
                if value < best.cost { best = (value, k, shape) }
            }
        }
        let within = ks.indices.filter { profile[$0] <= best.cost + 2.71 }
        let step = 0.02 * prior
        // An interval that reaches the end of the range searched goes on as far again.
        let low = within.first.map { $0 == 0 ? ks[$0] - 12 * step : ks[$0] - step / 2 } ?? best.k
        let high = within.last.map { $0 == ks.count - 1 ? ks[$0] + 12 * step : ks[$0] + step / 2 } ?? best.k
        return Curve(k: best.k, kLow: max(prior * 0.5, low), kHigh: high, shape: best.shape, usedBefore: before / best.k)
    }

    /// How much a share of the cell used before the counting began must lower the fit's cost to be kept: the
    /// readings must show it beyond their noise.
    static let usedBeforePenalty = 9.0

    /// The share of charge left at which the cell, sagging at `celsius`, reads the cutoff.
    static func cutoffChargeLeft(
        _ chemistry: BatteryChemistry, celsius: Double, shape: Double = 0.5, cutoffVolts: Double = BatteryChemistry.cutoffVolts,
        sag: (scale: Double, coldness: Double) = (1, 1)
    ) -> Double {
        var low = 0.0
        var high = 1.0
        for _ in 0..<40 {
            let middle = (low + high) / 2
            if chemistry.volts(chargeLeft: middle, shape: shape)
                - chemistry.sag(celsius: celsius, chargeLeft: middle, scale: sag.scale, coldness: sag.coldness) < cutoffVolts
            {
                low = middle
            } else {
                high = middle
            }
        }
        return high
    }

    /// The value `share` of the way up those `fill` writes (returning how many) into room for `capacity`: the
    /// sorted values' element at `share` × their count; nil for none. Every transmission reads a day's hours and a
    /// week's temperatures this way, so the few dozen values are sorted on the stack, not in an array of their own.
    static func quantile(_ share: Double, ofAtMost capacity: Int, _ fill: (UnsafeMutableBufferPointer<Double>) -> Int) -> Double? {
        withUnsafeTemporaryAllocation(of: Double.self, capacity: max(1, capacity)) { values in
            let count = fill(values)
            guard count > 0 else { return nil }
            // Insertion: at most 42 values.
            for index in 1..<count {
                let value = values[index]
                var position = index
                while position > 0, values[position - 1] > value {
                    values[position] = values[position - 1]
                    position -= 1
                }
                values[position] = value
            }
            return values[min(count - 1, Int(share * Double(count)))]
        }
    }
}
