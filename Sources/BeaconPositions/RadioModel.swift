import Foundation

/// How loud a receiver hears a transmitter at a distance: `powerAt1mDbm - 10 × exponent × log10(d)`, with Gaussian
/// noise of `sigmaDb` (log-distance path loss).
public struct RadioModel: Sendable, Equatable {
    public var powerAt1mDbm: Double
    public var exponent: Double
    public var sigmaDb: Double

    public init(powerAt1mDbm: Double, exponent: Double, sigmaDb: Double) {
        self.powerAt1mDbm = powerAt1mDbm
        self.exponent = exponent
        self.sigmaDb = sigmaDb
    }

    /// The model a site without one of its own uses: fitted on readings of a carried beacon at known distances
    /// in an open-plan office (docs/proximity-and-occupancy.md, "Positions").
    public static let openPlan = RadioModel(powerAt1mDbm: -61.7, exponent: 1.39, sigmaDb: 5.2)

    /// A reading used to fit a model: which receiver heard it, at what true distance, how loud.
    public struct Sample: Sendable {
        public var receiver: Int
        public var distance: Double
        public var rssi: Double

        public init(receiver: Int, distance: Double, rssi: Double) {
            self.receiver = receiver
            self.distance = distance
            self.rssi = rssi
        }
    }

    /// The least-squares model of readings at known distances (a calibration walk), and each receiver's mean
    /// residual as its offset (of `receivers`; 0 for one that heard nothing). The noise is the residuals' spread,
    /// at least 2 dB.
    public static func fit(_ samples: [Sample], receivers: Int) -> (model: RadioModel, offsets: [Double]) {
        let points = samples.map { (x: log10(max($0.distance, 0.1)), y: $0.rssi) }
        let count = Double(max(points.count, 1))
        let meanX = points.reduce(0) { $0 + $1.x } / count
        let meanY = points.reduce(0) { $0 + $1.y } / count
        let sxy = points.reduce(0) { $0 + ($1.x - meanX) * ($1.y - meanY) }
        let sxx = points.reduce(0) { $0 + ($1.x - meanX) * ($1.x - meanX) }
        let slope = sxx > 0 ? sxy / sxx : -20
        let model = RadioModel(powerAt1mDbm: meanY - slope * meanX, exponent: max(1, -slope / 10), sigmaDb: 1)
        var sums = [Double](repeating: 0, count: receivers)
        var counts = [Double](repeating: 0, count: receivers)
        for sample in samples where sample.receiver < receivers {
            sums[sample.receiver] += sample.rssi - model.expected(distance: sample.distance)
            counts[sample.receiver] += 1
        }
        let offsets = zip(sums, counts).map { $1 > 0 ? $0 / $1 : 0 }
        var squares = 0.0
        for sample in samples where sample.receiver < receivers {
            let residual = sample.rssi - model.expected(distance: sample.distance) - offsets[sample.receiver]
            squares += residual * residual
        }
        var fitted = model
        fitted.sigmaDb = max(2, (squares / max(1, count - 2)).squareRoot())
        return (fitted, offsets)
    }

    public func expected(distance: Double) -> Double { powerAt1mDbm - 10 * exponent * log10(max(distance, 0.1)) }
}
