import Foundation

/// Where one transmitter is on a `FloorModel`: a Bayes filter over the floor's cells. Between readings the belief
/// spreads as far as a walker goes; each reading weighs every cell by how likely that RSSI is there. The estimate
/// is the belief's mean with its spread, and each zone's share of the belief. A pure value, a probability per cell.
public struct PositionBelief: Sendable {
    private(set) var cells: [Float]
    /// The newest reading's time.
    public private(set) var timeMicros: Int64?
    /// Time not spread yet: readings come faster than a walker crosses a cell.
    private var unspreadSeconds = 0.0

    /// A belief spread evenly over the floor: nothing heard yet.
    public init(floor: FloorModel) {
        cells = [Float](repeating: 1 / Float(floor.cellCount), count: floor.cellCount)
    }

    /// A reading of `receiver` (an index into the floor's receivers) at `timeMicros`: the belief spreads for the
    /// time since the previous reading (none for a reading older than it), then is weighed by this one.
    public mutating func update(receiver: Int, rssi: Double, timeMicros: Int64, on floor: FloorModel, scratch: inout [Float]) {
        guard floor.expected.indices.contains(receiver), cells.count == floor.cellCount else { return }
        if let last = self.timeMicros, timeMicros > last {
            spread(seconds: Double(timeMicros - last) / 1e6, on: floor, scratch: &scratch)
        }
        self.timeMicros = max(self.timeMicros ?? timeMicros, timeMicros)
        let heard = Float(rssi)
        let inverseStep = 1 / FloorModel.likelihoodStep
        let table = floor.likelihood
        let last = table.count - 1
        var total: Float = 0
        floor.expected[receiver].withUnsafeBufferPointer { levels in
            table.withUnsafeBufferPointer { likelihood in
                cells.withUnsafeMutableBufferPointer { belief in
                    for cell in 0..<belief.count {
                        let step = Int(min(abs(heard - levels[cell]) * inverseStep, Float(last)))
                        let weight = belief[cell] * likelihood[step]
                        belief[cell] = weight
                        total += weight
                    }
                }
            }
        }
        guard total > 0, total.isFinite else {
            cells = [Float](repeating: 1 / Float(cells.count), count: cells.count)
            return
        }
        let inverse = 1 / total
        for cell in cells.indices { cells[cell] *= inverse }
    }

    /// Spreads the belief as far as a walker goes in `seconds` (with the time not spread before): a box blur of
    /// that many whole cells along each axis, twice (close to a Gaussian), stopped by the floor's walls.
    mutating func spread(seconds: Double, on floor: FloorModel, scratch: inout [Float]) {
        unspreadSeconds += seconds
        let radius = Int(FloorModel.walkingSpeed * unspreadSeconds / floor.cellSize)
        guard radius > 0 else { return }
        unspreadSeconds -= Double(radius) * floor.cellSize / FloorModel.walkingSpeed
        if scratch.count != cells.count { scratch = cells }
        let bounded = min(radius, max(floor.columns, floor.rows))
        for _ in 0..<2 {
            blur(radius: bounded, lines: floor.rows, length: floor.columns, stride: 1, lineStride: floor.columns, walls: floor.wallAfterInRow, scratch: &scratch)
            blur(radius: bounded, lines: floor.columns, length: floor.rows, stride: floor.columns, lineStride: 1, walls: floor.wallAfterInColumn, scratch: &scratch)
        }
    }

    /// A moving average of `2 × radius + 1` cells along each of `lines` lines of `length` cells, each stretch
    /// between walls (`walls`: 1 where one follows a cell) on its own.
    private mutating func blur(radius: Int, lines: Int, length: Int, stride: Int, lineStride: Int, walls: [UInt8]?, scratch: inout [Float]) {
        cells.withUnsafeBufferPointer { belief in
            scratch.withUnsafeMutableBufferPointer { out in
                for line in 0..<lines {
                    let base = line * lineStride
                    var start = 0
                    while start < length {
                        var end = start + 1
                        if let walls {
                            while end < length, walls[base + (end - 1) * stride] == 0 { end += 1 }
                        } else {
                            end = length
                        }
                        var sum: Float = 0
                        var count: Float = 0
                        for position in start..<min(start + radius, end) {
                            sum += belief[base + position * stride]
                            count += 1
                        }
                        for position in start..<end {
                            let entering = position + radius
                            if entering < end {
                                sum += belief[base + entering * stride]
                                count += 1
                            }
                            let leaving = position - radius - 1
                            if leaving >= start {
                                sum -= belief[base + leaving * stride]
                                count -= 1
                            }
                            out[base + position * stride] = sum / count
                        }
                        start = end
                    }
                }
            }
        }
        swap(&cells, &scratch)
    }

    /// Each zone's share of the belief (by cell centres; the floor outside every zone is no zone's).
    public func zoneProbabilities(on floor: FloorModel, into shares: inout [Double]) {
        if shares.count != floor.zoneCount { shares = [Double](repeating: 0, count: floor.zoneCount) }
        for zone in shares.indices { shares[zone] = 0 }
        var sums = [Float](repeating: 0, count: floor.zoneCount)
        for cell in cells.indices {
            let zone = Int(floor.zoneOfCell[cell])
            if zone >= 0 { sums[zone] += cells[cell] }
        }
        for zone in sums.indices { shares[zone] = Double(sums[zone]) }
    }

    /// Where the transmitter is: the belief's mean, and its spread (the root of the mean squared distance from
    /// it), metres.
    public func estimate(on floor: FloorModel) -> (x: Double, y: Double, spread: Double) {
        var x = 0.0
        var y = 0.0
        for cell in cells.indices {
            let centre = floor.centre(of: cell)
            x += Double(cells[cell]) * centre.x
            y += Double(cells[cell]) * centre.y
        }
        var spread = 0.0
        for cell in cells.indices {
            let centre = floor.centre(of: cell)
            spread += Double(cells[cell]) * ((centre.x - x) * (centre.x - x) + (centre.y - y) * (centre.y - y))
        }
        return (x, y, spread.squareRoot())
    }
}
