import BeaconAgent
import BeaconIngest
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import Reporting
import TestServers
import Testing

/// Every reading the decoders see in what agents hear reaches `sensor_readings` once, through real agents, a real
/// broker, the ingest and a real PostgreSQL.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(6)))
struct SensorReadingEndToEndTests {
    static let bindkey = "231d39c1d7cc1ab1aee224cd096db932"
    static let encryptedBTHome = DeviceAddress(value: 0x54_48_E6_8F_80_B0, kind: .public)

    static let sites = """
        sites:
          - id: hq
            zones: [{id: lobby}]
            agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lobby}, {id: hq-a3, zone: lobby}, {id: hq-gatt, zone: lobby}]
        beacons:
          - {id: "mac:C0:04:00:00:00:04", label: Ruuvi on the dock door}
          - {id: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:42", label: Trolley 42}
          - {id: "mac:54:48:E6:8F:80:B0", label: Freezer, bthome_bindkey: \(bindkey)}
          - {id: "mac:A4:C1:38:00:00:01", label: Cold room}
        """

    /// Ten seconds of the sensors the bundled capture lacks: encrypted BTHome (the bthome.io/encryption key), an
    /// ATC1441 and a pvvx thermometer (the cold room's battery nearly spent), Ruuvi RAWv1 with trailing bytes, and
    /// BTHome's newest objects.
    static func sensorCapture() -> [UInt8] {
        func ad(_ type: UInt8, _ data: [UInt8]) -> [UInt8] { [UInt8(data.count + 1), type] + data }
        func service(_ uuid: UInt16, _ data: [UInt8]) -> [UInt8] { ad(0x16, [UInt8(uuid & 0xFF), UInt8(uuid >> 8)] + data) }
        let key = try! [UInt8](hex: bindkey)
        var file = BtsnoopWriter.fileHeader
        let start: Int64 = 1_763_800_000_000_000
        for second in 0..<10 {
            let s = UInt8(second)
            let temperature = UInt16(2000 + second * 10)
            let sealed = BTHomePacket.encrypt(
                objects: [0x01, 90 - s, 0x02, UInt8(temperature & 0xFF), UInt8(temperature >> 8)], bindkey: key,
                address: encryptedBTHome, counter: UInt32(second + 1))
            let atcTenths = UInt16(215 + second)
            let pvvxHundredths = UInt16(2150 + second)
            let adverts: [(DeviceAddress, [UInt8])] = [
                (encryptedBTHome, ad(0x01, [0x06]) + service(0xFCD2, sealed)),
                (DeviceAddress(value: 0xA4_C1_38_00_00_01, kind: .public),
                 service(0x181A, [0xA4, 0xC1, 0x38, 0x00, 0x00, 0x01, UInt8(atcTenths >> 8), UInt8(atcTenths & 0xFF), 40, 4, 0x08, 0x66, s])),
                (DeviceAddress(value: 0xA4_C1_38_00_00_02, kind: .public),
                 service(0x181A, [0x02, 0x00, 0x00, 0x38, 0xC1, 0xA4, UInt8(pvvxHundredths & 0xFF), UInt8(pvvxHundredths >> 8),
                                  0x88, 0x13, 0xB8, 0x0B, 77, s, 0x04])),
                (DeviceAddress(value: 0xC0_05_00_00_00_05, kind: .random),
                 ad(0xFF, try! [UInt8](hex: "9904" + "03291A1ECE1EFC18F94202CA0B53" + "0000"))),
                (DeviceAddress(value: 0x54_48_E6_8F_80_B1, kind: .public),
                 service(0xFCD2, [0x40, 0x00, s, 0x61, 0xE8, 0x03, 0x62, 0x40, 0xE2, 0x01, 0x00, 0x63, 0xC0, 0x1D, 0xFE, 0xFF, 0x64, 5])),
            ]
            for (index, (address, payload)) in adverts.enumerated() {
                let event = AdvertisingReportDecoder.legacyReportEvent(address: address, rssi: Int8(-55 - index), data: payload)
                file += BtsnoopWriter.record(kind: .event, received: true, packet: event, timestamp: start + Int64(second) * 1_000_000 + Int64(index) * 10_000)
            }
        }
        return file
    }

    /// What the decoders read from the data frames of `sightings`: beacon, quantity and value (to a millionth).
    static func decodedReadings(_ sightings: [Sighting], bindkeys: [UInt64: [UInt8]]) throws -> Set<String> {
        var decoder = FrameDecoder(bindkeys: bindkeys)
        var readings = Set<String>()
        for sighting in sightings {
            let address = DeviceAddress(value: sighting.beacon.address, kind: sighting.beacon.addressIsRandom ? .random : .public)
            for content in sighting.frames {
                guard let frame = try decoder.frame(of: content, address: address, unixSeconds: sighting.timeMicros / 1_000_000)
                else { continue }
                for reading in frame.sensorReadings {
                    readings.insert("\(sighting.beacon.beaconID) \(reading.quantity) \(String(format: "%.6f", reading.value)) \(reading.unit)")
                }
            }
        }
        return readings
    }

    @Test func everyDecodedReadingIsStoredOnceWithBatteriesLabelsAndDeviceInformation() async throws {
        let sites = try SitesConfiguration.parse(Self.sites)
        let harness = try await IngestHarness.start { $0.sites = sites }
        let work = try makeTemporaryDirectory(prefix: "sensors")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let sensors = work + "/sensors.btsnoop"
        try Data(Self.sensorCapture()).write(to: URL(fileURLWithPath: sensors))
        let mixed = exampleFile("mixed-beacons.btsnoop")

        // Two agents hear the bundled capture (every transmission twice), a third the sensors.
        var expected: [Sighting] = []
        for (agent, capture) in [("hq-a1", mixed), ("hq-a2", mixed), ("hq-a3", sensors)] {
            var configuration = try IngestIntegrationTests().agentConfiguration(harness.broker, spool: work + "/" + agent, agent: agent)
            let run = Agent(
                configuration: configuration, source: CaptureReplaySource(path: capture, speed: .maximum),
                logger: Logger(label: agent))
            #expect(try await run.run() == .finished, "\(agent)")
            expected += try expectedSightings(capture: capture, configuration: configuration.extractor)
        }
        // A GATT poll of the thermometer of the bundled capture, as its agent publishes it.
        let polled = BeaconKey(beaconID: "mac:D9:4C:5D:C0:AB:B8", address: 0xD94C_5DC0_ABB8, addressIsRandom: true)
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-gatt", bootID: 1)
        builder.add(CharacteristicRead(beacon: polled, timeMicros: 1_763_800_010_000_000, characteristic: 0x2A19, value: [64]), nowNanoseconds: 0)
        builder.add(CharacteristicRead(beacon: polled, timeMicros: 1_763_800_010_000_000, characteristic: 0x2A29, value: Array("Acme".utf8)), nowNanoseconds: 0)
        let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 1_763_800_010_000_000)
        let poll = try #require(sealed)
        let (client, _) = try await harness.client()
        defer { client.stop() }
        try client.publish(topic: "beaconflow/v1/hq/hq-gatt/batch", payload: try poll.wireBytes())
        try await harness.eventually("the poll is committed") { try harness.count("beaconflow.device_info") == 1 }

        var decoded = try Self.decodedReadings(expected, bindkeys: sites.bindkeys)
        decoded.insert("mac:D9:4C:5D:C0:AB:B8 battery 64.000000 percent")
        #expect(decoded.contains { $0.hasPrefix("mac:54:48:E6:8F:80:B0 temperature") }, "the encrypted BTHome was read")
        #expect(decoded.contains { $0.hasPrefix("mac:A4:C1:38:00:00:02 humidity 50.000000") }, "the pvvx was read")
        let stored = Set(
            try harness.query("SELECT beacon_id || ' ' || quantity || ' ' || to_char(value, 'FM999999990.000000') || ' ' || unit FROM beaconflow.sensor_readings")
                .map { $0[0] ?? "" })
        #expect(stored == decoded, "missing: \(decoded.subtracting(stored).sorted()); extra: \(stored.subtracting(decoded).sorted())")
        // Once: the second agent's receptions added no row.
        #expect(try harness.query("SELECT count(*) = count(DISTINCT (beacon_id, quantity, ts)) FROM beaconflow.sensor_readings") == [["t"]])
        #expect(try harness.count("beaconflow.sensor_readings WHERE agent_id = 'hq-a2'") == 0)
        // The Ruuvi's sequence stays while its movement counter moves: ten transmissions of ten quantities.
        #expect(try harness.count("beaconflow.sensor_readings WHERE beacon_id = 'mac:C0:04:00:00:00:04'") == 100)

        let batteries = try harness.query(
            """
            SELECT h.beacon_id, h.battery_mv, round(h.battery_pct), h.temperature_c IS NOT NULL, s.status
            FROM beaconflow.beacon_health h JOIN beaconflow.beacon_state s USING (beacon_id)
            WHERE h.battery_mv IS NOT NULL OR h.battery_pct IS NOT NULL ORDER BY 1
            """)
        #expect(
            batteries
                == [
                    ["eddystone:0102030405060708090a:0000000000a1", "2991", nil, "t", "ok"],
                    ["mac:54:48:E6:8F:80:A5", nil, "94", "t", "ok"],
                    ["mac:54:48:E6:8F:80:B0", nil, "81", "t", "ok"],
                    ["mac:A4:C1:38:00:00:01", "2150", "4", "t", "low_battery"],
                    ["mac:A4:C1:38:00:00:02", "3000", "77", "t", "ok"],
                    ["mac:C0:04:00:00:00:04", "2977", nil, "t", "ok"],
                    ["mac:C0:05:00:00:00:05", "2899", nil, "t", "ok"],
                    ["mac:D9:4C:5D:C0:AB:B8", nil, "64", "t", "ok"],  // the temperature of its 0x1809 frame
                ])
        let labelled = try harness.query(
            "SELECT beacon_id, label, kind, identity_source FROM beaconflow.beacons WHERE label IS NOT NULL ORDER BY 1")
        #expect(
            labelled
                == [
                    ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:42", "Trolley 42", "ibeacon", "frame"],
                    ["mac:54:48:E6:8F:80:B0", "Freezer", "bthome", "address"],
                    ["mac:A4:C1:38:00:00:01", "Cold room", "atc1441", "address"],
                    ["mac:C0:04:00:00:00:04", "Ruuvi on the dock door", "ruuvi", "address"],
                ])
        #expect(try harness.query("SELECT beacon_id, name, value FROM beaconflow.device_info") == [["mac:D9:4C:5D:C0:AB:B8", "manufacturer_name", "Acme"]])
        let report = try Report.load(harness.connection)
        // The capture is a year old, so every beacon is stale by now and needs attention.
        let coldRoom = report.beacons.first { $0.beaconID == "mac:A4:C1:38:00:00:01" }
        #expect(coldRoom?.label == "Cold room" && coldRoom?.batteryMillivolts == 2150)
        #expect(report.text.contains("Cold room"))
        try await harness.stop()
    }
}
