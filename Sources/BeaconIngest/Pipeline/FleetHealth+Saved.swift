import BeaconBatteries

/// A beacon's battery state as the ingest keeps it between runs (`fleet_health_state`): its trend's 4-hour means,
/// its reboots of the week and its charge counting (`BatteryLife.Saved`), in the byte layout of `CheckpointWriter`.
/// Saved once an hour of event time per beacon and at a swap, with the batch that brought it; read back when a site
/// is claimed, so that a restarted ingest, or another instance taking the site over, forecasts as if one process had
/// heard the beacon throughout, less at most the last hour's readings.
public struct SavedBatteryState: Sendable {
    public var beaconID: String
    public var siteID: String
    /// The beacon's newest transmission when saved, µs.
    public var lastSeenMicros: Int64
    public var bytes: [UInt8]

    public init(beaconID: String, siteID: String, lastSeenMicros: Int64, bytes: [UInt8]) {
        self.beaconID = beaconID
        self.siteID = siteID
        self.lastSeenMicros = lastSeenMicros
        self.bytes = bytes
    }
}

extension FleetHealth {
    /// A beacon's battery state is saved at most once in this much of its event time (and at once on a swap).
    static let saveEveryMicros: Int64 = 3_600_000_000
    /// 2 adds the season's course of the cold, 3 the cell's own sag and the newest voltage as read; an older
    /// state is read without them.
    static let savedStateVersion: UInt8 = 3

    /// The battery states due to be saved since the last call.
    public mutating func takeToSave() -> [SavedBatteryState] {
        defer { toSave.removeAll() }
        return toSave.sorted().compactMap { beaconID in
            beacons[beaconID].map { beacon in
                SavedBatteryState(beaconID: beaconID, siteID: beacon.siteID, lastSeenMicros: beacon.lastSeenMicros, bytes: Self.encode(beacon))
            }
        }
    }

    /// Takes saved battery states as the beacons' own: at once for a beacon held here with older news, else when the
    /// beacon is next heard. A state that cannot be read is left out (its beacon starts afresh). Returns how many
    /// could not be read.
    public mutating func restore(_ saved: [SavedBatteryState]) -> Int {
        var unreadable = 0
        for state in saved {
            guard let decoded = try? Self.decode(state.bytes, description: description(of: state.beaconID)) else {
                unreadable += 1
                continue
            }
            let restored = RestoredState(siteID: state.siteID, lastSeenMicros: state.lastSeenMicros, state: decoded)
            if var beacon = beacons[state.beaconID] {
                guard beacon.lastSeenMicros < state.lastSeenMicros else { continue }
                restored.apply(to: &beacon)
                beacons[state.beaconID] = beacon
                changed.insert(state.beaconID)
            } else {
                restoring[state.beaconID] = restored
            }
        }
        return unreadable
    }

    /// The saved state of a beacon heard for the first time here, applied to its new entry, and saved again under
    /// it (it may have come from an address beacon merged into it, whose saved state goes with its row).
    mutating func restoreOnFirstSighting(_ beaconID: String) {
        guard let restored = restoring[beaconID], var beacon = beacons[beaconID] else { return }
        restored.apply(to: &beacon)
        beacons[beaconID] = beacon
        restoredThisTransaction.append(beaconID)
        toSave.insert(beaconID)
    }

    /// Lets go of the saved states read back for sites no longer served, whose beacons were not heard here.
    mutating func forgetRestoring(sites: Set<String>) {
        restoring = restoring.filter { !sites.contains($0.value.siteID) }
    }

    /// A saved state read back, waiting for its beacon to be heard.
    struct RestoredState: Sendable {
        var siteID: String
        var lastSeenMicros: Int64
        var state: DecodedState

        func apply(to beacon: inout Beacon) {
            beacon.buckets = state.buckets
            beacon.percentBuckets = state.percentBuckets
            beacon.reboots = state.reboots
            var battery = state.battery
            battery?.fitCurve()
            beacon.battery = battery
            beacon.savedHour = Int32(truncatingIfNeeded: lastSeenMicros.floorDivided(by: FleetHealth.saveEveryMicros))
        }
    }

    /// The cell the registry names for the beacon, with the configured cutoff.
    func description(of beaconID: String) -> BatteryDescription {
        var description = batteries[beaconID] ?? BatteryDescription()
        description.cutoffVolts = configuration.cutoffMillivolts / 1000
        return description
    }

    static func encode(_ beacon: Beacon) -> [UInt8] {
        var writer = CheckpointWriter()
        writer.byte(savedStateVersion)
        for buckets in [beacon.buckets, beacon.percentBuckets] {
            writer.int(buckets.count)
            for bucket in buckets {
                writer.int32(bucket.bucket)
                writer.double(bucket.sum)
                writer.int32(bucket.count)
            }
        }
        writer.int(beacon.reboots.count)
        for reboot in beacon.reboots { writer.int(reboot) }
        guard let life = beacon.battery?.saved else {
            writer.flag(false)
            return writer.bytes
        }
        writer.flag(true)
        writer.optional(life.fittedMicros)
        writer.int(life.swaps)
        writer.double(life.usedBeforeThisBootMilliampHours)
        writer.double(life.bootBaselineMilliampHours)
        writer.flag(life.last != nil)
        if let last = life.last {
            writer.int(last.micros)
            writer.double(last.volts)
            writer.double(last.celsius)
            writer.int(Int64(last.advertisingCount))
            writer.double(last.uptimeSeconds)
            writer.double(last.bootMilliampHours)
        }
        writer.int(life.recentHours.count)
        for hour in life.recentHours {
            writer.int32(hour.hour)
            writer.float(hour.sum)
            writer.int32(hour.count)
        }
        writer.int(life.bandVolts.count)
        for volts in life.bandVolts { writer.float(volts) }
        writer.int(life.points.count)
        for point in life.points {
            writer.float(point.counted)
            writer.float(point.volts)
        }
        writer.int(life.coldest.count)
        for cold in life.coldest {
            writer.int32(cold.bucket)
            writer.float(cold.celsius)
        }
        writer.optional(life.rateMilliampHoursPerDay.map { Int64(bitPattern: $0.bitPattern) })
        for sum in life.season.sums { writer.double(sum) }
        writer.optional(life.season.newestBucket.map(Int64.init))
        writer.optional(life.last?.loadedVolts.map { Int64(bitPattern: $0.bitPattern) })
        for sum in life.cellSag.sums { writer.double(sum) }
        return writer.bytes
    }

    struct DecodedState: Sendable {
        var buckets: [BatteryBucket] = []
        var percentBuckets: [BatteryBucket] = []
        var reboots: [Int64] = []
        var battery: BatteryLife?
    }

    static func decode(_ bytes: [UInt8], description: BatteryDescription) throws(CheckpointError) -> DecodedState {
        guard let version = bytes.first, (1...savedStateVersion).contains(version) else {
            throw CheckpointError(code: .unknownVersion, offset: 0)
        }
        var reader = CheckpointReader(Array(bytes.dropFirst()))
        var state = DecodedState()
        for percent in [false, true] {
            var buckets: [BatteryBucket] = []
            for _ in 0..<(try reader.count(minimumBytes: 16)) {
                let bucket = try reader.int32()
                let sum = try reader.double(in: -1e12...1e12)
                let count = try reader.int32()
                guard count > 0 else { throw CheckpointError(code: .damaged, offset: reader.offset) }
                buckets.append(BatteryBucket(bucket: bucket, sum: sum, count: count))
            }
            if percent { state.percentBuckets = buckets } else { state.buckets = buckets }
        }
        for _ in 0..<(try reader.count(minimumBytes: 8)) { state.reboots.append(try reader.time()) }
        if try reader.flag() {
            let fitted = try reader.optionalTime()
            let swaps = Int(try reader.int(in: 0...1_000_000))
            let used = try reader.double(in: 0...1e9)
            let baseline = try reader.double(in: 0...1e9)
            var last: BatteryLife.Reading?
            if try reader.flag() {
                last = BatteryLife.Reading(
                    micros: try reader.time(), volts: try reader.double(in: -100...100), celsius: try reader.double(in: -300...300),
                    advertisingCount: UInt32(try reader.int(in: 0...Int64(UInt32.max))), uptimeSeconds: try reader.double(in: 0...1e12),
                    bootMilliampHours: try reader.double(in: 0...1e9), loadedVolts: nil)
            }
            var hours: [(hour: Int32, sum: Float, count: Int32)] = []
            for _ in 0..<(try reader.count(minimumBytes: 12)) { hours.append((try reader.int32(), try reader.float(), try reader.int32())) }
            var bands: [Float] = []
            for _ in 0..<(try reader.count(minimumBytes: 4)) { bands.append(try reader.float()) }
            var points: [(counted: Float, volts: Float)] = []
            for _ in 0..<(try reader.count(minimumBytes: 8)) { points.append((try reader.float(), try reader.float())) }
            var coldest: [(bucket: Int32, celsius: Float)] = []
            for _ in 0..<(try reader.count(minimumBytes: 8)) { coldest.append((try reader.int32(), try reader.float())) }
            let rate = try reader.optional().map { Double(bitPattern: UInt64(bitPattern: $0)) }
            guard rate?.isFinite ?? true else { throw CheckpointError(code: .damaged, offset: reader.offset) }
            // The season's course, from the second version on.
            var season = SeasonalCold()
            if version >= 2 {
                let sums = try (0..<9).map { _ throws(CheckpointError) in try reader.double(in: -1e12...1e12) }
                let newest = try reader.optional().map { Int32(truncatingIfNeeded: $0) }
                guard let restored = SeasonalCold(sums: sums, newestBucket: newest) else {
                    throw CheckpointError(code: .damaged, offset: reader.offset)
                }
                season = restored
            }
            // The cell's own sag and the newest voltage as read, from the third version on.
            var cellSag = CellSag()
            if version >= 3 {
                let loaded = try reader.optional().map { Double(bitPattern: UInt64(bitPattern: $0)) }
                guard loaded.map({ (-100...100).contains($0) }) ?? true else { throw CheckpointError(code: .damaged, offset: reader.offset) }
                last?.loadedVolts = loaded
                let sums = try (0..<CellSag.sumCount).map { _ throws(CheckpointError) in try reader.double(in: -1e12...1e12) }
                guard let restored = CellSag(sums: sums) else { throw CheckpointError(code: .damaged, offset: reader.offset) }
                cellSag = restored
            }
            let saved = BatteryLife.Saved(
                fittedMicros: fitted, swaps: swaps, usedBeforeThisBootMilliampHours: used, bootBaselineMilliampHours: baseline,
                last: last, recentHours: hours, bandVolts: bands, points: points, coldest: coldest, rateMilliampHoursPerDay: rate,
                season: season, cellSag: cellSag)
            guard let life = BatteryLife(description: description, restoring: saved) else {
                throw CheckpointError(code: .damaged, offset: reader.offset)
            }
            state.battery = life
        }
        guard reader.isAtEnd else { throw CheckpointError(code: .damaged, offset: reader.offset) }
        return state
    }
}
