/// The stored history of a site with `zone_history: path` or `confirmed`: visits and minutes follow each beacon's
/// likeliest path (`ZonePath`), decided the history lag behind its readings (with `confirmed`, where the path
/// confirms the live zone's stay, that zone: `ZoneConfirmation`), while the live zone follows the switching rule.
extension SiteZoneTracker {
    /// Whether the live decisions are stored as history (`zone_history: crossings`).
    var storesLiveHistory: Bool { rules.history == .crossings }

    var pathLagSeconds: Int { max(1, Int(rules.historyLagMicros / 1_000_000)) }

    /// Adds the zones' levels as heard at a reading at `time` to the beacon's path (a later reading of the same
    /// second replaces them), and stores what the path decides.
    mutating func extendPath(of beaconID: String, _ beacon: inout Beacon, at time: Int64, into changes: inout [ZoneChange]) {
        let second = time.floorDivided(by: 1_000_000)
        if let path = beacon.path, second < path.newestSecond { return }
        // The levels' storage is the tracker's, reused from reading to reading (the path keeps their values only).
        var heard: [Double] = []
        swap(&heard, &scratchPathLevels)
        defer { swap(&heard, &scratchPathLevels) }
        zoneLevels(of: beacon, heard: true, into: &heard)
        if rules.scoring == .pattern { beacon.samples.add(second: second, levels: beacon.readings.lazy.map { (agent: $0.number, level: $0.heard) }) }
        guard beacon.path != nil else {
            beacon.path = ZonePath(second: second, levels: heard, lagSeconds: pathLagSeconds)
            beacon.pathStartMicros = time
            return
        }
        var decided: [(second: Int64, zone: Int)] = []
        let doors = doors
        let cost = rules.pathChangeDbSeconds
        let doorless = cost * rules.doorlessEvidenceFactor
        // In place (not copied out and back), so that the back-pointers are not copied at every reading.
        beacon.path!.add(
            second: second, levels: heard, changeCost: { from, to in doors?[from][to] == false ? doorless : cost }, decided: &decided)
        if rules.history == .confirmed { confirm(&decided, of: &beacon) }
        record(decided, of: beaconID, &beacon, into: &changes)
    }

    /// Decides the beacon's path through `time` (a minute about to be counted; with `final`, its last reading).
    mutating func decidePath(
        of beaconID: String, _ beacon: inout Beacon, through time: Int64, final: Bool = false, into changes: inout [ZoneChange]
    ) {
        guard beacon.path != nil else { return }
        var decided: [(second: Int64, zone: Int)] = []
        beacon.path!.decide(through: time.floorDivided(by: 1_000_000), into: &decided)
        if rules.history == .confirmed { confirm(&decided, of: &beacon, final: final) }
        record(decided, of: beaconID, &beacon, into: &changes)
    }

    /// The beacon left (or the data ended): its path is decided to its last reading, where its visit ends.
    mutating func endPath(of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]) {
        decidePath(of: beaconID, &beacon, through: beacon.lastSeenMicros, final: true, into: &changes)
        if beacon.historyZone != nil {
            let exit = max(beacon.lastSeenMicros, beacon.historyEnterMicros)
            changes.append(.visitClosed(site: site, beaconID: beaconID, enterMicros: beacon.historyEnterMicros, exitMicros: exit))
        }
        beacon.historyZone = nil
        beacon.path = nil
        beacon.stays = []
        beacon.samples.removeAll()
    }

    /// Stores decided seconds: a second of presence each, and a visit for each run of seconds in one zone; the
    /// patterns learn from those sampled.
    private mutating func record(
        _ decided: [(second: Int64, zone: Int)], of beaconID: String, _ beacon: inout Beacon, into changes: inout [ZoneChange]
    ) {
        beacon.samples.take(decided) { zone, levels in patterns.learn(zone: zone, second: levels) }
        for (second, zone) in decided {
            let start = max(second * 1_000_000, beacon.pathStartMicros)
            if beacon.historyZone != zone {
                if beacon.historyZone != nil {
                    changes.append(.visitClosed(site: site, beaconID: beaconID, enterMicros: beacon.historyEnterMicros, exitMicros: start))
                }
                beacon.historyZone = zone
                beacon.historyEnterMicros = start
                changes.append(.visitOpened(site: site, zone: zones[zone], beaconID: beaconID, enterMicros: start))
            }
            addPresence(of: beaconID, in: zone, from: start, to: second * 1_000_000 + 1_000_000)
        }
        // With `confirmed`, the history's visit in the live zone begins more than a second before the live stay
        // only where a stay before it was left out (a bounce, stored in the path's zones): once the history has
        // decided the live stay's start, the live zone is told since when the history has the beacon there, so
        // that past the lag the live outputs and the stored history agree.
        if rules.history == .confirmed, let zone = beacon.zone, beacon.historyZone == zone,
            beacon.historyEnterMicros < beacon.enterMicros - 1_000_000, let newest = decided.last?.second,
            newest * 1_000_000 + 1_000_000 > beacon.enterMicros
        {
            beacon.enterMicros = beacon.historyEnterMicros
            changes.append(.placement(site: site, beaconID: beaconID, zone: zones[zone], sinceMicros: beacon.historyEnterMicros))
        }
    }

    /// Decides every beacon's path through `time` (with `final`, the end of the data).
    mutating func decidePaths(through time: Int64, final: Bool = false, into changes: inout [ZoneChange]) {
        guard !storesLiveHistory else { return }
        for beaconID in beacons.filter({ $0.value.path != nil }).map(\.key).sorted() {
            guard var beacon = beacons[beaconID] else { continue }
            decidePath(of: beaconID, &beacon, through: time, final: final, into: &changes)
            beacons[beaconID] = beacon
        }
    }
}
