/// What `beacon_health` says about one beacon.
public struct BeaconHealth: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok
        case lowBattery = "low_battery"
        case stale
        case rebooting
    }

    public var beaconID: String
    public var siteID: String
    public var lastSeenMicros: Int64
    public var batteryMillivolts: Int32?
    public var batteryTrendMillivoltsPerDay: Double?
    public var estimatedDaysLeft: Double?
    public var temperatureCelsius: Double?
    public var rebootsIn7Days: Int
    /// `stale` is decided by the view, against the database's clock.
    public var status: Status
}

/// Fleet health per beacon: last seen, battery level and its trend, days left, reboots. A pure state machine fed
/// in event time.
///
/// The trend is the Theil–Sen slope (the median of pairwise slopes, robust to the odd sagging reading under radio
/// load or cold) of 4-hour battery means over the last 7 days; days left extrapolate it down to the cutoff.
public struct FleetHealth: Sendable {
    public struct Configuration: Sendable {
        /// The battery level at which a beacon stops working (a CR2032 is spent near 2.0 V).
        public var cutoffMillivolts: Double = 2000
        /// `low_battery` at or below this level...
        public var lowBatteryMillivolts: Double = 2400
        /// ...or when the forecast leaves fewer days than this.
        public var lowBatteryDays: Double = 30
        /// `rebooting` with at least this many reboots in 7 days.
        public var rebootingAt = 3

        public init() {}
    }

    static let window: Int64 = 7 * 86_400_000_000
    static let bucketMicros: Int64 = 4 * 3_600_000_000

    private struct BatteryBucket: Sendable {
        var bucket: Int32
        var sum: Double
        var count: Int32
    }

    private struct Beacon: Sendable {
        var siteID: String
        var lastSeenMicros: Int64
        var batteryMillivolts: Int32?
        var temperatureCelsius: Double?
        var buckets: [BatteryBucket] = []
        var reboots: [Int64] = []
    }

    public var configuration: Configuration
    private var beacons = JournaledDictionary<String, Beacon>()
    private var changed: Set<String> = []
    private var changedAtBegin: Set<String> = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public mutating func seen(beaconID: String, siteID: String, timeMicros: Int64) {
        if var beacon = beacons[beaconID] {
            guard timeMicros > beacon.lastSeenMicros else { return }
            beacon.lastSeenMicros = timeMicros
            beacon.siteID = siteID
            beacons[beaconID] = beacon
        } else {
            beacons[beaconID] = Beacon(siteID: siteID, lastSeenMicros: timeMicros)
        }
        changed.insert(beaconID)
    }

    public mutating func telemetry(_ row: TelemetryRow, rebooted: Bool) {
        seen(beaconID: row.beaconID, siteID: row.siteID, timeMicros: row.timeMicros)
        guard var beacon = beacons[row.beaconID] else { return }
        if let temperature = row.temperatureCelsius { beacon.temperatureCelsius = temperature }
        if rebooted { beacon.reboots.append(row.timeMicros) }
        if let battery = row.batteryMillivolts {
            beacon.batteryMillivolts = battery
            let bucket = Int32(truncatingIfNeeded: row.timeMicros / Self.bucketMicros)
            if let index = beacon.buckets.lastIndex(where: { $0.bucket == bucket }) {
                beacon.buckets[index].sum += Double(battery)
                beacon.buckets[index].count += 1
            } else {
                beacon.buckets.append(BatteryBucket(bucket: bucket, sum: Double(battery), count: 1))
                beacon.buckets.sort { $0.bucket < $1.bucket }
            }
        }
        let horizon = beacon.lastSeenMicros - Self.window
        beacon.buckets.removeAll { Int64($0.bucket) * Self.bucketMicros < horizon - Self.bucketMicros }
        beacon.reboots.removeAll { $0 < horizon }
        beacons[row.beaconID] = beacon
    }

    /// The beacons changed since the last call, as `beacon_health` rows.
    public mutating func takeChanged() -> [BeaconHealth] {
        defer { changed.removeAll() }  // not keeping capacity: a transaction's snapshot of it stays small
        return changed.sorted().compactMap { health(of: $0) }
    }

    public func health(of beaconID: String) -> BeaconHealth? {
        guard let beacon = beacons[beaconID] else { return nil }
        let points = beacon.buckets.map {
            (days: (Double($0.bucket) + 0.5) * Double(Self.bucketMicros) / 86_400_000_000, millivolts: $0.sum / Double($0.count))
        }
        let trend = Self.theilSenSlope(points)
        var daysLeft: Double?
        if let trend, let battery = beacon.batteryMillivolts {
            daysLeft = trend < 0 ? max(0, (Double(battery) - configuration.cutoffMillivolts) / -trend) : nil
        }
        let status: BeaconHealth.Status
        if beacon.reboots.count >= configuration.rebootingAt {
            status = .rebooting
        } else if let battery = beacon.batteryMillivolts,
            Double(battery) <= configuration.lowBatteryMillivolts || (daysLeft.map { $0 < configuration.lowBatteryDays } ?? false)
        {
            status = .lowBattery
        } else {
            status = .ok
        }
        return BeaconHealth(
            beaconID: beaconID, siteID: beacon.siteID, lastSeenMicros: beacon.lastSeenMicros,
            batteryMillivolts: beacon.batteryMillivolts, batteryTrendMillivoltsPerDay: trend,
            estimatedDaysLeft: daysLeft, temperatureCelsius: beacon.temperatureCelsius,
            rebootsIn7Days: beacon.reboots.count, status: status)
    }

    /// The median of the slopes between every pair of points; nil with fewer than two points a day apart.
    static func theilSenSlope(_ points: [(days: Double, millivolts: Double)]) -> Double? {
        guard let first = points.first, let last = points.last, last.days - first.days >= 1 else { return nil }
        var slopes: [Double] = []
        slopes.reserveCapacity(points.count * (points.count - 1) / 2)
        for i in points.indices {
            for j in points.index(after: i)..<points.endIndex where points[j].days > points[i].days {
                slopes.append((points[j].millivolts - points[i].millivolts) / (points[j].days - points[i].days))
            }
        }
        guard !slopes.isEmpty else { return nil }
        slopes.sort()
        let middle = slopes.count / 2
        return slopes.count % 2 == 1 ? slopes[middle] : (slopes[middle - 1] + slopes[middle]) / 2
    }

    public var trackedBeacons: Int { beacons.count }

    /// Forgets the beacons not seen the longest beyond `maximum` (their `beacon_health` rows stay; one heard again
    /// starts its battery trend afresh). Returns how many.
    mutating func evict(keeping maximum: Int) -> Int {
        beacons.evictOldest(keeping: maximum) { $0.lastSeenMicros }
    }

    mutating func beginTransaction() {
        beacons.begin()
        changedAtBegin = changed
    }

    mutating func commitTransaction() {
        beacons.commit()
        changedAtBegin = []
    }

    mutating func rollbackTransaction() {
        beacons.rollback()
        changed = changedAtBegin
        changedAtBegin = []
    }
}
