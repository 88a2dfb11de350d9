import BeaconAgent
import BeaconIngest
import BeaconSimulation
import Foundation

/// Zone methods compared without servers: a scenario's receptions (what each agent heard) go through a method in
/// event time, and the visits and per-minute counts it gives are scored like the views of a real run
/// (`AccuracyScore`). `ingest` runs the ingest's own smoothing and zone tracker; the others are peers' methods,
/// which decide once per second for each beacon:
///
/// - `nearest`: the zone of the agent with the loudest latest reading.
/// - `kalman`: room-assistant's Kalman filter on each agent's RSSI (process noise 0.008, measurement noise 4, per
///   reading), then nearest.
/// - `kalman-bermuda`: that, plus Bermuda's switching rule on distances: a challenger agent wins when it is at
///   most 0.70 of the incumbent's distance, or at most 0.85 and the worst of its last 5 distances is below the
///   incumbent's best of its last 5.
/// - `trimmed-mean`: ESPresense's 15 s window per agent, the mean of the readings inside the Tukey fences, nearest.
/// - `one-euro`: the 1€ filter per agent (minimum cutoff 0.05 Hz, β 0.005, derivative cutoff 1 Hz), nearest.
///
/// Every method sees RSSI corrected by the offsets the sites file knows, never the hidden ones. A beacon unheard
/// for the absence timeout (30 s) has left, when it was last heard; an agent's estimate counts for 10 s after its
/// latest reading.
public struct ZoneEvaluation: Sendable {
    public enum Method: Sendable, Equatable {
        case ingest(ZoneMethod)
        case nearest, kalman, kalmanBermuda, trimmedMean, oneEuro

        public var name: String {
            switch self {
            case .ingest(let method): method.name
            case .nearest: "nearest"
            case .kalman: "kalman"
            case .kalmanBermuda: "kalman-bermuda"
            case .trimmedMean: "trimmed-mean"
            case .oneEuro: "one-euro"
            }
        }

        public static let baselines: [Method] = [.nearest, .kalman, .kalmanBermuda, .trimmedMean, .oneEuro]
    }

    public let scenario: Scenario
    public let site: Scenario.Site
    private let simulator: Simulator
    /// Every reception of the site, in time order.
    private let receptions: [Heard]

    private struct Heard: Sendable {
        var timeMicros: Int64
        var beacon: Int32
        var agent: Int32
        var rssi: Float
    }

    /// Plays every agent of the scenario's first site (or `siteID`).
    public init(scenario: Scenario, site siteID: String? = nil) throws {
        self.scenario = scenario
        guard let site = scenario.sites.first(where: { siteID == nil || $0.id == siteID }) else {
            throw HarnessError("the scenario has no site \(siteID ?? "")")
        }
        self.site = site
        simulator = try Simulator(scenario)
        var heard: [Heard] = []
        for (agentIndex, agent) in site.agents.enumerated() {
            // The sites file calibrates the known offset away; the hidden one stays.
            let known = Float(agent.rssiOffsetDb)
            try simulator.receptions(site: site.id, agent: agent.id) { chunk in
                for reception in chunk {
                    heard.append(
                        Heard(timeMicros: reception.timeMicros, beacon: Int32(reception.beacon), agent: Int32(agentIndex),
                              rssi: Float(reception.rssi) - known))
                }
            }
        }
        heard.sort { ($0.timeMicros, $0.agent) < ($1.timeMicros, $1.agent) }
        receptions = heard
    }

    /// The score of one method.
    public func score(_ method: Method) throws -> AccuracyScore {
        switch method {
        case .ingest(let zoneMethod): try scoreIngest(zoneMethod)
        default: scoreBaseline(method)
        }
    }

    // MARK: The ingest's method

    private func scoreIngest(_ method: ZoneMethod) throws -> AccuracyScore {
        let (visits, minutes) = try history(method)
        let identity = Dictionary(uniqueKeysWithValues: scenario.beacons.map { ($0.name, $0.name) })
        return AccuracyScore(scenario: scenario, site: site.id, beaconIDs: identity, visits: visits, minutes: minutes)
    }

    /// The visits and zone-minutes the ingest's zone tracker records with `method`'s settings.
    private func history(_ method: ZoneMethod) throws -> (visits: [AccuracyScore.Visit], minutes: [AccuracyScore.ZoneMinute]) {
        let sites = try SitesConfiguration.forScenario(scenario, beaconIDs: simulator.beaconIDs, method: method)
        // The ingest's own per-reading step: the sites file's offsets, the site's smoothing, the zone tracker.
        var pipeline = IngestPipeline(sites: sites)
        let agentKeys = site.agents.map { AgentKey(site: site.id, agent: $0.id) }
        let knownOffsets = site.agents.map { Float($0.rssiOffsetDb) }
        let names = scenario.beacons.map(\.name)
        var changes: [ZoneChange] = []
        // One batch per agent and second, as agents send them.
        var index = 0
        while index < receptions.count {
            let second = receptions[index].timeMicros / 1_000_000
            var newest: [Int32: Int64] = [:]
            while index < receptions.count, receptions[index].timeMicros / 1_000_000 == second {
                let heard = receptions[index]
                // As the receiver heard it: the sites file's offset takes the known part away again.
                let rssi = Double(heard.rssi + knownOffsets[Int(heard.agent)])
                pipeline.zoneReading(
                    beaconID: names[Int(heard.beacon)], agent: agentKeys[Int(heard.agent)], rssi: rssi, timeMicros: heard.timeMicros)
                newest[heard.agent] = heard.timeMicros
                index += 1
            }
            for (agent, time) in newest { pipeline.agentProgressed(agentKeys[Int(agent)], newestMicros: time, arrivalMicros: time) }
            changes += pipeline.advanceZones(site: site.id, nowMicros: (second + 1) * 1_000_000)
        }
        changes += pipeline.finishZones()
        var open: [String: AccuracyScore.Visit] = [:]
        var visits: [AccuracyScore.Visit] = []
        var minutes: [AccuracyScore.ZoneMinute] = []
        for change in changes {
            switch change {
            case .visitOpened(_, let zone, let beacon, let enter):
                open[beacon] = AccuracyScore.Visit(beaconID: beacon, zone: zone, enter: Double(enter) / 1e6, exit: nil)
            case .visitClosed(_, let beacon, _, let exit):
                if var visit = open.removeValue(forKey: beacon) {
                    visit.exit = Double(exit) / 1e6
                    visits.append(visit)
                }
            case .occupancy(_, let zone, let minute, let occupants, _):
                minutes.append(AccuracyScore.ZoneMinute(zone: zone, minuteStart: Double(minute) / 1e6, occupants: occupants))
            case .merged(_, let addressBeaconID, let beaconID):
                if var visit = open.removeValue(forKey: addressBeaconID) {
                    visit.beaconID = beaconID
                    open[beaconID] = visit
                }
            case .agentState, .placement, .position, .positionMinute:
                break
            }
        }
        visits += open.values
        return (visits, minutes)
    }

    // MARK: Peers' methods

    /// One agent's estimate of one beacon.
    private struct Estimate {
        var value: Double = 0
        var timeMicros: Int64 = .min
        /// Kalman: its variance; 1€: the derivative estimate.
        var auxiliary: Double = 0
        /// Trimmed mean: the readings of the window.
        var window: [(time: Int64, rssi: Double)] = []
        var initialised = false
        /// Bermuda: the last distances at each evaluation.
        var distances: [Double] = []
    }

    private static let freshMicros: Int64 = 10_000_000
    private static let absenceMicros: Int64 = 30_000_000

    private func scoreBaseline(_ method: Method) -> AccuracyScore {
        let agentZones = site.agents.map(\.zone)
        let beaconCount = scenario.beacons.count
        var estimates = [[Estimate]](repeating: [Estimate](repeating: Estimate(), count: site.agents.count), count: beaconCount)
        var lastHeard = [Int64](repeating: .min, count: beaconCount)
        var incumbent = [Int?](repeating: nil, count: beaconCount)
        // Per beacon: its zone each second (nil: away), from the first second of the run.
        let start = scenario.startUnixSeconds
        let seconds = Int(scenario.durationSeconds.rounded(.up))
        var zoneAt = [[Int32]](repeating: [Int32](repeating: -1, count: seconds), count: beaconCount)
        let zoneIDs = site.zones.map(\.id)
        let zoneNumber = Dictionary(uniqueKeysWithValues: zoneIDs.enumerated().map { ($1, Int32($0)) })
        let power = scenario.beacons.map { Double($0.power1mDbm) }
        let exponent = site.pathLossExponent

        var index = 0
        for second in 0..<seconds {
            let end = (start + Int64(second) + 1) * 1_000_000
            while index < receptions.count, receptions[index].timeMicros < end {
                let heard = receptions[index]
                index += 1
                let beacon = Int(heard.beacon)
                lastHeard[beacon] = heard.timeMicros
                Self.update(&estimates[beacon][Int(heard.agent)], method: method, rssi: Double(heard.rssi), timeMicros: heard.timeMicros)
            }
            for beacon in 0..<beaconCount {
                guard lastHeard[beacon] != .min, end - lastHeard[beacon] <= Self.absenceMicros else {
                    if incumbent[beacon] != nil, lastHeard[beacon] != .min {
                        // Gone: its visit ended when it was last heard.
                        let heardSecond = Int(lastHeard[beacon] / 1_000_000 - start)
                        for later in max(0, heardSecond + 1)..<second { zoneAt[beacon][later] = -1 }
                    }
                    incumbent[beacon] = nil
                    continue
                }
                var best: (agent: Int, value: Double)?
                for agent in 0..<site.agents.count {
                    let estimate = Self.current(estimates[beacon][agent], method: method, nowMicros: end)
                    guard let value = estimate, end - estimates[beacon][agent].timeMicros <= Self.freshMicros else {
                        estimates[beacon][agent].distances.removeAll()
                        continue
                    }
                    if method == .kalmanBermuda {
                        estimates[beacon][agent].distances.append(pow(10, (power[beacon] - value) / (10 * exponent)))
                        if estimates[beacon][agent].distances.count > 5 { estimates[beacon][agent].distances.removeFirst() }
                    }
                    if value > best?.value ?? -.infinity { best = (agent, value) }
                }
                guard let best else { continue }
                var chosen = best.agent
                if method == .kalmanBermuda, let current = incumbent[beacon], current != best.agent,
                    let held = estimates[beacon][current].distances.last
                {
                    let challenger = estimates[beacon][best.agent].distances
                    let incumbentBest = estimates[beacon][current].distances.min() ?? held
                    let ratio = (challenger.last ?? .infinity) / held
                    let wins = ratio <= 0.70 || (ratio <= 0.85 && (challenger.max() ?? .infinity) < incumbentBest)
                    if !wins { chosen = current }
                }
                incumbent[beacon] = chosen
                if let zone = agentZones[chosen], let number = zoneNumber[zone] { zoneAt[beacon][second] = number }
            }
        }
        return Self.score(zoneAt: zoneAt, scenario: scenario, site: site.id, zoneIDs: zoneIDs)
    }

    private static func update(_ estimate: inout Estimate, method: Method, rssi: Double, timeMicros: Int64) {
        defer { estimate.timeMicros = timeMicros }
        switch method {
        case .kalman, .kalmanBermuda:
            let processNoise = 0.008
            let measurementNoise = 4.0
            guard estimate.initialised else {
                estimate = Estimate(value: rssi, timeMicros: timeMicros, auxiliary: measurementNoise, initialised: true)
                return
            }
            let predicted = estimate.auxiliary + processNoise
            let gain = predicted / (predicted + measurementNoise)
            estimate.value += gain * (rssi - estimate.value)
            estimate.auxiliary = (1 - gain) * predicted
        case .trimmedMean:
            estimate.window.append((timeMicros, rssi))
            estimate.window.removeAll { timeMicros - $0.time > 15_000_000 }
            estimate.initialised = true
        case .oneEuro:
            guard estimate.initialised, timeMicros > estimate.timeMicros else {
                estimate.value = rssi
                estimate.auxiliary = 0
                estimate.initialised = true
                return
            }
            let dt = Double(timeMicros - estimate.timeMicros) / 1e6
            func alpha(_ cutoff: Double) -> Double {
                let tau = 1 / (2 * .pi * cutoff)
                return 1 / (1 + tau / dt)
            }
            let derivative = (rssi - estimate.value) / dt
            estimate.auxiliary += alpha(1.0) * (derivative - estimate.auxiliary)
            let cutoff = 0.05 + 0.005 * abs(estimate.auxiliary)
            estimate.value += alpha(cutoff) * (rssi - estimate.value)
        default:
            estimate.value = rssi
            estimate.initialised = true
        }
    }

    private static func current(_ estimate: Estimate, method: Method, nowMicros: Int64) -> Double? {
        guard estimate.initialised else { return nil }
        guard method == .trimmedMean else { return estimate.value }
        let values = estimate.window.filter { nowMicros - $0.time <= 15_000_000 }.map(\.rssi).sorted()
        guard !values.isEmpty else { return nil }
        let q1 = values[values.count / 4]
        let q3 = values[(3 * values.count) / 4 < values.count ? (3 * values.count) / 4 : values.count - 1]
        let fence = 1.5 * (q3 - q1)
        let inside = values.filter { $0 >= q1 - fence && $0 <= q3 + fence }
        return inside.reduce(0, +) / Double(max(inside.count, 1))
    }

    /// Visits from each beacon's runs of seconds in one zone, minutes by the same majority rule as the ingest.
    static func score(zoneAt: [[Int32]], scenario: Scenario, site: String, zoneIDs: [String]) -> AccuracyScore {
        let start = Double(scenario.startUnixSeconds)
        var visits: [AccuracyScore.Visit] = []
        var minutes: [AccuracyScore.ZoneMinute] = []
        var occupants = [[Int]](repeating: [Int](repeating: 0, count: zoneIDs.count), count: zoneAt.first.map { ($0.count + 59) / 60 } ?? 0)
        for (beacon, series) in zoneAt.enumerated() {
            let name = scenario.beacons[beacon].name
            var runStart = 0
            for second in 0...series.count {
                let zone = second < series.count ? series[second] : -2
                if second > 0, second == series.count || zone != series[second - 1] {
                    let previous = series[second - 1]
                    if previous >= 0 {
                        let exit: Double? = second == series.count ? nil : start + Double(second)
                        visits.append(AccuracyScore.Visit(beaconID: name, zone: zoneIDs[Int(previous)], enter: start + Double(runStart), exit: exit))
                    }
                    runStart = second
                }
            }
            for minute in occupants.indices {
                var counts = [Int](repeating: 0, count: zoneIDs.count)
                for second in (minute * 60)..<min(series.count, minute * 60 + 60) where series[second] >= 0 {
                    counts[Int(series[second])] += 1
                }
                if let best = counts.indices.max(by: { counts[$0] < counts[$1] }), counts[best] >= 30 { occupants[minute][best] += 1 }
            }
        }
        for (minute, counts) in occupants.enumerated() {
            for (zone, count) in counts.enumerated() {
                minutes.append(AccuracyScore.ZoneMinute(zone: zoneIDs[zone], minuteStart: start + Double(minute * 60), occupants: count))
            }
        }
        let identity = Dictionary(uniqueKeysWithValues: scenario.beacons.map { ($0.name, $0.name) })
        return AccuracyScore(scenario: scenario, site: site, beaconIDs: identity, visits: visits, minutes: minutes)
    }
}
