import Foundation

/// Where one transmitter is on a `FloorModel`: a Bayes filter over the floor's cells. Between readings the belief
/// spreads as far as a walker goes; each reading weighs every cell by how likely that RSSI is there. The estimate
/// is the belief's mean with its spread, and each zone's share of the belief. A pure value, a probability per cell.
public struct PositionBelief: Sendable {
    /// Storage a belief borrows while it moves, kept by its owner between moves so that moving allocates nothing.
    public struct Scratch: Sendable {
        var cells: [Float] = []
        /// The cells column by column, for an open floor's passes along its rows.
        var transposed: [Float] = []
        /// Each line's running sum.
        var sums: [Float] = []
        /// 1 / n for each window width n.
        private var reciprocals: [Float] = [0]
        public init() {}

        /// 1 / n for each width n up to `width` (0 for none), grown once and kept.
        mutating func reciprocals(through width: Int) -> [Float] {
            while reciprocals.count <= width { reciprocals.append(1 / Float(reciprocals.count)) }
            return reciprocals
        }
    }

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
    public mutating func update(receiver: Int, rssi: Double, timeMicros: Int64, on floor: FloorModel, scratch: inout Scratch) {
        update(readings: [(receiver, rssi)], timeMicros: timeMicros, on: floor, scratch: &scratch)
    }

    /// Readings of one moment (a receiver, as an index into the floor's receivers, and its RSSI): the belief
    /// spreads for the time since the previous moment (none for an older one), is weighed by each reading, and is
    /// normalized once.
    public mutating func update(readings: [(receiver: Int, rssi: Double)], timeMicros: Int64, on floor: FloorModel, scratch: inout Scratch) {
        guard readings.contains(where: { floor.expected.indices.contains($0.receiver) }), cells.count == floor.cellCount else { return }
        advance(to: timeMicros, on: floor, scratch: &scratch)
        let inverseStep = 1 / FloorModel.likelihoodStep
        let table = floor.likelihood
        let last = Float(table.count - 1)
        // Each pass weighs the cells by one reading and scales them by the sum the pass before left (so many
        // small likelihoods in a row never underflow); the last sum normalizes.
        var scale: Float = 1
        var total: Float = 0
        table.withUnsafeBufferPointer { likelihood in
            cells.withUnsafeMutableBufferPointer { belief in
                for reading in readings where floor.expected.indices.contains(reading.receiver) {
                    let level = Float(reading.rssi)
                    total = 0
                    floor.expected[reading.receiver].withUnsafeBufferPointer { levels in
                        for cell in 0..<belief.count {
                            let step = Int(min(abs(level - levels[cell]) * inverseStep, last))
                            let weight = belief[cell] * likelihood[step] * scale
                            belief[cell] = weight
                            total += weight
                        }
                    }
                    guard total > 0, total.isFinite else { return }
                    scale = 1 / total
                }
            }
        }
        guard total > 0, total.isFinite else {
            cells = [Float](repeating: 1 / Float(cells.count), count: cells.count)
            return
        }
        for cell in cells.indices { cells[cell] *= scale }
    }

    /// Spreads the belief for the time from its newest reading to `timeMicros` (nothing for an earlier time).
    public mutating func advance(to timeMicros: Int64, on floor: FloorModel, scratch: inout Scratch) {
        guard cells.count == floor.cellCount else { return }
        if let last = self.timeMicros, timeMicros > last {
            spread(seconds: Double(timeMicros - last) / 1e6, on: floor, scratch: &scratch)
        }
        self.timeMicros = max(self.timeMicros ?? timeMicros, timeMicros)
    }

    /// A belief of these cells' probabilities (on the floor they were taken on).
    init(cells: [Float]) { self.cells = cells }

    /// This belief weighed cell by cell by `other` (what readings this one has not seen say of the same moment, on
    /// the same floor), renormalized; unchanged where the two share nothing.
    mutating func weigh(by other: PositionBelief) {
        guard other.cells.count == cells.count else { return }
        var total: Float = 0
        for cell in cells.indices { total += cells[cell] * other.cells[cell] }
        guard total > 0, total.isFinite else { return }
        let inverse = 1 / total
        for cell in cells.indices { cells[cell] *= other.cells[cell] * inverse }
    }

    /// Spreads the belief as far as a walker goes in `seconds` (with the time not spread before): a box blur of
    /// that many whole cells along each axis, twice (close to a Gaussian), stopped by the floor's walls.
    mutating func spread(seconds: Double, on floor: FloorModel, scratch: inout Scratch) {
        unspreadSeconds += seconds
        let radius = Int(FloorModel.walkingSpeed * unspreadSeconds / floor.cellSize)
        guard radius > 0 else { return }
        unspreadSeconds -= Double(radius) * floor.cellSize / FloorModel.walkingSpeed
        if scratch.cells.count != cells.count { scratch.cells = cells }
        let bounded = min(radius, max(floor.columns, floor.rows))
        guard let rowWalls = floor.wallAfterInRow, let columnWalls = floor.wallAfterInColumn else {
            spreadOpen(radius: bounded, columns: floor.columns, rows: floor.rows, scratch: &scratch)
            return
        }
        for _ in 0..<2 {
            blur(radius: bounded, lines: floor.rows, length: floor.columns, stride: 1, lineStride: floor.columns, walls: rowWalls, scratch: &scratch)
            blur(radius: bounded, lines: floor.columns, length: floor.rows, stride: floor.columns, lineStride: 1, walls: columnWalls, scratch: &scratch)
        }
    }

    /// `spread` where no wall stands: the same blur along every row and along every column, so the passes may run
    /// in any order. Both passes along the rows run on the cells laid out column by column, so that every pass
    /// moves lines that lie side by side in memory and no cell waits on the one before it.
    private mutating func spreadOpen(radius: Int, columns: Int, rows: Int, scratch: inout Scratch) {
        if scratch.transposed.count != cells.count { scratch.transposed = cells }
        if scratch.sums.count < max(columns, rows) { scratch.sums = [Float](repeating: 0, count: max(columns, rows)) }
        let reciprocals = scratch.reciprocals(through: 2 * radius + 1)
        reciprocals.withUnsafeBufferPointer { reciprocals in
            cells.withUnsafeMutableBufferPointer { belief in
                scratch.cells.withUnsafeMutableBufferPointer { other in
                    scratch.transposed.withUnsafeMutableBufferPointer { transposed in
                        scratch.sums.withUnsafeMutableBufferPointer { sums in
                            Self.transpose(belief, into: transposed, rows: rows, columns: columns)
                            Self.boxAlongSideBySideLines(
                                transposed, into: other, radius: radius, lines: rows, length: columns, sums: sums, reciprocals: reciprocals)
                            Self.boxAlongSideBySideLines(
                                other, into: transposed, radius: radius, lines: rows, length: columns, sums: sums, reciprocals: reciprocals)
                            Self.transpose(transposed, into: belief, rows: columns, columns: rows)
                            Self.boxAlongSideBySideLines(
                                belief, into: other, radius: radius, lines: columns, length: rows, sums: sums, reciprocals: reciprocals)
                            Self.boxAlongSideBySideLines(
                                other, into: belief, radius: radius, lines: columns, length: rows, sums: sums, reciprocals: reciprocals)
                        }
                    }
                }
            }
        }
    }

    /// `cells` of `rows` lines of `columns` laid out column by column instead.
    private static func transpose(_ cells: UnsafeMutableBufferPointer<Float>, into out: UnsafeMutableBufferPointer<Float>, rows: Int, columns: Int) {
        for row in 0..<rows {
            let from = row &* columns
            for column in 0..<columns { out[column &* rows &+ row] = cells[from &+ column] }
        }
    }

    /// A moving average of `2 × radius + 1` cells along each of `lines` lines of `length` cells, where the lines lie
    /// side by side (the cell at `position` of `line` is at `position × lines + line`): each line has its own running
    /// sum, and what enters and leaves the window depends on the position alone.
    private static func boxAlongSideBySideLines(
        _ cells: UnsafeMutableBufferPointer<Float>, into out: UnsafeMutableBufferPointer<Float>, radius: Int, lines: Int, length: Int,
        sums: UnsafeMutableBufferPointer<Float>, reciprocals: UnsafeBufferPointer<Float>
    ) {
        for line in 0..<lines { sums[line] = 0 }
        for position in 0..<min(radius, length) {
            let along = position &* lines
            for line in 0..<lines { sums[line] += cells[along &+ line] }
        }
        for position in 0..<length {
            let entering = position &+ radius
            let leaving = position &- radius &- 1
            if entering < length {
                let along = entering &* lines
                for line in 0..<lines { sums[line] += cells[along &+ line] }
            }
            if leaving >= 0 {
                let along = leaving &* lines
                for line in 0..<lines { sums[line] -= cells[along &+ line] }
            }
            let scale = reciprocals[min(entering &+ 1, length) &- max(leaving &+ 1, 0)]
            let along = position &* lines
            for line in 0..<lines { out[along &+ line] = max(0, sums[line]) * scale }
        }
    }

    /// A moving average of `2 × radius + 1` cells along each of `lines` lines of `length` cells, each stretch
    /// between walls (`walls`: 1 where one follows a cell) on its own.
    private mutating func blur(radius: Int, lines: Int, length: Int, stride: Int, lineStride: Int, walls: [UInt8], scratch: inout Scratch) {
        let reciprocals = scratch.reciprocals(through: 2 * radius + 1)
        cells.withUnsafeBufferPointer { belief in
            scratch.cells.withUnsafeMutableBufferPointer { out in
                reciprocals.withUnsafeBufferPointer { reciprocal in
                    for line in 0..<lines {
                        let base = line &* lineStride
                        var start = 0
                        while start < length {
                            var end = start &+ 1
                            while end < length, walls[base &+ (end &- 1) &* stride] == 0 { end &+= 1 }
                            var sum: Float = 0
                            var count = 0
                            for position in start..<min(start &+ radius, end) {
                                sum += belief[base &+ position &* stride]
                                count &+= 1
                            }
                            for position in start..<end {
                                // What enters less what leaves, so that the running sum waits on one addition a cell.
                                var change: Float = 0
                                let entering = position &+ radius
                                if entering < end {
                                    change = belief[base &+ entering &* stride]
                                    count &+= 1
                                }
                                let leaving = position &- radius &- 1
                                if leaving >= start {
                                    change -= belief[base &+ leaving &* stride]
                                    count &-= 1
                                }
                                sum += change
                                out[base &+ position &* stride] = max(0, sum) * reciprocal[count]
                            }
                            start = end
                        }
                    }
                }
            }
        }
        swap(&cells, &scratch.cells)
    }

    /// How much louder each receiver heard the readings than the floor expects, on average over the belief: for
    /// each reading its RSSI less the level expected of its receiver, cell by cell weighed by the cell's probability;
    /// the mean over the readings. Nil for none on this floor.
    public func excessLevel(of readings: [(receiver: Int, rssi: Double)], on floor: FloorModel) -> Double? {
        guard cells.count == floor.cellCount else { return nil }
        var sum = 0.0
        var count = 0
        cells.withUnsafeBufferPointer { belief in
            for reading in readings where floor.expected.indices.contains(reading.receiver) {
                let expected = floor.expected[reading.receiver].withUnsafeBufferPointer { Self.dot(belief, $0) }
                sum += reading.rssi - Double(expected)
                count += 1
            }
        }
        return count > 0 ? sum / Double(count) : nil
    }

    /// The sum of `a` and `b` multiplied cell by cell.
    private static func dot(_ a: UnsafeBufferPointer<Float>, _ b: UnsafeBufferPointer<Float>) -> Float {
        let count = min(a.count, b.count)
        guard let a = a.baseAddress, let b = b.baseAddress else { return 0 }
        return eightAtATime(count: count, lanes: { SIMD8(a, at: $0) * SIMD8(b, at: $0) }, single: { a[$0] * b[$0] })
    }

    /// The sum of `count` cells from `start`.
    private static func sum(_ cells: UnsafeBufferPointer<Float>, from start: Int, count: Int) -> Float {
        guard let base = cells.baseAddress else { return 0 }
        let first = base + start
        return eightAtATime(count: count, lanes: { SIMD8(first, at: $0) }, single: { first[$0] })
    }

    /// The sum of `lanes` over positions 0, 8, 16, … below `count` and of `single` over the rest: eight running sums
    /// side by side, since a single one would wait on each addition before the next.
    @inline(__always)
    private static func eightAtATime(count: Int, lanes: (Int) -> SIMD8<Float>, single: (Int) -> Float) -> Float {
        var sums = SIMD8<Float>()
        var cell = 0
        while cell &+ 8 <= count {
            sums += lanes(cell)
            cell &+= 8
        }
        var total = sums.sum()
        while cell < count {
            total += single(cell)
            cell &+= 1
        }
        return total
    }

    /// A zone's level from its share of a belief: the share in dB, at least -40 dB (so far off, the transmitter is
    /// not there).
    public static func zoneLevel(share: Double) -> Double { 10 * log10(max(share, 1e-4)) }

    /// Each zone's share of the belief (by cell centres; the floor outside every zone is no zone's).
    public func zoneProbabilities(on floor: FloorModel, into shares: inout [Double]) {
        if shares.count != floor.zoneCount { shares = [Double](repeating: 0, count: floor.zoneCount) }
        shares.withUnsafeMutableBufferPointer { shares in
            for zone in shares.indices { shares[zone] = 0 }
            cells.withUnsafeBufferPointer { belief in
                for run in floor.zoneRuns where run.start + run.count <= belief.count {
                    shares[run.zone] += Double(Self.sum(belief, from: run.start, count: run.count))
                }
            }
        }
    }

    /// Where the transmitter is: the belief's mean, and its spread (the root of the mean squared distance from
    /// it), metres.
    public func estimate(on floor: FloorModel) -> (x: Double, y: Double, spread: Double) {
        // One pass: the belief's weight, and its first and second moments along each axis, row by row.
        var weight = 0.0
        var sumX = 0.0
        var sumY = 0.0
        var sumSquares = 0.0
        cells.withUnsafeBufferPointer { belief in
            for row in 0..<floor.rows {
                let y = floor.originY + (Double(row) + 0.5) * floor.cellSize
                var rowWeight = 0.0
                var rowX = 0.0
                var rowXX = 0.0
                for column in 0..<floor.columns {
                    let x = floor.originX + (Double(column) + 0.5) * floor.cellSize
                    let w = Double(belief[row * floor.columns + column])
                    rowWeight += w
                    rowX += w * x
                    rowXX += w * x * x
                }
                weight += rowWeight
                sumX += rowX
                sumY += rowWeight * y
                sumSquares += rowXX + rowWeight * y * y
            }
        }
        guard weight > 0 else { return (floor.originX, floor.originY, 0) }
        let x = sumX / weight
        let y = sumY / weight
        return (x, y, max(0, sumSquares / weight - x * x - y * y).squareRoot())
    }
}

private extension SIMD8 where Scalar == Float {
    /// The eight floats from `pointer + offset`, however aligned.
    init(_ pointer: UnsafePointer<Float>, at offset: Int) {
        self = UnsafeRawPointer(pointer + offset).loadUnaligned(as: SIMD8<Float>.self)
    }
}
