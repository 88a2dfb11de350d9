/// Positions decided with hindsight, for a transmitter's history. Every second's readings are kept, and about every
/// other second the belief from the readings up to it, on a coarser floor; once `lagMicros` of later readings are
/// in, one backward pass gives each such second its belief given the readings before and after it (a two-filter smoother
/// over a fixed lag: the later readings run backwards in time through a belief of their own that starts spread over
/// the whole floor, and the product of the two is the belief at that second). A position asked for (`keep(at:)`)
/// is then drawn onto the line the seconds around it follow: a least-squares line in time over `lineMicros` either
/// side, taken at its moment. People and robots move in straight stretches between turns, which a belief that
/// spreads evenly in every direction does not know.
public struct PositionHindsight: Sendable {
    /// How long after a second readings at least count for it, microseconds (each pass decides the seconds this
    /// far behind the newest, the older ones with up to `passMicros` more). Alone, on the office's walks kept for
    /// choosing, 2, 5, 10, 20 and 60 s of readings after a position gave 1.00, 0.94, 0.91, 0.92 and 0.92 m at the
    /// median; with the line, 2, 5 and 10 s gave the same to a centimetre on the office's and the flat's sets for
    /// choosing, and a pass that starts further ahead of the seconds it decides costs more.
    public static let lagMicros: Int64 = 5_000_000
    /// How far either side of a position the seconds its line is fitted to reach, microseconds: on the office's
    /// walks kept for choosing, 5, 7 and 10 s gave 0.73, 0.66 and 0.67 m at the median.
    public static let lineMicros: Int64 = 7_000_000
    /// The backward pass runs once this much more than the lag has come in after the oldest second waiting, so
    /// that one pass decides that many seconds: each second is run backwards (lag + pass) / pass times, 1.25.
    static let passMicros: Int64 = 20_000_000

    /// A second of readings and, for the seconds decided, the belief after them on the hindsight's floor.
    struct Moment: Sendable {
        var timeMicros: Int64
        var readings: [(receiver: Int, rssi: Double)]
        var forward: [Float]?
    }

    /// Seconds this far apart at least are decided (about every other second of a beacon heard every second): on
    /// the sets for choosing, the line through them gave the same medians as through every second and p95 6 cm
    /// wider, and each second decided costs a copy of its belief, a product and an estimate.
    static let decidedEveryMicros: Int64 = 1_500_000

    /// A position asked for, with its belief's spread and zone shares once its second is decided.
    struct Asked: Sendable {
        var timeMicros: Int64
        var decided: (spread: Double, shares: [Double])?
    }

    /// A position kept: where the line puts the transmitter at its moment, the spread of its belief with hindsight,
    /// and each zone's share of that belief.
    public struct Kept: Sendable, Equatable {
        public var timeMicros: Int64
        public var x: Double
        public var y: Double
        public var spread: Double
        public var shares: [Double]
    }

    /// Seconds waiting for their later readings, in time order.
    private var waiting: [Moment] = []
    /// The newest second whose belief was kept to be decided.
    private var keptBeliefMicros: Int64?
    /// Seconds decided, each with the mean of its belief with hindsight, as far back as a line still needs them.
    private var decided: [(timeMicros: Int64, x: Double, y: Double)] = []
    /// Positions asked for and not given yet, in time order.
    private var asked: [Asked] = []

    public init() {}

    /// Whether nothing waits: no second undecided, no position not given.
    public var isEmpty: Bool { waiting.isEmpty && asked.isEmpty }

    /// A second's readings (each receiver's at most once) at `timeMicros` and the belief after them (on the floor
    /// `hindsightFloor` was made for); ignored unless later than the last second added.
    public mutating func add(
        _ readings: [(receiver: Int, rssi: Double)], at timeMicros: Int64, belief: PositionBelief, on hindsightFloor: HindsightFloor
    ) {
        guard !readings.isEmpty, timeMicros > (waiting.last?.timeMicros ?? decided.last?.timeMicros ?? .min) else { return }
        var forward: [Float]?
        if keptBeliefMicros.map({ timeMicros - $0 >= Self.decidedEveryMicros }) ?? true {
            forward = hindsightFloor.coarsened(belief.cells)
            if forward != nil { keptBeliefMicros = timeMicros }
        }
        waiting.append(Moment(timeMicros: timeMicros, readings: readings, forward: forward))
    }

    /// Asks for the position at `timeMicros`, a second added (or the latest before it); ignored unless later than
    /// the last asked for.
    public mutating func keep(at timeMicros: Int64) {
        guard timeMicros > (asked.last?.timeMicros ?? .min) else { return }
        asked.append(Asked(timeMicros: timeMicros))
    }

    /// The positions asked for whose line has all its seconds decided, in time order; with `final`, every one asked
    /// for, with what later readings there are (the data ended, or the transmitter left).
    public mutating func take(final: Bool, on hindsightFloor: HindsightFloor, scratch: inout PositionBelief.Scratch) -> [Kept] {
        if let newest = waiting.last?.timeMicros, let oldest = waiting.first?.timeMicros,
            final || newest - oldest >= Self.lagMicros + Self.passMicros
        {
            decide(through: final ? newest : newest - Self.lagMicros, on: hindsightFloor, scratch: &scratch)
        }
        var kept: [Kept] = []
        while let first = asked.first, let decision = first.decided,
            final || (decided.last?.timeMicros ?? .min) >= first.timeMicros + Self.lineMicros
        {
            let line = Self.line(through: decided.filter { abs($0.timeMicros - first.timeMicros) <= Self.lineMicros }, at: first.timeMicros)
            kept.append(Kept(timeMicros: first.timeMicros, x: line.x, y: line.y, spread: decision.spread, shares: decision.shares))
            asked.removeFirst()
        }
        if final {
            asked.removeAll()
            decided.removeAll()
        } else if let reach = (asked.first?.timeMicros ?? decided.last?.timeMicros).map({ $0 - Self.lineMicros }) {
            decided.removeAll { $0.timeMicros < reach }
        }
        return kept
    }

    /// Decides the waiting seconds up to `limit` in one backward pass from the newest.
    private mutating func decide(through limit: Int64, on hindsightFloor: HindsightFloor, scratch: inout PositionBelief.Scratch) {
        let floor = hindsightFloor.floor
        var backward = PositionBelief(floor: floor)
        var shares: [Double] = []
        var results: [(timeMicros: Int64, x: Double, y: Double)] = []
        // The second decided after the one at hand.
        var laterDecided = Int64.max
        for index in waiting.indices.reversed() {
            let time = waiting[index].timeMicros
            // Backwards in time, as forwards on negated times.
            backward.advance(to: -time, on: floor, scratch: &scratch)
            if waiting[index].forward != nil {
                // A second decided leaves `waiting`: its belief is taken out and weighed where it lies, not copied.
                if time <= limit, let forward = waiting[index].forward.take() {
                    var smoothed = PositionBelief(cells: forward)
                    smoothed.weigh(by: backward)
                    let estimate = smoothed.estimate(on: floor)
                    results.append((time, estimate.x, estimate.y))
                    // A position asked for at or after this second and before the next decided takes its belief.
                    if let askedIndex = asked.firstIndex(where: { $0.decided == nil && $0.timeMicros >= time && $0.timeMicros < laterDecided }) {
                        smoothed.zoneProbabilities(on: floor, into: &shares)
                        asked[askedIndex].decided = (estimate.spread, shares)
                    }
                }
                laterDecided = time
            }
            backward.update(readings: waiting[index].readings, timeMicros: -time, on: floor, scratch: &scratch)
        }
        decided += results.reversed()
        waiting.removeAll { $0.timeMicros <= limit }
        // A position asked for before every second left to decide and given no belief has no second of its own to
        // be decided by: nothing is kept for it.
        let undecided = waiting.first { $0.forward != nil }?.timeMicros ?? .max
        asked.removeAll { $0.decided == nil && $0.timeMicros < undecided }
    }

    /// When the transmitter most likely crossed from the zone `from` into `to` (indices of the hindsight floor's
    /// zones), in hindsight: each second waiting after `after` given its belief with the readings after it up to
    /// the newest, the moment the running sum of `to`'s excess over `from` (their shares in dB, over time) was
    /// lowest, the change point at which `ZoneCrossings` dates moves from live levels, taken halfway to the next
    /// second. A live belief trails a walker; with the readings after the crossing it no longer does. Nil when no
    /// second after `after` waits with its belief, or where the lowest is the first of them and seconds since
    /// `after` were decided before it (the crossing may be older than the seconds waiting).
    public func crossing(
        from: Int, to: Int, after: Int64, on hindsightFloor: HindsightFloor, scratch: inout PositionBelief.Scratch
    ) -> Int64? {
        let floor = hindsightFloor.floor
        guard floor.zoneCount > max(from, to), from >= 0, to >= 0, waiting.contains(where: { $0.forward != nil && $0.timeMicros > after })
        else { return nil }
        var backward = PositionBelief(floor: floor)
        var shares: [Double] = []
        // Each decided second's excess of `to` over `from`, newest first.
        var excesses: [(timeMicros: Int64, db: Double)] = []
        for moment in waiting.reversed() {
            guard moment.timeMicros > after else { break }
            backward.advance(to: -moment.timeMicros, on: floor, scratch: &scratch)
            if let forward = moment.forward {
                var smoothed = PositionBelief(cells: forward)
                smoothed.weigh(by: backward)
                smoothed.zoneProbabilities(on: floor, into: &shares)
                excesses.append(
                    (moment.timeMicros, PositionBelief.zoneLevel(share: shares[to]) - PositionBelief.zoneLevel(share: shares[from])))
            }
            backward.update(readings: moment.readings, timeMicros: -moment.timeMicros, on: floor, scratch: &scratch)
        }
        excesses.reverse()
        var sum = 0.0
        var lowest = 0.0
        var lowestIndex = -1
        for (index, second) in excesses.enumerated() {
            let seconds = index == 0 ? 0 : Double(second.timeMicros - excesses[index - 1].timeMicros) / 1e6
            sum += second.db * max(seconds, 1)
            if sum <= lowest {
                lowest = sum
                lowestIndex = index
            }
        }
        // No second favoured `from`, or only the first of them, decided seconds after the beacon entered: the
        // crossing may be older than the seconds waiting.
        guard lowestIndex >= 0, lowestIndex > 0 || excesses[0].timeMicros - after <= Self.decidedEveryMicros else { return nil }
        guard lowestIndex + 1 < excesses.count else { return excesses[lowestIndex].timeMicros }
        return (excesses[lowestIndex].timeMicros + excesses[lowestIndex + 1].timeMicros) / 2
    }

    /// The least-squares line in time through `points`, taken at `time` (their mean where they do not span time).
    static func line(through points: [(timeMicros: Int64, x: Double, y: Double)], at time: Int64) -> (x: Double, y: Double) {
        guard !points.isEmpty else { return (0, 0) }
        let count = Double(points.count)
        var sumT = 0.0, sumTT = 0.0, sumX = 0.0, sumY = 0.0, sumTX = 0.0, sumTY = 0.0
        for point in points {
            let t = Double(point.timeMicros - time) / 1e6
            sumT += t
            sumTT += t * t
            sumX += point.x
            sumY += point.y
            sumTX += t * point.x
            sumTY += t * point.y
        }
        let determinant = count * sumTT - sumT * sumT
        guard determinant > 1e-9 else { return (sumX / count, sumY / count) }
        return ((sumX * sumTT - sumT * sumTX) / determinant, (sumY * sumTT - sumT * sumTY) / determinant)
    }
}

/// The floor positions with hindsight are decided on: a floor's cells `coarsening` by `coarsening`, so that
/// hindsight costs a fraction of a second's move.
public struct HindsightFloor: Sendable {
    /// How many of the floor's cells wide a cell of the hindsight's floor is.
    public static let coarsening = 2

    public let floor: FloorModel
    /// The finer floor's grid.
    let fineColumns: Int
    let fineRows: Int

    /// `coarse`, a floor made as `floor` was with `coarsening` (the same origin, cells that many times as wide),
    /// for `floor`.
    public init(_ coarse: FloorModel, for floor: FloorModel) {
        self.floor = coarse
        fineColumns = floor.columns
        fineRows = floor.rows
    }

    /// A belief's cells of the finer floor summed into this floor's cells; nil for cells of another floor.
    func coarsened(_ cells: [Float]) -> [Float]? {
        let factor = Self.coarsening
        guard cells.count == fineColumns * fineRows, (fineColumns + factor - 1) / factor == floor.columns,
            (fineRows + factor - 1) / factor == floor.rows
        else { return nil }
        var coarse = [Float](repeating: 0, count: floor.cellCount)
        cells.withUnsafeBufferPointer { fine in
            coarse.withUnsafeMutableBufferPointer { coarse in
                for row in 0..<fineRows {
                    let from = row &* fineColumns
                    let to = (row / factor) &* floor.columns
                    for column in 0..<fineColumns { coarse[to &+ column / factor] += fine[from &+ column] }
                }
            }
        }
        return coarse
    }
}
