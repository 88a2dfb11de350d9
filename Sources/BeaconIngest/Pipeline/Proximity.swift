/// How a site smooths RSSI before zones are decided (sites file `rssi_smoothing`).
public enum RSSISmoothing: String, Sendable, Equatable {
    /// A Kalman filter per (beacon, agent): `ProximitySmoother` (the default).
    case kalman
    /// Each reading as heard (with the agent's offset): for comparison in the accuracy harness.
    case none
}

/// RSSI smoothing per (beacon, agent) pair: a one-dimensional Kalman filter on RSSI whose process noise grows
/// with the time between sightings, so a beacon that moves is followed within a few seconds while the
/// shadowing noise of a still one (σ ≈ 4-8 dB) is averaged out. A pure state machine.
public struct ProximitySmoother: Sendable {
    public struct Configuration: Sendable {
        /// Variance of one RSSI reading, dB² (6 dB shadowing: 36).
        public var measurementVariance: Double = 36
        /// How fast the true RSSI may wander, dB² per second: with 36 dB² readings a few times a second, a time
        /// constant of about 6 s (chosen with `beaconflow accuracy --preset`).
        public var processVariancePerSecond: Double = 1
        /// After this long without a sighting the filter starts afresh.
        public var resetAfterMicros: Int64 = 30_000_000

        public init() {}
    }

    /// The agent by a small number (the site and agent ids would be most of each key).
    private struct Key: Hashable {
        var beaconID: String
        var agent: UInt32
    }

    public var configuration: Configuration
    private var filters = JournaledDictionary<Key, RSSIFilter>()
    private var agentNumbers: [AgentKey: UInt32] = [:]
    /// The site of each agent number.
    private var agentSites: [String] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Feeds one reading and returns the smoothed RSSI. Readings older than the filter's last are smoothed with
    /// its state but do not move it.
    public mutating func filter(beaconID: String, agent: AgentKey, rssi: Double, timeMicros: Int64) -> Double {
        filter(beaconID: beaconID, agent: number(of: agent), rssi: rssi, timeMicros: timeMicros)
    }

    /// The same, for an agent numbered by `number(of:)` (once per batch, rather than per reading).
    mutating func filter(beaconID: String, agent number: UInt32, rssi: Double, timeMicros: Int64) -> Double {
        filters.update(Key(beaconID: beaconID, agent: number)) { state in
            RSSIFilter.update(&state, rssi: rssi, timeMicros: timeMicros, configuration: configuration)
        }
    }

    /// The agent's number in the filters' keys.
    mutating func number(of agent: AgentKey) -> UInt32 {
        if let number = agentNumbers[agent] { return number }
        let next = UInt32(agentSites.count)
        agentNumbers[agent] = next
        agentSites.append(agent.site)
        return next
    }

    /// Forgets a site's pairs not heard for `resetAfterMicros` before `timeMicros` (they would start afresh
    /// anyway), which bounds memory as devices come and go. Per site: sites may be at different event times.
    public mutating func prune(site: String, before timeMicros: Int64) {
        filters.removeAll { key, filter in
            agentSites[Int(key.agent)] == site && filter.timeMicros < timeMicros - configuration.resetAfterMicros
        }
    }

    /// Keeps at most `maximum` pairs, forgetting those fed least recently (a flood of identities): such a pair
    /// starts afresh if heard again.
    public mutating func evict(keeping maximum: Int) {
        filters.evictOldest(keeping: maximum) { $0.timeMicros }
    }

    mutating func beginTransaction() { filters.beginTransaction() }
    mutating func commitTransaction() { filters.commitTransaction() }
    mutating func rollbackTransaction() { filters.rollbackTransaction() }

    public var trackedPairs: Int { filters.count }
}

/// One (beacon, agent) pair's Kalman filter state; the one definition of the filter that `ProximitySmoother` and
/// the zone tracker both run.
struct RSSIFilter: Sendable, Equatable {
    var rssi: Double
    var variance: Double
    var timeMicros: Int64

    /// Feeds one reading to `state` (nil: none yet) and returns the smoothed RSSI. A filter not fed for longer than
    /// `resetAfterMicros` starts afresh; a reading older than the filter's last is smoothed with its state but does
    /// not move it.
    static func update(
        _ state: inout RSSIFilter?, rssi: Double, timeMicros: Int64, configuration: ProximitySmoother.Configuration
    ) -> Double {
        guard var filter = state, timeMicros - filter.timeMicros <= configuration.resetAfterMicros else {
            state = RSSIFilter(rssi: rssi, variance: configuration.measurementVariance, timeMicros: timeMicros)
            return rssi
        }
        guard timeMicros >= filter.timeMicros else { return filter.rssi }
        let seconds = Double(timeMicros - filter.timeMicros) / 1_000_000
        filter.variance += configuration.processVariancePerSecond * seconds
        let gain = filter.variance / (filter.variance + configuration.measurementVariance)
        filter.rssi += gain * (rssi - filter.rssi)
        filter.variance *= 1 - gain
        filter.timeMicros = timeMicros
        state = filter
        return filter.rssi
    }
}
