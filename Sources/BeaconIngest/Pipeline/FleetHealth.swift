import BeaconBatteries
import BeaconWire

/// What `beacon_health` says about one beacon.
public struct BeaconHealth: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok
        case lowBattery = "low_battery"
        case stale
        case rebooting
        /// Its identity advertised from two addresses at once (`CloneDetection`).
        case cloned
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
    /// The level in percent, for beacons that report it (BTHome, ATC/pvvx, GATT Battery Level).
    public var batteryPercent: Double?
    public var batteryTrendPercentPerDay: Double?
    /// The type of the beacon's identity frame, else of its data frames (`ruuvi`, `bthome`, ...).
    public var kind: String?
    public var firstSeenMicros: Int64
    /// How its latest sighting was sent; nil for a beacon known only from telemetry or GATT reads.
    public var heardAs: HeardAs?
    /// The URL of its latest Eddystone-URL frame.
    public var url: String?
    /// Since when it has been `cloned` (event time), or nil.
    public var clonedSinceMicros: Int64?
    /// How `estimatedDaysLeft` was found, or nil without a forecast.
    public var forecast: BatteryForecast?
}

/// A beacon's battery forecast beyond its point estimate.
public struct BatteryForecast: Sendable, Equatable {
    public enum Method: String, Sendable {
        /// From the TLM's counters and its voltage (`BatteryLife`), with a 90 % interval.
        case chargeCounting = "charge_counting"
        /// The voltage's trend over a week, for beacons that report a voltage without counters.
        case voltageTrend = "voltage_trend"
        /// The percent's trend over a week.
        case percentTrend = "percent_trend"
    }

    public var method: Method
    /// The 90 % interval of the days left; nil for the trends.
    public var daysLeftLow: Double?
    public var daysLeftHigh: Double?
    /// When to have replaced the cell: the forecast's reading plus the interval's low end (else the point
    /// estimate), µs.
    public var replaceByMicros: Int64
    /// The share of its charge the cell has left, for charge counting.
    public var chargeLeft: Double?
    /// The coldest temperature the cell carries now, °C, for charge counting (`BatteryLife.Forecast`).
    public var coldestCarriedCelsius: Double?
    /// When the cell now in the beacon was first heard or found swapped for a fresh one, for charge counting, µs.
    public var cellSinceMicros: Int64?
}

/// An identity found advertised from two addresses at once, and since when.
public struct ClonedBeacon: Sendable, Equatable {
    public var beaconID: String
    public var siteID: String
    public var sinceMicros: Int64
}

/// The device address and advertising event of a sighting, as the agent reported them.
public struct HeardAs: Sendable, Equatable {
    /// Big-endian in the low 48 bits; nil when the site pseudonymises addresses.
    public var address: UInt64?
    public var addressIsRandom: Bool
    /// `AdvertisingReport.advertisingEvent`; nil from agents that do not report it.
    public var advertisingEvent: UInt16?

    public init(_ key: BeaconKey) {
        address = key.address == 0 ? nil : key.address
        addressIsRandom = key.addressIsRandom
        advertisingEvent = key.advertisingEvent
    }
}

/// Fleet health per beacon: last seen, battery level and its trend, days left, reboots. A pure state machine fed
/// in event time.
///
/// Days left come from `BatteryLife` for beacons whose Eddystone TLM reports a voltage: the charge its counters
/// say was used, against the cell the registry names (`batteries`), corrected by the voltage's curve, with a 90 %
/// interval; `low_battery` when fewer than `lowBatteryDays` are left, whatever a cold night reads. Other beacons
/// have a trend: the Theil–Sen slope (the median of pairwise slopes, robust to the odd sagging reading under radio
/// load or cold) of 4-hour battery means over the last 7 days, extrapolated down to the cutoff, and `low_battery`
/// also at a low level. Voltage (TLM, Ruuvi, ATC/pvvx) and percent (BTHome, ATC/pvvx, GATT Battery Level) are
/// followed each in its own unit; the trend's days left come from the voltage when the beacon reports one (along
/// its chemistry's curve: `trendOnCurve`), else from the percent.
public struct FleetHealth: Sendable {
    public struct Configuration: Sendable {
        /// The battery level at which a beacon stops working (a CR2032 is spent near 2.0 V): for both forecasts.
        public var cutoffMillivolts: Double = 2000
        /// `low_battery` at or below this level (beacons without TLM counters)...
        public var lowBatteryMillivolts: Double = 2200
        /// ...or when the forecast leaves fewer days than this.
        public var lowBatteryDays: Double = 30
        /// `rebooting` with at least this many reboots in 7 days.
        public var rebootingAt = 3
        /// The same cutoff and low level for beacons that report percent only.
        public var cutoffPercent: Double = 0
        public var lowBatteryPercent: Double = 5
        /// Forecast TLM beacons from their counters (`BatteryLife`); false keeps the trend for every beacon (the
        /// accuracy harness's baseline).
        public var chargeCounting = true
        /// Extrapolate a voltage's trend as the share of charge it reads on the cell's chemistry's curve under a
        /// burst at the newest temperature (its last reading's share, falling at the trend's slope times the curve's
        /// there) rather than as volts in a straight line; false is the trend as it was (the accuracy harness's
        /// baseline).
        public var trendOnCurve = true

        public init() {}
    }

    static let window: Int64 = 7 * 86_400_000_000
    static let bucketMicros: Int64 = 4 * 3_600_000_000

    struct BatteryBucket: Sendable {
        var bucket: Int32
        var sum: Double
        var count: Int32
    }

    struct Beacon: Sendable {
        var siteID: String
        var lastSeenMicros: Int64
        var firstSeenMicros: Int64
        var kind: String?
        var heardAs: HeardAs?
        /// The addresses of a constant identity, or nil for other beacons.
        var clones: CloneDetection?
        /// What the beacon reported of itself, or nil while it reported nothing.
        private var reports: Boxed<Reports>?

        init(siteID: String, lastSeenMicros: Int64, firstSeenMicros: Int64, kind: String?, heardAs: HeardAs?, clones: CloneDetection?) {
            self.siteID = siteID
            self.lastSeenMicros = lastSeenMicros
            self.firstSeenMicros = firstSeenMicros
            self.kind = kind
            self.heardAs = heardAs
            self.clones = clones
        }

        var url: String? {
            get { reports?.value.url }
            set { update(\.url, to: newValue, unless: newValue == nil) }
        }
        var batteryMillivolts: Int32? {
            get { reports?.value.batteryMillivolts }
            set { update(\.batteryMillivolts, to: newValue, unless: newValue == nil) }
        }
        var batteryPercent: Double? {
            get { reports?.value.batteryPercent }
            set { update(\.batteryPercent, to: newValue, unless: newValue == nil) }
        }
        var temperatureCelsius: Double? {
            get { reports?.value.temperatureCelsius }
            set { update(\.temperatureCelsius, to: newValue, unless: newValue == nil) }
        }
        var buckets: [BatteryBucket] {
            get { reports?.value.buckets ?? [] }
            set { update(\.buckets, to: newValue, unless: newValue.isEmpty) }
        }
        var percentBuckets: [BatteryBucket] {
            get { reports?.value.percentBuckets ?? [] }
            set { update(\.percentBuckets, to: newValue, unless: newValue.isEmpty) }
        }
        var reboots: [Int64] {
            get { reports?.value.reboots ?? [] }
            set { update(\.reboots, to: newValue, unless: newValue.isEmpty) }
        }
        var battery: BatteryLife? {
            get { reports?.value.battery }
            set { update(\.battery, to: newValue, unless: newValue == nil) }
        }
        /// The hour of event time its battery state was last marked for saving in.
        var savedHour: Int32 {
            get { reports?.value.savedHour ?? .min }
            set { update(\.savedHour, to: newValue, unless: newValue == .min) }
        }
        /// Whether it holds anything of its battery worth keeping across a restart.
        var hasBatteryState: Bool {
            guard let reports = reports?.value else { return false }
            return reports.battery != nil || !reports.buckets.isEmpty || !reports.percentBuckets.isEmpty || !reports.reboots.isEmpty
        }

        /// Sets one report, without making room for reports where the beacon has none and the value is the default.
        private mutating func update<Value>(_ report: WritableKeyPath<Reports, Value>, to value: Value, unless isDefault: Bool) {
            guard var box = reports else {
                guard !isDefault else { return }
                var fresh = Reports()
                fresh[keyPath: report] = value
                reports = Boxed(fresh)
                return
            }
            reports = nil  // the only reference while it changes
            box.value[keyPath: report] = value
            reports = box
        }
    }

    /// What only beacons with telemetry or sensors report. Most beacons of a large fleet report none of it, so it is
    /// held apart, one reference wide in each beacon's entry.
    private struct Reports: Sendable {
        var url: String?
        var batteryMillivolts: Int32?
        var batteryPercent: Double?
        var temperatureCelsius: Double?
        var buckets: [BatteryBucket] = []
        var percentBuckets: [BatteryBucket] = []
        var reboots: [Int64] = []
        var battery: BatteryLife?
        var savedHour: Int32 = .min
    }

    public var configuration: Configuration
    /// The cells the registry names, by beacon id; a beacon not named has `BatteryDescription()`'s.
    public var batteries: [String: BatteryDescription] = [:]
    var beacons = JournaledDictionary<String, Beacon>()
    var changed: Set<String> = []
    private var changedAtBegin: Set<String> = []
    /// Beacons whose battery state is due to be saved (`takeToSave`).
    var toSave: Set<String> = []
    private var toSaveAtBegin: Set<String> = []
    /// Saved battery states read back (`restore`) for beacons not heard here yet, and those taken by a beacon heard
    /// in the transaction under way (dropped from `restoring` at its commit).
    var restoring: [String: RestoredState] = [:]
    var restoredThisTransaction: [String] = []
    /// Identities flagged as cloned since the last `takeNewlyCloned()`.
    private var newlyCloned: [ClonedBeacon] = []
    private var newlyClonedAtBegin: [ClonedBeacon] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// A transmission of the beacon; `heardAs` when it was a sighting (its address and event are kept from the
    /// latest). True when the sighting came from a copy of the beacon's identity (`CloneDetection`).
    @discardableResult
    public mutating func seen(_ beacon: ResolvedBeacon, siteID: String, timeMicros: Int64, heardAs: HeardAs? = nil) -> Bool {
        let beaconID = beacon.id
        let kind = beacon.kind
        var changes = false
        var copy = false
        var cloned: ClonedBeacon?
        var created = false
        // In place: the entry's arrays (the clone detector's addresses) are not copied at every sighting.
        beacons.update(beaconID) { entry in
            if entry == nil {
                created = true
                entry = Beacon(
                    siteID: siteID, lastSeenMicros: timeMicros, firstSeenMicros: timeMicros, kind: Self.identityKind(kind),
                    heardAs: heardAs, clones: Self.hasConstantIdentity(kind) ? CloneDetection() : nil)
                changes = true
            }
            guard var beacon = entry.take() else { return }
            defer { entry = beacon }
            if let address = heardAs?.address, beacon.clones != nil {
                let wasCloned = beacon.clones?.clonedSinceMicros
                copy = beacon.clones?.heard(address, at: timeMicros) ?? false
                let since = beacon.clones?.clonedSinceMicros
                if since != wasCloned {
                    changes = true
                    if wasCloned == nil, let since { cloned = ClonedBeacon(beaconID: beaconID, siteID: siteID, sinceMicros: since) }
                }
            }
            if timeMicros < beacon.firstSeenMicros {
                beacon.firstSeenMicros = timeMicros
                if beacon.heardAs == nil { beacon.heardAs = heardAs }
                changes = true
            } else if timeMicros > beacon.lastSeenMicros {
                beacon.lastSeenMicros = timeMicros
                beacon.siteID = siteID
                if let heardAs { beacon.heardAs = heardAs }
                changes = true
            } else if let heardAs, beacon.heardAs == nil || timeMicros == beacon.lastSeenMicros, beacon.heardAs != heardAs {
                // Of sightings at the same time (adverts the radio delivered together), the later one.
                beacon.heardAs = heardAs
                changes = true
            }
        }
        if let cloned { newlyCloned.append(cloned) }
        if changes { changed.insert(beaconID) }
        if created, !restoring.isEmpty { restoreOnFirstSighting(beaconID) }
        return copy
    }

    /// Identities any device can copy and that stay the same: iBeacon, AltBeacon, Eddystone-UID.
    static func hasConstantIdentity(_ kind: BeaconIdentity.Kind?) -> Bool {
        switch kind {
        case .eddystone, .iBeacon, .altBeacon: true
        case .eid, .mac, .anon, nil: false
        }
    }

    /// The URL an Eddystone-URL frame of the beacon carries.
    public mutating func url(beaconID: String, _ url: String) {
        guard var beacon = beacons[beaconID], beacon.url != url else { return }
        beacon.url = url
        beacons[beaconID] = beacon
        changed.insert(beaconID)
    }

    /// The type of a frame heard from the beacon: an identity frame's type wins over data frames'.
    public mutating func kind(_ resolved: ResolvedBeacon, _ frameType: String) {
        let beaconID = resolved.id
        guard var beacon = beacons[beaconID] else { return }
        let kind = Self.identityKind(resolved.kind) ?? frameType
        guard beacon.kind != kind else { return }
        beacon.kind = kind
        beacons[beaconID] = beacon
        changed.insert(beaconID)
    }

    /// The kind an identity tells by itself, as the views name it.
    static func identityKind(_ kind: BeaconIdentity.Kind?) -> String? {
        switch kind {
        case .eddystone: "eddystone-uid"
        case .eid: "eddystone-eid"
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .mac, .anon, nil: nil
        }
    }

    /// A battery or temperature reading of a format other than TLM.
    public mutating func reading(_ reading: SensorReading, beaconID: String, siteID: String, timeMicros: Int64) {
        switch (reading.quantity, reading.unit) {
        case ("battery_voltage", SensorUnit.millivolt):
            seen(ResolvedBeacon(id: beaconID), siteID: siteID, timeMicros: timeMicros)
            battery(beaconID: beaconID, millivolts: Int32(clamping: Int(reading.value.rounded())), timeMicros: timeMicros)
        case ("battery", SensorUnit.percent):
            seen(ResolvedBeacon(id: beaconID), siteID: siteID, timeMicros: timeMicros)
            guard var beacon = beacons[beaconID] else { return }
            beacon.batteryPercent = reading.value
            Self.add(reading.value, at: timeMicros, to: &beacon.percentBuckets)
            beacons[beaconID] = beacon
        case ("temperature", SensorUnit.celsius):
            seen(ResolvedBeacon(id: beaconID), siteID: siteID, timeMicros: timeMicros)
            guard var beacon = beacons[beaconID] else { return }
            beacon.temperatureCelsius = reading.value
            beacons[beaconID] = beacon
        default:
            return
        }
        prune(beaconID, readAt: timeMicros)
    }

    private mutating func battery(beaconID: String, millivolts: Int32, timeMicros: Int64) {
        beacons.update(beaconID) { entry in
            guard entry != nil else { return }
            entry!.batteryMillivolts = millivolts
            Self.add(Double(millivolts), at: timeMicros, to: &entry!.buckets)
        }
    }

    private static func add(_ level: Double, at timeMicros: Int64, to buckets: inout [BatteryBucket]) {
        let bucket = Int32(truncatingIfNeeded: timeMicros / bucketMicros)
        if let index = buckets.lastIndex(where: { $0.bucket == bucket }) {
            buckets[index].sum += level
            buckets[index].count += 1
        } else {
            buckets.append(BatteryBucket(bucket: bucket, sum: level, count: 1))
            buckets.sort { $0.bucket < $1.bucket }
        }
    }

    /// Keeps a week of buckets and reboots; marks the battery state for saving once an hour of event time.
    private mutating func prune(_ beaconID: String, readAt timeMicros: Int64) {
        let due = beacons.update(beaconID) { entry -> Bool in
            guard entry != nil else { return false }
            let horizon = entry!.lastSeenMicros - Self.window
            // Written only when something is old enough to go (a report written is its box written).
            func old(_ bucket: BatteryBucket) -> Bool { Int64(bucket.bucket) * Self.bucketMicros < horizon - Self.bucketMicros }
            if entry!.buckets.contains(where: old) { entry!.buckets.removeAll(where: old) }
            if entry!.percentBuckets.contains(where: old) { entry!.percentBuckets.removeAll(where: old) }
            if entry!.reboots.contains(where: { $0 < horizon }) { entry!.reboots.removeAll { $0 < horizon } }
            let hour = Int32(truncatingIfNeeded: timeMicros.floorDivided(by: Self.saveEveryMicros))
            guard hour > entry!.savedHour, entry!.hasBatteryState else { return false }
            entry!.savedHour = hour
            return true
        }
        if due { toSave.insert(beaconID) }
    }

    public mutating func telemetry(_ row: TelemetryRow, rebooted: Bool) {
        seen(ResolvedBeacon(id: row.beaconID), siteID: row.siteID, timeMicros: row.timeMicros)
        var description: BatteryDescription?
        if configuration.chargeCounting, row.batteryMillivolts != nil {
            description = batteries[row.beaconID] ?? BatteryDescription()
            description?.cutoffVolts = configuration.cutoffMillivolts / 1000
        }
        // Changed in place: the entry's reports and the forecast's arrays each held once, so nothing is copied.
        let swapped = beacons.update(row.beaconID) { entry -> Bool in
            guard entry != nil else { return false }
            if let temperature = row.temperatureCelsius { entry!.temperatureCelsius = temperature }
            if rebooted { entry!.reboots.append(row.timeMicros) }
            guard let description, let millivolts = row.batteryMillivolts else { return false }
            var life = entry!.battery ?? BatteryLife(description: description)
            entry!.battery = nil
            life.description = description
            let swapped = life.observe(
                micros: row.timeMicros, millivolts: Double(millivolts), celsius: row.temperatureCelsius,
                advertisingCount: row.advertisingCount, uptimeSeconds: row.uptimeSeconds)
            entry!.battery = life
            // A fresh cell's trend starts afresh too.
            if swapped { entry!.buckets = [] }
            return swapped
        }
        // And a fresh cell is saved at once.
        if swapped { toSave.insert(row.beaconID) }
        if let battery = row.batteryMillivolts {
            self.battery(beaconID: row.beaconID, millivolts: battery, timeMicros: row.timeMicros)
        }
        prune(row.beaconID, readAt: row.timeMicros)
    }

    /// The identities found advertised from two addresses at once since the last call.
    public mutating func takeNewlyCloned() -> [ClonedBeacon] {
        defer { newlyCloned = [] }
        return newlyCloned
    }

    /// The beacons changed since the last call, as `beacon_health` rows.
    public mutating func takeChanged() -> [BeaconHealth] {
        defer { changed.removeAll() }  // not keeping capacity: a transaction's snapshot of it stays small
        return changed.sorted().compactMap { health(of: $0) }
    }

    public func health(of beaconID: String) -> BeaconHealth? {
        guard let beacon = beacons[beaconID] else { return nil }
        func slope(_ buckets: [BatteryBucket]) -> Double? {
            TheilSenSlope.of(
                buckets.map { (x: (Double($0.bucket) + 0.5) * Double(Self.bucketMicros) / 86_400_000_000, y: $0.sum / Double($0.count)) })
        }
        func daysLeft(level: Double, cutoff: Double, trend: Double?) -> Double? {
            guard let trend, trend < 0 else { return nil }
            return max(0, (level - cutoff) / -trend)
        }
        /// The days until the share of charge `millivolts` reads on the chemistry's curve under load at `celsius`,
        /// falling as `trend` (mV a day) takes it there, reaches the cutoff's share.
        func daysLeftOnCurve(millivolts: Double, celsius: Double, trend: Double?, chemistry: BatteryChemistry) -> Double? {
            guard let trend, trend < 0 else { return nil }
            guard millivolts > configuration.cutoffMillivolts else { return 0 }
            let share = { (millivolts: Double) in chemistry.chargeLeft(loadedVolts: millivolts / 1000, celsius: celsius) }
            // The curve's slope at the reading (share a mV), over the trend's fall of a day either side.
            let above = millivolts + max(1, -trend)
            let below = max(configuration.cutoffMillivolts, millivolts + min(-1, trend))
            let perMillivolt = (share(above) - share(below)) / (above - below)
            guard perMillivolt > 0 else { return nil }
            return max(0, (share(millivolts) - share(configuration.cutoffMillivolts)) / (perMillivolt * -trend))
        }
        let trend = slope(beacon.buckets)
        let percentTrend = slope(beacon.percentBuckets)
        var low = false
        var left: Double?
        var forecast: BatteryForecast?
        if let life = beacon.battery, let counted = life.forecast(), let read = life.lastReadingMicros {
            left = counted.daysLeft
            forecast = BatteryForecast(
                method: .chargeCounting, daysLeftLow: counted.daysLeftLow, daysLeftHigh: counted.daysLeftHigh,
                replaceByMicros: read + Self.micros(days: counted.daysLeftLow), chargeLeft: counted.chargeLeft,
                coldestCarriedCelsius: counted.coldestCarriedCelsius, cellSinceMicros: life.fittedMicros)
        } else if let battery = beacon.batteryMillivolts {
            left = configuration.trendOnCurve
                ? daysLeftOnCurve(
                    millivolts: Double(battery), celsius: beacon.temperatureCelsius ?? 25, trend: trend,
                    chemistry: batteries[beaconID]?.chemistry ?? .unknown)
                : daysLeft(level: Double(battery), cutoff: configuration.cutoffMillivolts, trend: trend)
            low = Double(battery) <= configuration.lowBatteryMillivolts
            if let left { forecast = BatteryForecast(method: .voltageTrend, replaceByMicros: beacon.lastSeenMicros + Self.micros(days: left)) }
        } else if let percent = beacon.batteryPercent {
            left = daysLeft(level: percent, cutoff: configuration.cutoffPercent, trend: percentTrend)
            low = percent <= configuration.lowBatteryPercent
            if let left { forecast = BatteryForecast(method: .percentTrend, replaceByMicros: beacon.lastSeenMicros + Self.micros(days: left)) }
        }
        let status: BeaconHealth.Status
        if beacon.clones?.clonedSinceMicros != nil {
            status = .cloned
        } else if beacon.reboots.count >= configuration.rebootingAt {
            status = .rebooting
        } else if low || (left.map { $0 < configuration.lowBatteryDays } ?? false) {
            status = .lowBattery
        } else {
            status = .ok
        }
        return BeaconHealth(
            beaconID: beaconID, siteID: beacon.siteID, lastSeenMicros: beacon.lastSeenMicros,
            batteryMillivolts: beacon.batteryMillivolts, batteryTrendMillivoltsPerDay: trend,
            estimatedDaysLeft: left, temperatureCelsius: beacon.temperatureCelsius,
            rebootsIn7Days: beacon.reboots.count, status: status, batteryPercent: beacon.batteryPercent,
            batteryTrendPercentPerDay: percentTrend, kind: beacon.kind, firstSeenMicros: beacon.firstSeenMicros,
            heardAs: beacon.heardAs, url: beacon.url, clonedSinceMicros: beacon.clones?.clonedSinceMicros, forecast: forecast)
    }

    /// Days as µs, bounded to a century (a forecast on a full plateau can run to years).
    static func micros(days: Double) -> Int64 {
        Int64(min(max(0, days), 36_500) * 86_400_000_000)
    }

    public var trackedBeacons: Int { beacons.count }

    /// The address beacon `addressBeaconID` was `beacon`'s transmissions (`AddressMerge`): its battery history and
    /// counters become `beacon`'s where `beacon` has none here, and it is forgotten (its row goes with the merge in
    /// the database).
    mutating func merge(_ addressBeaconID: String, into beacon: ResolvedBeacon) {
        if let saved = restoring[addressBeaconID] {
            // Known only from its saved battery state (heard before a restart): the beacon's, where it has none.
            if var entry = beacons[beacon.id] {
                if !entry.hasBatteryState {
                    saved.apply(to: &entry)
                    beacons[beacon.id] = entry
                    changed.insert(beacon.id)
                    toSave.insert(beacon.id)
                }
            } else if restoring[beacon.id] == nil {
                restoring[beacon.id] = saved
            }
        }
        guard var entry = beacons[addressBeaconID] else { return }
        beacons[addressBeaconID] = nil
        changed.remove(addressBeaconID)
        toSave.remove(addressBeaconID)
        guard beacons[beacon.id] == nil else { return }
        entry.kind = Self.identityKind(beacon.kind) ?? entry.kind
        entry.clones = Self.hasConstantIdentity(beacon.kind) ? CloneDetection() : nil
        beacons[beacon.id] = entry
        changed.insert(beacon.id)
        if entry.hasBatteryState { toSave.insert(beacon.id) }
    }

    /// Forgets the beacons not seen the longest beyond `maximum` (their `beacon_health` rows stay; one heard again
    /// starts its battery trend afresh). Returns how many.
    mutating func evict(keeping maximum: Int) -> Int {
        beacons.evictOldest(keeping: maximum) { $0.lastSeenMicros }
    }

    mutating func beginTransaction() {
        beacons.beginTransaction()
        changedAtBegin = changed
        newlyClonedAtBegin = newlyCloned
        toSaveAtBegin = toSave
    }

    mutating func commitTransaction() {
        beacons.commitTransaction()
        changedAtBegin = []
        newlyClonedAtBegin = []
        toSaveAtBegin = []
        for beaconID in restoredThisTransaction { restoring[beaconID] = nil }
        restoredThisTransaction = []
    }

    mutating func rollbackTransaction() {
        beacons.rollbackTransaction()
        changed = changedAtBegin
        changedAtBegin = []
        newlyCloned = newlyClonedAtBegin
        newlyClonedAtBegin = []
        toSave = toSaveAtBegin
        toSaveAtBegin = []
        restoredThisTransaction = []
    }
}
