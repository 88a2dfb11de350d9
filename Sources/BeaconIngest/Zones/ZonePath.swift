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
    /// The back-pointers of the undecided seconds, oldest first: for each second and zone, the zone of the second
    /// before on the likeliest path ending there. Run-length coded, as runs of a count of consecutive seconds
    /// (two bytes, little-endian) and their pointers (a byte per zone): while the zones' order holds, every second
    /// has the same pointers, so a beacon that stays where it is keeps one run, not a byte per zone and second.
    private(set) var runs: [UInt8]
    let lagSeconds: Int
    /// The newest second added, and the newest decided (`newestSecond - decidedThrough` seconds wait).
    private(set) var newestSecond: Int64
    private(set) var decidedThrough: Int64

    /// A path that starts at `second` with these levels.
    init(second: Int64, levels: [Double], lagSeconds: Int) {
        self.lagSeconds = max(1, lagSeconds)
        scores = Self.relative(levels)
        base = [Double](repeating: 0, count: levels.count)
        runs = []
        newestSecond = second
        decidedThrough = second - 1
        // The first second's pointers are never followed.
        runs.append(1)
        runs.append(0)
        runs.append(contentsOf: (0..<levels.count).map { UInt8($0) })
    }

    private init(scores: [Double], base: [Double], runs: [UInt8], lagSeconds: Int, newestSecond: Int64, decidedThrough: Int64) {
        self.scores = scores
        self.base = base
        self.runs = runs
        self.lagSeconds = lagSeconds
        self.newestSecond = newestSecond
        self.decidedThrough = decidedThrough
    }

    var zoneCount: Int { scores.count }
    private var runBytes: Int { 2 + zoneCount }
    private static let longestRun = Int(UInt16.max)

    private func runLength(at start: Int) -> Int { Int(runs[start]) | Int(runs[start + 1]) << 8 }

    private mutating func setRunLength(at start: Int, _ length: Int) {
        runs[start] = UInt8(truncatingIfNeeded: length)
        runs[start + 1] = UInt8(truncatingIfNeeded: length >> 8)
    }

    /// Appends the pointers of the second after the newest undecided one.
    private mutating func appendSecond(pointers: some Collection<UInt8>) {
        if runs.count >= runBytes {
            let last = runs.count - runBytes
            let length = runLength(at: last)
            if length < Self.longestRun, runs[(last + 2)...].elementsEqual(pointers) {
                setRunLength(at: last, length + 1)
                return
            }
        }
        runs.append(1)
        runs.append(0)
        runs.append(contentsOf: pointers)
    }

    /// Adds second `second` with the zones' levels (-infinity: not a candidate): the newest second again replaces
    /// its levels (those of its last reading count); a later one is added (the seconds between carry no
    /// evidence), and what falls out of the lag is decided, appended as (second, zone) to `decided`.
    mutating func add(second: Int64, levels: [Double], changeCost: (Int, Int) -> Double, decided: inout [(second: Int64, zone: Int)]) {
        let evidence = Self.relative(levels)
        if second == newestSecond {
            setScores(evidence: evidence)
            return
        }
        guard second > newestSecond else { return }
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
            step(to: next, evidence: next == second ? evidence : nil, changeCost: changeCost)
            next += 1
        }
    }

    /// Moves the path on to `second`, whose levels relative to the best are `evidence` (nil: a silent second).
    private mutating func step(to second: Int64, evidence: [Double]?, changeCost: (Int, Int) -> Double) {
        let zoneCount = zoneCount
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: zoneCount) { pointers in
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
                base[zone] = best
                pointers[zone] = UInt8(from)
            }
            appendSecond(pointers: pointers)
        }
        setScores(evidence: evidence)
        newestSecond = second
    }

    /// The scores: `base` plus the newest second's `evidence` (nil: none), the best at 0.
    private mutating func setScores(evidence: [Double]?) {
        var top = -Double.infinity
        for zone in scores.indices {
            scores[zone] = base[zone] + (evidence?[zone] ?? 0)
            top = max(top, scores[zone])
        }
        for zone in scores.indices { scores[zone] -= top }
    }

    /// Decides every second through `through` (at most `newestSecond`) by tracing back from the best zone now.
    mutating func decide(through: Int64, into decided: inout [(second: Int64, zone: Int)]) {
        let last = min(through, newestSecond)
        guard last > decidedThrough else { return }
        // Traced back from the newest second; only the zones of the `count` oldest are kept.
        let count = Int(last - decidedThrough)
        let trace = trace(oldest: count)
        for index in 0..<count { decided.append((decidedThrough + 1 + Int64(index), trace[index])) }
        dropOldest(count)
        decidedThrough = last
    }

    /// The zones of the likeliest path ending in the best zone now, through the undecided seconds oldest first
    /// (`decidedThrough + 1` on): what would be decided if the readings ended here. Only the `oldest` first are
    /// returned where given.
    func trace(oldest: Int? = nil) -> [Int] {
        let undecided = Int(newestSecond - decidedThrough)
        let count = min(oldest ?? undecided, undecided)
        var trace = [Int](repeating: 0, count: count)
        var zone = bestZone
        var index = undecided - 1
        var start = runs.count
        while index >= 0, start >= runBytes {
            start -= runBytes
            for _ in 0..<runLength(at: start) where index >= 0 {
                if index < count { trace[index] = zone }
                zone = Int(runs[start + 2 + zone])
                index -= 1
            }
        }
        return trace
    }

    /// Forgets the pointers of the oldest `seconds` undecided seconds.
    private mutating func dropOldest(_ seconds: Int) {
        var left = seconds
        var cut = 0
        while left > 0, cut < runs.count {
            let length = runLength(at: cut)
            if length > left {
                setRunLength(at: cut, length - left)
                break
            }
            left -= length
            cut += runBytes
        }
        runs.removeFirst(cut)
    }

    func encode(into writer: inout CheckpointWriter) {
        writer.int(lagSeconds)
        writer.int(newestSecond)
        writer.int(decidedThrough)
        for score in scores + base { writer.double(score) }
        writer.int(runs.count / runBytes)
        for start in stride(from: 0, to: runs.count, by: runBytes) {
            writer.int(runLength(at: start))
            // Eight pointers to a word.
            for wordStart in stride(from: start + 2, to: start + runBytes, by: 8) {
                var word: UInt64 = 0
                for (index, pointer) in runs[wordStart..<min(wordStart + 8, start + runBytes)].enumerated() {
                    word |= UInt64(pointer) << (8 * UInt64(index))
                }
                writer.int(Int64(bitPattern: word))
            }
        }
    }

    /// Reads what `encode` wrote for a path over `zoneCount` zones; `ringOfPointers`: as checkpoint version 4
    /// wrote it, a byte per zone for each second of the lag, by second modulo the lag.
    static func decode(from reader: inout CheckpointReader, zoneCount: Int, ringOfPointers: Bool = false) throws(CheckpointError) -> ZonePath {
        let lag = Int(try reader.int(in: 1...86_400))
        let newest = try reader.int(in: 0...Int64.max / 1_000_000)
        let decided = try reader.int(in: newest - Int64(lag)...newest)
        var scores: [Double] = []
        for _ in 0..<zoneCount { scores.append(try reader.double(in: -1e15...0)) }
        var base: [Double] = []
        for _ in 0..<zoneCount { base.append(try reader.double(in: -1e15...1e15)) }
        var path = ZonePath(scores: scores, base: base, runs: [], lagSeconds: lag, newestSecond: newest, decidedThrough: decided)
        if ringOfPointers {
            let ring = try readPointers(lag * zoneCount, zoneCount: zoneCount, from: &reader)
            for second in stride(from: decided + 1, through: newest, by: 1) {
                let slot = Int(second.floorModulo(Int64(lag))) * zoneCount
                path.appendSecond(pointers: ring[slot..<(slot + zoneCount)])
            }
            return path
        }
        var covered = 0
        for _ in 0..<(try reader.count(minimumBytes: 16)) {
            let length = Int(try reader.int(in: 1...Int64(longestRun)))
            path.runs.append(UInt8(truncatingIfNeeded: length))
            path.runs.append(UInt8(truncatingIfNeeded: length >> 8))
            path.runs.append(contentsOf: try readPointers(zoneCount, zoneCount: zoneCount, from: &reader))
            covered += length
        }
        guard covered == Int(newest - decided) else { throw CheckpointError(code: .damaged, offset: reader.offset) }
        return path
    }

    /// Reads `count` pointers to zones, eight to a word.
    private static func readPointers(_ count: Int, zoneCount: Int, from reader: inout CheckpointReader) throws(CheckpointError) -> [UInt8] {
        var pointers: [UInt8] = []
        pointers.reserveCapacity(count)
        while pointers.count < count {
            let word = UInt64(bitPattern: try reader.int())
            for index in 0..<min(8, count - pointers.count) {
                let pointer = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))
                guard Int(pointer) < zoneCount else { throw CheckpointError(code: .damaged, offset: reader.offset) }
                pointers.append(pointer)
            }
        }
        return pointers
    }

    /// The zone the likeliest path is in now (between equal scores, the first).
    var bestZone: Int { scores.indices.max { (scores[$0], -$0) < (scores[$1], -$1) } ?? 0 }

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
