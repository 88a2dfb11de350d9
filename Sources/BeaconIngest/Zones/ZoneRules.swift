/// How a site decides which zone a beacon is in (sites file keys in parentheses).
public struct ZoneRules: Sendable, Equatable {
    /// A challenger zone gathers evidence while it is louder than the current one by more than this
    /// (`zone_switch_margin_db`) for a settled beacon, proportionally less before (none for a beacon just placed):
    /// the excess, in dB, times how long it lasts...
    public var switchMarginDb: Double = 2
    /// ...and the beacon moves once the evidence reaches this (`zone_switch_evidence_db_s`; by default
    /// `defaultSwitchEvidenceDbSeconds(history:scoring:)`)...
    public var switchEvidenceDbSeconds: Double = Self.defaultSwitchEvidenceDbSeconds(history: .confirmed, scoring: .pattern)
    /// A move between zones that share no door (where the site lists its `doors`) needs this many times the
    /// evidence (`zone_switch_doorless_factor`): a beacon cannot pass through a wall, so such a change is more
    /// likely the radio's.
    public var doorlessEvidenceFactor: Double = 3
    /// A beacon that has been in its zone, that zone leading, for this long (`zone_switch_settled_s`; 0: never)
    /// needs twice the evidence to move, and proportionally less before, and gathers only beyond the full margin: a
    /// beacon that has sat still is less likely to move than one that just arrived, and a stretch of shadowing
    /// looks like a move.
    public var settledMicros: Int64 = 1_200_000_000
    /// ...and has been gathering for at least this long of event time (`zone_switch_dwell_s`).
    public var switchDwellMicros: Int64 = 10_000_000
    /// Not heard for this long: the beacon has left (`absence_timeout_s`); its visit ends when it was last heard.
    public var absenceTimeoutMicros: Int64 = 30_000_000
    /// How long after a minute ends its counts wait (`history_lag_s`, at least the absence timeout): the stored
    /// history is decided this far behind the readings (a move decided within it is dated back into the minute),
    /// so the stored minutes and visits no longer change once this has passed.
    public var historyLagMicros: Int64 = 120_000_000
    /// A beacon that appears is placed once it has been heard for this long (by the agents around it), in the
    /// zone loudest by then; its visit starts at its first reading.
    public var entryDwellMicros: Int64 = 2_000_000
    /// Where zones are scored by position, the beacon waits beyond the entry dwell until one zone holds this share
    /// of its belief (twice the rest together), at most until it has been heard for the reading lifetime (chosen on
    /// the recorded walks kept for choosing settings, BENCHMARKS.md "A beacon's first zone").
    public static let firstZoneShare = 2.0 / 3
    /// An agent's reading counts toward the beacon's zone for this long.
    public var readingLifetimeMicros: Int64 = 10_000_000
    /// How the zones are compared (`zone_scoring`): by learned patterns of all agents' levels, or by each zone's
    /// loudest agent.
    public var scoring: ZoneScoring = .pattern
    /// How the stored history (visits, minutes) is decided (`zone_history`): by the live decisions dated where the
    /// readings turned, those of them the likeliest path over the history lag confirms, or that path.
    public var history: ZoneHistory = .confirmed
    /// What a change of zone costs the likeliest path (`zone_path_change_db_s`), in the zones' levels times seconds
    /// (by default `defaultPathChangeDbSeconds(scoring:)`).
    public var pathChangeDbSeconds: Double = Self.defaultPathChangeDbSeconds(scoring: .pattern)
    /// How long a silent agent holds its site's decisions back, in the ingest's own time (`allowed_lateness_s`):
    /// its batches arriving within it are applied in event order, before any minute they fall in is counted.
    /// Past it the agent is let go, and what it brings back from behind the watermark is stored as sightings but
    /// moves no zone (counted as late). Lower values keep a site's tables fresher while one of its agents is away.
    public var allowedLatenessMicros: Int64 = 300_000_000
    /// How long, after a site's first batch, its decisions wait for an agent of the sites file never heard from
    /// (`first_batch_wait_s`; at most the allowed lateness). Past it the site goes on without that agent.
    public var firstBatchWaitMicros: Int64 = 30_000_000

    public init() {}

    /// A site's floor, as far as zone scoring goes: none (fewer than three agents with `at`, or a zone without a
    /// `rect`), with walls (the site lists its `doors`: patterns learned from the readings score its zones by
    /// default, walls and all) or open (no doors listed: zones scored by position by default).
    public enum Floor: Sendable, Equatable {
        case none
        case walled
        case open
    }

    /// The evidence a move needs unless the sites file sets it: less where zones are scored by patterns learned
    /// from a history decided in hindsight (`path`, `confirmed`: every agent's level teaches, so the patterns
    /// spread wider and their scores differ less, and the history leaves out the live rule's quick mistakes) than
    /// with the live decisions stored as they are (`crossings`) or each zone as loud as its loudest agent.
    /// Zones scored by position move on less: a zone's share of the position is already smoothed over time by the
    /// walking speed (chosen on recorded walks kept for choosing settings, BENCHMARKS.md "Positions in the ingest").
    public static func defaultSwitchEvidenceDbSeconds(history: ZoneHistory, scoring: ZoneScoring) -> Double {
        switch scoring {
        case .position: 60
        case .pattern where history != .crossings: 120
        default: 200
        }
    }

    /// What a change of zone costs the likeliest path unless the sites file sets it: less where zones are scored
    /// by position, whose levels (a zone's share of the position, in dB) span less than RSSI's.
    public static func defaultPathChangeDbSeconds(scoring: ZoneScoring) -> Double {
        scoring == .position ? 100 : 150
    }
}

/// How a site decides the history it stores (sites file key `zone_history`).
public enum ZoneHistory: String, Sendable, Equatable, CaseIterable {
    /// The live decisions, each move dated where the readings as heard turned (`ZoneCrossings`).
    case crossings
    /// The likeliest path of zones over the history lag (`ZonePath`), decided that lag behind the readings.
    case path
    /// The live decisions as with `crossings`, each stay checked against the likeliest path: a stay in a zone the
    /// path does not pass through while it lasts takes the path's zones (`ZoneConfirmation`).
    case confirmed
}

/// Whether a site's zone decisions wait for one of its agents (`agent_health.zone_state`).
public enum AgentZoneState: String, Sendable, Equatable {
    /// Never heard: the site waits for its first batch, up to the first-batch wait after the site's first.
    case awaited
    /// Sending, and within `holdingAfterMicros` of the site's newest reading.
    case live
    /// Silent, or behind the site's newest reading, by more than `holdingAfterMicros`, within the allowed lateness:
    /// the site's decisions wait for it.
    case holding
    /// Silent past the allowed lateness, or never heard past the first-batch wait: the site goes on without it,
    /// and what it brings back from behind the watermark moves no zone.
    case letGo = "let_go"

    /// How far an agent may lag before it counts as holding its site back.
    public static let holdingAfterMicros: Int64 = 10_000_000
}

/// What zone tracking adds to the database.
public enum ZoneChange: Sendable, Equatable {
    /// The beacon's live zone changed: it is in `zone` since `sinceMicros`, or (nil) away since it was last heard
    /// then. Decided at once, while visits and minutes follow the stored history (`zone_history`), which may be
    /// decided up to the history lag later.
    case placement(site: String, beaconID: String, zone: String?, sinceMicros: Int64)
    case visitOpened(site: String, zone: String, beaconID: String, enterMicros: Int64)
    case visitClosed(site: String, beaconID: String, enterMicros: Int64, exitMicros: Int64)
    /// The minute that starts at `minuteMicros`: the beacons that spent most of it in the zone (at least half of
    /// it, so a beacon counts in at most one zone), and the seconds of presence of every beacon summed.
    case occupancy(site: String, zone: String, minuteMicros: Int64, occupants: Int, occupantSeconds: Double)
    /// An agent's state changed, at `sinceMicros` of the ingest's clock.
    case agentState(site: String, agent: String, state: AgentZoneState, sinceMicros: Int64)
    /// Where a beacon is on its site's floor (`zone_scoring: position`), once every `BeaconPosition.intervalMicros`
    /// of event time while it is heard: the live position.
    case position(site: String, beaconID: String, position: BeaconPosition)
    /// A beacon's positions of the minute that starts at `minuteMicros`, once its readings have passed that minute
    /// (or it left): the positions' history, one row a beacon-minute.
    case positionMinute(site: String, beaconID: String, minuteMicros: Int64, positions: [BeaconPosition])
    /// The address beacon `addressBeaconID` is `beaconID` (`AddressMerge`): its live zone and position are the
    /// beacon's from here (the database moves its rows with the merge).
    case merged(site: String, addressBeaconID: String, beaconID: String)

    public var site: String {
        switch self {
        case .placement(let site, _, _, _), .visitOpened(let site, _, _, _), .visitClosed(let site, _, _, _),
            .occupancy(let site, _, _, _, _), .agentState(let site, _, _, _), .position(let site, _, _),
            .positionMinute(let site, _, _, _), .merged(let site, _, _):
            site
        }
    }
}
