import BeaconWire

/// One TLM transmission, however many agents heard it (the `telemetry` view).
public struct TelemetryRow: Sendable, Equatable {
    public var timeMicros: Int64
    public var siteID: String
    public var agentID: String
    public var beaconID: String
    public var batteryMillivolts: Int32?
    public var temperatureCelsius: Double?
    public var advertisingCount: UInt32
    public var uptimeSeconds: Double

    public init(
        timeMicros: Int64, siteID: String, agentID: String, beaconID: String, batteryMillivolts: Int32?,
        temperatureCelsius: Double?, advertisingCount: UInt32, uptimeSeconds: Double
    ) {
        self.timeMicros = timeMicros
        self.siteID = siteID
        self.agentID = agentID
        self.beaconID = beaconID
        self.batteryMillivolts = batteryMillivolts
        self.temperatureCelsius = temperatureCelsius
        self.advertisingCount = advertisingCount
        self.uptimeSeconds = uptimeSeconds
    }
}

/// A telemetry row the pipeline has not seen, and whether its beacon rebooted since the one before.
public struct NewTelemetry: Sendable, Equatable {
    public var row: TelemetryRow
    public var rebooted: Bool

    /// What identifies this offer of the transmission in the database: the beacon, the frame's advertising counter
    /// and uptime, and the time it was heard.
    public var transmission: TransmissionKey {
        TransmissionKey(
            beaconID: row.beaconID, advertisingCount: Int64(row.advertisingCount), uptimeSeconds: row.uptimeSeconds, timeMicros: row.timeMicros)
    }
}

/// One reception of a TLM transmission: its counters are the same for every agent that heard it, its time within
/// minutes of theirs; a reboot restarts the counters, so the same counters hours apart are another transmission.
public struct TransmissionKey: Hashable, Sendable {
    public var beaconID: String
    public var advertisingCount: Int64
    public var uptimeSeconds: Double
    public var timeMicros: Int64
}

/// Turns the TLM and eTLM frames of sightings into telemetry rows, once per transmission: a fast path in memory in
/// front of the database's check (`TransmissionStore.telemetry`, which makes it exact however late an agent delivers).
///
/// Several agents hear the same transmission, and an agent repeats the frame in each batch until it changes: a
/// transmission is its beacon and advertising counter (PDU count), so a row is offered only for a counter not
/// seen for that beacon within `windowMicros` of event time. An agent that lags the others by more than that — a
/// spool draining after a long outage, a replay — offers rows the database then refuses. A reboot restarts the counters; it shows as
/// the beacon's boot time (sighting time minus uptime) jumping forward, which, unlike the uptime itself, does not
/// move when a lagging agent delivers old transmissions late. A pure state machine.
public struct TelemetryDeduplicator: Sendable {
    /// How far behind the newest transmission of a beacon a repeat is still recognised: the allowed lateness.
    public var windowMicros: Int64 = 300_000_000
    /// At most this many counters per beacon (a beacon sending TLM ten times a second for the whole window).
    public var maximumRemembered = 3_000
    /// How far the boot time may wander (beacon clock drift, agent clock offsets) before it counts as a reboot.
    public var rebootToleranceMicros: Int64 = 120_000_000

    private struct Transmission: Sendable {
        var counter: UInt32
        var timeMicros: Int64
    }

    private struct Recent: Sendable {
        /// In arrival order; pruned from the front.
        var transmissions: [Transmission] = []
        var newestMicros: Int64
        var bootMicros: Int64
    }

    private var recent = JournaledDictionary<String, Recent>()

    public init() {}

    /// The address beacon `addressBeaconID` was `beaconID`'s transmissions (`AddressMerge`): its counters become
    /// `beaconID`'s where that beacon has none.
    mutating func merge(_ addressBeaconID: String, into beaconID: String) {
        guard let counters = recent[addressBeaconID] else { return }
        recent[addressBeaconID] = nil
        if recent[beaconID] == nil { recent[beaconID] = counters }
    }

    /// Whether this (beacon, counter) is new, and whether the beacon rebooted since the last one.
    public mutating func observe(beaconID: String, tlm: EddystoneTLM, timeMicros: Int64) -> (new: Bool, rebooted: Bool) {
        let bootMicros = timeMicros - Int64(tlm.uptimeTenths) * 100_000
        let transmission = Transmission(counter: tlm.advertisingCount, timeMicros: timeMicros)
        guard var entry = recent[beaconID] else {
            recent[beaconID] = Recent(transmissions: [transmission], newestMicros: timeMicros, bootMicros: bootMicros)
            return (true, false)
        }
        var rebooted = false
        if bootMicros > entry.bootMicros + rebootToleranceMicros {
            rebooted = true
            entry.transmissions.removeAll(keepingCapacity: true)
            entry.bootMicros = bootMicros
        } else if bootMicros >= entry.bootMicros - rebootToleranceMicros {
            if entry.transmissions.contains(where: { $0.counter == tlm.advertisingCount }) { return (false, false) }
            entry.bootMicros = bootMicros  // follows the beacon's clock drift
        } else {
            // From before the last reboot, delivered late: new (its counter is forgotten), state unchanged.
            return (true, false)
        }
        entry.transmissions.append(transmission)
        entry.newestMicros = max(entry.newestMicros, timeMicros)
        let horizon = entry.newestMicros - windowMicros
        let expired = entry.transmissions.prefix { $0.timeMicros < horizon }.count
        let excess = entry.transmissions.count - expired - maximumRemembered
        entry.transmissions.removeFirst(expired + max(0, excess))
        recent[beaconID] = entry
        return (true, rebooted)
    }

    public var trackedBeacons: Int { recent.count }

    /// Forgets the beacons whose newest transmission is the oldest beyond `maximum` (a repeat of theirs is then
    /// refused by the database's check instead).
    mutating func evict(keeping maximum: Int) {
        recent.evictOldest(keeping: maximum) { $0.newestMicros }
    }

    mutating func beginTransaction() { recent.beginTransaction() }
    mutating func commitTransaction() { recent.commitTransaction() }
    mutating func rollbackTransaction() { recent.rollbackTransaction() }
}
