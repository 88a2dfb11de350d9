import Foundation

/// How a site scores the zones a beacon may be in (sites file key `zone_scoring`).
public enum ZoneScoring: String, Sendable, Equatable, CaseIterable {
    /// Each zone by how well the beacon's levels at all the site's agents match what the site has learned of
    /// beacons in that zone (`ZonePatterns`).
    case pattern
    /// Each zone by the loudest reading among its own agents.
    case loudest
    /// Each zone by its share of where the beacon is on the site's floor (`PositionBelief`), in dB: the default
    /// where the site has an open floor (agents with `at`, zones with `rect`, no `doors`).
    case position
}

/// What a site learns of its zones from the beacons in them: for each zone and agent, how loud that agent hears
/// a beacon of the zone relative to the loudest agent hearing it (mean and spread, in dB). A pure value.
///
/// The zone a beacon is in is the one whose pattern explains its levels best, all agents together: an agent on a
/// wall that hears the next room's beacons loudly, or a receiver a few dB hotter than the others, stops pulling
/// beacons into its zone once the site has seen beacons on either side. Relative levels make the pattern the same
/// for beacons of any transmit power; a score fits each zone's pattern to the readings (see `score`).
///
/// Before anything is learned, each zone expects its own agents 3 dB below the loudest and the others 16 dB below,
/// give or take 6 dB (worth 30 readings). With a history decided in hindsight (`zone_history: path` or
/// `confirmed`) a zone learns from the seconds its stored history places beacons in it, every agent heard
/// (`ZonePatternSamples`); with `crossings`, from a beacon that has been in its live zone for a minute and whose
/// loudest agent is one of the zone's own, so that a zone's pattern cannot drift over to its neighbour's beacons.
/// The newest 3,000 readings of each zone and agent count, so the patterns follow a site that changes. A spread
/// never counts as less than 6 dB: shadowing makes any narrower pattern overconfident.
struct ZonePatterns: Sendable {
    struct Statistics: Sendable {
        var weight: Double
        var mean: Double
        var variance: Double
        /// Derived from the variance, floored at `minimumDeviationDb`: what a score needs.
        var inverseTwiceVariance = 0.0
        var halfLogVariance = 0.0

        init(mean: Double) {
            weight = ZonePatterns.priorWeight
            self.mean = mean
            variance = ZonePatterns.priorDeviationDb * ZonePatterns.priorDeviationDb
            derive()
        }

        init(weight: Double, mean: Double, variance: Double) {
            self.weight = weight
            self.mean = mean
            self.variance = variance
            derive()
        }

        mutating func add(_ value: Double) {
            weight = min(weight + 1, ZonePatterns.memory)
            let delta = value - mean
            mean += delta / weight
            variance += (delta * (value - mean) - variance) / weight
            derive()
        }

        private mutating func derive() {
            let floored = max(variance, ZonePatterns.minimumDeviationDb * ZonePatterns.minimumDeviationDb)
            inverseTwiceVariance = 1 / (2 * floored)
            halfLogVariance = 0.5 * log(floored)
        }
    }

    static let priorOwnDb = -3.0
    static let priorOtherDb = -16.0
    static let priorDeviationDb = 6.0
    static let priorWeight = 30.0
    static let memory = 3000.0
    static let minimumDeviationDb = 6.0
    /// Scores are twice the log-likelihood, so that they compare like levels in dB under the switching rule.
    static let scoreScale = 2.0
    static let learnAfterMicros: Int64 = 60_000_000
    /// How far the level a zone's pattern is fitted at may stray from the loudest reading (a prior, in dB).
    static let referenceDeviationDb = 4.0
    static let referenceWeight = 1 / (referenceDeviationDb * referenceDeviationDb)

    /// [zone][agent]
    private var statistics: [[Statistics]]
    let zoneOfAgent: [Int]

    init(zoneCount: Int, zoneOfAgent: [Int]) {
        self.zoneOfAgent = zoneOfAgent
        statistics = (0..<zoneCount).map { zone in
            zoneOfAgent.map { Statistics(mean: $0 == zone ? Self.priorOwnDb : Self.priorOtherDb) }
        }
    }

    /// Each zone's score for a beacon whose agents (by index) hear it at these levels (dB), written to `scores`.
    ///
    /// The patterns are relative levels, so each zone's is placed where it fits the readings best: at the mean of
    /// each agent's level less the zone's expectation for it, weighted by the expectation's precision and held
    /// near the loudest reading by a prior of `referenceDeviationDb`. Measured from the loudest reading alone,
    /// that reading's own shadowing would shift every comparison; fitted, it weighs as one agent among several.
    func score<Levels: Collection>(levels: Levels, into scores: inout [Double]) where Levels.Element == (agent: Int, level: Double) {
        let loudest = levels.lazy.map(\.level).max() ?? 0
        for zone in statistics.indices {
            // One pass: with x = level − expectation and w its precision, Σ w (x − r)² = Σ w x² − r Σ w x at the
            // fitted r = Σ w x / Σ w. The prior counts as one more term: the loudest reading, at `referenceWeight`.
            var weights = Self.referenceWeight
            var weighted = loudest * Self.referenceWeight
            var weightedSquares = loudest * loudest * Self.referenceWeight
            var halfLogVariances = 0.0
            for (agent, level) in levels {
                let entry = statistics[zone][agent]
                let precision = 2 * entry.inverseTwiceVariance
                let deviation = level - entry.mean
                weights += precision
                weighted += precision * deviation
                weightedSquares += precision * deviation * deviation
                halfLogVariances += entry.halfLogVariance
            }
            let reference = weighted / weights
            let total = -(weightedSquares - reference * weighted) / 2 - halfLogVariances
            scores[zone] = total * Self.scoreScale
        }
    }

    /// Learns from one reading of a beacon in its live zone `zone`, whose agents hear it at `levels`, if its
    /// loudest agent is one of the zone's own (`zone_history: crossings`).
    mutating func learn<Levels: Collection>(zone: Int, agent: Int, levels: Levels) where Levels.Element == (agent: Int, level: Double) {
        guard let loudest = levels.max(by: { $0.level < $1.level }), zoneOfAgent[loudest.agent] == zone,
            let own = levels.first(where: { $0.agent == agent })
        else { return }
        statistics[zone][agent].add(own.level - loudest.level)
    }

    /// Learns from one second of a beacon the stored history placed in `zone`: every agent heard, each relative to
    /// the loudest, whichever that is (`ZonePatternSamples`).
    mutating func learn(zone: Int, second levels: ArraySlice<(agent: Int32, level: Float)>) {
        guard let loudest = levels.lazy.map(\.level).max() else { return }
        for (agent, level) in levels { statistics[zone][Int(agent)].add(Double(level - loudest)) }
    }

    func encode(into writer: inout CheckpointWriter) {
        for zone in statistics {
            for entry in zone {
                writer.double(entry.weight)
                writer.double(entry.mean)
                writer.double(entry.variance)
            }
        }
    }

    /// Reads what `encode` wrote for patterns of the same zones and agents.
    mutating func decode(from reader: inout CheckpointReader) throws(CheckpointError) {
        for zone in statistics.indices {
            for agent in statistics[zone].indices {
                statistics[zone][agent] = Statistics(
                    weight: try reader.double(in: 0...1e12), mean: try reader.double(in: CheckpointReader.decibels),
                    variance: try reader.double(in: 0...1e6))
            }
        }
    }

    /// The learned mean and spread of one zone and agent (for tests and diagnostics).
    func expectation(zone: Int, agent: Int) -> (meanDb: Double, deviationDb: Double) {
        let entry = statistics[zone][agent]
        return (entry.mean, entry.variance.squareRoot())
    }
}

