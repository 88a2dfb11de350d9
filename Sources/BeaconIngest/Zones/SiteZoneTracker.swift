import BeaconPositions
import Foundation

/// Zone assignment for one site, in event time. A pure state machine.
///
/// Readings (RSSI per beacon and agent) wait until the site's watermark passes them (`EventTime`), then are smoothed
/// and applied in time order, so the same captures give the same visits whether they are replayed live or at full
/// speed, and a batch that arrives late (an agent's spool draining after an outage) still lands in the right
/// minute; readings that an agent let go brings back behind the watermark are stored as sightings but do not move
/// zones (counted in `lateReadings`). A site that goes dark closes its visits and counts its minutes, up to two
/// minutes past the counting lag after its newest reading (beyond that its minutes are unknown, and not written).
///
/// The state, by concern: the site's layout (zones, agents, doors, smoothing; fixed), its event time
/// (`eventTime`), each beacon's place and evidence (`beacons`), the minutes not counted yet (`presence`,
/// `nextMinute`), and the patterns learned (`patterns`).
///
/// Each zone has a level for a beacon: where the site has an open floor (agents with `at`, zones with `rect`, no
/// `doors`), by default its share of where the beacon is (`PositionBelief`, which every reading of a placed agent
/// moves), in dB; elsewhere by default its score under the site's learned patterns (`ZonePatterns`), which weighs
/// the fresh readings of every agent; with `zone_scoring: loudest`, the loudest fresh reading of the zone's own
/// agents. A beacon is placed in the zone of the highest level and moves by change detection (Page's CUSUM):
/// each other zone gathers evidence, its excess over the current zone beyond a margin times how long it lasts,
/// never below 0; the beacon moves when a zone's evidence reaches `switchEvidenceDbSeconds` after gathering for at
/// least `switchDwellMicros`. So a brief shadow (a person between beacon and receiver) gathers a little and decays,
/// while a move gathers steadily, sooner the clearer it is. How settled a beacon is in its zone (`settledMicros`)
/// sets the margin (from 0 for a beacon just placed to `switchMarginDb`) and the evidence (up to twice). The move
/// is dated in hindsight, where the readings as heard say it happened (`ZoneCrossings`), at most `historyLagMicros`
/// before the decision. Minutes are counted when the watermark is the counting lag (the greater of the absence
/// timeout and the history lag) past their end: until then a reading can still show that the beacon stayed
/// through a gap, or move its time to another zone. With `zone_history: path` the stored history follows each
/// beacon's likeliest path instead (`ZonePathHistory`), and the live decisions only the live zone.
public struct SiteZoneTracker: Sendable {
    public let site: String
    public let rules: ZoneRules
    let zones: [String]
    /// A minute's presence before any: no beacon in any zone.
    let emptyMinute: [[String: Int64]]
    /// The agents that serve a zone, and with `zone_scoring: position` those with a position (the others' readings
    /// are ignored), numbered as in `patterns`, in the order of their ids (readings at the same time are applied
    /// in that order).
    let agentNumbers: [String: Int]
    /// Where the site has a floor: the floor, and each agent's receiver on it by agent number (nil for an agent
    /// without a position).
    let floor: FloorModel?
    /// The floor the positions kept run their hindsight on (`PositionHindsight`).
    let hindsightFloor: HindsightFloor?
    let receiverOfAgent: [Int?]
    var patterns: ZonePatterns
    /// Whether two zones (by number) share a door; nil where the site lists none (every pair does).
    let doors: [[Bool]]?
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

    struct AgentProgress: Sendable {
        var newestMicros: Int64
        var lastArrivalMicros: Int64
    }

    struct AgentReading: Sendable {
        var number: Int
        var time: Int64
        /// Smoothed (with the site's smoothing), and as heard.
        var rssi: Double
        var heard: Double
    }

    /// Zones are numbered by their order in the sites file.
    struct Beacon: Sendable {
        var zone: Int?
        var enterMicros: Int64 = 0
        var lastSeenMicros: Int64 = 0
        /// Newest reading per agent (a few agents hear a beacon: a small array costs less than a dictionary).
        var readings: [AgentReading] = []
        /// Per challenger zone: the evidence gathered for it (dB·s) and since when.
        var evidence: [(zone: Int, dbSeconds: Double, sinceMicros: Int64)] = []
        /// When the evidence was last brought up to date.
        var evidenceMicros: Int64 = 0
        /// Event time in the current zone while it led (the highest level), up to the rules' `settledMicros`: how
        /// settled the beacon is.
        var settledMicros: Int64 = 0
        /// When a move to each other zone most likely happened (history is dated there).
        var crossings = ZoneCrossings()
        /// The first reading of a beacon not placed yet.
        var appearedMicros: Int64?
        /// Each agent's RSSI filter (the site's `rssi_smoothing`), which outlives the reading's lifetime.
        var filters: [AgentFilter] = []
        /// With `zone_history: path` or `confirmed`: the likeliest path not decided yet, from the reading `pathStartMicros`...
        var path: ZonePath?
        var pathStartMicros: Int64 = 0
        /// ...and the zone of the stored history's open visit, and when it began.
        var historyZone: Int?
        var historyEnterMicros: Int64 = 0
        /// With `zone_history: confirmed`: the live zone's stays since the path's oldest undecided second.
        var stays: [LiveStay] = []
        /// With `zone_history: path` or `confirmed` and `zone_scoring: pattern`: what the patterns learn from once decided.
        var samples = ZonePatternSamples()
        /// Where the site has a floor: where the beacon is on it, each zone's share of it, the readings of the
        /// second not applied to it yet, the slot of event time of its newest reading, whether that slot's
        /// position was given, the seconds and positions waiting for hindsight, and the history's positions of the
        /// current minute, and how much louder than the site's model it is heard (`ZonePositions.swift`).
        var position: PositionBelief?
        var positionShares: [Double] = []
        /// Each zone's share in dB (`PositionBelief.zoneLevel`): its level where zones are scored by position.
        var positionLevels: [Double] = []
        var heardThisSecond = HeardInSecond()
        var positionSlot: Int64 = .min
        var positionGiven = true
        var hindsight = PositionHindsight()
        var level = TransmitterLevel()
        var minutePositions: [BeaconPosition] = []

        /// Whether positions are still to be given or kept (`keepPositions`).
        var hasPositionsToKeep: Bool { !positionGiven || !hindsight.isEmpty || !minutePositions.isEmpty }
    }

    struct AgentFilter: Sendable {
        var number: Int
        var filter: RSSIFilter?
    }

    /// Event time: agents' progress, the readings waiting and the watermark.
    var eventTime: EventTime
    /// Each beacon's place, evidence and filters.
    var beacons = JournaledDictionary<String, Beacon>()
    /// Storage for a reading's zone levels, smoothed and as heard (see `apply`).
    private var scratchLevels: [Double] = []
    private var scratchHeardLevels: [Double] = []
    /// Storage for the levels a beacon's path is extended by (`extendPath`).
    var scratchPathLevels: [Double] = []
    /// Storage for a position belief's spreading, on the floor and on the hindsight's.
    var scratchCells = PositionBelief.Scratch()
    var scratchHindsightCells = PositionBelief.Scratch()
    /// The tracker as it was at `beginTransaction()`, without its beacons (journaled instead).
    private var undo: [SiteZoneTracker] = []
    /// Microseconds of presence per minute, zone number and beacon, for minutes not yet counted.
    var presence: [Int64: [[String: Int64]]] = [:]
    /// The next minute to count.
    var nextMinute: Int64?
    /// Where visits of silent beacons were last ended (at most once a second of event time).
    private var closedThroughMicros: Int64 = .min
    /// The earliest reading applied: the site's first minute is observed from here.
    var firstReadingMicros: Int64?
    /// Whether minutes were counted since the last `takeCheckpoint()`.
    public internal(set) var checkpointDue = false

    public var watermarkMicros: Int64 { eventTime.watermarkMicros }
    public var lateReadings: Int { eventTime.lateReadings }
    /// How many readings may wait for the slowest agent before it is let go.
    public var maximumPending: Int {
        get { eventTime.maximumPending }
        set { eventTime.maximumPending = newValue }
    }

    static let minute: Int64 = 60_000_000
    /// How loud a zone none of whose agents hears the beacon (freshly) counts: below any receiver's sensitivity.
    static let unheardDbm = -105.0

    public init(site: SitesConfiguration.Site) {
        self.site = site.id
        rules = site.zoneRules
        smoothing = site.rssiSmoothing == .kalman ? ProximitySmoother.Configuration() : nil
        zones = site.zones.map(\.id)
        emptyMinute = Array(repeating: [:], count: zones.count)
        // Zones scored by position take every agent with a position; otherwise the agents of a zone, those of
        // them with a position moving the beacons' positions.
        let scoredByPosition = rules.scoring == .position
        let placed = site.agents.filter { $0.zone != nil || (scoredByPosition && $0.position != nil) }.sorted { $0.id < $1.id }
        agentNumbers = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        eventTime = EventTime(agents: agentNumbers.keys)
        let withPosition = placed.filter { $0.position != nil }
        doors = site.passages
        if site.hasFloor, withPosition.count >= SitesConfiguration.Site.receiversForPositions {
            func floor(coarsening: Int) -> FloorModel {
                FloorModel(
                    zones: site.zones.map { $0.rect ?? [] },
                    // Readings come with each agent's offset already added.
                    receivers: withPosition.map { FloorModel.Receiver(x: $0.position!.x, y: $0.position!.y, z: $0.position!.z, id: $0.id) },
                    model: site.radioModel, doors: site.passages, map: site.radioMap, coarsening: coarsening)
            }
            let fine = floor(coarsening: 1)
            self.floor = fine
            hindsightFloor = HindsightFloor(floor(coarsening: HindsightFloor.coarsening), for: fine)
            receiverOfAgent = placed.map { agent in withPosition.firstIndex { $0.id == agent.id } }
        } else {
            floor = nil
            hindsightFloor = nil
            receiverOfAgent = []
        }
        // An agent without a zone (placed by position only) counts for the first zone: patterns are not used there.
        patterns = ZonePatterns(
            zoneCount: zones.count, zoneOfAgent: placed.map { [zones] agent in agent.zone.flatMap { zones.firstIndex(of: $0) } ?? 0 })
    }

    /// Queues an agent's readings; each is applied once the watermark passes it.
    public mutating func add(_ readings: [BeaconReading], agent: String) {
        guard let number = agentNumbers[agent] else { return }
        eventTime.add(readings, agentNumber: number)
    }

    /// Queues one reading.
    public mutating func add(beaconID: String, agent: String, timeMicros: Int64, rssi: Double) {
        add([BeaconReading(beaconID: beaconID, timeMicros: timeMicros, rssi: rssi)], agent: agent)
    }

    /// Readings the watermark has passed wait for the next `advance` (a bounded one left them).
    public var hasReadyReadings: Bool { eventTime.readyLeft }

    /// Records that an agent's batch arrived, holding readings up to `newestMicros` (its event-time progress).
    public mutating func agentProgressed(_ agent: String, newestMicros: Int64, arrivalMicros: Int64) {
        eventTime.progressed(agent, newestMicros: newestMicros, arrivalMicros: arrivalMicros)
    }

    /// Moves the watermark as far as the live agents allow and applies what it passed; `nowMicros` is the
    /// ingest's clock (for idle agents). At most `limit` readings are applied: with more passed, the rest and the
    /// minutes after them wait for the next call (`hasReadyReadings`), which applies them first, so that a backlog
    /// read back is applied in pieces with the writer turning between them.
    public mutating func advance(nowMicros: Int64, applyingAtMost limit: Int = .max) -> [ZoneChange] {
        var changes = eventTime.stateChanges(site: site, agentIDs: agentIDs, nowMicros: nowMicros, rules: rules)
        let moved = eventTime.advance(nowMicros: nowMicros, rules: rules, countingLagMicros: countingLagMicros) != nil
        guard moved || eventTime.readyLeft else { return changes }
        let watermark = eventTime.watermarkMicros
        for reading in eventTime.takeReady(through: watermark, atMost: limit) {
            countMinutes(through: reading.timeMicros, into: &changes)
            apply(reading, into: &changes)
        }
        if eventTime.readyLeft { return changes }
        countMinutes(through: watermark, into: &changes)
        if watermark &- closedThroughMicros >= 1_000_000 || closedThroughMicros == .min {
            closedThroughMicros = watermark
            closeVisitsOfSilentBeacons(at: watermark, into: &changes)
        }
        return changes
    }

    /// Ends the visit of every beacon not heard for the absence timeout by `time`, at its last reading, as its next
    /// reading would (its state stays, so that reading goes on the same way): a beacon that leaves leaves when
    /// the watermark passes, not when the next minute is counted.
    private mutating func closeVisitsOfSilentBeacons(at time: Int64, into changes: inout [ZoneChange]) {
        let silent = beacons.filter {
            ($0.value.zone != nil || $0.value.path != nil || $0.value.historyZone != nil || $0.value.hasPositionsToKeep)
                && time - $0.value.lastSeenMicros > rules.absenceTimeoutMicros
        }
        for (beaconID, var beacon) in silent.sorted(by: { $0.key < $1.key }) {
            keepPositions(of: beaconID, &beacon, into: &changes)
            if !storesLiveHistory { endPath(of: beaconID, &beacon, into: &changes) }
            leave(beaconID, beacon, into: &changes)
            beacon.zone = nil
            beacon.evidence = []
            beacon.crossings.removeAll()
            beacons[beaconID] = beacon
        }
    }

    /// How long after its end a minute is counted.
    var countingLagMicros: Int64 { max(rules.absenceTimeoutMicros, rules.historyLagMicros) }

    /// The agents serving a zone, by id.
    var agentIDs: [String] { agentNumbers.keys.sorted() }

    /// The order readings are applied in: by time, then agent, then beacon (then level, so that the order never
    /// depends on the order of arrival).
    static func inOrder(_ a: Reading, _ b: Reading) -> Bool {
        if a.timeMicros != b.timeMicros { return a.timeMicros < b.timeMicros }
        if a.agentNumber != b.agentNumber { return a.agentNumber < b.agentNumber }
        if a.beaconID != b.beaconID { return a.beaconID < b.beaconID }
        return a.rssi < b.rssi
    }

    mutating func apply(_ reading: Reading, into changes: inout [ZoneChange]) {
        // Moved out of the table while it changes, so that its arrays are not copied at every reading.
        var beacon = Beacon()
        let slot = beacons.checkOut(reading.beaconID, swapping: &beacon)
        func store(_ beacon: inout Beacon) {
            if let slot { beacons.checkIn(&beacon, at: slot) } else { beacons[reading.beaconID] = beacon }
        }
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
        if !storesLiveHistory, beacon.path != nil || beacon.historyZone != nil,
            time - beacon.lastSeenMicros > rules.absenceTimeoutMicros
        {
            endPath(of: reading.beaconID, &beacon, into: &changes)
        }
        if beacon.zone != nil, time - beacon.lastSeenMicros > rules.absenceTimeoutMicros {
            // Gone for longer than the absence timeout: that visit ended when it was last heard.
            leave(reading.beaconID, beacon, into: &changes)
            beacon.zone = nil
            beacon.evidence = []
            beacon.crossings.removeAll()
        }
        if beacon.zone == nil, let appeared = beacon.appearedMicros, time - appeared > rules.absenceTimeoutMicros {
            beacon.appearedMicros = nil
        }
        let previousSeen = beacon.lastSeenMicros
        let wasPlaced = beacon.zone != nil
        if let index = beacon.readings.firstIndex(where: { $0.number == reading.agentNumber }) {
            beacon.readings[index].time = time
            beacon.readings[index].rssi = level
            beacon.readings[index].heard = reading.rssi
        } else {
            beacon.readings.append(AgentReading(number: reading.agentNumber, time: time, rssi: level, heard: reading.rssi))
        }
        beacon.lastSeenMicros = max(beacon.lastSeenMicros, time)

        beacon.readings.removeAll { time - $0.time > rules.readingLifetimeMicros }
        if floor != nil, let receiver = receiverOfAgent[reading.agentNumber] {
            locate(reading.beaconID, &beacon, receiver: receiver, rssi: reading.rssi, at: time, into: &changes)
        }
        // The levels' storage is the tracker's, reused from reading to reading.
        var levels: [Double] = []
        var heardLevels: [Double] = []
        swap(&levels, &scratchLevels)
        swap(&heardLevels, &scratchHeardLevels)
        defer {
            swap(&levels, &scratchLevels)
            swap(&heardLevels, &scratchHeardLevels)
        }
        zoneLevels(of: beacon, heard: false, into: &levels)
        if rules.history == .path { extendPath(of: reading.beaconID, &beacon, at: time, into: &changes) }
        if rules.scoring == .pattern, storesLiveHistory, let zone = beacon.zone, time - beacon.enterMicros >= ZonePatterns.learnAfterMicros {
            patterns.learn(zone: zone, agent: reading.agentNumber, levels: beacon.readings.lazy.map { (agent: $0.number, level: $0.rssi) })
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
            if rules.history == .confirmed { extendPath(of: reading.beaconID, &beacon, at: time, into: &changes) }
            store(&beacon)
            return
        }
        if let current = beacon.zone {
            // Page's CUSUM per challenger: evidence grows with the challenger's excess over the current zone beyond
            // the margin, for as long as it lasts, and never falls below 0; a move is dated where the readings as
            // heard turned (`crossings`).
            let elapsed = min(max(time - beacon.evidenceMicros, 0), 1_000_000)
            let seconds = Double(elapsed) / 1_000_000
            beacon.evidenceMicros = time
            if best == current { beacon.settledMicros = min(beacon.settledMicros + elapsed, rules.settledMicros) }
            let held = levels[current] > -.infinity ? levels[current] : Self.unheardDbm
            // How settled the beacon is, 0 to 1: the margin and the evidence a move needs grow with it (without
            // the rule, the full margin and the evidence as set).
            let settled = rules.settledMicros > 0 ? Double(min(beacon.settledMicros, rules.settledMicros)) / Double(rules.settledMicros) : 0
            let margin = rules.settledMicros > 0 ? rules.switchMarginDb * settled : rules.switchMarginDb
            var evidence: [(zone: Int, dbSeconds: Double, sinceMicros: Int64)] = []
            for zone in levels.indices where zone != current && levels[zone] > -.infinity {
                let before = beacon.evidence.first { $0.zone == zone }
                let excess = levels[zone] - held - margin
                let gathered = (before?.dbSeconds ?? 0) + excess * seconds
                // Evidence begins at the first reading in excess, even before any time has passed.
                if gathered > 0 || excess > 0 { evidence.append((zone, max(gathered, 0), before?.sinceMicros ?? time)) }
            }
            beacon.evidence = evidence
            // Without smoothing the levels are already those of the readings as heard.
            let levelsAsHeard = smoothing != nil && rules.scoring != .position
            if levelsAsHeard { zoneLevels(of: beacon, heard: true, into: &heardLevels) }
            beacon.crossings.add(
                levels: levelsAsHeard ? heardLevels : levels, current: current, seconds: seconds, at: time, unheard: Self.unheardDbm)
            // The most evidence for its threshold; between equal ones, the first zone id in alphabetical order.
            func share(_ entry: (zone: Int, dbSeconds: Double, sinceMicros: Int64)) -> Double {
                entry.dbSeconds / (evidenceNeeded(from: current, to: entry.zone) * (1 + settled))
            }
            if let strongest = evidence.max(by: { (share($0), zones[$1.zone]) < (share($1), zones[$0.zone]) }),
                share(strongest) >= 1, time - strongest.sinceMicros >= rules.switchDwellMicros
            {
                // Dated in hindsight, at most the history lag before now, so that no minute counted yet changes.
                // Where positions date it too, the earlier of the two: the live levels trail a walker, and the
                // seconds waiting for hindsight may begin after the crossing, so each errs late.
                let liveCrossing = beacon.crossings.moment(of: strongest.zone) ?? strongest.sinceMicros
                let crossing = min(positionCrossing(of: beacon, from: current, to: strongest.zone) ?? .max, liveCrossing)
                let moment = max(crossing, time - rules.historyLagMicros, beacon.enterMicros + 1)
                if storesLiveHistory {
                    changes.append(.visitClosed(site: site, beaconID: reading.beaconID, enterMicros: beacon.enterMicros, exitMicros: moment))
                    movePresence(of: reading.beaconID, from: current, to: strongest.zone, between: moment, and: previousSeen)
                    changes.append(.visitOpened(site: site, zone: zones[strongest.zone], beaconID: reading.beaconID, enterMicros: moment))
                }
                changes.append(.placement(site: site, beaconID: reading.beaconID, zone: zones[strongest.zone], sinceMicros: moment))
                beacon.zone = strongest.zone
                beacon.enterMicros = moment
                if rules.history == .confirmed { beacon.stays.append(LiveStay(zone: strongest.zone, previousZone: current, startMicros: moment, kept: false)) }
                beacon.evidence = []
                beacon.settledMicros = 0
                beacon.crossings.removeAll()
            }
        } else if let appeared = beacon.appearedMicros, time - appeared >= rules.entryDwellMicros,
            firstZoneIsClear(best, of: beacon, heardMicros: time - appeared)
        {
            beacon.zone = best
            beacon.crossings.removeAll()
            beacon.enterMicros = appeared
            beacon.evidenceMicros = time
            beacon.appearedMicros = nil
            if rules.history == .confirmed { beacon.stays.append(LiveStay(zone: best, previousZone: nil, startMicros: appeared, kept: false)) }
            changes.append(.placement(site: site, beaconID: reading.beaconID, zone: zones[best], sinceMicros: appeared))
            if storesLiveHistory {
                changes.append(.visitOpened(site: site, zone: zones[best], beaconID: reading.beaconID, enterMicros: appeared))
            }
        } else if beacon.appearedMicros == nil {
            beacon.appearedMicros = time
        }
        if storesLiveHistory, let zone = beacon.zone {
            // Present from the previous reading (if the beacon stayed) through this one; a beacon just placed, from
            // its first reading.
            let stayed = wasPlaced && previousSeen > 0 && time - previousSeen <= rules.absenceTimeoutMicros
            let from = wasPlaced ? (stayed ? max(previousSeen, beacon.enterMicros) : time) : beacon.enterMicros
            addPresence(of: reading.beaconID, in: zone, from: from, to: time)
        }
        // After the live decision, so that a move it dates into the second the path decides now is seen there.
        if rules.history == .confirmed { extendPath(of: reading.beaconID, &beacon, at: time, into: &changes) }
        store(&beacon)
    }

    /// A placed beacon left (absent, forgotten, or the site stopped): its live zone, and with `crossings` its visit,
    /// ends when it was last heard.
    func leave(_ beaconID: String, _ beacon: Beacon, into changes: inout [ZoneChange]) {
        guard beacon.zone != nil else { return }
        if storesLiveHistory {
            changes.append(.visitClosed(site: site, beaconID: beaconID, enterMicros: beacon.enterMicros, exitMicros: beacon.lastSeenMicros))
        }
        changes.append(.placement(site: site, beaconID: beaconID, zone: nil, sinceMicros: beacon.lastSeenMicros))
    }

    /// Whether a beacon heard for `heardMicros` (the entry dwell at least) may be placed in `zone`, the one leading:
    /// where zones are scored by position, once the zone holds `ZoneRules.firstZoneShare` of the belief or the beacon
    /// has been heard for the reading lifetime. A belief starts spread over the whole floor and takes a few seconds
    /// to gather; placed before, a beacon near a border may start on the wrong side and stay there.
    private func firstZoneIsClear(_ zone: Int, of beacon: Beacon, heardMicros: Int64) -> Bool {
        guard rules.scoring == .position, beacon.positionShares.indices.contains(zone) else { return true }
        return beacon.positionShares[zone] >= ZoneRules.firstZoneShare || heardMicros >= rules.readingLifetimeMicros
    }

    /// The evidence a move needs: more between zones that share no door.
    private func evidenceNeeded(from: Int, to: Int) -> Double {
        guard let doors, !doors[from][to] else { return rules.switchEvidenceDbSeconds }
        return rules.switchEvidenceDbSeconds * rules.doorlessEvidenceFactor
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
            if var beacon = beacons[beaconID] {
                keepPositions(of: beaconID, &beacon, into: &changes)
                if !storesLiveHistory { endPath(of: beaconID, &beacon, into: &changes) }
                leave(beaconID, beacon, into: &changes)
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

    /// The beacons placed in a zone now, as far as the watermark has gone, with when they entered it.
    public var placements: [(beaconID: String, zone: String, enterMicros: Int64)] {
        beacons.compactMap { entry in entry.value.zone.map { (entry.key, zones[$0], entry.value.enterMicros) } }
    }

    mutating func beginTransaction() {
        beacons.beginTransaction()
        var saved = self
        saved.beacons = JournaledDictionary()
        undo = [saved]
    }

    mutating func commitTransaction() {
        beacons.commitTransaction()
        undo = []
    }

    mutating func rollbackTransaction() {
        guard var saved = undo.first else { return }
        beacons.rollbackTransaction()
        saved.beacons = beacons
        self = saved
    }
    public var pendingReadings: Int { eventTime.pending.count }
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
