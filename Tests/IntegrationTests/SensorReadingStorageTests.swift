import BeaconWire
@testable import BeaconIngest
import LibPQ
import LocalServers
import Logging
import TestServers
import Testing

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct SensorReadingStorageTests {
    @Test func readingsAreStoredOncePerTransmissionAcrossRestartsWithHealthLabelsAndDeviceInformation() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SensorFixtures.sites()
        let t = SensorFixtures.t
        let sealed = BTHomePacket.encrypt(
            objects: try [UInt8](hex: "02ca0903bf13"), bindkey: try [UInt8](hex: SensorFixtures.bthomeKey),
            address: SensorFixtures.bthomeAddress, counter: 7)
        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        try writer.writeRegistry(sites)
        let first = try writer.commit([
            SensorFixtures.batch(
                "a1", 1,
                [Sighting(timeMicros: t, beacon: SensorFixtures.ruuvi, rssi: -60, data: SensorFixtures.ruuviFrame(sequence: 205)),
                 Sighting(timeMicros: t + 10, beacon: SensorFixtures.bthome, rssi: -60, data: .serviceData(uuid16: 0xFCD2, FrameBytes(sealed)))],
                reads: [
                    CharacteristicRead(beacon: SensorFixtures.bthome, timeMicros: t + 20, characteristic: 0x2A19, value: [87]),
                    CharacteristicRead(beacon: SensorFixtures.bthome, timeMicros: t + 20, characteristic: 0x2A29, value: Array("Acme".utf8)),
                ])
        ], state: &state, nowMicros: t)
        #expect(first.sensorReadingRows == 13)
        // A restarted ingest remembers nothing; the second agent's reception of the same transmissions adds nothing.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        let second = try writer.commit([
            SensorFixtures.batch(
                "a2", 1,
                [Sighting(timeMicros: t + 40_000, beacon: SensorFixtures.ruuvi, rssi: -70, data: SensorFixtures.ruuviFrame(sequence: 205)),
                 Sighting(timeMicros: t + 40_010, beacon: SensorFixtures.bthome, rssi: -70, data: .serviceData(uuid16: 0xFCD2, FrameBytes(sealed)))])
        ], state: &state, nowMicros: t)
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
