/// The likeliest sequence of zones of one beacon, decided a fixed lag behind its readings: a Viterbi decoder over
/// its zones' levels second by second, each change of zone costing `changeCost` dB·s (times the doorless factor
/// between zones that share no door). Pure.
///
/// Each second adds the zones' levels, relative to the best, to the score of the likeliest path ending in each
/// zone; the path's seconds older than `lagSeconds` are decided by tracing back from the best zone now. A move the
/// readings show only faintly is kept if the seconds after it confirm it, and a stretch of shadowing that favours
/// a neighbour for a while is outweighed by the seconds either side of it: the history is decided by all the
/// readings around each second, not only by those before it.
struct ZonePath: Sendable, Equatable {
    /// The score of the likeliest path ending in each zone (dB·s), the best at 0...
    private(set) var scores: [Double]
    /// ...and what it was before the newest second's levels were added, which a later reading of that second
    /// replaces.
    private(set) var base: [Double]
    /// For each undecided second (ring, by second modulo `lagSeconds`) and zone: the zone of the second before on
    /// the likeliest path ending there.
    private(set) var pointers: [UInt8]
    let lagSeconds: Int
    /// The newest second added, and the newest decided (`newestSecond - decidedThrough` seconds wait).
    private(set) var newestSecond: Int64
    private(set) var decidedThrough: Int64

    /// A path that starts at `second` with these levels.
    init(second: Int64, levels: [Double], lagSeconds: Int) {
        self.lagSeconds = max(1, lagSeconds)
        scores = Self.relative(levels)
        base = [Double](repeating: 0, count: levels.count)
        pointers = [UInt8](repeating: 0, count: self.lagSeconds * levels.count)
        newestSecond = second
        decidedThrough = second - 1
    }

    init(scores: [Double], base: [Double], pointers: [UInt8], lagSeconds: Int, newestSecond: Int64, decidedThrough: Int64) {
        self.scores = scores
        self.base = base
        self.pointers = pointers
        self.lagSeconds = lagSeconds
        self.newestSecond = newestSecond
        self.decidedThrough = decidedThrough
    }

    var zoneCount: Int { scores.count }

    /// Adds second `second` with the zones' levels (-infinity: not a candidate): the newest second again replaces
    /// its levels (those of its last reading count); a later one is added (the seconds between carry no
    /// evidence), and what falls out of the lag is decided, appended as (second, zone) to `decided`.
    mutating func add(second: Int64, levels: [Double], changeCost: (Int, Int) -> Double, decided: inout [(second: Int64, zone: Int)]) {
        let evidence = Self.relative(levels)
        if second == newestSecond {
            scores = Self.normalized(zip(base, evidence).map { $0 + $1 })
            return
        }
        guard second > newestSecond else { return }
        let silent = [Double](repeating: 0, count: zoneCount)
        if second - newestSecond > Int64(lagSeconds) {
            // Silent for longer than the lag (a beacon heard again within the absence timeout, where that is the
            // longer): the path so far is decided, and goes on from the last `lagSeconds` seconds of the silence.
            decide(through: newestSecond, into: &decided)
            newestSecond = second - Int64(lagSeconds)
            decidedThrough = newestSecond
        }
        var next = newestSecond + 1
        while next <= second {
            if next - decidedThrough > Int64(lagSeconds) { decide(through: next - Int64(lagSeconds), into: &decided) }
            step(to: next, evidence: next == second ? evidence : silent, changeCost: changeCost)
            next += 1
        }
    }

    private mutating func step(to second: Int64, evidence: [Double], changeCost: (Int, Int) -> Double) {
        let slot = Int(second.floorModulo(Int64(lagSeconds))) * zoneCount
        var updated = scores
        for zone in 0..<zoneCount {
            var best = scores[zone]
            var from = zone
            for previous in 0..<zoneCount where previous != zone {
                let candidate = scores[previous] - changeCost(previous, zone)
                if candidate > best {
                    best = candidate
                    from = previous
                }
            }
            updated[zone] = best
            pointers[slot + zone] = UInt8(from)
        }
        base = updated
        scores = Self.normalized(zip(updated, evidence).map { $0 + $1 })
        newestSecond = second
    }

    /// Decides every second through `through` (at most `newestSecond`) by tracing back from the best zone now.
    mutating func decide(through: Int64, into decided: inout [(second: Int64, zone: Int)]) {
        let last = min(through, newestSecond)
        guard last > decidedThrough else { return }
        var zone = bestZone
        var trace = [Int](repeating: 0, count: Int(newestSecond - decidedThrough))
        var second = newestSecond
        while second > decidedThrough {
            trace[Int(second - decidedThrough - 1)] = zone
            zone = Int(pointers[Int(second.floorModulo(Int64(lagSeconds))) * zoneCount + zone])
            second -= 1
        }
        for index in 0..<Int(last - decidedThrough) { decided.append((decidedThrough + 1 + Int64(index), trace[index])) }
        decidedThrough = last
    }

    func encode(into writer: inout CheckpointWriter) {
        writer.int(lagSeconds)
        writer.int(newestSecond)
        writer.int(decidedThrough)
        for score in scores + base { writer.double(score) }
        // Eight pointers to a word.
        for start in stride(from: 0, to: pointers.count, by: 8) {
            var word: UInt64 = 0
            for (index, pointer) in pointers[start..<min(start + 8, pointers.count)].enumerated() {
                word |= UInt64(pointer) << (8 * UInt64(index))
            }
            writer.int(Int64(bitPattern: word))
        }
    }

    /// Reads what `encode` wrote for a path over `zoneCount` zones.
    static func decode(from reader: inout CheckpointReader, zoneCount: Int) throws(CheckpointError) -> ZonePath {
        let lag = Int(try reader.int(in: 1...86_400))
        let newest = try reader.int(in: 0...Int64.max / 1_000_000)
        let decided = try reader.int(in: newest - Int64(lag)...newest)
        var scores: [Double] = []
        for _ in 0..<zoneCount { scores.append(try reader.double(in: -1e15...0)) }
        var base: [Double] = []
        for _ in 0..<zoneCount { base.append(try reader.double(in: -1e15...1e15)) }
        var pointers: [UInt8] = []
        pointers.reserveCapacity(lag * zoneCount)
        while pointers.count < lag * zoneCount {
            let word = UInt64(bitPattern: try reader.int())
            for index in 0..<min(8, lag * zoneCount - pointers.count) {
                let pointer = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))
                guard Int(pointer) < zoneCount else { throw CheckpointError(code: .damaged, offset: reader.offset) }
                pointers.append(pointer)
            }
        }
        return ZonePath(scores: scores, base: base, pointers: pointers, lagSeconds: lag, newestSecond: newest, decidedThrough: decided)
    }

    /// The zone the likeliest path is in now (between equal scores, the first).
    var bestZone: Int { scores.indices.max { (scores[$0], -$0) < (scores[$1], -$1) } ?? 0 }

    /// Scores with the best at 0.
    private static func normalized(_ scores: [Double]) -> [Double] {
        let top = scores.max() ?? 0
        return scores.map { $0 - top }
    }

    /// Levels relative to the best, a zone that is no candidate far below.
    private static func relative(_ levels: [Double]) -> [Double] {
        let top = levels.max() ?? 0
        guard top > -.infinity else { return [Double](repeating: 0, count: levels.count) }
        return levels.map { $0 > -.infinity ? $0 - top : -1_000 }
    }
}

extension Int64 {
    /// The remainder of a division rounding down (never negative for a positive divisor).
    func floorModulo(_ divisor: Int64) -> Int64 {
        let remainder = self % divisor
        return remainder < 0 ? remainder + divisor : remainder
    }
}
