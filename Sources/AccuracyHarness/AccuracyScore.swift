import BeaconAgent
import BeaconSimulation
import Foundation

/// How well the `visits` and `zone_occupancy` views of a run match the scenario's ground truth. Pure.
///
/// - Zone accuracy: beacon-seconds placed in the right zone, sampled every second of every true stay except its
///   first `settleSeconds` (nothing can be known of a beacon before it has been heard for a moment).
/// - False changes: visits beyond the beacon's true stays, summed per beacon, per beacon-hour on site.
/// - Missed stays, enter and exit error: per true stay (the last one only when 10 s of it fall inside the run), the
///   visits in its zone that overlap it; |recorded − true| of the first one's enter and of the last one's exit (for
///   stays that end within the run and visits that closed). Visits are dated in event time (a move is dated, in
///   hindsight, where the readings turned), so this is what reports show, whatever the delay of the decision itself (the site's
///   dwell plus the watermark's lag).
/// - Occupancy: mean |counted − true| over the zone-minutes of `zone_occupancy` inside the run, and the share of
///   them within ±1, where true is the number of beacons whose stays in the zone cover at least 30 s of the minute
///   (the rule the ingest counts by).
public struct AccuracyScore: Sendable, Equatable {
    public var beaconSeconds = 0
    public var correctSeconds = 0
    /// Every second of every true stay, the first ones too, and those not placed in the stay's zone: what a
    /// method identifies wrong from the first reading on (the share a room trial reports as rooms mis-identified).
    public var everySecond = 0
    public var everySecondWrong = 0
    /// True stays of at least `longStaySeconds`, and those of them no visit overlaps.
    public var longStays = 0
    public var missedLongStays = 0
    public var visits = 0
    public var trueStays = 0
    /// Visits beyond the true stays, summed over beacons.
    public var extraVisits = 0
    /// True stays without any visit in their zone overlapping them.
    public var missedStays = 0
    public var beaconHours = 0.0
    public var enterErrors: [Double] = []
    public var exitErrors: [Double] = []
    public var zoneMinutes = 0
    public var occupancyAbsoluteError = 0
    /// Zone-minutes counted within ±1 of the truth.
    public var zoneMinutesWithinOne = 0
    /// Zone-minutes counted exactly right.
    public var zoneMinutesExact = 0
    /// Beacons stored of their own that are no beacon of the scenario: an address (`mac:`) whose identity frames
    /// the pipeline did not tie to its beacon. Counted by a pipeline run (`AccuracyRun`) over every beacon the
    /// site stored; 0 without servers, where every reading is a scenario beacon's.
    public var phantomBeacons = 0
    /// Sighting and telemetry rows stored under an address id (`mac:`) that is no beacon of the scenario: frames
    /// the pipeline did not tie to the identity sent from the same address. Counted by a pipeline run.
    public var addressRows = 0
    /// The length of the run scored, for `addressRowsPerHour`.
    public var runHours = 0.0
    public var addressRowsPerHour: Double { runHours == 0 ? 0 : Double(addressRows) / runHours }
    /// Where the truth is positions (a recording): the stored positions (`beacon_position_history`) against
    /// where the beacon was at each; empty where the site stored none.
    public var positions = RecordedWalk.PositionErrors()

    public static let settleSeconds = 5.0
    public static let longStaySeconds = 30.0
    /// Stays cut short by the end of the run are matched only when at least this long.
    public static let decidableSeconds = 10.0

    public var zoneAccuracy: Double { beaconSeconds == 0 ? 0 : Double(correctSeconds) / Double(beaconSeconds) }
    public var zoneWrongEverySecond: Double { everySecond == 0 ? 0 : Double(everySecondWrong) / Double(everySecond) }
    public var falseChangesPerBeaconHour: Double { beaconHours == 0 ? 0 : Double(extraVisits) / beaconHours }
    public var medianEnterErrorSeconds: Double? { Self.median(enterErrors) }
    public var medianExitErrorSeconds: Double? { Self.median(exitErrors) }
    public var occupancyMeanAbsoluteError: Double {
        zoneMinutes == 0 ? 0 : Double(occupancyAbsoluteError) / Double(zoneMinutes)
    }
    public var occupancyWithinOne: Double { zoneMinutes == 0 ? 0 : Double(zoneMinutesWithinOne) / Double(zoneMinutes) }
    public var occupancyExact: Double { zoneMinutes == 0 ? 0 : Double(zoneMinutesExact) / Double(zoneMinutes) }

    /// One row of the `visits` view: times in Unix seconds, `exit` nil while open.
    public struct Visit: Sendable {
        public var beaconID: String
        public var zone: String
        public var enter: Double
        public var exit: Double?

        public init(beaconID: String, zone: String, enter: Double, exit: Double?) {
            self.beaconID = beaconID
            self.zone = zone
            self.enter = enter
            self.exit = exit
        }
    }

    /// One row of the `zone_occupancy` view.
    public struct ZoneMinute: Sendable {
        public var zone: String
        public var minuteStart: Double
        public var occupants: Int

        public init(zone: String, minuteStart: Double, occupants: Int) {
            self.zone = zone
            self.minuteStart = minuteStart
            self.occupants = occupants
        }
    }

    /// A beacon's true stay in a zone, in Unix seconds.
    public struct Stay: Sendable, Equatable {
        /// The beacon's id as the ingest stores it.
        public var beacon: String
        public var zone: String
        public var enter: Double
        public var exit: Double

        public init(beacon: String, zone: String, enter: Double, exit: Double) {
            self.beacon = beacon
            self.zone = zone
            self.enter = enter
            self.exit = exit
        }
    }

    /// Scores the rows of one site; `beaconIDs` maps the scenario's beacon names to the ids the ingest stores.
    public init(scenario: Scenario, site: String, beaconIDs: [String: String], visits: [Visit], minutes: [ZoneMinute]) {
        let start = Double(scenario.startUnixSeconds)
        let end = start + scenario.durationSeconds
        var stays: [String: [Stay]] = [:]
        for beacon in scenario.beacons where beacon.site == site {
            guard let id = beaconIDs[beacon.name] else { continue }
            stays[id] = Self.stays(of: beacon, start: start, end: end).map { Stay(beacon: id, zone: $0.zone, enter: $0.enter, exit: $0.exit) }
        }
        self.init(stays: stays, start: start, end: end, visits: visits, minutes: minutes)
    }

    /// Scores visits and zone-minutes against the true stays of each beacon (by the id the ingest stores), over the
    /// run from `start` to `end` (Unix seconds).
    public init(stays staysByBeacon: [String: [Stay]], start: Double, end: Double, visits: [Visit], minutes: [ZoneMinute]) {
        let visitsByBeacon = Dictionary(grouping: visits, by: \.beaconID)
        var staysByZone: [String: [Stay]] = [:]
        for (id, stays) in staysByBeacon.sorted(by: { $0.key < $1.key }) {
            let predicted = visitsByBeacon[id] ?? []
            self.visits += predicted.count
            trueStays += stays.count
            extraVisits += max(0, predicted.count - stays.count)
            for stay in stays {
                staysByZone[stay.zone, default: []].append(stay)
                beaconHours += (stay.exit - stay.enter) / 3600
                // The visits in the stay's zone that overlap it, in time order, swept once.
                let covering = predicted.filter {
                    $0.zone == stay.zone && $0.enter < stay.exit && ($0.exit ?? .infinity) > stay.enter
                }.sorted { $0.enter < $1.enter }
                var next = 0
                var coveredUntil = -Double.infinity
                var second = stay.enter
                while second < stay.exit {
                    while next < covering.count, covering[next].enter <= second {
                        coveredUntil = max(coveredUntil, covering[next].exit ?? .infinity)
                        next += 1
                    }
                    let correct = second < coveredUntil
                    everySecond += 1
                    if !correct { everySecondWrong += 1 }
                    if second >= stay.enter + Self.settleSeconds {
                        beaconSeconds += 1
                        if correct { correctSeconds += 1 }
                    }
                    second += 1
                }
                // A stay that began just before the run ended cannot have been decided yet.
                guard stay.exit - stay.enter >= Self.decidableSeconds || stay.exit < end else { continue }
                let long = stay.exit - stay.enter >= Self.longStaySeconds
                if long { longStays += 1 }
                guard let first = covering.first, let last = covering.last else {
                    missedStays += 1
                    if long { missedLongStays += 1 }
                    continue
                }
                enterErrors.append(abs(first.enter - stay.enter))
                if stay.exit < end, let exit = last.exit { exitErrors.append(abs(exit - stay.exit)) }
            }
        }
        for minute in minutes where minute.minuteStart >= start && minute.minuteStart + 60 <= end {
            // Per beacon, its seconds in each zone this minute; it counts in the zone of the most, from 30 s.
            var seconds: [String: [String: Double]] = [:]
            for (zone, stays) in staysByZone {
                for stay in stays {
                    let overlap = min(stay.exit, minute.minuteStart + 60) - max(stay.enter, minute.minuteStart)
                    if overlap > 0 { seconds[stay.beacon, default: [:]][zone, default: 0] += overlap }
                }
            }
            let beacons = seconds.values.filter { zones in
                guard let best = zones.max(by: { ($0.value, $1.key) < ($1.value, $0.key) }) else { return false }
                return best.key == minute.zone && best.value >= 30
            }.count
            zoneMinutes += 1
            occupancyAbsoluteError += abs(minute.occupants - beacons)
            if abs(minute.occupants - beacons) <= 1 { zoneMinutesWithinOne += 1 }
            if minute.occupants == beacons { zoneMinutesExact += 1 }
        }
    }

    /// The stays of a beacon's path, clipped to the run; moves within a zone do not end a stay.
    static func stays(of beacon: Scenario.Beacon, start: Double, end: Double) -> [Stay] {
        var stays: [Stay] = []
        for (index, stop) in beacon.path.enumerated() {
            guard let zone = stop.zone else { continue }
            let enter = start + stop.atSeconds
            let exit = index + 1 < beacon.path.count ? start + beacon.path[index + 1].atSeconds : end
            guard enter < end else { break }
            if let last = stays.last, last.zone == zone, last.exit == enter {
                stays[stays.count - 1].exit = min(exit, end)  // moved within the zone: the same stay
            } else {
                stays.append(Stay(beacon: beacon.name, zone: zone, enter: enter, exit: min(exit, end)))
            }
        }
        return stays
    }

    public static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}
