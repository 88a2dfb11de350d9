import BeaconWire
import TestServers
@testable import BeaconIngest
import Testing

@Suite struct SensorReadingTests {
    let t = SensorFixtures.t
    let ruuvi = SensorFixtures.ruuvi
    let bthome = SensorFixtures.bthome
    static let bthomeAddress = SensorFixtures.bthomeAddress
    static let bthomeKey = SensorFixtures.bthomeKey
    static func sites(bindkey: String? = SensorFixtures.bthomeKey) throws -> SitesConfiguration { try SensorFixtures.sites(bindkey: bindkey) }
    func ruuviFrame(sequence: UInt16) -> DataFrameContent { SensorFixtures.ruuviFrame(sequence: sequence) }
    func batch(_ agent: String, _ sequence: UInt64, _ sightings: [Sighting], reads: [CharacteristicRead] = []) -> DecodedBatch {
        SensorFixtures.batch(agent, sequence, sightings, reads: reads)
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
        let sighting = Sighting(timeMicros: t, beacon: bthome, rssi: -60, data: .serviceData(uuid16: 0xFCD2, FrameBytes(sealed)))

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
