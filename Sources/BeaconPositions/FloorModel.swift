import Foundation

/// A site's floor as the position filter sees it: a grid of cells over the zones' rectangles, the RSSI each
/// receiver is expected to hear from each cell under the site's `RadioModel`, the zone each cell lies in, and how
/// likely a reading is given the level expected. Fixed for a site; shared by every transmitter's `PositionBelief`.
public struct FloorModel: Sendable {
    /// A receiver's position in metres (its height where known), its RSSI offset (what it hears above the model)
    /// and its id in a `RadioMap`.
    public struct Receiver: Sendable, Equatable {
        public var x: Double
        public var y: Double
        public var z: Double?
        public var offsetDb: Double
        public var id: String

        public init(x: Double, y: Double, z: Double? = nil, offsetDb: Double = 0, id: String = "") {
            self.x = x
            self.y = y
            self.z = z
            self.offsetDb = offsetDb
            self.id = id
        }
    }

    /// At most this many cells: a larger floor gets larger cells (a warehouse of 100 × 50 m, 1.1 m). A beacon's
    /// belief is 4 bytes a cell.
    public static let maximumCells = 4_000
    /// The finest cell, in metres: on recorded walks, positions and zones from 0.25 m cells were no better.
    public static let finestCell = 0.5
    /// How fast a transmitter may move, metres a second (a brisk walk).
    public static let walkingSpeed = 1.5
    /// How much wider than the model's noise a receiver's mean of a second is taken to be: less evidence than the
    /// noise says, so that a belief a few seconds old does not yet point to one side of a border it walks along
    /// (the narrowest that did not on the walks kept for choosing; BENCHMARKS.md).
    public static let noiseWidening = 1.3
    /// The least a reading's likelihood is, against 1 at its expected level: a reading far off the model (a
    /// reflection, a body in the way) does not rule a place out.
    public static let likelihoodFloor: Float = 1e-4
    /// The height a transmitter is taken to be carried at where a receiver's height is known, metres.
    public static let transmitterHeight = 1.2

    public let model: RadioModel
    public let cellSize: Double
    public let columns: Int
    public let rows: Int
    public let originX: Double
    public let originY: Double
    public let receivers: [Receiver]
    /// Per receiver, the RSSI expected in each cell (its offset included).
    let expected: [[Float]]
    /// Each zone's cells (by index into the rectangles given; a cell is in the first that holds its centre) as runs
    /// of neighbouring cells in cell order, so that a zone's share is summed a run at a time.
    let zoneRuns: [ZoneRun]
    struct ZoneRun: Sendable {
        var start: Int
        var count: Int
        var zone: Int
    }
    /// Where a walled floor's walls are, for each cell: 1 where a wall lies between it and the next cell of its row
    /// (`wallAfterInRow`) or of its column (`wallAfterInColumn`); nil on an open floor.
    let wallAfterInRow: [UInt8]?
    let wallAfterInColumn: [UInt8]?
    public let zoneCount: Int
    /// A reading's likelihood by its distance from the expected level, in steps of `likelihoodStep` dB.
    let likelihood: [Float]
    static let likelihoodStep: Float = 0.1

    /// A floor over the bounding box of `zones` (rectangles x0, y0, x1, y1; the first that holds a cell's centre
    /// is its zone), with `receivers` and `model`. With `doors` (for each two zones, whether a door joins them),
    /// a wall stands between neighbouring cells of two zones that no door joins; a door joins its zones all along
    /// their shared edge, and the floor outside every zone is open to all.
    /// A `map` corrects the model place by place for each receiver it has points for. With a `coarsening` above 1,
    /// cells that many times as wide (a `HindsightFloor`'s).
    public init(
        zones: [[Double]], receivers: [Receiver], model: RadioModel, doors: [[Bool]]? = nil, map: RadioMap? = nil, coarsening: Int = 1
    ) {
        let rects = zones.filter { $0.count == 4 }
        let x0 = rects.map { $0[0] }.min() ?? 0
        let y0 = rects.map { $0[1] }.min() ?? 0
        let x1 = max(rects.map { $0[2] }.max() ?? 1, x0 + Self.finestCell)
        let y1 = max(rects.map { $0[3] }.max() ?? 1, y0 + Self.finestCell)
        var cellSize = max(Self.finestCell, ((x1 - x0) * (y1 - y0) / Double(Self.maximumCells)).squareRoot())
        func cells(of size: Double) -> (columns: Int, rows: Int) {
            (max(1, Int(((x1 - x0) / size).rounded(.up))), max(1, Int(((y1 - y0) / size).rounded(.up))))
        }
        // Whole cells cover a little more than the floor: a few percent larger cells at most keep to the bound.
        for _ in 0..<10 where cells(of: cellSize).columns * cells(of: cellSize).rows > Self.maximumCells { cellSize *= 1.01 }
        cellSize *= Double(max(1, coarsening))
        self.cellSize = cellSize
        self.model = model
        self.receivers = receivers
        originX = x0
        originY = y0
        (columns, rows) = cells(of: cellSize)
        zoneCount = zones.count
        var zoneOfCell = [Int32](repeating: -1, count: columns * rows)
        var expected: [[Float]] = Array(repeating: [Float](repeating: 0, count: columns * rows), count: receivers.count)
        for row in 0..<rows {
            let y = y0 + (Double(row) + 0.5) * cellSize
            for column in 0..<columns {
                let x = x0 + (Double(column) + 0.5) * cellSize
                let cell = row * columns + column
                if let zone = zones.firstIndex(where: { $0.count == 4 && x >= $0[0] && x < $0[2] && y >= $0[1] && y < $0[3] }) {
                    zoneOfCell[cell] = Int32(zone)
                }
                for (index, receiver) in receivers.enumerated() {
                    let dz = receiver.z.map { Self.transmitterHeight - $0 } ?? 0
                    let distance = ((x - receiver.x) * (x - receiver.x) + (y - receiver.y) * (y - receiver.y) + dz * dz).squareRoot()
                    let correction = map?.correction(receiver: receiver.id, x: x, y: y) ?? 0
                    expected[index][cell] = Float(model.expected(distance: distance) + receiver.offsetDb + correction)
                }
            }
        }
        var zoneRuns: [ZoneRun] = []
        for cell in zoneOfCell.indices where zoneOfCell[cell] >= 0 {
            let zone = Int(zoneOfCell[cell])
            if let last = zoneRuns.last, last.zone == zone, last.start + last.count == cell {
                zoneRuns[zoneRuns.count - 1].count += 1
            } else {
                zoneRuns.append(ZoneRun(start: cell, count: 1, zone: zone))
            }
        }
        self.zoneRuns = zoneRuns
        self.expected = expected
        if let doors {
            let columns = columns
            let rows = rows
            func wall(_ a: Int, _ b: Int) -> UInt8 {
                let from = Int(zoneOfCell[a])
                let to = Int(zoneOfCell[b])
                guard from >= 0, to >= 0, from != to, doors.indices.contains(from), doors[from].indices.contains(to) else { return 0 }
                return doors[from][to] ? 0 : 1
            }
            wallAfterInRow = (0..<(columns * rows)).map { cell in cell % columns + 1 < columns ? wall(cell, cell + 1) : 0 }
            wallAfterInColumn = (0..<(columns * rows)).map { cell in cell / columns + 1 < rows ? wall(cell, cell + columns) : 0 }
        } else {
            wallAfterInRow = nil
            wallAfterInColumn = nil
        }
        let sigma = model.sigmaDb * Self.noiseWidening
        let steps = Int((5 * Float(sigma)) / Self.likelihoodStep) + 1
        likelihood = (0..<steps).map { step in
            let difference = Double(step) * Double(Self.likelihoodStep)
            return Float(exp(-difference * difference / (2 * sigma * sigma))) + Self.likelihoodFloor
        }
    }

    public var cellCount: Int { columns * rows }

    /// The cell that holds a point (the nearest one for a point off the floor).
    func cell(containing x: Double, _ y: Double) -> Int {
        let column = min(columns - 1, max(0, Int(((x - originX) / cellSize).rounded(.down))))
        let row = min(rows - 1, max(0, Int(((y - originY) / cellSize).rounded(.down))))
        return row * columns + column
    }

    /// The centre of a cell, metres.
    func centre(of cell: Int) -> (x: Double, y: Double) {
        (originX + (Double(cell % columns) + 0.5) * cellSize, originY + (Double(cell / columns) + 0.5) * cellSize)
    }
}
