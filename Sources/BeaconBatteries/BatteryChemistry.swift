import Foundation

/// What a beacon's cell is, and what is known of how such cells discharge: nominal capacity, the voltage against
/// the share of charge left at a beacon's light load and 25 °C, and how the voltage under a radio burst sags in the
/// cold. Facts from published curves (each source named below); the spread between published curves of one
/// chemistry is part of what a forecast does not know.
public enum BatteryChemistry: String, CaseIterable, Sendable, Codable {
    /// A 3 V lithium-manganese-dioxide coin cell, 20 × 3.2 mm.
    case cr2032
    /// The same chemistry, 24 × 7.7 mm.
    case cr2477
    /// Two lithium-iron-disulfide AA cells in series.
    case lithiumAA2 = "2xaa-lithium"
    /// Not known: forecast from the voltage alone, with a wider interval.
    case unknown

    /// The voltage at which a beacon stops advertising (its radio's brown-out), volts.
    public static let cutoffVolts = 2.0

    /// Nominal capacity, mAh: CR2032 225 mAh (the IEC 60086 typical capacity to 2.0 V), CR2477 1000 mAh
    /// (Panasonic CR2477 datasheet), 2×AA lithium 3500 mAh (Energizer L91 datasheet, to 0.9 V a cell). Unknown
    /// cells are taken as coin cells.
    public var nominalMilliampHours: Double {
        switch self {
        case .cr2032, .unknown: 225
        case .cr2477: 1000
        case .lithiumAA2: 3500
        }
    }

    /// The share of charge lost to self-discharge in a year (about 1 % for both chemistries at room temperature,
    /// their makers' shelf-life figures).
    public var selfDischargePerYear: Double { 0.01 }

    /// Voltage against the share of charge left, at a beacon's light load and 25 °C: `shape` from 0 to 1 runs
    /// between the two published curves of the chemistry (see `curves`); the forecast takes the middle.
    public func volts(chargeLeft fraction: Double, shape: Double = 0.5) -> Double {
        let curves = Self.curves(self)
        let low = Self.interpolate(curves.0, at: fraction)
        let high = Self.interpolate(curves.1, at: fraction)
        return low + (high - low) * min(1, max(0, shape))
    }

    /// The share of charge left that reads `volts` on the middle curve (0 below its end, 1 above its start).
    public func chargeLeft(volts: Double) -> Double {
        Self.share(reading: volts) { self.volts(chargeLeft: $0) }
    }

    /// The share of charge left at which the middle curve, less the sag under a burst at `celsius`, reads
    /// `loadedVolts` (0 below its end, 1 above its start): what a reading under load tells of a cell's charge when
    /// nothing else does.
    public func chargeLeft(loadedVolts: Double, celsius: Double) -> Double {
        Self.share(reading: loadedVolts) { volts(chargeLeft: $0) - sag(celsius: celsius, chargeLeft: $0) }
    }

    /// The share of charge left at which `curve` (rising with the share) reads `reading`, by halving.
    private static func share(reading: Double, on curve: (Double) -> Double) -> Double {
        var low = 0.0
        var high = 1.0
        for _ in 0..<40 {
            let middle = (low + high) / 2
            if curve(middle) < reading { low = middle } else { high = middle }
        }
        return (low + high) / 2
    }

    /// How far apart the chemistry's published curves are at `fraction`, volts: what a reading's voltage cannot
    /// tell about the charge left.
    public func curveSpread(chargeLeft fraction: Double) -> Double {
        abs(volts(chargeLeft: fraction, shape: 1) - volts(chargeLeft: fraction, shape: 0))
    }

    /// How much lower the voltage reads during a radio burst than at rest, volts, at `celsius` with `fraction` of
    /// the charge left: a lithium cell's internal resistance grows in the cold and towards the end of its life.
    /// At 25 °C a fresh coin cell sags about 50 mV; at -20 °C about ten times that, 3 V reading near 2.4-2.5 V
    /// (the drop users of coin cells outdoors report, and the makers' temperature curves at 15 kΩ). Lithium AA cells
    /// keep their voltage far better in the cold (Energizer's L91 datasheet: rated down to -40 °C).
    public func sag(celsius: Double, chargeLeft fraction: Double, scale: Double = 1, coldness: Double = 1) -> Double {
        let (atRoom, perTenKelvin) = sagParameters
        let used = 1 - min(1, max(0, fraction))
        return scale * atRoom * exp(coldness * perTenKelvin * (25 - celsius) / 10) * (1 + 2 * used * used)
    }

    /// The sag at 25 °C of a fresh cell, volts, and how it grows, e-fold, for each 10 K colder.
    private var sagParameters: (atRoom: Double, perTenKelvin: Double) {
        switch self {
        case .cr2032, .unknown: (0.05, 0.51)
        case .cr2477: (0.04, 0.51)
        case .lithiumAA2: (0.03, 0.30)
        }
    }

    /// The coldest temperature at which a cell with `fraction` of its charge left still reads `cutoffVolts` under a
    /// burst, °C (`sag` solved for the temperature); +∞ when its voltage at rest is at the cutoff or below.
    /// `scale` and `coldness` as for `sag`: a cell's own (`CellSag`).
    public func coldestCarried(
        chargeLeft fraction: Double, shape: Double = 0.5, cutoffVolts: Double = Self.cutoffVolts, scale: Double = 1, coldness: Double = 1
    ) -> Double {
        let (atRoom, perTenKelvin) = sagParameters
        let used = 1 - min(1, max(0, fraction))
        let headroom = volts(chargeLeft: fraction, shape: shape) - cutoffVolts
        guard headroom > 0 else { return .infinity }
        return 25 - 10 / (perTenKelvin * coldness) * log(headroom / (scale * atRoom * (1 + 2 * used * used)))
    }

    /// How the sag grows in the cold: e-fold for each 10 K colder, this many times.
    var coldGrowthPerTenKelvin: Double { sagParameters.perTenKelvin }

    /// The two published curves (share of charge left, volts), each from full to empty.
    ///
    /// Lithium-manganese-dioxide coin cells: Nordic Semiconductor's model of a CR2032 in its nRF51 SDK
    /// (`lib_battery_level.c`: 3.0-2.9 V holds 58 % of the charge, 2.9-2.74 V 24 %, 2.74-2.44 V 12 %, 2.44-2.1 V
    /// 6 %), and Silicon Labs' table averaged from Energizer's, Maxell's and Panasonic's CR2032 datasheets
    /// (Thunderboard React's `cr2032.c`: 3.0 V 100 %, 2.9 V 80 %, 2.8 V 60 %, 2.7 V 40 %, 2.6 V 30 %, 2.5 V 20 %,
    /// 2.4 V 10 %, 2.0 V 0 %). The CR2477 is taken to share its chemistry's curves.
    ///
    /// Lithium-iron-disulfide AA: the shape of Energizer's L91 datasheet curve at light drain, flat then a cliff in
    /// the last tenth (1.78 V a cell fresh, near 1.5 V for most of its life), twice for two in series; the second
    /// curve lies 40 mV lower a cell (cells of other makers, and older stock).
    static func curves(_ chemistry: BatteryChemistry) -> ([(Double, Double)], [(Double, Double)]) {
        switch chemistry {
        case .cr2032, .cr2477, .unknown: coinCellCurves
        case .lithiumAA2: lithiumAACurves
        }
    }

    private static let coinCellCurves: ([(Double, Double)], [(Double, Double)]) = (
        [(1, 3.0), (0.42, 2.9), (0.18, 2.74), (0.06, 2.44), (0, 2.0)],
        [(1, 3.0), (0.8, 2.9), (0.6, 2.8), (0.4, 2.7), (0.3, 2.6), (0.2, 2.5), (0.1, 2.4), (0, 2.0)]
    )

    private static let lithiumAACurves: ([(Double, Double)], [(Double, Double)]) = {
        let cell: [(Double, Double)] = [
            (1, 1.78), (0.95, 1.65), (0.8, 1.58), (0.5, 1.52), (0.2, 1.45), (0.1, 1.40), (0.05, 1.30), (0.02, 1.15), (0, 0.9),
        ]
        return (cell.map { ($0.0, 2 * ($0.1 - 0.04)) }, cell.map { ($0.0, 2 * $0.1) })
    }()

    /// Linear between the points of a curve given from full (1) to empty (0).
    static func interpolate(_ curve: [(Double, Double)], at fraction: Double) -> Double {
        let x = min(1, max(0, fraction))
        var index = 1
        while index < curve.count - 1, x < curve[index].0 { index += 1 }
        let upper = curve[index - 1]
        let lower = curve[index]
        let span = upper.0 - lower.0
        return span <= 0 ? upper.1 : lower.1 + (upper.1 - lower.1) * (x - lower.0) / span
    }
}
