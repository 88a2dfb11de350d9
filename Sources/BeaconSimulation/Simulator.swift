import BeaconAgent
import BeaconBatteries
import BeaconMessaging
import BeaconWire
import Foundation
import WorkQueue

/// SplitMix64: small, fast and deterministic for a seed, so that a scenario always plays the same way.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// A standard normal value (Box-Muller).
    public mutating func gaussian() -> Double {
        let u = max(unit(), .leastNonzeroMagnitude)
        return (-2 * Foundation.log(u)).squareRoot() * cos(2 * .pi * unit())
    }
}

/// One scenario beacon: its identity and the frames it sends.
struct SimulatedBeacon: Sendable {
    enum Kind: Sendable {
        case eddystoneUID(namespace: [UInt8], instance: [UInt8], url: [UInt8]?)
        case eddystoneEID(identityKey: [UInt8], rotationExponent: UInt8)
        case iBeacon(IBeacon)
        case altBeacon(AltBeacon)
    }

    let kind: Kind
    let beaconID: String
    let address: DeviceAddress
    let spec: Scenario.Beacon
    /// Its cells as the scenario starts and at each swap (`spec.batterySwapsAtSeconds`, fresh), drawn from the
    /// chemistry's spreads (the same for the same name).
    let cells: [SimulatedCell]
    /// How long it has run on its first cell before the scenario starts, seconds: what its used charge took at
    /// its interval. Its TLM counters begin there, as a beacon's that has run since its cell was fitted.
    let runningBeforeSeconds: Double

    init(_ spec: Scenario.Beacon, index: Int) throws(ConfigurationError) {
        self.spec = spec
        // A random static address (top two bits set), the same for the same name.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in spec.name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        address = DeviceAddress(value: (hash & 0x3FFF_FFFF_FFFF) | 0xC000_0000_0000, kind: .random)
        var random = SeededGenerator(seed: hash ^ 0xCE11)
        cells = ([spec.batteryLeft] + spec.batterySwapsAtSeconds.map { _ in 1 }).map {
            SimulatedCell(chemistry: spec.battery, transmitPowerDbm: spec.transmitPowerDbm, chargeLeft: $0, random: &random)
        }
        let first = cells[0]
        runningBeforeSeconds = first.usedMilliampHours / first.milliampHoursPerSecond(advertsPerSecond: 1 / Self.meanAdvertSeconds(spec))
        let power = Int8(clamping: spec.power1mDbm)
        func hex(_ text: String?, _ count: Int, _ field: String) throws(ConfigurationError) -> [UInt8] {
            guard let text, let bytes = try? [UInt8](hex: text), bytes.count == count else {
                throw ConfigurationError("\(field) must be \(count * 2) hex digits")
            }
            return bytes
        }
        switch spec.type {
        case "eddystone-uid":
            let namespace = try hex(spec.namespace, 10, "namespace")
            let instance = try hex(spec.instance, 6, "instance")
            var url: [UInt8]?
            if let text = spec.url {
                guard let encoded = EddystoneURL.encode(text) else {
                    throw ConfigurationError("url '\(text)' cannot be sent as an Eddystone-URL")
                }
                url = encoded
            }
            kind = .eddystoneUID(namespace: namespace, instance: instance, url: url)
            beaconID = EddystoneUID(txPower: 0, namespace: namespace, instance: instance).beaconID
        case "eddystone-eid":
            let key = try hex(spec.identityKey, 16, "identity_key")
            guard spec.rotationExponent <= 15 else { throw ConfigurationError("rotation_exponent must be 0-15") }
            kind = .eddystoneEID(identityKey: key, rotationExponent: spec.rotationExponent)
            // The id the registry of the sites file gives the beacon, under which the ingest reports resolved EIDs.
            beaconID = EddystoneUID(
                txPower: 0, namespace: try hex(spec.namespace, 10, "namespace"),
                instance: try hex(spec.instance, 6, "instance")
            ).beaconID
        case "ibeacon":
            let uuid = try hex(spec.uuid, 16, "uuid")
            let beacon = IBeacon(
                uuidHigh: uuid[0..<8].reduce(0) { $0 << 8 | UInt64($1) }, uuidLow: uuid[8...].reduce(0) { $0 << 8 | UInt64($1) },
                major: spec.major ?? 1, minor: spec.minor ?? UInt16(truncatingIfNeeded: index), measuredPower: power)
            kind = .iBeacon(beacon)
            beaconID = beacon.beaconID
        case "altbeacon":
            let id1 = try hex(spec.uuid, 16, "uuid (AltBeacon id1)")
            let beacon = AltBeacon(
                manufacturerID: 0x0118, id1: id1, id2: spec.major ?? 1, id3: spec.minor ?? UInt16(truncatingIfNeeded: index),
                referenceRSSI: power, manufacturerReserved: 0)
            kind = .altBeacon(beacon)
            beaconID = beacon.beaconID
        default:
            throw ConfigurationError("type '\(spec.type)' is not eddystone-uid, eddystone-eid, ibeacon or altbeacon")
        }
    }

    /// The advertising data of advert number `count` since it booted, `uptimeSeconds` ago, at `unixMicros`,
    /// `elapsedSeconds` into the scenario.
    func advertisingData(count: Int, uptimeSeconds: Double, unixMicros: Int64, elapsedSeconds: Double, salt: UInt16) -> [UInt8] {
        let flags: [UInt8] = [0x02, 0x01, 0x06]
        let eddystone: [UInt8] = [0x03, 0x03, 0xAA, 0xFE]
        func serviceData(_ frame: [UInt8]) -> [UInt8] { flags + eddystone + [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame }
        let zeroMetrePower = UInt8(bitPattern: Int8(clamping: spec.power1mDbm + 41))
        let isTelemetry = count % spec.tlmEvery == spec.tlmEvery - 1
        switch kind {
        case .eddystoneUID(let namespace, let instance, let url):
            if isTelemetry { return serviceData([0x20, 0x00] + telemetry(count: count, uptimeSeconds: uptimeSeconds, elapsedSeconds: elapsedSeconds, unixMicros: unixMicros).fieldBytes) }
            if let url, count % spec.tlmEvery == spec.tlmEvery / 2 { return serviceData([0x10, zeroMetrePower] + url) }
            return serviceData([0x00, zeroMetrePower] + namespace + instance + [0, 0])
        case .eddystoneEID(let key, let exponent):
            let beaconTime = UInt32(truncatingIfNeeded: unixMicros / 1_000_000)
            if isTelemetry {
                let frame = EddystoneKeyring.encrypt(
                    telemetry(count: count, uptimeSeconds: uptimeSeconds, elapsedSeconds: elapsedSeconds, unixMicros: unixMicros), identityKey: key, rotationExponent: exponent,
                    beaconTime: beaconTime, salt: salt)
                return serviceData(
                    [0x20, 0x01] + frame.ciphertext + [UInt8(frame.salt >> 8), UInt8(frame.salt & 0xFF)]
                        + [UInt8(frame.mic >> 8), UInt8(frame.mic & 0xFF)])
            }
            let eid = EddystoneKeyring.eid(identityKey: key, rotationExponent: exponent, beaconTime: beaconTime)
            return serviceData([0x30, zeroMetrePower] + (0..<8).map { UInt8(truncatingIfNeeded: eid >> (56 - 8 * $0)) })
        case .iBeacon(let beacon):
            return flags + [0x1A, 0xFF, 0x4C, 0x00] + beacon.payload
        case .altBeacon(let beacon):
            return flags + [0x1B, 0xFF, UInt8(beacon.manufacturerID & 0xFF), UInt8(beacon.manufacturerID >> 8)]
                + beacon.payload
        }
    }

    /// TLM as a real beacon's moves: the advert counter and uptime in 0.1 s since it booted, its cell's voltage
    /// under load and the temperature of the moment.
    func telemetry(count: Int, uptimeSeconds: Double, elapsedSeconds: Double, unixMicros: Int64) -> EddystoneTLM {
        let celsius = celsius(unixMicros: unixMicros)
        let volts = cell(after: elapsedSeconds).loadedVolts(celsius: celsius)
        return EddystoneTLM(
            batteryMillivolts: UInt16(clamping: Int((volts * 1000).rounded())), temperatureRaw: Int16((celsius * 256).rounded()),
            advertisingCount: UInt32(truncatingIfNeeded: count), uptimeTenths: UInt32(uptimeSeconds * 10))
    }

    /// The temperature at `unixMicros`: the day's cycle about `temperature_c`, coldest at 04:00 UTC.
    func celsius(unixMicros: Int64) -> Double {
        let hourOfDay = Double(unixMicros % 86_400_000_000) / 3_600_000_000
        return spec.temperatureC - spec.temperatureSwingC * cos(2 * .pi * (hourOfDay - 4) / 24)
    }

    /// Seconds from one advert to the next on average: the interval plus half BLE's 0-10 ms of random delay.
    static func meanAdvertSeconds(_ spec: Scenario.Beacon) -> Double { spec.intervalMs / 1000 + 0.005 }

    /// Its advert count as the scenario starts, on the cell it has run on since it was fitted.
    var advertsBefore: Int { Int(runningBeforeSeconds / Self.meanAdvertSeconds(spec)) }

    /// Its cell `elapsedSeconds` into the scenario, discharged since it was fitted by that time's adverts, its
    /// sleep current and self-discharge.
    func cell(after elapsedSeconds: Double) -> SimulatedCell {
        let swaps = spec.batterySwapsAtSeconds
        let fitted = swaps.lastIndex { $0 <= elapsedSeconds }.map { $0 + 1 } ?? 0
        let seconds = elapsedSeconds - (fitted == 0 ? 0 : swaps[fitted - 1])
        var cell = cells[fitted]
        cell.use(seconds: seconds, adverts: seconds / Self.meanAdvertSeconds(spec))
        return cell
    }

    /// Whether its cell holds its radio up at `elapsedSeconds` into the scenario, at the temperature then.
    func powered(elapsedSeconds: Double, unixMicros: Int64) -> Bool {
        cell(after: elapsedSeconds).powers(celsius: celsius(unixMicros: unixMicros))
    }
}

/// Plays a scenario: every beacon's adverts, as each agent of a site hears them, in time order. What an agent
/// hears: the log-distance path loss from the beacon's position on its trajectory, the loss of every wall between
/// them, the link's correlated shadowing and independent fading, the receiver's offsets (known and hidden) and
/// loss, and a -100 dBm sensitivity floor. Deterministic for the scenario's seed.
public struct Simulator: Sendable {
    public let scenario: Scenario
    let beacons: [SimulatedBeacon]
    private let plans: [String: FloorPlan]
    private let trajectories: [Trajectory]
    /// Per site and agent: the offset the sites file does not know.
    public let hiddenOffsets: [String: [String: Double]]
    /// Receivers hear nothing weaker than this.
    static let sensitivityDbm = -100.0
    /// Beacons hang about 1 m above or below the receivers: no distance is shorter than that.
    static let heightDifferenceMetres = 1.0

    public init(_ scenario: Scenario) throws(ConfigurationError) {
        self.scenario = scenario
        var beacons: [SimulatedBeacon] = []
        for (index, spec) in scenario.beacons.enumerated() { beacons.append(try SimulatedBeacon(spec, index: index)) }
        self.beacons = beacons
        var plans: [String: FloorPlan] = [:]
        var hidden: [String: [String: Double]] = [:]
        for (siteIndex, site) in scenario.sites.enumerated() {
            plans[site.id] = FloorPlan(site)
            var random = SeededGenerator(seed: scenario.seed ^ 0x5EED_0FF5 &+ UInt64(siteIndex) &* 0x9E37_79B9_7F4A_7C15)
            for agent in site.agents {
                let drawn = (2 * random.unit() - 1) * site.receiverOffsetSpreadDb
                hidden[site.id, default: [:]][agent.id] = agent.hiddenRSSIOffsetDb ?? drawn
            }
        }
        self.plans = plans
        hiddenOffsets = hidden
        trajectories = beacons.enumerated().map { index, beacon in
            var random = SeededGenerator(seed: scenario.seed ^ UInt64(index + 1) &* 0xD1B5_4A32_D192_ED03)
            return Trajectory(path: beacon.spec.path, plan: plans[beacon.spec.site] ?? FloorPlan(scenario.sites[0]), random: &random)
        }
    }

    /// The identity each named beacon is reported under, for ground truth and registries.
    public var beaconIDs: [String: String] {
        Dictionary(uniqueKeysWithValues: beacons.map { ($0.spec.name, $0.beaconID) })
    }

    /// One advert as one agent heard it.
    public struct Reception: Sendable {
        /// Index into the scenario's beacons.
        public var beacon: Int
        public var timeMicros: Int64
        public var rssi: Double
        /// The advert's number since the beacon booted.
        public var count: Int
        /// When the beacon booted, seconds into the scenario: before it on its first cell, later after a swap or
        /// a brown-out.
        public var bootSeconds: Double
    }

    /// What one agent hears, in capture-time order, handed over in chunks of simulated time (10 s).
    public func run(site siteID: String, agent agentID: String, deliver: ([TimedReport]) throws -> Void) throws {
        try receptions(site: siteID, agent: agentID) { receptions in
            var reports: [TimedReport] = []
            reports.reserveCapacity(receptions.count)
            for reception in receptions {
                let beacon = beacons[reception.beacon]
                let seconds = Double(reception.timeMicros - scenario.startUnixSeconds * 1_000_000) / 1_000_000
                let data = beacon.advertisingData(
                    count: reception.count, uptimeSeconds: seconds - reception.bootSeconds, unixMicros: reception.timeMicros, elapsedSeconds: seconds,
                    salt: UInt16(truncatingIfNeeded: reception.count &* 0x9E37 &+ reception.beacon))
                let report = AdvertisingReport(
                    eventType: 0x03, isExtended: false, address: beacon.address,
                    rssi: Int8(clamping: Int(reception.rssi.rounded())), data: data)
                reports.append(TimedReport(timeMicros: reception.timeMicros, report: report))
            }
            try deliver(reports)
        }
    }

    /// What one agent hears, as receptions without frames (for the accuracy evaluation), in chunks of 10 s.
    public func receptions(site siteID: String, agent agentID: String, deliver: ([Reception]) throws -> Void) throws {
        guard let site = scenario.sites.first(where: { $0.id == siteID }),
            let agentIndex = site.agents.firstIndex(where: { $0.id == agentID }), let plan = plans[siteID]
        else {
            throw ConfigurationError("the scenario has no agent \(agentID) at site \(siteID)")
        }
        let agent = site.agents[agentIndex]
        let offset = agent.rssiOffsetDb + (hiddenOffsets[siteID]?[agentID] ?? 0)
        let receiver = (x: agent.position[0], y: agent.position[1])
        let members = beacons.indices.filter { beacons[$0].spec.site == siteID }
        // Per beacon: its own random stream for advert timing (the same for every agent of the site), and one per
        // (beacon, agent) link for what this receiver makes of each advert.
        var timing = members.map { SeededGenerator(seed: scenario.seed ^ UInt64($0 + 1) &* 0x9E37_79B9) }
        var reception = members.map {
            SeededGenerator(seed: scenario.seed ^ (UInt64($0 + 1) << 20) ^ UInt64(agentIndex + 1) &* 0xC2B2_AE35)
        }
        var shadowing = [LinkShadowing](repeating: LinkShadowing(), count: members.count)
        var nextAdvert = members.indices.map { timing[$0].unit() * beacons[members[$0]].spec.intervalMs / 1000 }
        var counts = members.map { beacons[$0].advertsBefore }
        // Whether each beacon's cell holds its radio up, decided for each window alike for every agent; a beacon
        // that comes back boots again.
        var powered = [Bool](repeating: true, count: members.count)
        var boots = members.map { -beacons[$0].runningBeforeSeconds }
        var swapsDone = [Int](repeating: 0, count: members.count)
        let window = 10.0
        var windowStart = 0.0
        while windowStart < scenario.durationSeconds {
            let windowEnd = min(windowStart + window, scenario.durationSeconds)
            var heard: [Reception] = []
            for (slot, index) in members.enumerated() {
                let spec = beacons[index].spec
                let on = beacons[index].powered(
                    elapsedSeconds: windowStart, unixMicros: scenario.startUnixSeconds * 1_000_000 + Int64(windowStart * 1_000_000))
                if on, !powered[slot] {
                    boots[slot] = windowStart
                    counts[slot] = 0
                }
                powered[slot] = on
                while nextAdvert[slot] < windowEnd {
                    let time = nextAdvert[slot]
                    // BLE adds 0-10 ms of random delay to every advertising interval.
                    nextAdvert[slot] += spec.intervalMs / 1000 + timing[slot].unit() * 0.010
                    guard on else { continue }
                    // A swap: the beacon boots again on the fresh cell.
                    let swaps = spec.batterySwapsAtSeconds
                    while swapsDone[slot] < swaps.count, swaps[swapsDone[slot]] <= time {
                        boots[slot] = max(boots[slot], swaps[swapsDone[slot]])
                        counts[slot] = 0
                        swapsDone[slot] += 1
                    }
                    let count = counts[slot]
                    counts[slot] += 1
                    guard let position = trajectories[index].position(at: time) else { continue }
                    let dx = position.x - receiver.x
                    let dy = position.y - receiver.y
                    let distance = (dx * dx + dy * dy + Self.heightDifferenceMetres * Self.heightDifferenceMetres).squareRoot()
                    let walls = site.wallLossDb > 0 ? Double(plan.walls(from: position, to: receiver)) * site.wallLossDb : 0
                    let shadow = shadowing[slot].next(
                        at: time, sigma: site.shadowingDb, correlationSeconds: site.shadowingCorrelationSeconds,
                        random: &reception[slot])
                    let fading = site.fadingDb > 0 ? reception[slot].gaussian() * site.fadingDb : 0
                    let missed = reception[slot].unit() < agent.loss
                    let rssi = Double(spec.power1mDbm) - 10 * site.pathLossExponent * log10(distance) - walls + shadow + fading + offset
                    guard !missed, rssi >= Self.sensitivityDbm else { continue }
                    let micros = scenario.startUnixSeconds * 1_000_000 + Int64((time * 1_000_000).rounded())
                    heard.append(Reception(beacon: index, timeMicros: micros, rssi: rssi, count: count, bootSeconds: boots[slot]))
                }
            }
            heard.sort { $0.timeMicros < $1.timeMicros }
            try deliver(heard)
            windowStart = windowEnd
        }
    }

    /// The ground truth as CSV: `beacon_id,site_id,zone_id,enter_ts,exit_ts` (RFC 3339, UTC), one row per stay.
    public var groundTruthCSV: String {
        var lines = ["beacon_id,site_id,zone_id,enter_ts,exit_ts"]
        for beacon in beacons {
            let path = beacon.spec.path
            for (index, stop) in path.enumerated() {
                guard let zone = stop.zone, stop.atSeconds < scenario.durationSeconds else { continue }
                let end = index + 1 < path.count ? min(path[index + 1].atSeconds, scenario.durationSeconds) : scenario.durationSeconds
                func timestamp(_ seconds: Double) -> String {
                    RFC3339.format(microseconds: scenario.startUnixSeconds * 1_000_000 + Int64((seconds * 1_000_000).rounded()))
                }
                lines.append("\(beacon.beaconID),\(beacon.spec.site),\(zone),\(timestamp(stop.atSeconds)),\(timestamp(end))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Plays one agent of a scenario as an advert source, paced like a replay.
public struct SimulatorSource: AdvertSource {
    public let simulator: Simulator
    public let site: String
    public let agent: String
    public let speed: ReplaySpeed
    public var name: String { "sim:\(site)/\(agent)" }

    public init(simulator: Simulator, site: String, agent: String, speed: ReplaySpeed) {
        self.simulator = simulator
        self.site = site
        self.agent = agent
        self.speed = speed
    }

    struct Stopped: Error {}

    public func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws {
        let started = ContinuousClock.now
        let origin = simulator.scenario.startUnixSeconds * 1_000_000
        do {
            try simulator.run(site: site, agent: agent) { reports in
                var start = reports.startIndex
                while start < reports.endIndex {
                    if stop.isStopped { throw Stopped() }
                    var end = start + 1
                    if case .factor(let factor) = speed {
                        // Everything due within the next 10 ms goes at once.
                        let due = started + .microseconds(Int64(Double(reports[start].timeMicros - origin) / factor))
                        stop.wait(until: due)
                        let horizon = reports[start].timeMicros + Int64(10_000 * factor)
                        while end < reports.endIndex, reports[end].timeMicros <= horizon { end += 1 }
                    } else {
                        end = min(reports.endIndex, start + 256)
                    }
                    deliver(Array(reports[start..<end]))
                    start = end
                }
            }
        } catch is Stopped {
            return
        } catch let error as ConfigurationError {
            throw SourceError(source: name, error.message)
        }
    }
}
