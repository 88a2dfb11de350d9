extension BatteryLife {
    /// What a battery life has learned, as plain values: what an ingest keeps in the database so that a restart, or
    /// another instance taking the site over, goes on counting and fitting from it. The fitted curve is not kept: it
    /// is fitted again from the points on restoring.
    public struct Saved: Sendable {
        public var fittedMicros: Int64?
        public var swaps: Int
        public var usedBeforeThisBootMilliampHours: Double
        public var bootBaselineMilliampHours: Double
        public var last: Reading?
        public var recentHours: [(hour: Int32, sum: Float, count: Int32)]
        /// One per band of temperatures (`bandCount`), NaN for none.
        public var bandVolts: [Float]
        public var points: [(counted: Float, volts: Float)]
        public var coldest: [(bucket: Int32, celsius: Float)]
        public var rateMilliampHoursPerDay: Double?
        public var season: SeasonalCold
        public var cellSag: CellSag

        public init(
            fittedMicros: Int64?, swaps: Int, usedBeforeThisBootMilliampHours: Double, bootBaselineMilliampHours: Double,
            last: Reading?, recentHours: [(hour: Int32, sum: Float, count: Int32)], bandVolts: [Float],
            points: [(counted: Float, volts: Float)], coldest: [(bucket: Int32, celsius: Float)], rateMilliampHoursPerDay: Double?,
            season: SeasonalCold = SeasonalCold(), cellSag: CellSag = CellSag()
        ) {
            self.fittedMicros = fittedMicros
            self.swaps = swaps
            self.usedBeforeThisBootMilliampHours = usedBeforeThisBootMilliampHours
            self.bootBaselineMilliampHours = bootBaselineMilliampHours
            self.last = last
            self.recentHours = recentHours
            self.bandVolts = bandVolts
            self.points = points
            self.coldest = coldest
            self.rateMilliampHoursPerDay = rateMilliampHoursPerDay
            self.season = season
            self.cellSag = cellSag
        }

        /// Within the bounds a battery life keeps (a day of hourly means, a week of temperatures, the bands, the
        /// points before thinning): what `BatteryLife(description:restoring:)` takes.
        public var isWithinBounds: Bool {
            recentHours.count <= BatteryLife.maximumHours && coldest.count <= BatteryLife.maximumTemperatures
                && bandVolts.count == BatteryLife.bandCount && points.count <= 2 * BatteryLife.maximumPoints && swaps >= 0
                && recentHours.allSatisfy { $0.count > 0 }
        }
    }

    /// The number of temperature bands a swap's rise is measured in.
    public static let bandCount = 24

    /// What this battery life has learned.
    public var saved: Saved {
        Saved(
            fittedMicros: fittedMicros, swaps: swaps, usedBeforeThisBootMilliampHours: usedBeforeThisBootMilliampHours,
            bootBaselineMilliampHours: bootBaselineMilliampHours, last: last, recentHours: recentHours, bandVolts: bandVolts,
            points: points, coldest: coldest, rateMilliampHoursPerDay: rateMilliampHoursPerDay, season: season,
            cellSag: cellSag)
    }

    /// The battery life that learned `saved`, for a cell as `description` says (the sites file may have named it
    /// since); nil when `saved` is out of bounds. Its next transmission goes on from where the saved one left off,
    /// a reboot or swap in between found as usual. Its curve is fitted by `fitCurve()` (or that transmission):
    /// an instance claiming a site restores every beacon's at once, and fits only those it hears.
    public init?(description: BatteryDescription, restoring saved: Saved) {
        guard saved.isWithinBounds else { return nil }
        self.init(description: description)
        fittedMicros = saved.fittedMicros
        swaps = saved.swaps
        usedBeforeThisBootMilliampHours = saved.usedBeforeThisBootMilliampHours
        bootBaselineMilliampHours = saved.bootBaselineMilliampHours
        last = saved.last
        recentHours = saved.recentHours
        bandVolts = saved.bandVolts
        points = Self.countedOnce(saved.points)
        coldest = saved.coldest
        rateMilliampHoursPerDay = saved.rateMilliampHoursPerDay
        season = saved.season
        cellSag = saved.cellSag
    }

    /// `points` without those whose charge counted lies above a later one's. The count only grows from one day's
    /// point to the next; a state saved by an earlier version may hold a day whose reboot, with the next day's
    /// first transmission, had its charge counted twice, and a curve fitted through it takes the cell for spent.
    static func countedOnce(_ points: [(counted: Float, volts: Float)]) -> [(counted: Float, volts: Float)] {
        var kept: [(counted: Float, volts: Float)] = []
        var lowestLater = Float.infinity
        for point in points.reversed() where point.counted <= lowestLater {
            kept.append(point)
            lowestLater = point.counted
        }
        return kept.reversed()
    }

    /// Fits the cell's curve to what it has learned, unless fitted already.
    public mutating func fitCurve() {
        guard curve == nil, let last else { return }
        refit(today: median(ofDay: last.micros / Self.day))
        followSeason()
    }
}
