/// How a site decides which zone a beacon is in (sites file keys in parentheses).
public struct ZoneRules: Sendable, Equatable {
    /// A challenger zone gathers evidence while it is louder than the current one by more than this
    /// (`zone_switch_margin_db`): the excess, in dB, times how long it lasts...
    public var switchMarginDb: Double = 2
    /// ...and the beacon moves once the evidence reaches this (`zone_switch_evidence_db_s`)...
    public var switchEvidenceDbSeconds: Double = 200
    /// ...and has been gathering for at least this long of event time (`zone_switch_dwell_s`).
    public var switchDwellMicros: Int64 = 10_000_000
    /// Not heard for this long: the beacon has left (`absence_timeout_s`); its visit ends when it was last heard.
    public var absenceTimeoutMicros: Int64 = 30_000_000
    /// A beacon that appears is placed once it has been heard for this long (by the agents around it), in the
    /// zone loudest by then; its visit starts at its first reading.
    public var entryDwellMicros: Int64 = 2_000_000
    /// An agent's reading counts toward the beacon's zone for this long.
    public var readingLifetimeMicros: Int64 = 10_000_000
    /// How the zones are compared (`zone_scoring`): by learned patterns of all agents' levels, or by each zone's
    /// loudest agent.
    public var scoring: ZoneScoring = .pattern
    /// How long a silent agent holds its site's decisions back, in the ingest's own time (`allowed_lateness_s`):
    /// its batches arriving within it are applied in event order, before any minute they fall in is counted.
    /// Past it the agent is let go, and what it brings back from behind the watermark is stored as sightings but
    /// moves no zone (counted as late). Lower values keep a site's tables fresher while one of its agents is away.
    public var allowedLatenessMicros: Int64 = 300_000_000

    public init() {}
}

/// What zone tracking adds to the database.
public enum ZoneChange: Sendable, Equatable {
    case visitOpened(site: String, zone: String, beaconID: String, enterMicros: Int64)
    case visitClosed(site: String, beaconID: String, enterMicros: Int64, exitMicros: Int64)
    /// The minute that starts at `minuteMicros`: the beacons that spent most of it in the zone (at least half of
    /// it, so a beacon counts in at most one zone), and the seconds of presence of every beacon summed.
    case occupancy(site: String, zone: String, minuteMicros: Int64, occupants: Int, occupantSeconds: Double)

    public var site: String {
        switch self {
        case .visitOpened(let site, _, _, _), .visitClosed(let site, _, _, _), .occupancy(let site, _, _, _, _): site
        }
    }
}

/// Zone assignment for one site, in event time. A pure state machine.
///
/// Readings (RSSI per beacon and agent) wait until the site's watermark passes them, then are smoothed and applied in
/// time order, so the same captures give the same visits whether they are replayed live or at full speed, and a
/// batch that arrives late (an agent's spool draining after an outage) still lands in the right minute. The
/// watermark is the oldest newest-reading over the site's live agents. Every agent of the sites file is live
/// until it has sent nothing for `allowedLatenessMicros` of the ingest's own time (counted from the tracker's first
/// batch for one never heard), so agents that replay at different speeds wait for each other; readings that an
/// agent let go brings back behind the watermark are stored as sightings but do not move zones (counted in
/// `lateReadings`). More than `maximumPending` readings waiting releases the slowest agent, to bound memory. When
/// every agent has been silent for `allowedLatenessMicros`, the watermark follows the ingest's clock from each
/// agent's newest reading on, so a site that goes dark closes its visits and counts its minutes, up to two minutes
/// past the absence timeout after its newest reading (beyond that its minutes are unknown, and not written).
///
/// Each zone has a level for a beacon: by default its score under the site's learned patterns (`ZonePatterns`),
/// which weighs the fresh readings of every agent; with `zone_scoring: loudest`, the loudest fresh reading of the
/// zone's own agents. A beacon is placed in the zone of the highest level and moves by change detection (Page's
/// CUSUM): each other zone gathers evidence, its excess over the current zone beyond `switchMarginDb` times how long it lasts,
/// never below 0; the beacon moves when a zone's evidence reaches `switchEvidenceDbSeconds` after gathering for at
/// least `switchDwellMicros`, and the move is dated when that evidence began. So a brief shadow (a person between
/// beacon and receiver) gathers a little and decays, while a move gathers steadily, sooner the clearer it is. Minutes are
/// counted when the watermark is an absence timeout past their end, since until then a reading can still show
/// that the beacon stayed through a gap.
public struct SiteZoneTracker: Sendable {
    public let site: String
    public let rules: ZoneRules
    private let zones: [String]
    /// A minute's presence before any: no beacon in any zone.
    private let emptyMinute: [[String: Int64]]
    /// The agents that serve a zone (the others' readings are ignored), numbered as in `patterns`, in the order
    /// of their ids (readings at the same time are applied in that order).
    private let agentNumbers: [String: Int]
    private var patterns: ZonePatterns
    /// The Kalman filter's settings, or nil where the site does not smooth.
    private let smoothing: ProximitySmoother.Configuration?

    /// A reading of one beacon by one agent (the agent is given separately): as heard plus the agent's offset
    /// from the sites file. The tracker smooths it, per beacon and agent, in event order.
    public struct BeaconReading: Sendable {
        public var beaconID: String
        public var timeMicros: Int64
        public var rssi: Double

        public init(beaconID: String, timeMicros: Int64, rssi: Double) {
            self.beaconID = beaconID
            self.timeMicros = timeMicros
            self.rssi = rssi
        }
    }

    struct Reading: Sendable {
        var beaconID: String
        var agentNumber: Int
        var timeMicros: Int64
        var rssi: Double
    }

    private struct AgentProgress: Sendable {
        var newestMicros: Int64
        var lastArrivalMicros: Int64
    }

    private struct AgentReading: Sendable {
        var number: Int
        var time: Int64
        var rssi: Double
    }

    /// Zones are numbered by their order in the sites file.
    private struct Beacon: Sendable {
        var zone: Int?
        var enterMicros: Int64 = 0
        var lastSeenMicros: Int64 = 0
        /// Newest reading per agent (a few agents hear a beacon: a small array costs less than a dictionary).
        var readings: [AgentReading] = []
        /// Per challenger zone: the evidence gathered for it (dB·s) and since when.
        var evidence: [(zone: Int, dbSeconds: Double, sinceMicros: Int64)] = []
        /// When the evidence was last brought up to date.
        var evidenceMicros: Int64 = 0
        /// The first reading of a beacon not placed yet.
        var appearedMicros: Int64?
        /// Each agent's RSSI filter (the site's `rssi_smoothing`), which outlives the reading's lifetime.
        var filters: [AgentFilter] = []
    }

    private struct AgentFilter: Sendable {
        var number: Int
        var filter: RSSIFilter?
    }

    private var pending: [Reading] = []
    private var agents: [String: AgentProgress] = [:]
    /// Agents of the sites file not heard yet, and when the tracker got its first batch.
    private var unheardAgents: Set<String>
    private var firstArrivalMicros: Int64?
    public var maximumPending = 2_000_000
    private var beacons = JournaledDictionary<String, Beacon>()
    /// The tracker as it was at `beginTransaction()`, without its beacons (journaled instead).
    private var undo: [SiteZoneTracker] = []
    /// Microseconds of presence per minute, zone number and beacon, for minutes not yet counted.
    private var presence: [Int64: [[String: Int64]]] = [:]
    /// The next minute to count.
    private var nextMinute: Int64?
    public private(set) var watermarkMicros: Int64 = .min
    /// The earliest reading applied: the site's first minute is observed from here.
    private var firstReadingMicros: Int64?
    public private(set) var lateReadings = 0
    /// Whether minutes were counted since the last `takeCheckpoint()`.
    public private(set) var checkpointDue = false

    static let minute: Int64 = 60_000_000
    /// How loud a zone none of whose agents hears the beacon (freshly) counts: below any receiver's sensitivity.
    static let unheardDbm = -105.0

    public init(site: SitesConfiguration.Site) {
        self.site = site.id
        rules = site.zoneRules
        smoothing = site.rssiSmoothing == .kalman ? ProximitySmoother.Configuration() : nil
        zones = site.zones.map(\.id)
        emptyMinute = Array(repeating: [:], count: zones.count)
        let placed = site.agents.compactMap { agent in agent.zone.map { (id: agent.id, zone: $0) } }.sorted { $0.id < $1.id }
        agentNumbers = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        unheardAgents = Set(agentNumbers.keys)
        patterns = ZonePatterns(zoneCount: zones.count, zoneOfAgent: placed.map { [zones] agent in zones.firstIndex(of: agent.zone) ?? 0 })
    }

    /// Queues an agent's readings; each is applied once the watermark passes it.
    public mutating func add(_ readings: [BeaconReading], agent: String) {
        guard let number = agentNumbers[agent] else { return }
        pending.reserveCapacity(pending.count + readings.count)
        for reading in readings {
            if reading.timeMicros <= watermarkMicros {
                lateReadings += 1
                continue
            }
            pending.append(Reading(beaconID: reading.beaconID, agentNumber: number, timeMicros: reading.timeMicros, rssi: reading.rssi))
        }
    }

    /// Queues one reading.
    public mutating func add(beaconID: String, agent: String, timeMicros: Int64, rssi: Double) {
        add([BeaconReading(beaconID: beaconID, timeMicros: timeMicros, rssi: rssi)], agent: agent)
    }

    /// Records that an agent's batch arrived, holding readings up to `newestMicros` (its event-time progress).
    public mutating func agentProgressed(_ agent: String, newestMicros: Int64, arrivalMicros: Int64) {
        var progress = agents[agent] ?? AgentProgress(newestMicros: newestMicros, lastArrivalMicros: arrivalMicros)
        progress.newestMicros = max(progress.newestMicros, newestMicros)
        progress.lastArrivalMicros = max(progress.lastArrivalMicros, arrivalMicros)
        agents[agent] = progress
        unheardAgents.remove(agent)
        if firstArrivalMicros == nil { firstArrivalMicros = arrivalMicros }
    }

    /// Moves the watermark as far as the live agents allow and applies what it passed; `nowMicros` is the
    /// ingest's clock (for idle agents).
    public mutating func advance(nowMicros: Int64) -> [ZoneChange] {
        guard let newest = agents.values.map(\.newestMicros).max(), let first = firstArrivalMicros else { return [] }
        if !unheardAgents.isEmpty, nowMicros - first <= rules.allowedLatenessMicros, pending.count <= maximumPending {
            return []  // waiting for every agent's first batch
        }
        var live = agents.values.filter { nowMicros - $0.lastArrivalMicros <= rules.allowedLatenessMicros }.map(\.newestMicros)
        if pending.count > maximumPending, let slowest = live.min() { live.removeAll { $0 == slowest } }
        // With every agent silent past the lateness, the site's event time goes on at the ingest clock's pace from
        // where each agent left it, less the lateness: beacons no longer heard leave, their minutes are counted.
        // Not beyond that: the minutes of a dark site are unknown, not empty.
        let watermark = live.min() ?? max(newest, darkWatermark(newest: newest, nowMicros: nowMicros))
        guard watermark > watermarkMicros else { return [] }
        watermarkMicros = watermark
        var changes: [ZoneChange] = []
        pending.sort(by: Self.inOrder)
        let ready = pending.partitioningIndex { $0.timeMicros > watermark }
        for reading in pending[..<ready] {
            countMinutes(through: reading.timeMicros, into: &changes)
            apply(reading, into: &changes)
        }
        pending.removeFirst(ready)
        countMinutes(through: watermark, into: &changes)
        return changes
    }

    /// Where a site whose agents are all silent has got to: each agent's newest reading plus the ingest's time since
    /// its lateness ran out, at most two minutes past the absence timeout after the site's newest reading.
    private func darkWatermark(newest: Int64, nowMicros: Int64) -> Int64 {
        let extrapolated = agents.values.map { $0.newestMicros &+ max(0, nowMicros - $0.lastArrivalMicros - rules.allowedLatenessMicros) }
        return min(extrapolated.max() ?? newest, newest &+ rules.absenceTimeoutMicros &+ 2 * Self.minute)
    }

    /// The order readings are applied in: by time, then agent, then beacon (then level, so that the order never
    /// depends on the order of arrival).
    private static func inOrder(_ a: Reading, _ b: Reading) -> Bool {
        if a.timeMicros != b.timeMicros { return a.timeMicros < b.timeMicros }
        if a.agentNumber != b.agentNumber { return a.agentNumber < b.agentNumber }
        if a.beaconID != b.beaconID { return a.beaconID < b.beaconID }
        return a.rssi < b.rssi
    }

    private mutating func apply(_ reading: Reading, into changes: inout [ZoneChange]) {
        var beacon = beacons[reading.beaconID] ?? Beacon()
        let time = reading.timeMicros
        var level = reading.rssi
        if let smoothing {
            let index = beacon.filters.firstIndex { $0.number == reading.agentNumber } ?? {
                beacon.filters.append(AgentFilter(number: reading.agentNumber))
                return beacon.filters.count - 1
            }()
            level = RSSIFilter.update(&beacon.filters[index].filter, rssi: reading.rssi, timeMicros: time, configuration: smoothing)
        }
        if firstReadingMicros == nil { firstReadingMicros = time }
        if beacon.zone != nil, time - beacon.lastSeenMicros > rules.absenceTimeoutMicros {
            // Gone for longer than the absence timeout: that visit ended when it was last heard.
            changes.append(.visitClosed(site: site, beaconID: reading.beaconID, enterMicros: beacon.enterMicros, exitMicros: beacon.lastSeenMicros))
            beacon.zone = nil
            beacon.evidence = []
        }
        if beacon.zone == nil, let appeared = beacon.appearedMicros, time - appeared > rules.absenceTimeoutMicros {
            beacon.appearedMicros = nil
        }
        let previousSeen = beacon.lastSeenMicros
        let wasPlaced = beacon.zone != nil
        if let index = beacon.readings.firstIndex(where: { $0.number == reading.agentNumber }) {
            beacon.readings[index].time = time
            beacon.readings[index].rssi = level
        } else {
            beacon.readings.append(AgentReading(number: reading.agentNumber, time: time, rssi: level))
        }
        beacon.lastSeenMicros = max(beacon.lastSeenMicros, time)

        // Each zone's level, by zone number: its score from the fresh readings of all agents, or its loudest fresh
        // reading (-infinity: not a candidate).
        beacon.readings.removeAll { time - $0.time > rules.readingLifetimeMicros }
        var levels = [Double](repeating: -.infinity, count: zones.count)
        switch rules.scoring {
        case .pattern where !beacon.readings.isEmpty:
            let heard = beacon.readings.lazy.map { (agent: $0.number, level: $0.rssi) }
            patterns.score(levels: heard, into: &levels)
            if let zone = beacon.zone, time - beacon.enterMicros >= ZonePatterns.learnAfterMicros {
                patterns.learn(zone: zone, agent: reading.agentNumber, levels: heard)
            }
        default:
            for value in beacon.readings {
                let zone = patterns.zoneOfAgent[value.number]
                levels[zone] = max(levels[zone], value.rssi)
            }
        }
        // The highest level; between equal ones, the first zone id in alphabetical order.
        var best: Int?
        for zone in levels.indices where levels[zone] > -.infinity {
            if let leader = best, levels[zone] < levels[leader] || (levels[zone] == levels[leader] && zones[zone] > zones[leader]) {
                continue
            }
            best = zone
        }
        guard let best else {
            beacons[reading.beaconID] = beacon
            return
        }
        if let current = beacon.zone {
            // Page's CUSUM per challenger: evidence grows with the challenger's excess over the current zone beyond
            // the margin, for as long as it lasts, and never falls below 0; a move is dated where it began.
            let seconds = Double(min(max(time - beacon.evidenceMicros, 0), 1_000_000)) / 1_000_000
            beacon.evidenceMicros = time
            let held = levels[current] > -.infinity ? levels[current] : Self.unheardDbm
            var evidence: [(zone: Int, dbSeconds: Double, sinceMicros: Int64)] = []
            for zone in levels.indices where zone != current && levels[zone] > -.infinity {
                let before = beacon.evidence.first { $0.zone == zone }
                let excess = levels[zone] - held - rules.switchMarginDb
                let gathered = (before?.dbSeconds ?? 0) + excess * seconds
                // Evidence begins at the first reading in excess, even before any time has passed.
                if gathered > 0 || excess > 0 { evidence.append((zone, max(gathered, 0), before?.sinceMicros ?? time)) }
            }
            beacon.evidence = evidence
            // The most evidence; between equal ones, the first zone id in alphabetical order.
            if let strongest = evidence.max(by: { ($0.dbSeconds, zones[$1.zone]) < ($1.dbSeconds, zones[$0.zone]) }),
                strongest.dbSeconds >= rules.switchEvidenceDbSeconds, time - strongest.sinceMicros >= rules.switchDwellMicros
            {
                let moment = max(strongest.sinceMicros, beacon.enterMicros + 1)
                changes.append(.visitClosed(site: site, beaconID: reading.beaconID, enterMicros: beacon.enterMicros, exitMicros: moment))
                movePresence(of: reading.beaconID, from: current, to: strongest.zone, between: moment, and: previousSeen)
                beacon.zone = strongest.zone
                beacon.enterMicros = moment
                beacon.evidence = []
                changes.append(.visitOpened(site: site, zone: zones[strongest.zone], beaconID: reading.beaconID, enterMicros: moment))
            }
        } else if let appeared = beacon.appearedMicros, time - appeared >= rules.entryDwellMicros {
            beacon.zone = best
            beacon.enterMicros = appeared
            beacon.evidenceMicros = time
            beacon.appearedMicros = nil
            changes.append(.visitOpened(site: site, zone: zones[best], beaconID: reading.beaconID, enterMicros: appeared))
        } else if beacon.appearedMicros == nil {
            beacon.appearedMicros = time
        }
        if let zone = beacon.zone {
            // Present from the previous reading (if the beacon stayed) through this one; a beacon just placed, from
            // its first reading.
            let stayed = wasPlaced && previousSeen > 0 && time - previousSeen <= rules.absenceTimeoutMicros
            let from = wasPlaced ? (stayed ? max(previousSeen, beacon.enterMicros) : time) : beacon.enterMicros
            addPresence(of: reading.beaconID, in: zone, from: from, to: time)
        }
        beacons[reading.beaconID] = beacon
    }

    /// A move is dated back to when the challenger became louder: the presence counted in the old zone since
    /// then belongs to the new one.
    private mutating func movePresence(of beaconID: String, from old: Int, to new: Int, between from: Int64, and to: Int64) {
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

    private mutating func addPresence(of beaconID: String, in zone: Int, from: Int64, to: Int64) {
        var minute = Self.minuteStart(from)
        while minute < to {
            let overlap = min(to, minute + Self.minute) - max(from, minute)
            if minute >= (nextMinute ?? .min), overlap > 0 {
                presence[minute, default: emptyMinute][zone][beaconID, default: 0] += overlap
            }
            minute += Self.minute
        }
    }


    /// Counts every minute that ended an absence timeout before `time`, and closes the visits of beacons gone.
    private mutating func countMinutes(through time: Int64, into changes: inout [ZoneChange]) {
        var minute = nextMinute ?? presence.keys.min() ?? Self.minuteStart(time)
        if nextMinute == nil { nextMinute = minute }
        // A long silence: skip to a day before rather than write a day of empty minutes.
        if time - minute > 86_400_000_000 { minute = Self.minuteStart(time - 86_400_000_000) }
        while minute + Self.minute + rules.absenceTimeoutMicros <= time {
            count(minute, into: &changes)
            minute += Self.minute
            closeAbsent(before: minute, into: &changes)
        }
        nextMinute = minute
    }

    /// Every zone's count of the minute that starts at `minute` (zeros included): a beacon counts in the zone where
    /// it spent the most of the minute when that is at least half of it — of the part observed, in the site's
    /// first minute (from its first reading) and at the end of the data (through `end`).
    private mutating func count(_ minute: Int64, through end: Int64 = .max, into changes: inout [ZoneChange]) {
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

    private mutating func closeAbsent(before time: Int64, into changes: inout [ZoneChange]) {
        let gone = beacons.filter { time - $0.value.lastSeenMicros > rules.absenceTimeoutMicros }
        for (beaconID, beacon) in gone {
            if beacon.zone != nil {
                changes.append(.visitClosed(site: site, beaconID: beaconID, enterMicros: beacon.enterMicros, exitMicros: beacon.lastSeenMicros))
            }
            beacons[beaconID] = nil
        }
    }

    /// Keeps at most `maximum` beacons, forgetting those heard least recently beyond it (a flood of identities):
    /// a forgotten beacon's visit ends when it was last heard, as if it had left, and its presence in the minutes
    /// not counted yet is dropped with it. Heard again, it starts afresh.
    public mutating func evict(keeping maximum: Int) -> [ZoneChange] {
        guard beacons.count > maximum else { return [] }
        let excess = beacons.count - maximum + maximum / 10
        let oldest = beacons.map { (time: $0.value.lastSeenMicros, id: $0.key) }.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
            .prefix(excess)
        var changes: [ZoneChange] = []
        var forgotten: Set<String> = []
        for (_, beaconID) in oldest {
            if let beacon = beacons[beaconID], beacon.zone != nil {
                changes.append(.visitClosed(site: site, beaconID: beaconID, enterMicros: beacon.enterMicros, exitMicros: beacon.lastSeenMicros))
            }
            beacons[beaconID] = nil
            forgotten.insert(beaconID)
        }
        for (minute, perZone) in presence {
            presence[minute] = perZone.map { $0.filter { !forgotten.contains($0.key) } }
        }
        return changes
    }

    static func minuteStart(_ time: Int64) -> Int64 { time.floorDivided(by: minute) * minute }

    /// The zone a beacon is in now, as far as the watermark has gone.
    public func zone(of beaconID: String) -> String? { beacons[beaconID]?.zone.map { zones[$0] } }

    public var trackedBeacons: Int { beacons.count }

    /// For the end of the data (a replay, the demo): applies every reading still waiting and counts the minutes
    /// through the newest one, the last one as far as it went. Visits stay open: the beacons were still there.
    public mutating func finish() -> [ZoneChange] {
        guard let newest = agents.values.map(\.newestMicros).max() else { return [] }
        var changes: [ZoneChange] = []
        watermarkMicros = max(watermarkMicros, newest)
        pending.sort(by: Self.inOrder)
        for reading in pending {
            countMinutes(through: reading.timeMicros, into: &changes)
            apply(reading, into: &changes)
        }
        pending.removeAll()
        var minute = nextMinute ?? presence.keys.min() ?? Self.minuteStart(newest)
        while minute <= Self.minuteStart(newest) {
            count(minute, through: newest, into: &changes)
            minute += Self.minute
        }
        nextMinute = minute
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
    public mutating func resume(openVisits: [OpenVisit], lastCountedMinuteMicros: Int64?) {
        if let minute = lastCountedMinuteMicros { nextMinute = minute + Self.minute }
        // Observed before: the minute in progress is not the site's first.
        firstReadingMicros = ([lastCountedMinuteMicros].compactMap { $0 } + openVisits.map(\.enterMicros)).min()
        for visit in openVisits {
            guard let zone = zones.firstIndex(of: visit.zone) else { continue }
            var beacon = Beacon()
            beacon.zone = zone
            beacon.enterMicros = visit.enterMicros
            beacon.lastSeenMicros = max(visit.lastSeenMicros, visit.enterMicros)
            beacons[visit.beaconID] = beacon
            // Its presence in the minutes not counted yet, which the previous run held in memory.
            addPresence(of: visit.beaconID, in: zone, from: visit.enterMicros, to: beacon.lastSeenMicros)
        }
    }

    static let checkpointVersion: Int64 = 1

    /// The tracker's state as of its watermark, as bytes for `restore(checkpoint:)`: all of it but the readings
    /// still waiting, which the database holds as the site's sightings newer than the watermark.
    public mutating func takeCheckpoint() -> [UInt8] {
        checkpointDue = false
        var out = CheckpointWriter()
        out.int(Self.checkpointVersion)
        out.strings(zones)
        out.strings(agentNumbers.sorted { $0.value < $1.value }.map(\.key))
        out.int(watermarkMicros)
        out.optional(nextMinute)
        out.optional(firstReadingMicros)
        out.optional(firstArrivalMicros)
        out.strings(unheardAgents.sorted())
        out.int(agents.count)
        for (agent, progress) in agents.sorted(by: { $0.key < $1.key }) {
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
            }
            out.int(beacon.evidence.count)
            for evidence in beacon.evidence {
                out.int(evidence.zone)
                out.double(evidence.dbSeconds)
                out.int(evidence.sinceMicros)
            }
            out.int(beacon.evidenceMicros)
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
        guard try input.int() == Self.checkpointVersion else { throw CheckpointError(code: .unknownVersion, offset: 0) }
        let zoneIDs = try input.strings()
        let agentIDs = try input.strings()
        guard zoneIDs == zones, agentIDs == agentNumbers.sorted(by: { $0.value < $1.value }).map(\.key) else {
            throw CheckpointError(code: .otherLayout, offset: input.offset)
        }
        var restored = self
        restored.pending = []
        // Every value is range-checked: a damaged or edited row must not reach the tracker's arithmetic.
        restored.watermarkMicros = try input.time(also: [.min])
        restored.nextMinute = try input.optionalMinute()
        restored.firstReadingMicros = try input.optionalTime()
        restored.firstArrivalMicros = try input.optionalTime()
        restored.unheardAgents = Set(try input.strings())
        restored.agents = [:]
        for _ in 0..<(try input.count(minimumBytes: 24)) {
            let agent = try input.string()
            restored.agents[agent] = AgentProgress(newestMicros: try input.time(), lastArrivalMicros: try input.time())
        }
        try restored.patterns.decode(from: &input)
        restored.beacons = JournaledDictionary()
        for _ in 0..<(try input.count(minimumBytes: 40)) {
            let beaconID = try input.string()
            var beacon = Beacon()
            beacon.zone = try input.optional().map { zone throws(CheckpointError) in
                guard zone >= 0, zone < zones.count else { throw CheckpointError(code: .damaged, offset: input.offset) }
                return Int(zone)
            }
            beacon.enterMicros = try input.time(also: [0])
            beacon.lastSeenMicros = try input.time(also: [0])
            for _ in 0..<(try input.count(minimumBytes: 24)) {
                beacon.readings.append(
                    AgentReading(
                        number: try input.index(below: agentIDs.count), time: try input.time(),
                        rssi: try input.double(in: CheckpointReader.decibels)))
            }
            for _ in 0..<(try input.count(minimumBytes: 24)) {
                beacon.evidence.append(
                    (try input.index(below: zones.count), try input.double(in: 0...1e12), try input.time()))
            }
            beacon.evidenceMicros = try input.time(also: [0])
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
        restored.checkpointDue = false
        self = restored
    }

    mutating func beginTransaction() {
        beacons.begin()
        var saved = self
        saved.beacons = JournaledDictionary()
        undo = [saved]
    }

    mutating func commitTransaction() {
        beacons.commit()
        undo = []
    }

    mutating func rollbackTransaction() {
        guard var saved = undo.first else { return }
        beacons.rollback()
        saved.beacons = beacons
        self = saved
    }
    public var pendingReadings: Int { pending.count }
}

extension Array {
    /// The index of the first element for which `belongs` holds, in an array where it holds for a suffix.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
