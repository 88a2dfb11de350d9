import BeaconWire
import Foundation
import TestServers
import Testing
@testable import BeaconAgent
@testable import BeaconSimulation

func play(_ simulator: Simulator, site: String, agent: String) throws -> [TimedReport] {
    var all: [TimedReport] = []
    try simulator.run(site: site, agent: agent) { all += $0 }
    return all
}

/// One beacon alone in a tiny zone at a known distance from one agent.
func singleBeaconScenario(
    distance: Double, loss: Double = 0, shadowing: Double = 4, correlation: Double = 0, seconds: Int = 120
) throws -> Scenario {
    try Scenario.parse(
        """
        seed: 3
        duration_s: \(seconds)
        sites:
          - id: s
            path_loss_exponent: 2.5
            shadowing_db: \(shadowing)
            shadowing_correlation_s: \(correlation)
            zones: [{id: z, rect: [\(distance - 0.001), -0.001, \(distance + 0.001), 0.001]}]
            agents: [{id: a, position: [0, 0], loss: \(loss)}]
        beacons:
          - {name: b, site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, interval_ms: 100,
             power_1m_dbm: -59, path: [{at_s: 0, zone: z}]}
        """)
}

@Suite struct SimulatorTests {
    @Test func theSameSeedPlaysTheSameWay() throws {
        let scenario = try Scenario.load(path: demoScenarioPath)
        let first = try play(try Simulator(scenario), site: "hq", agent: "hq-a1")
        let second = try play(try Simulator(scenario), site: "hq", agent: "hq-a1")
        #expect(first.count > 1000)
        #expect(first.map(\.timeMicros) == second.map(\.timeMicros))
        #expect(first.map(\.report) == second.map(\.report))
        #expect(first.map(\.timeMicros) == first.map(\.timeMicros).sorted())
        var other = scenario
        other.seed = 8
        #expect(try play(try Simulator(other), site: "hq", agent: "hq-a1").map(\.report) != first.map(\.report))
    }

    @Test func rssiFollowsTheLogDistanceModel() throws {
        // 3 m away and 1 m of height difference: d = √10; -59 - 25 log10 √10 = -71.5 dBm, σ 4 dB.
        let reports = try play(try Simulator(try singleBeaconScenario(distance: 3)), site: "s", agent: "a")
        #expect(reports.count > 1100)  // 120 s at 100 ms (+0-10 ms advertising delay)
        let values = reports.map { Double($0.report.rssi!) }
        let mean = values.reduce(0, +) / Double(values.count)
        let deviation = (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)).squareRoot()
        #expect(abs(mean - -71.5) < 0.5, "mean \(mean)")
        #expect(abs(deviation - 4) < 0.4, "σ \(deviation)")
    }

    @Test func shadowingIsCorrelatedOverItsCorrelationTime() throws {
        // An hour at 100 ms: σ 6 dB, correlated over 5 s (an AR(1) process).
        let reports = try play(
            try Simulator(try singleBeaconScenario(distance: 3, shadowing: 6, correlation: 5, seconds: 3600)), site: "s", agent: "a")
        let values = reports.map { Double($0.report.rssi!) }
        let mean = values.reduce(0, +) / Double(values.count)
        let variance = values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)
        func correlation(lag: Int) -> Double {
            var sum = 0.0
            for index in 0..<(values.count - lag) { sum += (values[index] - mean) * (values[index + lag] - mean) }
            return sum / Double(values.count - lag) / variance
        }
        #expect(abs(mean - -71.5) < 1, "mean \(mean)")
        #expect(abs(variance.squareRoot() - 6) < 0.6, "σ \(variance.squareRoot())")
        // Adverts come every ~105 ms: 1 s is ~9.5 adverts (e^-0.2 = 0.82), 5 s ~48 (e^-1 = 0.37).
        #expect(abs(correlation(lag: 10) - 0.81) < 0.08, "1 s: \(correlation(lag: 10))")
        #expect(abs(correlation(lag: 48) - 0.37) < 0.12, "5 s: \(correlation(lag: 48))")
        // Independent per advert when the correlation time is 0.
        let independent = try play(
            try Simulator(try singleBeaconScenario(distance: 3, shadowing: 6, seconds: 600)), site: "s", agent: "a"
        ).map { Double($0.report.rssi!) }
        let independentMean = independent.reduce(0, +) / Double(independent.count)
        let lagged = zip(independent, independent.dropFirst()).map { ($0 - independentMean) * ($1 - independentMean) }
        #expect(abs(lagged.reduce(0, +) / Double(lagged.count) / 36) < 0.08)
    }

    @Test func wallsAndHiddenOffsetsLowerWhatTheReceiverHears() throws {
        // The beacon 3 m away in the next room (one wall of 6 dB); the receiver hears 2 dB less than the model
        // unbeknown to the sites file, and 1 dB more that the sites file knows.
        let scenario = try Scenario.parse(
            """
            duration_s: 10
            sites:
              - id: s
                shadowing_db: 0
                wall_loss_db: 6
                zones: [{id: near, rect: [-2, -2, 2.999, 2]}, {id: far, rect: [2.999, -0.001, 3.001, 0.001]}]
                agents: [{id: a, zone: near, position: [0, 0], loss: 0, rssi_offset_db: 1, hidden_rssi_offset_db: -2}]
            beacons:
              - {name: b, site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, power_1m_dbm: -59,
                 path: [{at_s: 0, zone: far}]}
            """)
        let simulator = try Simulator(scenario)
        #expect(simulator.hiddenOffsets["s"]?["a"] == -2)
        var heard: [Double] = []
        try simulator.receptions(site: "s", agent: "a") { heard += $0.map(\.rssi) }
        let plan = FloorPlan(scenario.sites[0])
        // 3 m away and 1 m of height difference: -59 - 25 log10 √10 = -71.5 dBm, less 6 + 2 - 1 dB.
        #expect(heard.count > 50)
        #expect(heard.allSatisfy { abs($0 - -78.5) < 0.01 }, "\(heard.prefix(3))")
        #expect(plan.walls(from: (3, 0), to: (0, 0)) == 1)
        #expect(plan.walls(from: (3, 0), to: (10, 0)) == 1)  // out of the site
        #expect(plan.walls(from: (0, 1), to: (0, -1)) == 0)
    }

    @Test func aBeaconWalksThroughTheDoorAndCrossesWhenThePathSays() throws {
        let scenario = try Scenario.parse(
            """
            duration_s: 100
            sites:
              - id: s
                zones: [{id: west, rect: [0, 0, 6, 5]}, {id: east, rect: [6, 0, 12, 5]}]
                doors: [{zones: [west, east], at: [6, 4]}]
                agents: [{id: a, zone: west, position: [3, 2.5]}]
            beacons:
              - {name: b, site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0,
                 path: [{at_s: 0, zone: west}, {at_s: 50, zone: east}, {at_s: 80}]}
            """)
        let plan = FloorPlan(scenario.sites[0])
        var random = SeededGenerator(seed: 9)
        let trajectory = Trajectory(path: scenario.beacons[0].path, plan: plan, random: &random)
        let door = try #require(trajectory.position(at: 50))
        #expect(abs(door.x - 6) < 1e-9 && abs(door.y - 4) < 1e-9)
        let before = try #require(trajectory.position(at: 49.9))
        let after = try #require(trajectory.position(at: 50.1))
        #expect(plan.zoneIndex(x: before.x, y: before.y) == 0 && plan.zoneIndex(x: after.x, y: after.y) == 1)
        // Walking speed between samples, standing still well before and after.
        #expect(hypot(after.x - before.x, after.y - before.y) <= 0.2 * Trajectory.walkingSpeed + 1e-9)
        let early = try #require(trajectory.position(at: 1))
        let settled = try #require(trajectory.position(at: 20))
        #expect(early == settled)
        #expect(trajectory.position(at: 80) == nil)
    }

    @Test func receiversMissAdvertsAtTheirLossRate() throws {
        let all = try play(try Simulator(try singleBeaconScenario(distance: 2, shadowing: 0)), site: "s", agent: "a")
        let lossy = try play(try Simulator(try singleBeaconScenario(distance: 2, loss: 0.3, shadowing: 0)), site: "s", agent: "a")
        let heard = Double(lossy.count) / Double(all.count)
        #expect(abs(heard - 0.7) < 0.05, "heard \(heard)")
        // Out of range: 60 m gives -59 - 25 log10 60 = -103 dBm, below the -100 dBm floor.
        #expect(try play(try Simulator(try singleBeaconScenario(distance: 60, shadowing: 0)), site: "s", agent: "a").isEmpty)
    }

    @Test func everyBeaconTypeSendsFramesThatDecode() throws {
        let simulator = try Simulator(try Scenario.load(path: demoScenarioPath))
        let reports = try play(simulator, site: "hq", agent: "hq-a2")
        let key = try [UInt8](hex: "000102030405060708090a0b0c0d0e0f")
        var decoder = FrameDecoder(
            keyring: EddystoneKeyring(identities: [
                EddystoneIdentity(beaconID: "eddystone:0102030405060708090a:0000000000b9", identityKey: key, rotationExponent: 8)
            ]))
        var kinds: [String: Int] = [:]
        for timed in reports {
            let data = try AdvertisingData(parsing: timed.report.data)
            for frame in try decoder.frames(in: data, address: timed.report.address, unixSeconds: timed.timeMicros / 1_000_000) {
                switch frame {
                case .eddystoneUID(let uid): kinds["uid:" + uid.beaconID, default: 0] += 1
                case .eddystoneURL(let url): kinds["url:" + url.url, default: 0] += 1
                case .eddystoneTLM(let tlm):
                    kinds["tlm", default: 0] += 1
                    #expect((2850...3100).contains(tlm.batteryMillivolts ?? 0), "a fresh CR2032 in a room")
                case .eddystoneEID(let eid): kinds["eid:" + (eid.beaconID ?? "unresolved"), default: 0] += 1
                case .eddystoneETLM(let etlm): kinds["etlm:" + (etlm.decrypted == nil ? "sealed" : "opened"), default: 0] += 1
                case .iBeacon(let beacon): kinds[beacon.beaconID, default: 0] += 1
                case .altBeacon(let beacon): kinds[beacon.beaconID, default: 0] += 1
                default: kinds["other", default: 0] += 1
                }
            }
        }
        #expect(kinds["uid:eddystone:0102030405060708090a:0000000000a1", default: 0] > 100)
        #expect(kinds["url:https://example.com/cart7", default: 0] > 5)
        #expect(kinds["tlm", default: 0] > 10)
        #expect(kinds["eid:eddystone:0102030405060708090a:0000000000b9", default: 0] > 100)
        #expect(kinds["eid:unresolved"] == nil)
        #expect(kinds["etlm:opened", default: 0] > 10)
        #expect(kinds["etlm:sealed"] == nil)
        #expect(kinds["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3", default: 0] > 100)
        #expect(kinds["altbeacon:00112233445566778899aabbccddeeff:2:12", default: 0] > 10)
        #expect(kinds["other"] == nil)
    }

    @Test func groundTruthListsEveryStay() throws {
        let simulator = try Simulator(try Scenario.load(path: demoScenarioPath))
        let lines = simulator.groundTruthCSV.split(separator: "\n").map(String.init)
        #expect(lines.first == "beacon_id,site_id,zone_id,enter_ts,exit_ts")
        #expect(lines.contains("eddystone:0102030405060708090a:0000000000a1,hq,corridor,2026-01-01T10:03:20.000000Z,2026-01-01T10:04:00.000000Z"))
        #expect(lines.contains("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3,hq,lobby,2026-01-01T10:06:40.000000Z,2026-01-01T10:10:00.000000Z"))
        #expect(lines.count == 1 + 3 + 2 + 1 + 2)
    }

    /// A day of one Eddystone beacon's TLM on a cell of `percent` charge, in a place of `celsius` ± `swing`:
    /// (hour of the day UTC, voltage, advertising count, uptime in seconds) of each TLM heard.
    func telemetryOverADay(percent: Double, celsius: Double, swing: Double, chemistry: String = "cr2032", swaps: [Double] = []) throws -> [(hour: Double, volts: Double, count: UInt32, uptime: Double)] {
        let scenario = try Scenario.parse(
            """
            seed: 5
            start_unix_s: 1767225600
            duration_s: 86400
            sites:
              - id: s
                shadowing_db: 0
                fading_db: 0
                zones: [{id: z, rect: [1, -1, 3, 1]}]
                agents: [{id: a, position: [0, 0], loss: 0}]
            beacons:
              - {name: door-3, site: s, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000c3, interval_ms: 1000,
                 tlm_every: 60, battery: \(chemistry), battery_left_pct: \(percent), temperature_c: \(celsius), temperature_swing_c: \(swing),
                 battery_swaps_at_s: \(swaps), path: [{at_s: 0, zone: z}]}
            """)
        var decoder = FrameDecoder()
        var readings: [(hour: Double, volts: Double, count: UInt32, uptime: Double)] = []
        for timed in try play(try Simulator(scenario), site: "s", agent: "a") {
            for frame in try decoder.frames(in: try AdvertisingData(parsing: timed.report.data), address: timed.report.address, unixSeconds: timed.timeMicros / 1_000_000) {
                if case .eddystoneTLM(let tlm) = frame, let millivolts = tlm.batteryMillivolts {
                    readings.append((Double(timed.timeMicros - 1_767_225_600_000_000) / 3_600_000_000, Double(millivolts) / 1000, tlm.advertisingCount, Double(tlm.uptimeTenths) / 10))
                }
            }
        }
        return readings
    }

    /// A fresh coin cell reads near 3 V under load, lower in the night's cold than in the afternoon's warmth; two
    /// lithium AA cells in series about 3.5 V, and they hardly sag.
    @Test func aFreshCellReadsItsChemistrysVoltageLowerInTheCold() throws {
        for (chemistry, fresh, fall) in [("cr2032", 2.85...3.05, 0.2...0.6), ("2xaa-lithium", 3.3...3.7, 0.0...0.1)] {
            let readings = try telemetryOverADay(percent: 100, celsius: 0, swing: 15, chemistry: chemistry)
            #expect(readings.count > 1400, "a TLM a minute, all day: \(readings.count)")
            let night = readings.filter { (3.5..<4.5).contains($0.hour) }.map(\.volts)
            let afternoon = readings.filter { (15.5..<16.5).contains($0.hour) }.map(\.volts)
            #expect(afternoon.allSatisfy { fresh.contains($0) }, "\(chemistry): \(afternoon.min() ?? 0)-\(afternoon.max() ?? 0)")
            #expect(fall.contains(afternoon.min()! - night.max()!), "\(chemistry): \(night.max()!) at night, \(afternoon.min()!) in the afternoon")
        }
        // Near its end, in a room's steady warmth, a cell reads its knee: lower the less charge is left. Its
        // counters tell of the charge spent: a CR2032 at a 1 s interval runs for about two years.
        let ends = try [12.0, 8, 5].map { try telemetryOverADay(percent: $0, celsius: 22, swing: 1.5) }
        let knee = ends.map { $0.map(\.volts).max()! }
        #expect(knee == knee.sorted(by: >) && knee.allSatisfy { (2.0...2.4).contains($0) }, "\(knee)")
        for end in ends {
            let first = try #require(end.first)
            #expect(first.uptime > 500 * 86_400 && first.uptime < 800 * 86_400, "\(first)")
            #expect(abs(Double(first.count) * 1.005 - first.uptime) < 3_600, "\(first)")
        }
    }

    /// A cell that cannot hold its radio up in the night's cold falls silent, and the beacon boots again, its counters
    /// from zero, when the day warms it.
    @Test func aCellBrownedOutInTheColdFallsSilentAndBootsAgainWhenWarm() throws {
        let readings = try telemetryOverADay(percent: 8, celsius: 0, swing: 15)
        #expect(readings.count > 100 && readings.count < 1000)
        #expect(readings.allSatisfy { !(1..<7).contains($0.hour) }, "heard in the night's cold")
        let first = try #require(readings.first)
        #expect(first.hour > 7 && first.uptime < 120 && first.count < 120, "\(first): not a fresh boot")
        #expect(readings.allSatisfy { $0.volts >= 2.0 })
    }

    /// A cell swapped for a fresh one: the beacon boots again, its counters from zero, and reads a fresh cell's
    /// voltage, through the night's cold that had stopped the old one.
    @Test func aSwappedCellBootsTheBeaconAgainOnAFreshCell() throws {
        let readings = try telemetryOverADay(percent: 8, celsius: 0, swing: 15, swaps: [64_800])
        let before = readings.filter { $0.hour < 18 }
        let after = readings.filter { $0.hour >= 18 }
        let first = try #require(after.first)
        #expect(first.hour < 18.1 && first.uptime < 120 && first.count < 120, "\(first): not a boot at the swap")
        #expect(after.count > 350, "heard all night on the fresh cell")
        #expect(after.map(\.volts).min()! > before.map(\.volts).max()! + 0.3)
        #expect(zip(after, after.dropFirst()).allSatisfy { $1.count > $0.count }, "one boot")
    }

    @Test func badScenariosAreRefusedWithTheirReason() {
        func error(_ yaml: String) -> String? {
            do {
                _ = try Scenario.parse(yaml)
                return nil
            } catch { return error.message }
        }
        let site = "sites: [{id: s, zones: [{id: z, rect: [0, 0, 1, 1]}], agents: [{id: a, position: [0, 0]}]}]"
        #expect(error("duration_s: 10\n\(site)\nbeacons: [{name: b, site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, path: [{at_s: 0, zone: nowhere}]}]")?.contains("unknown zone 'nowhere'") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [{name: b, site: s, type: radio, path: []}]")?.contains("type 'radio'") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [{name: b, site: s, type: ibeacon, uuid: 12, path: []}]")?.contains("uuid must be 32 hex digits") == true)
        #expect(error("duration_s: 0\n\(site)\nbeacons: []")?.contains("duration_s") == true)
        #expect(error("duration_s: 10\nsites: [{id: s, zones: [{id: z, rect: [1, 0, 0, 1]}], agents: []}]\nbeacons: []")?.contains("rect") == true)
        #expect(error("not: [valid")  != nil)
        let beacon = "{name: b, site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, path: []"
        #expect(error("duration_s: 10\n\(site)\nbeacons: [\(beacon), battery: cr2023}]")?.contains("battery must be one of 'cr2032', 'cr2477', '2xaa-lithium'") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [\(beacon), battery: unknown}]")?.contains("battery must be one of") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [\(beacon), battery_left_pct: 120}]")?.contains("battery_left_pct must be 0-100") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [\(beacon), temperature_c: -100}]")?.contains("temperature_c must be -60-85") == true)
        #expect(error("duration_s: 10\n\(site)\nbeacons: [\(beacon), battery_swaps_at_s: [5, 2]}]")?.contains("battery_swaps_at_s must be times after 0 in order") == true)
    }
}

/// Bytes per sighting on a simulated busy site: 150 beacons (Eddystone with TLM and URL, iBeacon, AltBeacon) in
/// three rooms, as the agent in the middle room batches them (defaults: 1 s or 1000 sightings).
@Suite struct BusySiteBatchSizeTests {
    @Test func aSightingCostsAtMostFiveBytesOnABusySimulatedSite() throws {
        var beacons: [String] = []
        for index in 0..<150 {
            let zone = ["a", "b", "c"][index % 3]
            switch index % 3 {
            case 0:
                beacons.append(
                    "  - {name: e\(index), site: s, type: eddystone-uid, namespace: 0102030405060708090a, instance: \(String(format: "%012x", index)), url: https://example.com/\(index), path: [{at_s: 0, zone: \(zone)}]}")
            case 1:
                beacons.append(
                    "  - {name: i\(index), site: s, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: \(index), interval_ms: 200, path: [{at_s: 0, zone: \(zone)}]}")
            default:
                beacons.append(
                    "  - {name: l\(index), site: s, type: altbeacon, uuid: 00112233445566778899aabbccddeeff, major: 2, minor: \(index), interval_ms: 300, path: [{at_s: 0, zone: \(zone)}]}")
            }
        }
        let scenario = try Scenario.parse(
            """
            duration_s: 60
            sites:
              - id: s
                zones: [{id: a, rect: [0, 0, 8, 8]}, {id: b, rect: [8, 0, 16, 8]}, {id: c, rect: [16, 0, 24, 8]}]
                agents: [{id: mid, position: [12, 4]}]
            beacons:
            \(beacons.joined(separator: "\n"))
            """)
        var extractor = SightingExtractor()
        var builder = BatchBuilder(siteID: "s", agentID: "mid", bootID: 1)
        // The same sightings as an agent sending version 1 batches them.
        var version1 = BatchBuilder(siteID: "s", agentID: "mid", bootID: 1)
        version1.configuration.formatVersion = 1
        var batches: [WireBatch] = []
        var batchesInVersion1: [WireBatch] = []
        var sequence: UInt64 = 0
        var clock: UInt64 = 0
        func seal() {
            sequence += 1
            if let batch = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0),
                let same = version1.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0)
            {
                batches.append(batch)
                batchesInVersion1.append(same)
            }
        }
        try Simulator(scenario).run(site: "s", agent: "mid") { reports in
            for timed in reports {
                // The agent's clock follows the simulated one here: batches close on their 1 s age.
                clock = UInt64(timed.timeMicros - scenario.startUnixSeconds * 1_000_000) * 1000
                if builder.isDue(nowNanoseconds: clock) { seal() }
                guard case .success(let sighting) = extractor.sighting(of: timed.report, timeMicros: timed.timeMicros)
                else { continue }
                _ = version1.add(sighting, nowNanoseconds: clock)
                if builder.add(sighting, nowNanoseconds: clock) { seal() }
            }
        }
        seal()
        let sightings = batches.reduce(0) { $0 + $1.sightingBeacon.count }
        #expect(sightings > 30_000)
        // As published (version 2: the body compressed), everything included.
        let published = try batches.map { try $0.wireBytes() }
        let total = published.reduce(0) { $0 + $1.count }
        #expect(Double(total) / Double(sightings) <= 5, "\(Double(total) / Double(sightings)) bytes per sighting in all")
        // Version 1 (the body as it is): 16.3 bytes per sighting when the dictionary held text ids, 11.5 with them
        // in binary.
        let uncompressed = try batchesInVersion1.reduce(0) { sum, batch in sum + (try batch.wireBytes()).count }
        #expect(Double(uncompressed) / Double(sightings) <= 12)
        // Both read back the same sightings, to the millisecond.
        for (bytes, same) in zip(published, batchesInVersion1).prefix(5) {
            let sent = try BatchReader.decode(bytes).sightings
            let inVersion1 = try BatchReader.decode(try same.wireBytes()).sightings
            #expect(sent.map(\.beacon.beaconID) == inVersion1.map(\.beacon.beaconID) && sent.map(\.rssi) == inVersion1.map(\.rssi))
            #expect(zip(sent, inVersion1).allSatisfy { abs($0.timeMicros - $1.timeMicros) <= 500 })
        }
        print(
            "busy simulated site: \(sightings) sightings in \(batches.count) batches: "
                + "\(Double(total) / Double(sightings)) bytes per sighting in all as published, "
                + "\(Double(uncompressed) / Double(sightings)) in version 1")
    }
}

/// Bytes per sighting on a small simulated site: the hard preset's 40 iBeacons (every 250 ms) in one site of 2×3
/// rooms with 9 receivers, each agent batching what it hears (defaults: 1 s or 1000 sightings). Each batch holds
/// about 90 sightings of about 30 beacons, so its dictionary weighs more than on a busy site.
@Suite struct SmallSiteBatchSizeTests {
    @Test func aSightingCostsAtMostSixBytesOnASmallSimulatedSite() throws {
        let scenario = try ScenarioFamily.scenario(ScenarioFamily.hard, seed: 31, durationSeconds: 120)
        let site = try #require(scenario.sites.first)
        var sightings = 0
        var batchCount = 0
        // As published; in version 2 (times to the microsecond); and without the dictionary's device addresses.
        var published = 0
        var inVersion2 = 0
        var withoutAddresses = 0
        for agent in site.agents {
            var extractor = SightingExtractor()
            var builder = BatchBuilder(siteID: site.id, agentID: agent.id, bootID: 1)
            var version2 = BatchBuilder(siteID: site.id, agentID: agent.id, bootID: 1)
            version2.configuration.formatVersion = 2
            var sequence: UInt64 = 0
            func seal() throws {
                sequence += 1
                guard let batch = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0),
                    let same = version2.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0)
                else { return }
                sightings += batch.sightingBeacon.count
                batchCount += 1
                published += try batch.wireBytes().count
                inVersion2 += try same.wireBytes().count
                var addressless = batch
                for index in addressless.beacons.indices { addressless.beacons[index].address = 0 }
                withoutAddresses += try addressless.wireBytes().count
            }
            try Simulator(scenario).run(site: site.id, agent: agent.id) { reports in
                for timed in reports {
                    let clock = UInt64(timed.timeMicros - scenario.startUnixSeconds * 1_000_000) * 1000
                    if builder.isDue(nowNanoseconds: clock) { try seal() }
                    guard case .success(let sighting) = extractor.sighting(of: timed.report, timeMicros: timed.timeMicros)
                    else { continue }
                    _ = version2.add(sighting, nowNanoseconds: clock)
                    if builder.add(sighting, nowNanoseconds: clock) { try seal() }
                }
            }
            try seal()
        }
        #expect(site.agents.count == 9 && sightings > 20_000, "\(site.agents.count) agents, \(sightings) sightings")
        func perSighting(_ bytes: Int) -> Double { Double(bytes) / Double(sightings) }
        print(
            "small simulated site: \(sightings) sightings in \(batchCount) batches: \(perSighting(published)) bytes per "
                + "sighting as published, \(perSighting(inVersion2)) in version 2; device addresses "
                + "\(perSighting(published - withoutAddresses))")
        #expect(perSighting(published) < perSighting(inVersion2) - 1)
        #expect(perSighting(published) <= 6, "\(perSighting(published)) bytes per sighting in all")
    }
}

@Suite struct ScenarioFamilyTests {
    /// The large preset: two sites of 3×3 rooms, a door in each of the 12 shared walls, a receiver at each room's
    /// centre and three on internal walls, 40 beacons each whose paths go only through their own site's rooms,
    /// each walk between rooms through a shared wall.
    @Test func theLargePresetHasTwoSitesOfNineRooms() throws {
        let scenario = try ScenarioFamily.scenario(ScenarioFamily.large, seed: 5, durationSeconds: 1800)
        #expect(scenario.sites.map(\.id) == ["grid-1", "grid-2"])
        #expect(scenario.beacons.count == 80)
        for site in scenario.sites {
            #expect(site.zones.count == 9 && site.doors.count == 12 && site.agents.count == 12)
            #expect(site.shadowingDb == ScenarioFamily.large.shadowingDb)
            let zones = Set(site.zones.map(\.id))
            let beacons = scenario.beacons.filter { $0.site == site.id }
            #expect(beacons.count == 40)
            #expect(beacons.allSatisfy { $0.path.allSatisfy { $0.zone.map(zones.contains) ?? true } })
        }
        #expect(scenario.beacons.flatMap(\.path).contains { $0.zone == "room-c3" })
        // The single-site presets keep their layout.
        let hard = try ScenarioFamily.scenario(ScenarioFamily.hard, seed: 5, durationSeconds: 600)
        #expect(hard.sites.map(\.id) == ["grid"] && hard.sites[0].zones.count == 6 && hard.sites[0].doors.count == 7)
    }
}
