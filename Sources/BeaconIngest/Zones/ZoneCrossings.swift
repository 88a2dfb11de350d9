import Foundation

/// When a beacon most likely crossed into another zone, in hindsight: the history a site stores dates each move
/// there rather than where the (smoothed, and so late) evidence for it began. Pure.
///
/// For each other zone, the excess of its level over the current zone's, computed from the readings as heard
/// (not smoothed), is summed over time since the beacon entered its zone: before a move the sum falls, after it
/// the sum rises, so the moment it was lowest is the most likely moment of the move (the maximum-likelihood
/// change point of a shift in the mean). Smoothing delays a decision by seconds; this takes that delay out of
/// the history without making the decision itself any less steady.
struct ZoneCrossings: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var zone: Int
        var sum: Double
        var lowest: Double
        var lowestMicros: Int64
    }

    private(set) var entries: [Entry] = []

    init(entries: [Entry] = []) { self.entries = entries }

    /// Adds `seconds` of the levels (by zone, -infinity: not heard) at `time`, against the zone the beacon is in.
    mutating func add(levels: [Double], current: Int, seconds: Double, at time: Int64, unheard: Double) {
        let held = levels[current] > -.infinity ? levels[current] : unheard
        for zone in levels.indices where zone != current && levels[zone] > -.infinity {
            let index = entries.firstIndex { $0.zone == zone } ?? {
                entries.append(Entry(zone: zone, sum: 0, lowest: 0, lowestMicros: time))
                return entries.count - 1
            }()
            entries[index].sum += (levels[zone] - held) * seconds
            if entries[index].sum <= entries[index].lowest {
                entries[index].lowest = entries[index].sum
                entries[index].lowestMicros = time
            }
        }
    }

    /// The most likely moment of a move to `zone`, if it was ever heard.
    func moment(of zone: Int) -> Int64? { entries.first { $0.zone == zone }?.lowestMicros }

    mutating func removeAll() { entries.removeAll() }
}

extension SiteZoneTracker {
    /// Each zone's level for a beacon, by zone number: its share of the beacon's position in dB, or from its agents'
    /// fresh readings (smoothed, or as `heard`) its score under the learned patterns or its loudest reading
    /// (-infinity: not a candidate). Written to
    /// `levels`, whose storage is reused from reading to reading.
    func zoneLevels(of beacon: Beacon, heard: Bool, into levels: inout [Double]) {
        if levels.count == zones.count {
            for zone in levels.indices { levels[zone] = -.infinity }
        } else {
            levels = [Double](repeating: -.infinity, count: zones.count)
        }
        let readings = beacon.readings
        switch rules.scoring {
        case .position:
            // A beacon not located yet (no reading of a placed agent) has no level anywhere.
            for zone in beacon.positionLevels.indices { levels[zone] = beacon.positionLevels[zone] }
        case .pattern where !readings.isEmpty:
            patterns.score(levels: readings.lazy.map { (agent: $0.number, level: heard ? $0.heard : $0.rssi) }, into: &levels)
        default:
            for reading in readings {
                let zone = patterns.zoneOfAgent[reading.number]
                levels[zone] = max(levels[zone], heard ? reading.heard : reading.rssi)
            }
        }
    }
}
