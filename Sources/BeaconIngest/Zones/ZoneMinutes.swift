/// The minutes of a site: presence per zone and beacon, counted once the counting lag has passed, and the end of
/// the data and a restart without a checkpoint.
extension SiteZoneTracker {
    /// A move is dated back to when the challenger became louder: the presence counted in the old zone since
    /// then belongs to the new one.
    mutating func movePresence(of beaconID: String, from old: Int, to new: Int, between from: Int64, and to: Int64) {
        var minute = Self.minuteStart(from)
        while minute < to {
            let overlap = min(to, minute + Self.minute) - max(from, minute)
            if let counted = presence[minute]?[old][beaconID], overlap > 0 {
                let moved = min(counted, overlap)
                presence[minute]?[old][beaconID] = counted - moved
                presence[minute, default: emptyMinute][new][beaconID, default: 0] += moved
            }
            minute += Self.minute
        }
    }

    mutating func addPresence(of beaconID: String, in zone: Int, from: Int64, to: Int64) {
        var minute = Self.minuteStart(from)
        while minute < to {
            let overlap = min(to, minute + Self.minute) - max(from, minute)
            if minute >= (nextMinute ?? .min), overlap > 0 {
                // In place: the minute's tables are changed where they are, not copied out and back.
                if presence[minute] == nil { presence[minute] = emptyMinute }
                presence[minute]![zone][beaconID, default: 0] += overlap
            }
            minute += Self.minute
        }
    }

    /// Counts every minute that ended the counting lag before `time`, and closes the visits of beacons gone.
    mutating func countMinutes(through time: Int64, into changes: inout [ZoneChange]) {
        var minute = nextMinute ?? presence.keys.min() ?? Self.minuteStart(time)
        if nextMinute == nil { nextMinute = minute }
        // A long silence: skip to a day before rather than write a day of empty minutes.
        if time - minute > 86_400_000_000 { minute = Self.minuteStart(time - 86_400_000_000) }
        while minute + Self.minute + countingLagMicros <= time {
            decidePaths(through: minute + Self.minute - 1, into: &changes)
            count(minute, into: &changes)
            minute += Self.minute
            closeAbsent(before: minute, into: &changes)
        }
        nextMinute = minute
    }

    /// Every zone's count of the minute that starts at `minute` (zeros included): a beacon counts in the zone where
    /// it spent the most of the minute when that is at least half of it — of the part observed, in the site's
    /// first minute (from its first reading) and at the end of the data (through `end`).
    mutating func count(_ minute: Int64, through end: Int64 = .max, into changes: inout [ZoneChange]) {
        let observedMicros = max(1, min(end, minute + Self.minute) - max(minute, firstReadingMicros ?? minute))
        checkpointDue = true
        let present = presence.removeValue(forKey: minute) ?? emptyMinute
        var best: [String: (zone: Int, micros: Int64)] = [:]
        for zone in zones.indices {
            for (beacon, micros) in present[zone] where micros > best[beacon]?.micros ?? 0 {
                best[beacon] = (zone, micros)
            }
        }
        var occupants = [Int](repeating: 0, count: zones.count)
        for (zone, micros) in best.values where 2 * micros >= observedMicros { occupants[zone] += 1 }
        for zone in zones.indices {
            let seconds = Double(present[zone].values.reduce(0, +)) / 1_000_000
            changes.append(
                .occupancy(site: site, zone: zones[zone], minuteMicros: minute, occupants: occupants[zone], occupantSeconds: seconds))
        }
    }

    mutating func closeAbsent(before time: Int64, into changes: inout [ZoneChange]) {
        let gone = beacons.filter { time - $0.value.lastSeenMicros > rules.absenceTimeoutMicros }
        for (beaconID, var beacon) in gone {
            if !storesLiveHistory { endPath(of: beaconID, &beacon, into: &changes) }
            leave(beaconID, beacon, into: &changes)
            beacons[beaconID] = nil
        }
    }

    /// For the end of the data (a replay, the demo): applies every reading still waiting and counts the minutes
    /// through the newest one, the last one as far as it went. Visits stay open (the beacons were still there),
    /// unless `closingVisits`: then each ends at its beacon's last reading (the site itself stopped).
    public mutating func finish(closingVisits: Bool = false) -> [ZoneChange] {
        guard let newest = eventTime.newestMicros else { return [] }
        var changes: [ZoneChange] = []
        eventTime.watermarkMicros = max(eventTime.watermarkMicros, newest)
        for reading in eventTime.takeReady() {
            countMinutes(through: reading.timeMicros, into: &changes)
            apply(reading, into: &changes)
        }
        decidePaths(through: newest, final: true, into: &changes)
        // A beacon in a zone and not yet absent was there when the data ended, as between two of its readings: in
        // a last minute only seconds long, its last reading may well be before the minute began.
        for (beaconID, beacon) in beacons where newest - beacon.lastSeenMicros <= rules.absenceTimeoutMicros {
            if let zone = storesLiveHistory ? beacon.zone : beacon.historyZone {
                addPresence(of: beaconID, in: zone, from: beacon.lastSeenMicros, to: newest)
            }
        }
        var minute = nextMinute ?? presence.keys.min() ?? Self.minuteStart(newest)
        while minute <= Self.minuteStart(newest) {
            count(minute, through: newest, into: &changes)
            minute += Self.minute
        }
        nextMinute = minute
        // The positions of each beacon's last minute: the data ended.
        for (beaconID, var beacon) in beacons.filter({ $0.value.hasPositionsToKeep }).sorted(by: { $0.key < $1.key }) {
            keepPositions(of: beaconID, &beacon, into: &changes)
            beacons[beaconID] = beacon
        }
        if closingVisits {
            let placed = beacons.filter { $0.value.zone != nil || $0.value.path != nil || $0.value.historyZone != nil }
            for (beaconID, var beacon) in placed.sorted(by: { $0.key < $1.key }) {
                if !storesLiveHistory { endPath(of: beaconID, &beacon, into: &changes) }
                leave(beaconID, beacon, into: &changes)
                beacons[beaconID] = nil
            }
        }
        return changes
    }

    /// A beacon whose visit a previous run left open.
    public struct OpenVisit: Sendable, Equatable {
        public var beaconID: String
        public var zone: String
        public var enterMicros: Int64
        public var lastSeenMicros: Int64

        public init(beaconID: String, zone: String, enterMicros: Int64, lastSeenMicros: Int64) {
            self.beaconID = beaconID
            self.zone = zone
            self.enterMicros = enterMicros
            self.lastSeenMicros = lastSeenMicros
        }
    }

    /// Picks up where a previous run left off: the beacons of its open visits are in their zones as last seen
    /// (a reading goes on with the same visit; a beacon not heard again has its visit closed when it was last
    /// seen), present there from the visit's start to when last seen in the minutes not counted yet, and
    /// counting goes on after the last minute it counted, so no minute is counted again from part of its readings.
    ///
    /// The site's agents count as heard at `nowMicros` (the ingest's clock), up to the newest time the previous run
    /// reached: a site none of whose agents comes back goes dark from there, and its visits close.
    public mutating func resume(openVisits: [OpenVisit], lastCountedMinuteMicros: Int64?, nowMicros: Int64) {
        if let minute = lastCountedMinuteMicros { nextMinute = minute + Self.minute }
        // Observed before: the minute in progress is not the site's first.
        firstReadingMicros = ([lastCountedMinuteMicros].compactMap { $0 } + openVisits.map(\.enterMicros)).min()
        let counted = lastCountedMinuteMicros.map { $0 + Self.minute + countingLagMicros }
        if let reached = ([counted].compactMap { $0 } + openVisits.map(\.lastSeenMicros)).max() {
            for agent in agentNumbers.keys { eventTime.agents[agent] = AgentProgress(newestMicros: reached, lastArrivalMicros: nowMicros) }
            eventTime.unheardAgents = []
            eventTime.firstArrivalMicros = nowMicros
        }
        for visit in openVisits {
            guard let zone = zones.firstIndex(of: visit.zone) else { continue }
            var beacon = Beacon()
            beacon.zone = zone
            beacon.enterMicros = visit.enterMicros
            beacon.lastSeenMicros = max(visit.lastSeenMicros, visit.enterMicros)
            if !storesLiveHistory {
                beacon.historyZone = zone
                beacon.historyEnterMicros = visit.enterMicros
                if rules.history == .confirmed { beacon.stays = [LiveStay(zone: zone, previousZone: nil, startMicros: visit.enterMicros, kept: true)] }
            }
            beacons[visit.beaconID] = beacon
            // Its presence in the minutes not counted yet, which the previous run held in memory.
            addPresence(of: visit.beaconID, in: zone, from: visit.enterMicros, to: beacon.lastSeenMicros)
        }
    }
}
