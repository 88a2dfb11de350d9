import Foundation

/// How one cell's voltage under a burst sags against its chemistry's figure (`BatteryChemistry.sag`): its sag at
/// room temperature and how much faster it grows in the cold. Cells of one chemistry differ here by tens of percent
/// (maker, age, the beacon's burst), and a coin cell outdoors stops in the first night its own sag cannot carry.
///
/// Learned from pairs of transmissions close in time, whose charge is the same and whose temperatures differ: the
/// change of the reading against the change the sag would make, for each of a grid of growths in the cold, by least
/// squares drawn towards the chemistry's own figure; the growth that fits best, and the scale at it. Two sums for
/// each growth and one more, whatever the history's length; a swapped cell starts again.
public struct CellSag: Sendable, Equatable {
    /// The sums over pairs of y·y, then for each growth of `growths` g·g and y·g: y the reading's fall, g the
    /// change the chemistry's sag, grown so in the cold, would make.
    public private(set) var sums = [Double](repeating: 0, count: CellSag.sumCount)
    /// The cell's sag against its chemistry's: `scale` at room temperature, `coldness` the factor on its growth in
    /// the cold (1 and 1 before any pair; within 0.3-3 and 0.6-1.6). Fitted again with each pair.
    public private(set) var fitted: (scale: Double, coldness: Double) = (1, 1)
    /// How many sums a cell's sag keeps.
    public static var sumCount: Int { 1 + 2 * growths.count }

    /// The growths in the cold tried, as factors on the chemistry's.
    static let growths = stride(from: 0.6, through: 1.6, by: 0.05).map { $0 }
    /// Transmissions at most this far apart make a pair, µs: within it a beacon's charge hardly moves.
    public static let pairMicros: Int64 = 2 * 3_600_000_000
    /// A pair's reading against the model, volts: the TLM's millivolt, the burst's own spread, the charge moved.
    static let readingSpread = 0.003
    /// How far a cell's sag and its growth in the cold lie from the chemistry's, relative (1σ).
    static let scaleSpread = 0.3
    static let growthSpread = 0.2

    public init() {}

    /// The state `sums` describe (a saved one); nil when they are not as many finite numbers as kept.
    public init?(sums: [Double]) {
        guard sums.count == Self.sumCount, sums.allSatisfy(\.isFinite) else { return nil }
        self.sums = sums
        fitted = Self.fit(sums)
    }

    public static func == (lhs: CellSag, rhs: CellSag) -> Bool { lhs.sums == rhs.sums }

    /// A pair of readings under a burst, volts, at their temperatures, of a cell with `chargeLeft` of its charge.
    public mutating func add(
        from earlier: (volts: Double, celsius: Double), to later: (volts: Double, celsius: Double), chemistry: BatteryChemistry,
        chargeLeft: Double
    ) {
        guard earlier.celsius != later.celsius, earlier.celsius.isFinite, later.celsius.isFinite, earlier.volts.isFinite,
            later.volts.isFinite
        else { return }
        // The sag at growth c is its value at 25 °C times e^(c·x), x the chemistry's growth from 25 °C to the
        // temperature: for the grid's growths, powers of one step's factor.
        let atRoom = chemistry.sag(celsius: 25, chargeLeft: chargeLeft)
        let x1 = chemistry.coldGrowthPerTenKelvin * (25 - earlier.celsius) / 10
        let x2 = chemistry.coldGrowthPerTenKelvin * (25 - later.celsius) / 10
        let step = Self.growths[1] - Self.growths[0]
        var grown1 = atRoom * exp(Self.growths[0] * x1)
        var grown2 = atRoom * exp(Self.growths[0] * x2)
        let factor1 = exp(step * x1)
        let factor2 = exp(step * x2)
        let y = earlier.volts - later.volts
        sums[0] += y * y
        for index in Self.growths.indices {
            let g = grown2 - grown1
            sums[1 + 2 * index] += g * g
            sums[2 + 2 * index] += y * g
            grown1 *= factor1
            grown2 *= factor2
        }
        fitted = Self.fit(sums)
    }

    /// The scale and growth of least cost given `sums`.
    static func fit(_ sums: [Double]) -> (scale: Double, coldness: Double) {
        let noise = 1 / (readingSpread * readingSpread)
        let scalePrior = 1 / (scaleSpread * scaleSpread)
        let growthPrior = 1 / (growthSpread * growthSpread)
        guard sums[0] > 0 else { return (1, 1) }
        // For each growth the least-squares scale and the cost at it; the growth of least cost, refined between its
        // neighbours by a parabola.
        var costs: [Double] = []
        var scales: [Double] = []
        for (index, growth) in growths.enumerated() {
            let gg = sums[1 + 2 * index]
            let yg = sums[2 + 2 * index]
            let scale = (yg * noise + scalePrior) / (gg * noise + scalePrior)
            let residual = sums[0] - 2 * scale * yg + scale * scale * gg
            costs.append(residual * noise + (scale - 1) * (scale - 1) * scalePrior + (growth - 1) * (growth - 1) * growthPrior)
            scales.append(scale)
        }
        guard let best = costs.indices.min(by: { costs[$0] < costs[$1] }) else { return (1, 1) }
        var growth = growths[best]
        var scale = scales[best]
        if best > 0, best < costs.count - 1 {
            let curvature = costs[best - 1] - 2 * costs[best] + costs[best + 1]
            if curvature > 0 {
                let shift = 0.5 * (costs[best - 1] - costs[best + 1]) / curvature
                growth += shift * 0.05
                scale += shift * (shift > 0 ? scales[best + 1] - scales[best] : scales[best] - scales[best - 1])
            }
        }
        return (min(3, max(0.3, scale)), min(1.6, max(0.6, growth)))
    }
}
