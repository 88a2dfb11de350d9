import BeaconPositions
import Foundation

/// Where a beacon is on its site's floor at one moment: the position belief's mean and spread, and each zone's
/// share of it.
public struct BeaconPosition: Sendable, Equatable {
    public var timeMicros: Int64
    public var x: Double
    public var y: Double
    /// The belief's spread around (x, y): the root of its mean squared distance from them, metres.
    public var errorM: Double
    /// Each zone's share of the belief, by zone id (zones with none left out).
    public var zoneShares: [String: Double]

    public init(timeMicros: Int64, x: Double, y: Double, errorM: Double, zoneShares: [String: Double]) {
        self.timeMicros = timeMicros
        self.x = x
        self.y = y
        self.errorM = errorM
        self.zoneShares = zoneShares
    }

    /// A beacon's position is given (live) and kept (history) once every this much event time: as it stands after
    /// the readings of each 10 s slot.
    public static let intervalMicros: Int64 = 10_000_000
    /// Zone shares below this are left out of a position.
    public static let leastShare = 0.005
}

/// A beacon's readings of one second, per receiver: they move its position belief together, once the second has
/// passed, as one reading each (their mean): a receiver's readings within a second share their fading, and the
/// belief costs the same to move whether a receiver heard one advert or ten.
struct HeardInSecond: Sendable {
    var second: Int64 = .min
    var newestMicros: Int64 = .min
    var readings: [(receiver: Int, sum: Double, count: Int)] = []

    mutating func add(receiver: Int, rssi: Double, at time: Int64) {
        newestMicros = max(newestMicros, time)
        if let index = readings.firstIndex(where: { $0.receiver == receiver }) {
            readings[index].sum += rssi
            readings[index].count += 1
        } else {
            readings.append((receiver, rssi, 1))
        }
    }
}

/// Positions where a site has a floor (its zones scored by them with `zone_scoring: position`): each beacon's
/// belief moved once a second by what each receiver heard of it in that second, and its position given once a slot
/// of event time, as the belief stands after the slot's readings (at the first reading of a later slot, or when the
/// beacon leaves or the data ends). The live position is that belief; the history's is the same moment decided
/// with hindsight (`PositionHindsight`: about every other second decided with the readings after it, the moment
/// drawn onto the line of those seconds 7 s either side), kept per minute once the minute has passed.
extension SiteZoneTracker {
    /// A reading of a placed receiver (as heard, with its agent's offset): the second before it, once passed,
    /// moves the belief and each zone's share of it; the slot before it, once passed, gives its position.
    mutating func locate(_ beaconID: String, _ beacon: inout Beacon, receiver: Int, rssi: Double, at time: Int64, into changes: inout [ZoneChange]) {
        let slot = time.floorDivided(by: BeaconPosition.intervalMicros)
        if slot > beacon.positionSlot { givePosition(of: beaconID, &beacon, into: &changes) }
        beacon.positionSlot = max(beacon.positionSlot, slot)
        let second = time.floorDivided(by: 1_000_000)
        if second > beacon.heardThisSecond.second {
            moveBelief(&beacon)
            beacon.heardThisSecond.second = second
        }
        beacon.heardThisSecond.add(receiver: receiver, rssi: rssi, at: time)
        beacon.positionGiven = false
    }

    /// Moves the beacon's belief by the readings of the second gathered (each receiver's mean, less the level the
    /// beacon is heard above the site's model), and each zone's share of it; the readings go to the position waiting
    /// for hindsight too, and what they say of the beacon's level to it.
    private mutating func moveBelief(_ beacon: inout Beacon) {
        guard let floor, !beacon.heardThisSecond.readings.isEmpty else { return }
        var belief = beacon.position ?? PositionBelief(floor: floor)
        beacon.position = nil
        let level = beacon.level.offsetDb
        let readings = beacon.heardThisSecond.readings.map { (receiver: $0.receiver, rssi: $0.sum / Double($0.count) - level) }
        let time = beacon.heardThisSecond.newestMicros
        belief.update(readings: readings, timeMicros: time, on: floor, scratch: &scratchCells)
        if readings.count >= TransmitterLevel.leastReceivers, let excess = belief.excessLevel(of: readings, on: floor) {
            beacon.level.learn(excessDb: excess, receivers: readings.count)
        }
        if let hindsightFloor { beacon.hindsight.add(readings, at: time, belief: belief, on: hindsightFloor) }
        belief.zoneProbabilities(on: floor, into: &beacon.positionShares)
        // Once a second here, rather than at each of the second's readings.
        if beacon.positionLevels.count != beacon.positionShares.count {
            beacon.positionLevels = [Double](repeating: 0, count: beacon.positionShares.count)
        }
        for zone in beacon.positionShares.indices {
            beacon.positionLevels[zone] = PositionBelief.zoneLevel(share: beacon.positionShares[zone])
        }
        beacon.position = belief
        beacon.heardThisSecond.readings.removeAll(keepingCapacity: true)
    }

    /// The live position of the beacon's newest slot, unless given already; the earlier slots' positions whose
    /// hindsight is complete, for the history.
    mutating func givePosition(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        guard !beacon.positionGiven else { return }
        moveBelief(&beacon)
        guard let floor, let belief = beacon.position, let time = belief.timeMicros else { return }
        beacon.positionGiven = true
        changes.append(.position(site: site, beaconID: beaconID, position: position(belief, at: time, shares: beacon.positionShares, on: floor)))
        beacon.hindsight.keep(at: time)
        record(of: beaconID, &beacon, final: false, into: &changes)
    }

    /// The beacon's positions of its current minute, for the history (the minute passed, or the beacon left), its
    /// newest slot's first, with what hindsight there is.
    mutating func keepPositions(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        givePosition(of: beaconID, &beacon, into: &changes)
        record(of: beaconID, &beacon, final: true, into: &changes)
        keepMinute(of: beaconID, &beacon, into: &changes)
    }

    /// The positions decided with hindsight that are ready (with `final`, every one asked for), for the history:
    /// the minute before each kept first, once it is in a later minute.
    private mutating func record(of beaconID: String, _ beacon: inout Beacon, final: Bool, into changes: inout [ZoneChange]) {
        guard let hindsightFloor else { return }
        for kept in beacon.hindsight.take(final: final, on: hindsightFloor, scratch: &scratchHindsightCells) {
            let position = BeaconPosition(
                timeMicros: kept.timeMicros, x: kept.x, y: kept.y, errorM: kept.spread, zoneShares: zoneShares(kept.shares))
            if let first = beacon.minutePositions.first, Self.minuteStart(first.timeMicros) != Self.minuteStart(position.timeMicros) {
                keepMinute(of: beaconID, &beacon, into: &changes)
            }
            beacon.minutePositions.append(position)
        }
    }

    private mutating func keepMinute(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        guard let first = beacon.minutePositions.first else { return }
        changes.append(
            .positionMinute(site: site, beaconID: beaconID, minuteMicros: Self.minuteStart(first.timeMicros), positions: beacon.minutePositions))
        beacon.minutePositions = []
    }

    /// A belief as a position: its mean, spread and zone shares.
    private func position(_ belief: PositionBelief, at time: Int64, shares: [Double], on floor: FloorModel) -> BeaconPosition {
        let estimate = belief.estimate(on: floor)
        return BeaconPosition(timeMicros: time, x: estimate.x, y: estimate.y, errorM: estimate.spread, zoneShares: zoneShares(shares))
    }

    /// Where a beacon of a site whose zones are scored by position crossed from zone `from` into `to`, in
    /// hindsight (`PositionHindsight.crossing`) since it entered its zone; nil elsewhere or where the seconds
    /// waiting do not tell.
    mutating func positionCrossing(of beacon: Beacon, from: Int, to: Int) -> Int64? {
        guard rules.scoring == .position, let hindsightFloor else { return nil }
        return beacon.hindsight.crossing(from: from, to: to, after: beacon.enterMicros, on: hindsightFloor, scratch: &scratchHindsightCells)
    }

    /// Zone shares by zone id, each to a thousandth, the least left out.
    private func zoneShares(_ shares: [Double]) -> [String: Double] {
        var byZone: [String: Double] = [:]
        for (zone, share) in shares.enumerated() where share >= BeaconPosition.leastShare {
            byZone[zones[zone]] = (share * 1000).rounded() / 1000
        }
        return byZone
    }
}
