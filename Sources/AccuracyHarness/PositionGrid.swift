import Foundation

/// Where a transmitter is on a floor plan, from the RSSI its receivers hear: a Bayes filter over a grid of cells.
/// Between readings the belief spreads as far as a walker goes (`predict`); each reading weighs every cell by how
/// likely that RSSI is there under a log-distance model of the radio, per receiver (`update`). The estimate is the
/// belief's mean, with its spread. A pure value.
public struct PositionGrid: Sendable {
    /// A receiver's position in metres (height when known) and its RSSI offset (what it hears above the model).
    public struct Receiver: Sendable {
        public var x: Double
        public var y: Double
        public var z: Double
        public var offsetDb: Double

        public init(x: Double, y: Double, z: Double = 0, offsetDb: Double = 0) {
            self.x = x
            self.y = y
            self.z = z
            self.offsetDb = offsetDb
        }
    }

    /// RSSI at distance d: `powerAt1mDbm - 10 × exponent × log10(d)`, with Gaussian noise of `sigmaDb`.
    public struct RadioModel: Sendable, Equatable {
        public var powerAt1mDbm: Double
        public var exponent: Double
        public var sigmaDb: Double

        public init(powerAt1mDbm: Double, exponent: Double, sigmaDb: Double) {
            self.powerAt1mDbm = powerAt1mDbm
            self.exponent = exponent
            self.sigmaDb = sigmaDb
        }

        /// The least-squares model of readings at known distances (a calibration walk), and each receiver's mean
        /// residual as its offset.
        public static func fit(_ samples: [(receiver: Int, distance: Double, rssi: Double)], receivers: Int) -> (RadioModel, offsets: [Double]) {
            let points = samples.map { (x: log10(max($0.distance, 0.1)), y: $0.rssi) }
            let count = Double(points.count)
            let meanX = points.reduce(0) { $0 + $1.x } / count
            let meanY = points.reduce(0) { $0 + $1.y } / count
            let sxy = points.reduce(0) { $0 + ($1.x - meanX) * ($1.y - meanY) }
            let sxx = points.reduce(0) { $0 + ($1.x - meanX) * ($1.x - meanX) }
            let slope = sxx > 0 ? sxy / sxx : -20
            let model = RadioModel(powerAt1mDbm: meanY - slope * meanX, exponent: max(1, -slope / 10), sigmaDb: 1)
            var sums = [Double](repeating: 0, count: receivers)
            var counts = [Double](repeating: 0, count: receivers)
            var squares = 0.0
            for sample in samples {
                let residual = sample.rssi - model.expected(distance: sample.distance)
                sums[sample.receiver] += residual
                counts[sample.receiver] += 1
            }
            let offsets = zip(sums, counts).map { $1 > 0 ? $0 / $1 : 0 }
            for sample in samples {
                let residual = sample.rssi - model.expected(distance: sample.distance) - offsets[sample.receiver]
                squares += residual * residual
            }
            var fitted = model
            fitted.sigmaDb = max(2, (squares / max(1, count - 2)).squareRoot())
            return (fitted, offsets)
        }

        public func expected(distance: Double) -> Double { powerAt1mDbm - 10 * exponent * log10(max(distance, 0.1)) }
    }

    public let cellSize: Double
    let columns: Int
    let rows: Int
    let originX: Double
    let originY: Double
    let model: RadioModel
    /// Per receiver, the RSSI expected in each cell (its offset included).
    let expected: [[Float]]
    /// How fast a transmitter may move, metres a second.
    public var speed: Double = 1.5
    /// How much wider than the model's noise a reading is taken to be: a receiver's readings come in bursts that
    /// share their fading, so they are not independent evidence (chosen on walks kept for choosing settings).
    public var noiseWidening = 1.5
    /// The belief, a probability per cell.
    private(set) var belief: [Float]
    private var scratch: [Float]
    private var timeMicros: Int64?
    /// Time not spread yet: readings come faster than a walker crosses a cell.
    private var unspreadSeconds = 0.0

    /// A grid over the rectangle `bounds` (x0, y0, x1, y1) in cells of `cellSize` metres, the transmitter held at
    /// `transmitterHeight`.
    public init(
        bounds: [Double], cellSize: Double = 0.25, receivers: [Receiver], model: RadioModel, transmitterHeight: Double = 1
    ) {
        self.cellSize = cellSize
        originX = bounds[0]
        originY = bounds[1]
        columns = max(1, Int(((bounds[2] - bounds[0]) / cellSize).rounded(.up)))
        rows = max(1, Int(((bounds[3] - bounds[1]) / cellSize).rounded(.up)))
        self.model = model
        let cellCount = columns * rows
        var expected: [[Float]] = []
        for receiver in receivers {
            var levels = [Float](repeating: 0, count: cellCount)
            for row in 0..<rows {
                for column in 0..<columns {
                    let dx = bounds[0] + (Double(column) + 0.5) * cellSize - receiver.x
                    let dy = bounds[1] + (Double(row) + 0.5) * cellSize - receiver.y
                    let dz = transmitterHeight - receiver.z
                    levels[row * columns + column] = Float(model.expected(distance: (dx * dx + dy * dy + dz * dz).squareRoot()) + receiver.offsetDb)
                }
            }
            expected.append(levels)
        }
        self.expected = expected
        belief = [Float](repeating: 1 / Float(cellCount), count: cellCount)
        scratch = belief
    }

    /// A reading of `receiver` at `timeMicros` (in time order): the belief spreads for the time since the last one,
    /// then is weighed by the reading.
    public mutating func update(receiver: Int, rssi: Double, timeMicros: Int64) {
        if let last = self.timeMicros {
            predict(elapsedSeconds: Double(max(0, timeMicros - last)) / 1e6)
        }
        self.timeMicros = timeMicros
        let levels = expected[receiver]
        let sigma = model.sigmaDb * noiseWidening
        let inverseVariance = Float(1 / (2 * sigma * sigma))
        let heard = Float(rssi)
        var total: Float = 0
        for cell in belief.indices {
            let difference = heard - levels[cell]
            // A floor under the likelihood: a reading far off the model (a reflection, a body) does not rule a
            // cell out.
            let weight = belief[cell] * (exp(-difference * difference * inverseVariance) + 1e-4)
            belief[cell] = weight
            total += weight
        }
        guard total > 0, total.isFinite else {
            belief = [Float](repeating: 1 / Float(belief.count), count: belief.count)
            return
        }
        for cell in belief.indices { belief[cell] /= total }
    }

    /// Spreads the belief as far as the transmitter can have moved in `elapsedSeconds` (with the time not spread
    /// before): a box blur of that many whole cells along each axis (two passes, close to a Gaussian).
    mutating func predict(elapsedSeconds: Double) {
        unspreadSeconds += elapsedSeconds
        let radius = Int(speed * unspreadSeconds / cellSize)
        guard radius > 0 else { return }
        unspreadSeconds -= Double(radius) * cellSize / speed
        for _ in 0..<2 {
            blur(radius: min(radius, max(columns, rows)), along: .rows)
            blur(radius: min(radius, max(columns, rows)), along: .columns)
        }
    }

    private enum Axis { case rows, columns }

    private mutating func blur(radius: Int, along axis: Axis) {
        let (lines, length) = axis == .rows ? (rows, columns) : (columns, rows)
        for line in 0..<lines {
            func index(_ position: Int) -> Int { axis == .rows ? line * columns + position : position * columns + line }
            var sum: Float = 0
            var count = 0
            for position in 0..<min(radius, length) {
                sum += belief[index(position)]
                count += 1
            }
            for position in 0..<length {
                let entering = position + radius
                if entering < length {
                    sum += belief[index(entering)]
                    count += 1
                }
                let leaving = position - radius - 1
                if leaving >= 0 {
                    sum -= belief[index(leaving)]
                    count -= 1
                }
                scratch[index(position)] = sum / Float(count)
            }
        }
        swap(&belief, &scratch)
    }

    /// How much of the belief lies in the rectangle `rect` (x0, y0, x1, y1), by cell centres.
    public func probability(in rect: [Double]) -> Double {
        guard rect.count == 4 else { return 0 }
        var total: Float = 0
        for row in 0..<rows {
            let y = originY + (Double(row) + 0.5) * cellSize
            guard y >= rect[1], y < rect[3] else { continue }
            for column in 0..<columns {
                let x = originX + (Double(column) + 0.5) * cellSize
                if x >= rect[0], x < rect[2] { total += belief[row * columns + column] }
            }
        }
        return Double(total)
    }

    /// The belief's mean, and its spread (the root of the mean squared distance from it), in metres.
    public var estimate: (x: Double, y: Double, spread: Double) {
        var x = 0.0
        var y = 0.0
        for row in 0..<rows {
            for column in 0..<columns {
                let weight = Double(belief[row * columns + column])
                x += weight * (originX + (Double(column) + 0.5) * cellSize)
                y += weight * (originY + (Double(row) + 0.5) * cellSize)
            }
        }
        var spread = 0.0
        for row in 0..<rows {
            for column in 0..<columns {
                let dx = originX + (Double(column) + 0.5) * cellSize - x
                let dy = originY + (Double(row) + 0.5) * cellSize - y
                spread += Double(belief[row * columns + column]) * (dx * dx + dy * dy)
            }
        }
        return (x, y, spread.squareRoot())
    }
}
