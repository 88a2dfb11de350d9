import BeaconWire
import Foundation
import Testing
@testable import BeaconAgent

let demoScenarioPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../deploy/scenarios/demo.yaml").standardized.path

func play(_ simulator: Simulator, site: String, agent: String) throws -> [TimedReport] {
    var all: [TimedReport] = []
    try simulator.run(site: site, agent: agent) { all += $0 }
    return all
}

/// One beacon alone in a tiny zone at a known distance from one agent.
func singleBeaconScenario(distance: Double, loss: Double = 0, shadowing: Double = 4, seconds: Int = 120) throws -> Scenario {
    try Scenario.parse(
        """
        seed: 3
        duration_s: \(seconds)
        sites:
          - id: s
            path_loss_exponent: 2.5
            shadowing_db: \(shadowing)
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
                    #expect(tlm.batteryMillivolts == 3000 || tlm.batteryMillivolts == 2999)
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
    }
}

/// Bytes per sighting on a simulated busy site: 150 beacons (Eddystone with TLM and URL, iBeacon, AltBeacon) in
/// three rooms, as the agent in the middle room batches them (defaults: 1 s or 1000 sightings).
@Suite struct BusySiteBatchSizeTests {
    @Test func repeatedSightingsCostAtMostSixBytesOnABusySimulatedSite() throws {
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
        var batches: [WireBatch] = []
        var sequence: UInt64 = 0
        var clock: UInt64 = 0
        func seal() {
            sequence += 1
            if let batch = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0) {
                batches.append(batch)
            }
        }
        try Simulator(scenario).run(site: "s", agent: "mid") { reports in
            for timed in reports {
                // The agent's clock follows the simulated one here: batches close on their 1 s age.
                clock = UInt64(timed.timeMicros - scenario.startUnixSeconds * 1_000_000) * 1000
                if builder.isDue(nowNanoseconds: clock) { seal() }
                guard case .success(let sighting) = extractor.sighting(of: timed.report, timeMicros: timed.timeMicros)
                else { continue }
                if builder.add(sighting, nowNanoseconds: clock) { seal() }
            }
        }
        seal()
        let sightings = batches.reduce(0) { $0 + $1.sightingBeacon.count }
        let total = try batches.reduce(0) { $0 + (try $1.serializedBytes() as [UInt8]).count }
        // The sighting columns alone: each batch without its dictionary and data frames.
        let columns = try batches.reduce(0) { sum, batch in
            var bare = batch
            bare.beacons = []
            bare.dataFrames = []
            return sum + (try bare.serializedBytes() as [UInt8]).count
        }
        #expect(sightings > 30_000)
        let perSighting = Double(columns) / Double(sightings)
        #expect(perSighting <= 6, "\(perSighting) bytes per sighting in the columns")
        print(
            "busy simulated site: \(sightings) sightings in \(batches.count) batches, \(total) bytes: "
                + "\(Double(total) / Double(sightings)) per sighting in all, \(perSighting) in the sighting columns")
    }
}
