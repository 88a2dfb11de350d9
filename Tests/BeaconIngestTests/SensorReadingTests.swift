import BeaconWire
@testable import BeaconIngest
import LibPQ
import LocalServers
import Logging
import Testing

@Suite struct SensorReadingTests {
    /// The BTHome encryption example of bthome.io/encryption: key, address, and a packet of temperature 25.06 °C
    /// and humidity 50.55 %.
    static let bthomeAddress = DeviceAddress("54:48:E6:8F:80:A5")!
    static let bthomeKey = "231d39c1d7cc1ab1aee224cd096db932"

    static func sites(bindkey: String? = bthomeKey) throws -> SitesConfiguration {
        try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                zones: [{id: lobby}]
                agents: [{id: a1, zone: lobby}, {id: a2, zone: lobby}]
            beacons:
              - id: "mac:54:48:E6:8F:80:A5"
                label: Freezer
            \(bindkey.map { "    bthome_bindkey: \($0)" } ?? "")
            """)
    }

    let t: Int64 = 1_767_225_600_000_000
    let ruuvi = BeaconKey(beaconID: "mac:CB:B8:33:4C:88:4F", address: 0xCBB8_334C_884F, addressIsRandom: true)
    let bthome = BeaconKey(beaconID: "mac:54:48:E6:8F:80:A5", address: 0x5448_E68F_80A5, addressIsRandom: false)

    /// docs.ruuvi.com, data format 5 "valid data" vector, with its measurement sequence replaced.
    func ruuviFrame(sequence: UInt16) -> DataFrameContent {
        var bytes = try! [UInt8](hex: "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")
        bytes[16] = UInt8(sequence >> 8)
        bytes[17] = UInt8(sequence & 0xFF)
        return .manufacturerData(companyID: RuuviMeasurement.companyID, bytes)
    }

    func batch(_ agent: String, _ sequence: UInt64, _ sightings: [Sighting], reads: [CharacteristicRead] = []) -> DecodedBatch {
        DecodedBatch(
            siteID: "hq", agentID: agent, bootID: 1, sequence: sequence, firstUnacknowledgedSequence: sequence,
            agentClockMicros: t, sightings: sightings, characteristicReads: reads)
    }

    func quantities(_ rows: [SensorReadingRow]) -> [String] { rows.map { "\($0.reading.quantity)=\($0.reading.value) \($0.reading.unit)" } }

    @Test func aTransmissionHeardByTwoAgentsGivesItsReadingsOnce() throws {
        var pipeline = IngestPipeline(sites: try Self.sites())
        let first = pipeline.apply(batch("a1", 1, [Sighting(timeMicros: t, beacon: ruuvi, rssi: -60, data: ruuviFrame(sequence: 205))]), nowMicros: t)
        #expect(
            quantities(first.sensorReadings) == [
                "temperature=24.3 celsius", "humidity=53.49 percent", "pressure=1000.44 hectopascal",
                "acceleration_x=0.0392266 metre_per_second_squared", "acceleration_y=-0.0392266 metre_per_second_squared",
                "acceleration_z=10.1596894 metre_per_second_squared", "battery_voltage=2977.0 millivolt", "tx_power=4.0 dbm",
                "movement_count=66.0 count", "measurement_sequence=205.0 count",
            ])
        #expect(first.sensorReadings.allSatisfy { $0.beaconID == ruuvi.beaconID && $0.agentID == "a1" && $0.frameType == "ruuvi" })
        // The second agent heard the same transmission, 40 ms later by its clock: nothing new.
        let second = pipeline.apply(
            batch("a2", 1, [Sighting(timeMicros: t + 40_000, beacon: ruuvi, rssi: -70, data: ruuviFrame(sequence: 205))]), nowMicros: t)
        #expect(second.sensorReadings.isEmpty)
        // The next measurement is new for either agent; a Ruuvi sequence also tells a repeat a minute later.
        let next = pipeline.apply(
            batch("a2", 2, [Sighting(timeMicros: t + 1_000_000, beacon: ruuvi, rssi: -70, data: ruuviFrame(sequence: 206)),
                            Sighting(timeMicros: t + 60_000_000, beacon: ruuvi, rssi: -70, data: ruuviFrame(sequence: 205))]),
            nowMicros: t)
        #expect(next.sensorReadings.count == 10)
        #expect(next.sensorReadings.allSatisfy { $0.timeMicros == t + 1_000_000 })
    }

    @Test func framesWithoutACounterAreOneTransmissionOnlyWithinTheTolerance() throws {
        var pipeline = IngestPipeline(sites: try Self.sites())
        let battery = DataFrameContent.serviceData(uuid16: 0x180F, [87])
        func readings(_ agent: String, _ sequence: UInt64, at time: Int64) -> [String] {
            quantities(pipeline.apply(batch(agent, sequence, [Sighting(timeMicros: time, beacon: ruuvi, rssi: -60, data: battery)]), nowMicros: t).sensorReadings)
        }
        #expect(readings("a1", 1, at: t) == ["battery=87.0 percent"])
        #expect(readings("a2", 1, at: t + 1_000_000) == [])
        // The same value a minute later is a later reading (the agent sends an unchanged frame once a minute).
        #expect(readings("a1", 2, at: t + 60_000_000) == ["battery=87.0 percent"])
    }

    @Test func encryptedBTHomeIsReadWithTheRegistryKeyAndAWrongKeyIsNamed() throws {
        let sealed = BTHomePacket.encrypt(
            objects: try [UInt8](hex: "02ca0903bf13"), bindkey: try [UInt8](hex: Self.bthomeKey), address: Self.bthomeAddress,
            counter: 0x3322_1100)
        let sighting = Sighting(timeMicros: t, beacon: bthome, rssi: -60, data: .serviceData(uuid16: 0xFCD2, sealed))

        var keyed = IngestPipeline(sites: try Self.sites())
        #expect(quantities(keyed.apply(batch("a1", 1, [sighting]), nowMicros: t).sensorReadings) == [
            "temperature=25.06 celsius", "humidity=50.55 percent",
        ])
        var wrong = IngestPipeline(sites: try Self.sites(bindkey: "00112233445566778899aabbccddeeff"))
        let refused = wrong.apply(batch("a1", 1, [sighting]), nowMicros: t)
        #expect(refused.sensorReadings.isEmpty)
        #expect(refused.undecodableFrames.map(\.reason) == ["authentication_failed"])
        #expect(refused.undecodableFrames.first?.message.contains("wrong bindkey") == true)
        var keyless = IngestPipeline(sites: try Self.sites(bindkey: nil))
        let locked = keyless.apply(batch("a1", 1, [sighting]), nowMicros: t)
        #expect(locked.sensorReadings.isEmpty)
        #expect(locked.undecodableFrames.map(\.reason) == ["no_bindkey"])
        // The sighting itself is kept either way.
        #expect(locked.sightings.count == 1 && refused.sightings.count == 1)
    }

    @Test func gattReadsAreReadingsOrDeviceInformation() throws {
        var pipeline = IngestPipeline(sites: try Self.sites())
        let reads = [
            CharacteristicRead(beacon: bthome, timeMicros: t, characteristic: 0x2A19, value: [87]),
            CharacteristicRead(beacon: bthome, timeMicros: t, characteristic: 0x2A29, value: Array("Acme".utf8)),
            CharacteristicRead(beacon: bthome, timeMicros: t, characteristic: 0x2A5B, value: [1, 2]),
        ]
        let output = pipeline.apply(batch("a1", 1, [], reads: reads), nowMicros: t)
        #expect(quantities(output.sensorReadings) == ["battery=87.0 percent"])
        #expect(output.sensorReadings.first?.frameType == "gatt-read")
        #expect(output.deviceInfo.map { "\($0.name)=\($0.value)" } == ["manufacturer_name=Acme", "characteristic_2a5b=0102"])
    }

    @Test func batteryInPercentHasATrendDaysLeftAndALowStatus() {
        var health = FleetHealth()
        let day: Int64 = 86_400_000_000
        for index in 0..<10 {
            health.reading(
                SensorReading(quantity: "battery", value: 60 - Double(index) * 2, unit: SensorUnit.percent),
                beaconID: "b", siteID: "hq", timeMicros: t + Int64(index) * day / 2)
        }
        let state = health.health(of: "b")
        #expect(state?.batteryPercent == 42)
        #expect(state?.batteryMillivolts == nil)
        #expect(abs((state?.batteryTrendPercentPerDay ?? 0) + 4) < 0.01)
        #expect(abs((state?.estimatedDaysLeft ?? 0) - 10.5) < 0.01)  // 42 % at 4 % a day, down to 0 %
        #expect(state?.status == .lowBattery)  // fewer than 30 days left
        health.reading(SensorReading(quantity: "temperature", value: -18.5, unit: SensorUnit.celsius), beaconID: "b", siteID: "hq", timeMicros: t + 5 * day)
        #expect(health.health(of: "b")?.temperatureCelsius == -18.5)
    }

    @Test func theKindIsTheIdentityFrameElseTheDataFrame() throws {
        var pipeline = IngestPipeline(sites: try Self.sites())
        let tagged = BeaconKey(beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", address: 0xCBB8_334C_884F, addressIsRandom: true)
        _ = pipeline.apply(
            batch("a1", 1, [Sighting(timeMicros: t, beacon: ruuvi, rssi: -60, data: ruuviFrame(sequence: 1)),
                            Sighting(timeMicros: t + 1, beacon: tagged, rssi: -60, data: ruuviFrame(sequence: 2))]),
            nowMicros: t)
        #expect(pipeline.health.health(of: ruuvi.beaconID)?.kind == "ruuvi")  // heard before the iBeacon at its address
        #expect(pipeline.health.health(of: tagged.beaconID)?.kind == "ibeacon")
    }
}

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(2)))
struct SensorReadingStorageTests {
    let support = SensorReadingTests()

    @Test func readingsAreStoredOncePerTransmissionAcrossRestartsWithHealthLabelsAndDeviceInformation() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try Migrator.migrate(connection, logger: Logger(label: "test"))
        let sites = try SensorReadingTests.sites()
        let t = support.t
        let sealed = BTHomePacket.encrypt(
            objects: try [UInt8](hex: "02ca0903bf13"), bindkey: try [UInt8](hex: SensorReadingTests.bthomeKey),
            address: SensorReadingTests.bthomeAddress, counter: 7)
        var writer = BatchWriter(connection: connection, pipeline: IngestPipeline(sites: sites))
        try writer.writeRegistry(sites)
        let first = try writer.commit([
            support.batch(
                "a1", 1,
                [Sighting(timeMicros: t, beacon: support.ruuvi, rssi: -60, data: support.ruuviFrame(sequence: 205)),
                 Sighting(timeMicros: t + 10, beacon: support.bthome, rssi: -60, data: .serviceData(uuid16: 0xFCD2, sealed))],
                reads: [
                    CharacteristicRead(beacon: support.bthome, timeMicros: t + 20, characteristic: 0x2A19, value: [87]),
                    CharacteristicRead(beacon: support.bthome, timeMicros: t + 20, characteristic: 0x2A29, value: Array("Acme".utf8)),
                ])
        ], nowMicros: t)
        #expect(first.sensorReadingRows == 13)
        // A restarted ingest remembers nothing; the second agent's reception of the same transmissions adds nothing.
        writer = BatchWriter(connection: connection, pipeline: IngestPipeline(sites: sites))
        let second = try writer.commit([
            support.batch(
                "a2", 1,
                [Sighting(timeMicros: t + 40_000, beacon: support.ruuvi, rssi: -70, data: support.ruuviFrame(sequence: 205)),
                 Sighting(timeMicros: t + 40_010, beacon: support.bthome, rssi: -70, data: .serviceData(uuid16: 0xFCD2, sealed))])
        ], nowMicros: t)
        #expect(second.sensorReadingRows == 0)
        #expect(
            try connection.query(
                "SELECT beacon_id, agent_id, quantity, value, unit FROM beaconflow.sensor_readings WHERE quantity IN ('temperature', 'battery', 'battery_voltage') ORDER BY 1, 3")
                == [
                    ["mac:54:48:E6:8F:80:A5", "a1", "battery", "87", "percent"],
                    ["mac:54:48:E6:8F:80:A5", "a1", "temperature", "25.06", "celsius"],
                    ["mac:CB:B8:33:4C:88:4F", "a1", "battery_voltage", "2977", "millivolt"],
                    ["mac:CB:B8:33:4C:88:4F", "a1", "temperature", "24.3", "celsius"],
                ])
        #expect(try connection.query("SELECT count(*), count(DISTINCT (beacon_id, quantity)) FROM beaconflow.sensor_readings") == [["13", "13"]])
        #expect(
            try connection.query("SELECT beacon_id, battery_mv, battery_pct, temperature_c FROM beaconflow.beacon_health ORDER BY 1")
                == [["mac:54:48:E6:8F:80:A5", nil, "87", "25.06"], ["mac:CB:B8:33:4C:88:4F", "2977", nil, "24.3"]])
        #expect(
            try connection.query(
                "SELECT beacon_id, site_id, label, kind, first_seen = to_timestamp(1767225600), identity_source FROM beaconflow.beacons ORDER BY 1")
                == [["mac:54:48:E6:8F:80:A5", "hq", "Freezer", "bthome", "f", "address"],
                    ["mac:CB:B8:33:4C:88:4F", "hq", nil, "ruuvi", "t", "address"]])
        #expect(try connection.query("SELECT beacon_id, name, value, agent_id FROM beaconflow.device_info") == [["mac:54:48:E6:8F:80:A5", "manufacturer_name", "Acme", "a1"]])
        // A registry entry no longer in the sites file goes; one never heard is listed without a site.
        var edited = sites
        edited.beacons = [SitesConfiguration.Beacon(id: "ibeacon:x", label: "Spare")]
        try writer.writeRegistry(edited)
        #expect(
            try connection.query("SELECT beacon_id, site_id, label FROM beaconflow.beacons WHERE label IS NOT NULL") == [["ibeacon:x", nil, "Spare"]])
    }
}
