
/// Where a sighting was heard from: the site, the agent, the agent's zone and the placement its distances are
/// computed with (from the sites file). One row of `sighting_sources`; nil placement only for rows stored before
/// sightings were packed.
public struct SightingSource: Hashable, Sendable {
    public var siteID: String
    public var agentID: String
    public var zoneID: String?
    public var rssiOffsetDb: Double?
    public var pathLossExponent: Double?

    public init(siteID: String, agentID: String, zoneID: String?, rssiOffsetDb: Double?, pathLossExponent: Double?) {
        self.siteID = siteID
        self.agentID = agentID
        self.zoneID = zoneID
        self.rssiOffsetDb = rssiOffsetDb
        self.pathLossExponent = pathLossExponent
    }
}

/// The sightings of one beacon by one source with one frame power within one UTC minute: one `sighting_packs`
/// row. Storing them together pays PostgreSQL's per-row overhead (about 28 bytes) once per pack instead of once
/// per sighting; the `sightings` view unnests them.
public struct SightingPack: Sendable, Equatable {
    /// The time of the pack's first sighting (the row's `ts`).
    public var startMicros: Int64
    public var source: SightingSource
    public var beaconID: String
    public var powerAt1mDbm: Int8?
    /// In time order, encoded by `Reading`.
    public var readings: [Int64]

    /// One sighting as the `bigint` the view decodes: the microseconds after the pack's start from bit 24 up, the
    /// RSSI + 128 in bits 16-23, the smoothed RSSI in hundredths of a dB + 32768 in bits 0-15 (`centiDecibels`).
    public enum Reading {
        public static func encode(offsetMicros: Int64, rssi: Int8, smoothedRSSI: Double) -> Int64 {
            offsetMicros << 24 | Int64(Int(rssi) + 128) << 16 | Int64(Int(centiDecibels(smoothedRSSI)) + 32768)
        }

        public static func decode(_ reading: Int64) -> (offsetMicros: Int64, rssi: Int8, smoothedCentiDecibels: Int16) {
            (reading >> 24, Int8(truncatingIfNeeded: (reading >> 16 & 255) - 128),
             Int16(truncatingIfNeeded: (reading & 65535) - 32768))
        }

        /// The smoothed RSSI as stored, in hundredths of a dB: to the nearest half dB (finer than the whole-dB RSSI
        /// it smooths; a compacted pack keeps it in one byte), clamped to ±327.5 dB.
        public static func centiDecibels(_ decibels: Double) -> Int16 {
            let halves = (decibels * 2).rounded()
            guard halves.isFinite else { return 0 }
            return Int16(max(-655, min(655, halves))) * 50
        }
    }

    static let microsPerMinute: Int64 = 60_000_000

    private struct Key: Hashable {
        var source: Int
        var beaconID: String
        var powerAt1mDbm: Int8?
        var minute: Int64
    }

    /// Packs rows in the order their packs first appear; each pack's readings in time order.
    public static func pack(_ rows: [SightingRow]) -> [SightingPack] {
        var sources: [SightingSource] = []
        var sourceIndex: [SightingSource: Int] = [:]
        var lastSource: (source: SightingSource, index: Int)?
        var packIndex: [Key: Int] = [:]
        var members: [[Int]] = []
        for (position, row) in rows.enumerated() {
            let source: Int
            if let last = lastSource, last.source == row.source {
                source = last.index
            } else {
                source = sourceIndex[row.source] ?? {
                    sources.append(row.source)
                    sourceIndex[row.source] = sources.count - 1
                    return sources.count - 1
                }()
                lastSource = (row.source, source)
            }
            let key = Key(
                source: source, beaconID: row.beaconID, powerAt1mDbm: row.powerAt1mDbm,
                minute: row.timeMicros.floorDivided(by: microsPerMinute))
            if let index = packIndex[key] {
                members[index].append(position)
            } else {
                packIndex[key] = members.count
                members.append([position])
            }
        }
        return members.map { positions in
            var ordered = positions
            if !positions.isSorted(by: { rows[$0].timeMicros }) {
                ordered.sort { (rows[$0].timeMicros, $0) < (rows[$1].timeMicros, $1) }
            }
            let first = rows[ordered[0]]
            return SightingPack(
                startMicros: first.timeMicros, source: first.source, beaconID: first.beaconID,
                powerAt1mDbm: first.powerAt1mDbm,
                readings: ordered.map { position in
                    let row = rows[position]
                    return Reading.encode(
                        offsetMicros: row.timeMicros - first.timeMicros, rssi: row.rssi, smoothedRSSI: row.smoothedRSSI)
                })
        }
    }

    /// The rows back, as the view shows them (the smoothed RSSI to 0.5 dB).
    public var rows: [SightingRow] {
        readings.map { reading in
            let (offset, rssi, smoothed) = Reading.decode(reading)
            return SightingRow(
                timeMicros: startMicros + offset, source: source, beaconID: beaconID, rssi: rssi, powerAt1mDbm: powerAt1mDbm,
                smoothedRSSI: Double(smoothed) / 100)
        }
    }
}

extension Array {
    fileprivate func isSorted(by time: (Element) -> Int64) -> Bool {
        zip(self, dropFirst()).allSatisfy { time($0) <= time($1) }
    }
}

/// A pack with its dictionary keys, as copied into `sighting_packs`.
public struct StoredPack: Sendable {
    public var pack: SightingPack
    public var sourceKey: Int32
    public var beaconKey: Int32

    public init(pack: SightingPack, sourceKey: Int32, beaconKey: Int32) {
        self.pack = pack
        self.sourceKey = sourceKey
        self.beaconKey = beaconKey
    }

}

/// The per-minute rollup of one (minute, source, beacon), as upserted into `sighting_minutes`.
struct MinuteRollup: Equatable {
    var minuteMicros: Int64
    var sourceKey: Int32
    var beaconKey: Int32
    var sightings: Int32
    var rssiMin: Int16
    var rssiMax: Int16
    var rssiSum: Int64

    /// One rollup per (minute, source, beacon) of `packs`, sorted by the table's key so that concurrent writers
    /// take row locks in the same order.
    static func of(_ packs: [StoredPack]) -> [MinuteRollup] {
        struct Key: Hashable {
            var minute: Int64
            var source: Int32
            var beacon: Int32
        }
        var rollups: [Key: MinuteRollup] = [:]
        for stored in packs {
            let minute = stored.pack.startMicros.floorDivided(by: SightingPack.microsPerMinute) * SightingPack.microsPerMinute
            let key = Key(minute: minute, source: stored.sourceKey, beacon: stored.beaconKey)
            var rollup =
                rollups[key]
                ?? MinuteRollup(
                    minuteMicros: minute, sourceKey: stored.sourceKey, beaconKey: stored.beaconKey, sightings: 0,
                    rssiMin: .max, rssiMax: .min, rssiSum: 0)
            for reading in stored.pack.readings {
                let rssi = Int16(SightingPack.Reading.decode(reading).rssi)
                rollup.sightings += 1
                rollup.rssiMin = min(rollup.rssiMin, rssi)
                rollup.rssiMax = max(rollup.rssiMax, rssi)
                rollup.rssiSum += Int64(rssi)
            }
            rollups[key] = rollup
        }
        return rollups.values.sorted { ($0.beaconKey, $0.minuteMicros, $0.sourceKey) < ($1.beaconKey, $1.minuteMicros, $1.sourceKey) }
    }
}
