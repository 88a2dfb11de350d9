/// What a site with `zone_history: path` or `confirmed` learns its patterns from: a beacon's levels as heard,
/// every `intervalSeconds`th second of its path not decided yet, taught to the zone the stored history places that
/// second in once it is decided (`SiteZoneTracker.record`). Pure.
///
/// Deciding with the history lag's hindsight gives better labels than the live zone, and every agent's level
/// teaches, whichever is loudest: a beacon near the wall of its room, louder at the next room's receiver on that
/// wall, teaches its own zone that this happens. (With `crossings`, a beacon teaches from its live zone, and only
/// while its loudest agent is one of that zone's own: the live zone's mistakes would otherwise teach themselves.)
/// Seconds of shadowing a few seconds apart say much the same, so one in ten is kept, which bounds what a beacon
/// holds to a tenth of the lag's seconds.
struct ZonePatternSamples: Sendable, Equatable {
    /// The sampled seconds, oldest first, and where each one's levels end in `levels`.
    private(set) var seconds: [Int64] = []
    private(set) var ends: [Int32] = []
    /// Agent number and level as heard (dBm), for every agent heard at a sampled second.
    private(set) var levels: [(agent: Int32, level: Float)] = []

    static let intervalSeconds: Int64 = 10

    static func == (a: Self, b: Self) -> Bool {
        a.seconds == b.seconds && a.ends == b.ends && a.levels.elementsEqual(b.levels) { $0 == $1 }
    }

    var isEmpty: Bool { seconds.isEmpty }

    /// Keeps `second`'s levels if it is one of the sampled seconds; a later reading of the same second replaces them.
    mutating func add(second: Int64, levels heard: some Collection<(agent: Int, level: Double)>) {
        guard second.floorModulo(Self.intervalSeconds) == 0, seconds.last.map({ $0 <= second }) ?? true else { return }
        if seconds.last == second {
            seconds.removeLast()
            ends.removeLast()
            levels.removeLast(levels.count - Int(ends.last ?? 0))
        }
        seconds.append(second)
        levels.append(contentsOf: heard.lazy.map { (Int32($0.agent), Float($0.level)) })
        ends.append(Int32(levels.count))
    }

    /// Calls `teach` with the levels of each decided second that was sampled, and its zone; forgets every sample
    /// through the newest decided second.
    mutating func take(_ decided: [(second: Int64, zone: Int)], teach: (_ zone: Int, _ levels: ArraySlice<(agent: Int32, level: Float)>) -> Void) {
        guard let newest = decided.last?.second, let oldest = seconds.first, oldest <= newest else { return }
        var sample = 0
        for (second, zone) in decided where second.floorModulo(Self.intervalSeconds) == 0 {
            while sample < seconds.count, seconds[sample] < second { sample += 1 }
            guard sample < seconds.count else { break }
            if seconds[sample] == second { teach(zone, levels[start(of: sample)..<Int(ends[sample])]) }
        }
        let kept = seconds.partitioningIndex { $0 > newest }
        guard kept > 0 else { return }
        let cut = Int(ends[kept - 1])
        seconds.removeFirst(kept)
        ends.removeFirst(kept)
        levels.removeFirst(cut)
        for index in ends.indices { ends[index] -= Int32(cut) }
    }

    private func start(of sample: Int) -> Int { sample == 0 ? 0 : Int(ends[sample - 1]) }

    mutating func removeAll() { self = ZonePatternSamples() }

    func encode(into writer: inout CheckpointWriter) {
        writer.int(seconds.count)
        for sample in seconds.indices {
            writer.int(seconds[sample])
            writer.int(Int(ends[sample]) - start(of: sample))
            for entry in levels[start(of: sample)..<Int(ends[sample])] {
                writer.int(Int64(entry.agent))
                writer.double(Double(entry.level))
            }
        }
    }

    /// Reads what `encode` wrote, for agents numbered below `agentCount`.
    static func decode(from reader: inout CheckpointReader, agentCount: Int) throws(CheckpointError) -> ZonePatternSamples {
        var samples = ZonePatternSamples()
        for _ in 0..<(try reader.count(minimumBytes: 16)) {
            let second = try reader.int(in: 0...Int64.max / 1_000_000)
            guard second.floorModulo(intervalSeconds) == 0, samples.seconds.last.map({ $0 < second }) ?? true else {
                throw CheckpointError(code: .damaged, offset: reader.offset)
            }
            for _ in 0..<(try reader.count(minimumBytes: 16)) {
                let agent = try reader.index(below: agentCount)
                samples.levels.append((Int32(agent), Float(try reader.double(in: CheckpointReader.decibels))))
            }
            samples.seconds.append(second)
            samples.ends.append(Int32(samples.levels.count))
        }
        return samples
    }
}
