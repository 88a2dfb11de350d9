@testable import BeaconIngest
import Testing

@Suite struct SightingPackTests {
    let lobby = SightingSource(siteID: "hq", agentID: "hq-a1", zoneID: "lobby", rssiOffsetDb: 1.5, pathLossExponent: 2.5)
    let lab = SightingSource(siteID: "hq", agentID: "hq-a2", zoneID: nil, rssiOffsetDb: 0, pathLossExponent: 3)
    let minute: Int64 = 1_767_225_600_000_000  // 2026-01-01T00:00:00Z

    func row(_ source: SightingSource, _ beacon: String, _ offset: Int64, rssi: Int8 = -60, power: Int8? = -59, smoothed: Double = -61.234)
        -> SightingRow
    {
        SightingRow(timeMicros: minute + offset, source: source, beaconID: beacon, rssi: rssi, powerAt1mDbm: power, smoothedRSSI: smoothed)
    }

    @Test func readingsKeepEveryFieldAtItsLimits() {
        for (offset, rssi, smoothed) in [(Int64(0), Int8.min, -327.68), (59_999_999, Int8.max, 327.67), (1, -1, 0.004), (30_000_000, 0, -0.005)] {
            let decoded = SightingPack.Reading.decode(SightingPack.Reading.encode(offsetMicros: offset, rssi: rssi, smoothedRSSI: smoothed))
            #expect(decoded.offsetMicros == offset && decoded.rssi == rssi)
            #expect(decoded.smoothedCentiDecibels == SightingPack.Reading.centiDecibels(smoothed))
        }
        // To the nearest half dB.
        #expect(SightingPack.Reading.centiDecibels(-61.234) == -6100 && SightingPack.Reading.centiDecibels(-61.26) == -6150)
        #expect(SightingPack.Reading.centiDecibels(-0.2) == 0 && SightingPack.Reading.centiDecibels(-127.4) == -12750)
        #expect(SightingPack.Reading.centiDecibels(1000) == 32750 && SightingPack.Reading.centiDecibels(-1000) == -32750)
        #expect(SightingPack.Reading.centiDecibels(.nan) == 0)
    }

    @Test func packsHoldOneBeaconSourcePowerAndMinuteInTimeOrder() {
        // Two batches interleaved, a power change, a minute boundary, and a second agent.
        let rows = [
            row(lobby, "b1", 59_000_000), row(lobby, "b2", 59_100_000), row(lobby, "b1", 59_500_000, rssi: -70),
            row(lobby, "b1", 60_000_000), row(lobby, "b1", 59_200_000, power: -65), row(lab, "b1", 59_300_000),
            row(lobby, "b1", 58_000_000, rssi: -50),
        ]
        let packs = SightingPack.pack(rows)
        #expect(packs.count == 5)
        let first = packs[0]
        #expect(first.beaconID == "b1" && first.source == lobby && first.powerAt1mDbm == -59)
        #expect(first.startMicros == minute + 58_000_000)
        #expect(first.rows.map(\.rssi) == [-50, -60, -70])
        #expect(first.rows.map(\.timeMicros) == [58_000_000, 59_000_000, 59_500_000].map { minute + $0 })
        for pack in packs {
            let minutes = Set(pack.rows.map { $0.timeMicros.floorDivided(by: 60_000_000) })
            #expect(minutes.count == 1)
        }
        // Every row comes back once, the smoothed RSSI to 0.5 dB.
        let back = packs.flatMap(\.rows)
        #expect(back.count == rows.count)
        for original in rows {
            var stored = original
            stored.smoothedRSSI = -61
            #expect(back.contains(stored), "\(original)")
        }
    }

    @Test func distancesFollowTheModelWithTheSourcesPlacement() {
        let heard = row(lobby, "b1", 0, rssi: -66, power: -59, smoothed: -64.5)
        // 10^((-59 - (-66 + 1.5)) / 25) and 10^((-59 + 64.5) / 25).
        #expect(heard.distanceMeters == Float(IngestPipeline.distance(rssi: -64.5, powerAt1m: -59, exponent: 2.5)))
        #expect(abs(Double(heard.distanceMeters!) - 1.659) < 0.001)
        #expect(abs(Double(heard.smoothedDistanceMeters!) - 1.660) < 0.001)
        #expect(row(lobby, "b1", 0, power: nil).distanceMeters == nil)
        #expect(row(lobby, "b1", 0, power: nil).smoothedDistanceMeters == nil)
    }

    @Test func rollupsCountEachMinuteSourceAndBeaconOnce() {
        let rows = [row(lobby, "b1", 1, rssi: -50), row(lobby, "b1", 2, rssi: -70, power: -65), row(lobby, "b1", 60_000_001, rssi: -40)]
        let stored = SightingPack.pack(rows).map { StoredPack(pack: $0, sourceKey: 7, beaconKey: 3) }
        #expect(stored.count == 3)
        #expect(
            MinuteRollup.of(stored) == [
                MinuteRollup(minuteMicros: minute, sourceKey: 7, beaconKey: 3, sightings: 2, rssiMin: -70, rssiMax: -50, rssiSum: -120),
                MinuteRollup(minuteMicros: minute + 60_000_000, sourceKey: 7, beaconKey: 3, sightings: 1, rssiMin: -40, rssiMax: -40, rssiSum: -40),
            ])
    }

    @Test func keysLearnedInATransactionThatRollsBackAreForgotten() {
        var keys = DictionaryKeys()
        keys.learned(beacon: "b1", key: 1)
        keys.learned(source: lobby, key: 2)
        #expect(keys.beacon("b1") == 1 && keys.source(lobby) == 2)
        keys.rollbackTransaction()
        #expect(keys.beacon("b1") == nil && keys.source(lobby) == nil)
        keys.learned(beacon: "b1", key: 5)
        keys.commitTransaction()
        keys.rollbackTransaction()
        #expect(keys.beacon("b1") == 5)
    }
}
