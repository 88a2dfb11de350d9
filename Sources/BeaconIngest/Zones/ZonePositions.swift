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

/// The positions a site with `zone_scoring: position` gives: each beacon's position once a slot of event time,
/// as the belief stands after the slot's readings (given at the first reading of a later slot, or when the beacon
/// leaves or the data ends), and its positions of each minute once the beacon's readings have passed it.
extension SiteZoneTracker {
    /// The position of the beacon's newest slot, unless given already; the minute before it first, once the
    /// position is in a later minute.
    mutating func givePosition(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        guard !beacon.positionGiven, let floor, let belief = beacon.position, let time = belief.timeMicros else { return }
        beacon.positionGiven = true
        if let first = beacon.minutePositions.first, Self.minuteStart(first.timeMicros) != Self.minuteStart(time) {
            keepPositions(of: beaconID, &beacon, into: &changes)
        }
        let estimate = belief.estimate(on: floor)
        var shares: [String: Double] = [:]
        for (zone, share) in beacon.positionShares.enumerated() where share >= BeaconPosition.leastShare {
            shares[zones[zone]] = (share * 1000).rounded() / 1000
        }
        let position = BeaconPosition(timeMicros: time, x: estimate.x, y: estimate.y, errorM: estimate.spread, zoneShares: shares)
        beacon.minutePositions.append(position)
        changes.append(.position(site: site, beaconID: beaconID, position: position))
    }

    /// The beacon's positions of its current minute, for the history (the minute passed, or the beacon left), its
    /// newest slot's first.
    mutating func keepPositions(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        givePosition(of: beaconID, &beacon, into: &changes)
        guard let first = beacon.minutePositions.first else { return }
        changes.append(
            .positionMinute(site: site, beaconID: beaconID, minuteMicros: Self.minuteStart(first.timeMicros), positions: beacon.minutePositions))
        beacon.minutePositions = []
    }
}
