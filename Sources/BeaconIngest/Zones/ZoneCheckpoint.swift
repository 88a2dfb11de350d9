extension SiteZoneTracker {
    /// 2: readings as heard beside the smoothed ones, and the crossings; 3: how settled each beacon is; 4: the
    /// history's open visit and likeliest path (`zone_history: path`); 5: the path's back-pointers run-length
    /// coded; 6: the live stays (`zone_history: confirmed`); 7: the `zone_history` it was taken under; 8: the
    /// samples the patterns learn from (`ZonePatternSamples`). Earlier versions, without them, still read (taken
    /// under `crossings`, unless a beacon has a path; without samples, the seconds undecided then teach nothing).
    static let checkpointVersion: Int64 = 8

    /// The tracker's state as of its watermark, as bytes for `restore(checkpoint:)`: all of it but the readings
    /// still waiting, which the database holds as the site's sightings newer than the watermark.
    public mutating func takeCheckpoint() -> [UInt8] {
        checkpointDue = false
        var out = CheckpointWriter()
        out.int(Self.checkpointVersion)
        out.strings(zones)
        out.strings(agentNumbers.sorted { $0.value < $1.value }.map(\.key))
        out.string(rules.history.rawValue)
        out.int(eventTime.watermarkMicros)
        out.optional(nextMinute)
        out.optional(firstReadingMicros)
        out.optional(eventTime.firstArrivalMicros)
        out.strings(eventTime.unheardAgents.sorted())
        out.int(eventTime.agents.count)
        for (agent, progress) in eventTime.agents.sorted(by: { $0.key < $1.key }) {
            out.string(agent)
            out.int(progress.newestMicros)
            out.int(progress.lastArrivalMicros)
        }
        patterns.encode(into: &out)
        out.int(beacons.count)
        for (beaconID, beacon) in beacons.sorted(by: { $0.key < $1.key }) {
            out.string(beaconID)
            out.optional(beacon.zone.map(Int64.init))
            out.int(beacon.enterMicros)
            out.int(beacon.lastSeenMicros)
            out.int(beacon.readings.count)
            for reading in beacon.readings {
                out.int(reading.number)
                out.int(reading.time)
                out.double(reading.rssi)
                out.double(reading.heard)
            }
            out.int(beacon.evidence.count)
            for evidence in beacon.evidence {
                out.int(evidence.zone)
                out.double(evidence.dbSeconds)
                out.int(evidence.sinceMicros)
            }
            out.int(beacon.evidenceMicros)
            out.int(beacon.settledMicros)
            out.int(beacon.crossings.entries.count)
            for entry in beacon.crossings.entries {
                out.int(entry.zone)
                out.double(entry.sum)
                out.double(entry.lowest)
                out.int(entry.lowestMicros)
            }
            out.optional(beacon.appearedMicros)
            out.int(beacon.filters.count)
            for agent in beacon.filters {
                out.int(agent.number)
                out.optional(agent.filter?.timeMicros)
                if let filter = agent.filter {
                    out.double(filter.rssi)
                    out.double(filter.variance)
                }
            }
            out.optional(beacon.historyZone.map(Int64.init))
            out.int(beacon.historyEnterMicros)
            out.optional(beacon.path.map { _ in beacon.pathStartMicros })
            beacon.path?.encode(into: &out)
            out.int(beacon.stays.count)
            for stay in beacon.stays {
                out.int(stay.zone)
                out.optional(stay.previousZone.map(Int64.init))
                out.int(stay.startMicros)
                out.int(stay.kept ? 1 : 0)
            }
            beacon.samples.encode(into: &out)
        }
        out.int(presence.count)
        for (minute, perZone) in presence.sorted(by: { $0.key < $1.key }) {
            out.int(minute)
            for zone in perZone {
                out.int(zone.count)
                for (beaconID, micros) in zone.sorted(by: { $0.key < $1.key }) {
                    out.string(beaconID)
                    out.int(micros)
                }
            }
        }
        return out.bytes
    }

    /// Restores a state `takeCheckpoint()` saved for the same zones and agents. The readings it left waiting are
    /// to be added again (the site's sightings newer than `watermarkMicros`). The tracker is unchanged on error.
    public mutating func restore(checkpoint: [UInt8]) throws(CheckpointError) {
        var input = CheckpointReader(checkpoint)
        let version = try input.int()
        guard (1...Self.checkpointVersion).contains(version) else { throw CheckpointError(code: .unknownVersion, offset: 0) }
        let zoneIDs = try input.strings()
        let agentIDs = try input.strings()
        guard zoneIDs == zones, agentIDs == agentNumbers.sorted(by: { $0.value < $1.value }).map(\.key) else {
            throw CheckpointError(code: .otherLayout, offset: input.offset)
        }
        // A checkpoint of another history has no open visit where this one keeps it: the site resumes from its
        // open visits instead.
        if version >= 7, try input.string() != rules.history.rawValue {
            throw CheckpointError(code: .otherHistory, offset: input.offset)
        }
        var restored = self
        restored.eventTime.dropPending()
        // Every value is range-checked: a damaged or edited row must not reach the tracker's arithmetic.
        restored.eventTime.watermarkMicros = try input.time(also: [.min])
        restored.nextMinute = try input.optionalMinute()
        restored.firstReadingMicros = try input.optionalTime()
        restored.eventTime.firstArrivalMicros = try input.optionalTime()
        restored.eventTime.unheardAgents = Set(try input.strings())
        restored.eventTime.agents = [:]
        for _ in 0..<(try input.count(minimumBytes: 24)) {
            let agent = try input.string()
            restored.eventTime.agents[agent] = AgentProgress(newestMicros: try input.time(), lastArrivalMicros: try input.time())
        }
        try restored.patterns.decode(from: &input)
        restored.beacons = JournaledDictionary()
        for _ in 0..<(try input.count(minimumBytes: 40)) {
            let beaconID = try input.string()
            var beacon = Beacon()
            beacon.zone = try input.optionalIndex(below: zones.count)
            beacon.enterMicros = try input.time(also: [0])
            beacon.lastSeenMicros = try input.time(also: [0])
            for _ in 0..<(try input.count(minimumBytes: version == 1 ? 24 : 32)) {
                let number = try input.index(below: agentIDs.count)
                let time = try input.time()
                let rssi = try input.double(in: CheckpointReader.decibels)
                let heard = version == 1 ? rssi : try input.double(in: CheckpointReader.decibels)
                beacon.readings.append(AgentReading(number: number, time: time, rssi: rssi, heard: heard))
            }
            for _ in 0..<(try input.count(minimumBytes: 24)) {
                beacon.evidence.append(
                    (try input.index(below: zones.count), try input.double(in: 0...1e12), try input.time()))
            }
            beacon.evidenceMicros = try input.time(also: [0])
            if version >= 3 { beacon.settledMicros = try input.int(in: 0...86_400_000_000) }
            if version >= 2 {
                var entries: [ZoneCrossings.Entry] = []
                for _ in 0..<(try input.count(minimumBytes: 32)) {
                    entries.append(
                        ZoneCrossings.Entry(
                            zone: try input.index(below: zones.count), sum: try input.double(in: -1e15...1e15),
                            lowest: try input.double(in: -1e15...0), lowestMicros: try input.time()))
                }
                beacon.crossings = ZoneCrossings(entries: entries)
            }
            beacon.appearedMicros = try input.optionalTime()
            for _ in 0..<(try input.count(minimumBytes: 9)) {
                var agent = AgentFilter(number: try input.index(below: agentIDs.count))
                if let time = try input.optionalTime() {
                    agent.filter = RSSIFilter(
                        rssi: try input.double(in: CheckpointReader.decibels), variance: try input.double(in: 0...1e6),
                        timeMicros: time)
                }
                beacon.filters.append(agent)
            }
            if version >= 4 {
                beacon.historyZone = try input.optionalIndex(below: zones.count)
                beacon.historyEnterMicros = try input.time(also: [0])
                if let start = try input.optionalTime() {
                    beacon.pathStartMicros = start
                    beacon.path = try ZonePath.decode(from: &input, zoneCount: zones.count, ringOfPointers: version == 4)
                }
            }
            if version >= 6 {
                for _ in 0..<(try input.count(minimumBytes: 25)) {
                    beacon.stays.append(
                        LiveStay(
                            zone: try input.index(below: zones.count), previousZone: try input.optionalIndex(below: zones.count),
                            startMicros: try input.time(), kept: try input.int(in: 0...1) == 1))
                }
            }
            if version >= 8 { beacon.samples = try ZonePatternSamples.decode(from: &input, agentCount: agentIDs.count) }
            restored.beacons[beaconID] = beacon
        }
        restored.presence = [:]
        for _ in 0..<(try input.count(minimumBytes: 8)) {
            let minute = try input.minute()
            var perZone = emptyMinute
            for zone in zones.indices {
                for _ in 0..<(try input.count(minimumBytes: 16)) {
                    let beaconID = try input.string()
                    perZone[zone][beaconID] = try input.int(in: 0...60_000_000)
                }
            }
            restored.presence[minute] = perZone
        }
        guard input.isAtEnd else { throw CheckpointError(code: .damaged, offset: input.offset) }
        if version < 7, rules.history != .crossings || restored.beacons.contains(where: { $0.value.path != nil || $0.value.historyZone != nil }) {
            throw CheckpointError(code: .otherHistory, offset: input.offset)
        }
        restored.checkpointDue = false
        self = restored
    }
}
