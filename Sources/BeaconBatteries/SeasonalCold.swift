import Foundation

/// The course of a place's cold through the year, learned from a beacon's own temperatures: the coldest reading of
/// each 4 hours fitted to a mean and a cycle of one year (`a + b·cos ωt + c·sin ωt`) by least squares, older hours
/// weighing less (half after a year) and the cycle's amplitude drawn towards none, so that a few weeks of readings
/// move it only as far as they show. What it keeps is the fit's sums: nine numbers, whatever the history's length.
///
/// A forecast asks how much colder or warmer the nights will be some days on than now (`shift`): an outdoor coin
/// cell stops in the first night its charge cannot carry, and in autumn each week's nights are colder than the last.
public struct SeasonalCold: Sendable, Equatable {
    /// The weighted sums of the design's products with itself and with the temperatures: 1, cos, sin, cos·cos,
    /// cos·sin, sin·sin, y, y·cos, y·sin.
    public internal(set) var sums = [Double](repeating: 0, count: 9)
    /// The newest 4-hour bucket added (what older ones' weights are relative to).
    public internal(set) var newestBucket: Int32?

    /// A bucket's weight halves in a year of buckets.
    static let halfLifeBuckets = 365.0 * 6
    static let year = 365.25
    /// The prior on the cycle's amplitude against a bucket's scatter about the fit: (4 °C / 10 °C)², counted once a
    /// day (a day's six buckets share its weather).
    static let amplitudePrior = 6 * 0.16
    /// At most this much colder or warmer than now, °C: the annual swing of the nights' lows in any climate where
    /// beacons hang outdoors.
    static let maximumShift = 25.0

    public init() {}

    /// The state `sums` and `newestBucket` describe (a saved one); nil when they are not finite.
    public init?(sums: [Double], newestBucket: Int32?) {
        guard sums.count == 9, sums.allSatisfy(\.isFinite), sums[0] >= 0 else { return nil }
        self.sums = sums
        self.newestBucket = newestBucket
    }

    /// The coldest reading of 4-hour bucket `bucket` (`BatteryLife.temperatureBucket` since the epoch). Buckets are
    /// added in order; one older than the newest is ignored.
    public mutating func add(bucket: Int32, celsius: Double) {
        guard celsius.isFinite else { return }
        if let newest = newestBucket {
            guard bucket > newest else { return }
            let decay = pow(0.5, Double(bucket - newest) / Self.halfLifeBuckets)
            for index in sums.indices { sums[index] *= decay }
        }
        newestBucket = bucket
        let (c, s) = Self.cycle(day: Double(bucket) / 6)
        let terms = [1, c, s, c * c, c * s, s * s, celsius, celsius * c, celsius * s]
        for index in sums.indices { sums[index] += terms[index] }
    }

    /// The fitted yearly cycle; nil under a day of buckets.
    public func course() -> Course? {
        guard sums[0] >= 6 else { return nil }
        let prior = Self.amplitudePrior
        let matrix = [
            [sums[0], sums[1], sums[2]],
            [sums[1], sums[3] + prior, sums[4]],
            [sums[2], sums[4], sums[5] + prior],
        ]
        return Self.solve(matrix, [sums[6], sums[7], sums[8]]).map { Course(cosine: $0[1], sine: $0[2]) }
    }

    /// The cycle fitted: how the cold moves through the year.
    public struct Course: Sendable {
        var cosine: Double
        var sine: Double

        /// Half the swing from the warmest nights of the year to the coldest, °C.
        public var amplitude: Double { (cosine * cosine + sine * sine).squareRoot() }

        /// The least and the most `shift` from `day` can be.
        public func shiftRange(fromDay day: Double) -> ClosedRange<Double> {
            let (c0, s0) = SeasonalCold.cycle(day: day)
            let now = cosine * c0 + sine * s0
            return max(-maximumShift, -amplitude - now)...min(maximumShift, amplitude - now)
        }

        /// The cold `days` after `day` (days since the epoch) less the cold on `day`, °C.
        public func shift(fromDay day: Double, days: Double) -> Double {
            let (c0, s0) = SeasonalCold.cycle(day: day)
            let (c1, s1) = SeasonalCold.cycle(day: day + days)
            return max(-maximumShift, min(maximumShift, cosine * (c1 - c0) + sine * (s1 - s0)))
        }
    }

    static func cycle(day: Double) -> (Double, Double) {
        let angle = 2 * .pi * day / year
        return (cos(angle), sin(angle))
    }

    /// A 3 × 3 system by Cramer's rule; nil when it is singular.
    static func solve(_ m: [[Double]], _ v: [Double]) -> [Double]? {
        func determinant(_ m: [[Double]]) -> Double {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        }
        let whole = determinant(m)
        guard abs(whole) > 1e-9 else { return nil }
        return (0..<3).map { column in
            var replaced = m
            for row in 0..<3 { replaced[row][column] = v[row] }
            return determinant(replaced) / whole
        }
    }
}
