import BeaconIngest
import BeaconWire
import Foundation
import LocalServers

// Sites, batches, frames and checkpoints that the ingest's pure tests and its integration tests share.

/// One site, hq, with two zones and an agent in each.
public let testSites = """
    sites:
      - id: hq
        zone_history: crossings
        history_lag_s: 60
        zones: [{id: lobby}, {id: lab}]
        agents:
          - {id: hq-a1, zone: lobby}
          - {id: hq-a2, zone: lab}
    """

/// A batch as an agent of `site` would publish it: `count` sightings of one beacon a second apart from `start`.
public func batchPayload(
    site: String = "hq", agent: String = "hq-a1", sequence: UInt64, beaconID: String = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2",
    count: Int = 100, start: Int64 = 1_767_225_600_000_000, formatVersion: UInt32? = nil,
    rssi: (Int) -> Int8 = { Int8(-50 - $0 % 30) }, edit: (inout WireBatch) -> Void = { _ in }
) throws -> [UInt8] {
    var builder = BatchBuilder(siteID: site, agentID: agent, bootID: 42)
    builder.configuration.maximumSightings = 10_000
    if let formatVersion { builder.configuration.formatVersion = formatVersion }
    let key = BeaconKey(beaconID: beaconID, address: 0xC000_0000_0001, addressIsRandom: true, powerAt1mDbm: -59)
    for index in 0..<count {
        _ = builder.add(
            Sighting(timeMicros: start + Int64(index) * 1_000_000, beacon: key, rssi: rssi(index)),
            nowNanoseconds: 0)
    }
    let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: start)
    guard var wire = sealed else { throw LocalServerError("the batch builder sealed no batch") }
    edit(&wire)
    return try wire.wireBytes()
}

/// Sensor frames and batches of site hq (agents a1, a2 in the lobby).
public enum SensorFixtures {
    /// The BTHome encryption example of bthome.io/encryption: key, address, and a packet of temperature 25.06 °C
    /// and humidity 50.55 %.
    public static let bthomeAddress = DeviceAddress("54:48:E6:8F:80:A5")!
    public static let bthomeKey = "231d39c1d7cc1ab1aee224cd096db932"

    public static func sites(bindkey: String? = bthomeKey) throws -> SitesConfiguration {
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

    public static let t: Int64 = 1_767_225_600_000_000
    public static let ruuvi = BeaconKey(beaconID: "mac:CB:B8:33:4C:88:4F", address: 0xCBB8_334C_884F, addressIsRandom: true)
    public static let bthome = BeaconKey(beaconID: "mac:54:48:E6:8F:80:A5", address: 0x5448_E68F_80A5, addressIsRandom: false)

    /// docs.ruuvi.com, data format 5 "valid data" vector, with its measurement sequence replaced.
    public static func ruuviFrame(sequence: UInt16) -> DataFrameContent {
        var bytes = try! [UInt8](hex: "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")
        bytes[16] = UInt8(sequence >> 8)
        bytes[17] = UInt8(sequence & 0xFF)
        return .manufacturerData(companyID: RuuviMeasurement.companyID, FrameBytes(bytes))
    }

    public static func batch(_ agent: String, _ sequence: UInt64, _ sightings: [Sighting], reads: [CharacteristicRead] = []) -> DecodedBatch {
        DecodedBatch(
            siteID: "hq", agentID: agent, bootID: 1, sequence: sequence, firstUnacknowledgedSequence: sequence,
            agentClockMicros: t, sightings: sightings, characteristicReads: reads)
    }
}

/// The checkpoint with its next minute to count set to Int64.min, and where that field starts; nil when the
/// checkpoint has no next minute. The layout: version, zones, agents, zone history, watermark, then the next
/// minute as a flag and 8 bytes.
public func checkpointWithNextMinuteAtInt64Min(_ state: [UInt8]) -> (state: [UInt8], offset: Int)? {
    var reader = 8
    for _ in 0..<2 {
        let count = Int(state[reader]) | Int(state[reader + 1]) << 8
        reader += 8
        for _ in 0..<count { reader += 8 + (Int(state[reader]) | Int(state[reader + 1]) << 8) }
    }
    reader += 8 + (Int(state[reader]) | Int(state[reader + 1]) << 8)
    reader += 8
    guard state[reader] == 1 else { return nil }
    var damaged = state
    for byte in 0..<8 { damaged[reader + 1 + byte] = byte == 7 ? 0x80 : 0 }
    return (damaged, reader)
}
