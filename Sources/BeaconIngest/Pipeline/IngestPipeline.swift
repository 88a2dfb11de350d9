import BeaconWire
import Foundation

/// One row of the `sightings` view, as the pipeline derives it. The distances are not stored: the view computes
/// them from the RSSI, the frame's power and the source's placement, as `distanceMeters` does here.
public struct SightingRow: Sendable, Equatable {
    public var timeMicros: Int64
    public var source: SightingSource
    public var beaconID: String
    public var rssi: Int8
    public var powerAt1mDbm: Int8?
    /// The RSSI after the agent's offset and the site's smoothing (stored to 0.5 dB).
    public var smoothedRSSI: Double

    public init(
        timeMicros: Int64, source: SightingSource, beaconID: String, rssi: Int8, powerAt1mDbm: Int8?, smoothedRSSI: Double
    ) {
        self.timeMicros = timeMicros
        self.source = source
        self.beaconID = beaconID
        self.rssi = rssi
        self.powerAt1mDbm = powerAt1mDbm
        self.smoothedRSSI = smoothedRSSI
    }

    public var siteID: String { source.siteID }
    public var agentID: String { source.agentID }
    public var zoneID: String? { source.zoneID }

    /// The view's `distance_m`: the log-distance model on the RSSI with the agent's offset.
    public var distanceMeters: Float? {
        guard let power = powerAt1mDbm, let offset = source.rssiOffsetDb, let exponent = source.pathLossExponent else {
            return nil
        }
        return Float(IngestPipeline.distance(rssi: Double(rssi) + offset, powerAt1m: Double(power), exponent: exponent))
    }

    /// The view's `smoothed_distance_m`, from the smoothed RSSI as stored.
    public var smoothedDistanceMeters: Float? {
        guard let power = powerAt1mDbm, let exponent = source.pathLossExponent else { return nil }
        let stored = Double(SightingPack.Reading.centiDecibels(smoothedRSSI)) / 100
        return Float(IngestPipeline.distance(rssi: stored, powerAt1m: Double(power), exponent: exponent))
    }
}

/// What one newly committed batch adds to the database.
public struct PipelineOutput: Sendable {
    public var sightings: [SightingRow] = []
    /// Transmissions the pipeline has not seen within its window: written unless the database holds them already.
    public var telemetry: [NewTelemetry] = []
    /// Readings of transmissions the pipeline has not seen: written unless the database holds them already.
    public var sensorReadings: [SensorReadingRow] = []
    public var deviceInfo: [DeviceInfoRow] = []
    public var undecodableFrames: [UndecodableFrame] = []
    public var zoneChanges: [ZoneChange] = []
    /// Address frames that began or ended waiting for their identity (`AddressWait`).
    var waitingFrames = WaitingFrames()
    /// Address beacons found to be beacons with an identity: the database files their rows under it.
    public var addressMerges: [AddressMerge] = []
    /// Readings that came too late to move zones (from an agent its site had let go).
    public var lateReadings = 0
    /// Beacons forgotten to stay within `IngestPipeline.maximumBeacons`.
    public var evictedBeacons = 0

    /// Adds another batch's output to this one.
    mutating func append(_ other: PipelineOutput) {
        // Rows of an address beacon from earlier batches of the group are the beacon's too.
        for merge in other.addressMerges { rename(merge) }
        addressMerges += other.addressMerges
        sightings += other.sightings
        telemetry += other.telemetry
        sensorReadings += other.sensorReadings
        deviceInfo += other.deviceInfo
        undecodableFrames += other.undecodableFrames
        zoneChanges += other.zoneChanges
        waitingFrames.append(other.waitingFrames)
        lateReadings += other.lateReadings
        evictedBeacons += other.evictedBeacons
    }
}

/// Everything the ingest derives from batches, as one pure state machine: EID resolution, association of
/// identity-less frames, telemetry dedup and eTLM decryption, agent clock offsets, distance and smoothing, fleet
/// health. The writer applies it to each batch inside the batch's transaction and keeps a copy to roll back to
/// when the transaction fails, so the state always matches what is committed.
public struct IngestPipeline: Sendable {
    public var sites: SitesConfiguration
    /// EIDs resolved (an EID stands for its beacon for its rotation period) and eTLM frames decrypted, with the
    /// registry's identity keys.
    public var eids: EIDResolver
    /// Phones and watches by the registry's IRKs.
    public var privateAddresses: PrivateAddressResolver
    public var telemetry = TelemetryDeduplicator()
    public var sensorReadings = SensorDeduplicator()
    /// Decodes the data frames of sightings, with the registry's BTHome bindkeys.
    public var frameDecoder: FrameDecoder
    public var health: FleetHealth
    public var clocks = AgentClocks()
    public var sharedAgentIDs = SharedAgentIDs()
    public var proximity = ProximitySmoother()
    /// How long a device address stays attached to the identity the site last heard from it
    /// (`BeaconIdentity.addressLifetimeMicros`).
    public var addressLifetimeMicros = BeaconIdentity.addressLifetimeMicros
    /// Beacons (and device addresses) the per-beacon tables hold at most, whatever ids arrive: past it those not
    /// seen the longest are forgotten (`--max-beacons`): fleet health, telemetry and reading deduplication,
    /// address associations, EIDs, the zone trackers of all sites together (and so their checkpoints), the RSSI
    /// filters and the addresses agents sent (`filtersPerBeacon` per beacon of each) and the writer's cache of
    /// dictionary keys.
    public var maximumBeacons = 200_000
    /// RSSI filters (and agents' addresses) kept per beacon of `maximumBeacons` (one per agent that hears it: a
    /// few, usually).
    static let filtersPerBeacon = 4

    var placements: [AgentKey: Placement] = [:]
    /// Zone assignment per site.
    public internal(set) var zoneTrackers: [String: SiteZoneTracker] = [:]
    private var sightingsSincePrune = 0
    static let pruneEverySightings = 100_000
    /// Address frames waiting for their identity.
    var waiting = AddressWait()
    /// Identities by device address per site, for frames that arrived as `mac:` sightings.
    var identities = JournaledDictionary<AddressKey, AddressIdentity>()
    /// The addresses each agent sent, for the batches that leave them out.
    private var addresses = AgentAddresses()
    /// Each beacon id once, shared by the per-beacon tables (not rolled back: a cache).
    var beaconIDs = BeaconIDInterner()
    /// The pipeline as it was at `beginTransaction()`, without its per-beacon tables (journaled instead).
    private var undo: [IngestPipeline] = []

    struct AddressIdentity {
        var beacon: ResolvedBeacon
        var timeMicros: Int64
    }

    /// What the sites file says about an agent.
    struct Placement {
        var zone: String?
        var rssiOffsetDb: Double = 0
        var pathLossExponent: Double = 2.5
        var smoothing = RSSISmoothing.kalman
    }

    struct AddressKey: Hashable {
        var site: String
        var address: UInt64
    }

    public init(sites: SitesConfiguration, health: FleetHealth.Configuration = .init()) {
        self.sites = sites
        self.eids = EIDResolver(keyring: EddystoneKeyring(identities: sites.identities))
        self.privateAddresses = PrivateAddressResolver(keys: sites.irks)
        self.frameDecoder = FrameDecoder(bindkeys: sites.bindkeys)
        self.health = FleetHealth(configuration: health)
        self.health.batteries = sites.batteries
        placements = Self.placements(of: sites)
        for site in sites.sites { zoneTrackers[site.id] = SiteZoneTracker(site: site) }
    }

    private static func placements(of sites: SitesConfiguration) -> [AgentKey: Placement] {
        var placements: [AgentKey: Placement] = [:]
        for site in sites.sites {
            for agent in site.agents {
                placements[AgentKey(site: site.id, agent: agent.id)] = Placement(
                    zone: agent.zone, rssiOffsetDb: agent.rssiOffsetDb, pathLossExponent: site.pathLossExponent,
                    smoothing: site.rssiSmoothing)
            }
        }
        return placements
    }

    /// The sites file read again, between transactions: agents' placements, identity keys and bindkeys from
    /// `sites`; the zone trackers of the `reset` sites start anew (they are claimed again, and resume from the
    /// database), and those of sites no longer in the file go. What the pipeline learnt of beacons stays.
    public mutating func reconfigure(sites: SitesConfiguration, reset: Set<String>) {
        self.sites = sites
        placements = Self.placements(of: sites)
        eids.keyring = EddystoneKeyring(identities: sites.identities)
        privateAddresses = PrivateAddressResolver(keys: sites.irks)
        frameDecoder = FrameDecoder(bindkeys: sites.bindkeys)
        health.batteries = sites.batteries
        let ids = Set(sites.sites.map(\.id))
        zoneTrackers = zoneTrackers.filter { ids.contains($0.key) && !reset.contains($0.key) }
        for site in sites.sites where zoneTrackers[site.id] == nil { zoneTrackers[site.id] = SiteZoneTracker(site: site) }
    }

    /// The rows of one batch that the database did not have yet; `nowMicros` is the ingest's clock. `inOrder`:
    /// every earlier batch of the agent is committed (see `heldProgress`).
    public mutating func apply(_ batch: DecodedBatch, nowMicros: Int64, inOrder: Bool = true) -> PipelineOutput {
        apply(timed(batch), nowMicros: nowMicros, inOrder: inOrder)
    }

    /// The same, with its event times as the writer took it.
    public mutating func apply(_ timed: TimedBatch, nowMicros: Int64, inOrder: Bool = true) -> PipelineOutput {
        var batch = timed.batch
        addresses.resolve(&batch, beaconIDs: &beaconIDs, holdingAtMost: 2 * maximumBeacons)
        let agentKey = AgentKey(site: batch.siteID, agent: batch.agentID)
        let placement = placements[agentKey] ?? Placement()
        let source = SightingSource(
            siteID: batch.siteID, agentID: batch.agentID, zoneID: placement.zone, rssiOffsetDb: placement.rssiOffsetDb,
            pathLossExponent: placement.pathLossExponent)
        var output = PipelineOutput()
        output.sightings.reserveCapacity(batch.sightings.count)
        var zoneReadings: [SiteZoneTracker.BeaconReading] = []
        zoneReadings.reserveCapacity(batch.sightings.count)
        let heardBy = HeardBy(agent: agentKey, number: proximity.number(of: agentKey), placement: placement, source: source)
        for (sighting, time) in zip(batch.sightings, timed.sightingTimes) {
            let beacon = identity(of: sighting, site: batch.siteID, timeMicros: time)
            if beacon.kind == .mac, AddressWait.waits(sighting),
                !waiting.waitedInVain(site: batch.siteID, address: sighting.beacon.address, timeMicros: time, lifetimeMicros: addressLifetimeMicros)
            {
                wait(sighting, at: time, heardBy: agentKey, nowMicros: nowMicros, into: &output)
                continue
            }
            // An identity heard from a device address: it merges the address's beacon, and claims its waiting frames.
            let identifiesAddress = beacon.kind != .mac && sighting.beacon.address != 0
            if identifiesAddress,
                let merge = mergeAddressBeacon(site: batch.siteID, address: sighting.beacon.address, into: beacon, timeMicros: time, output: &output)
            {
                for index in zoneReadings.indices where zoneReadings[index].beaconID == merge.addressBeaconID {
                    zoneReadings[index].beaconID = merge.beaconID
                }
            }
            if let reading = record(sighting, at: time, as: beacon, heardBy: heardBy, into: &output) { zoneReadings.append(reading) }
            if identifiesAddress {
                claimWaiting(site: batch.siteID, address: sighting.beacon.address, as: beacon, into: &output)
            }
        }
        for (read, time) in zip(batch.characteristicReads, timed.readTimes) {
            characteristicRead(read, agent: agentKey, timeMicros: time, into: &output)
        }
        let lateBefore = zoneTrackers[batch.siteID]?.lateReadings ?? 0
        zoneTrackers[batch.siteID]?.add(zoneReadings, agent: batch.agentID)
        // Only this batch's site: the transaction holds its lease, not necessarily the others'.
        output.append(expireWaiting(sites: [batch.siteID], nowMicros: nowMicros))
        if let newest = output.sightings.map(\.timeMicros).max() {
            if inOrder {
                agentProgressed(agentKey, newestMicros: max(newest, heldProgress.removeValue(forKey: agentKey) ?? .min), arrivalMicros: nowMicros)
            } else {
                heldProgress[agentKey] = max(newest, heldProgress[agentKey] ?? .min)
            }
            sightingsSincePrune += output.sightings.count
            if sightingsSincePrune >= Self.pruneEverySightings {
                sightingsSincePrune = 0
                proximity.prune(site: batch.siteID, before: newest)
                addresses.prune(site: batch.siteID, before: newest)
            }
        }
        output.lateReadings = (zoneTrackers[batch.siteID]?.lateReadings ?? 0) - lateBefore
        output.evictedBeacons = health.evict(keeping: maximumBeacons)
        telemetry.evict(keeping: maximumBeacons)
        sensorReadings.evict(keeping: maximumBeacons)
        identities.evictOldest(keeping: maximumBeacons) { $0.timeMicros }
        addresses.evict(keeping: maximumBeacons * Self.filtersPerBeacon)
        proximity.evict(keeping: maximumBeacons * Self.filtersPerBeacon)
        eids.maximumRemembered = maximumBeacons
        output.zoneChanges += advanceZones(site: batch.siteID, nowMicros: nowMicros)
        // The zone trackers of all sites together hold at most `maximumBeacons`: this site keeps what the others
        // leave (so its checkpoint is bounded too).
        let others = zoneTrackers.reduce(0) { $0 + ($1.key == batch.siteID ? 0 : $1.value.trackedBeacons) }
        if let changes = zoneTrackers[batch.siteID]?.evict(keeping: max(maximumBeacons - others, maximumBeacons / 10)) {
            output.zoneChanges += changes
        }
        return output
    }

    /// The agent's RSSI offset and its site's smoothing.
    mutating func smoothedReading(
        beaconID: String, agent: UInt32, placement: Placement, rssi heard: Double, timeMicros: Int64
    ) -> (rssi: Double, smoothed: Double) {
        let rssi = heard + placement.rssiOffsetDb
        let smoothed = switch placement.smoothing {
        case .kalman: proximity.filter(beaconID: beaconID, agent: agent, rssi: rssi, timeMicros: timeMicros)
        case .none: rssi
        }
        return (rssi, smoothed)
    }

    /// An agent's batches committed past a gap (the batches before them are still to come, resent by the agent):
    /// the newest reading they hold, which counts as the agent's progress only once the gap is filled, so that
    /// the site's watermark does not pass the readings still to come. Batches come out of order when an agent
    /// resends after a new ingest instance took its site over, or after a broker lost them.
    private var heldProgress: [AgentKey: Int64] = [:]

    /// The gap before an agent's held batches is filled (by a batch without readings, or one found committed):
    /// their progress counts now.
    public mutating func releaseHeldProgress(_ agent: AgentKey, arrivalMicros: Int64) {
        guard let newest = heldProgress.removeValue(forKey: agent) else { return }
        agentProgressed(agent, newestMicros: newest, arrivalMicros: arrivalMicros)
    }

    /// Records that an agent's readings reached `newestMicros` of event time, arriving at `arrivalMicros`.
    public mutating func agentProgressed(_ agent: AgentKey, newestMicros: Int64, arrivalMicros: Int64) {
        zoneTrackers[agent.site]?.agentProgressed(agent.agent, newestMicros: newestMicros, arrivalMicros: arrivalMicros)
    }

    /// Fleet health learns from the telemetry rows the database took (a repeat it refused teaches nothing).
    public mutating func telemetryStored(_ stored: [NewTelemetry]) {
        for telemetry in stored { health.telemetry(telemetry.row, rebooted: telemetry.rebooted) }
    }

    /// And from the battery and temperature readings of other formats (TLM's are telemetry, `telemetryStored`).
    public mutating func sensorReadingsStored(_ stored: [SensorReadingRow]) {
        for row in stored {
            health.reading(row.reading, beaconID: row.beaconID, siteID: row.siteID, timeMicros: row.timeMicros)
        }
    }

    /// Starts a transaction: what the pipeline does until `commitTransaction()` can be undone by
    /// `rollbackTransaction()` (the database transaction it went with failed). The per-beacon tables keep a
    /// journal of what changed, so neither a transaction nor its undoing copies them: the rest of the pipeline is
    /// saved whole.
    public mutating func beginTransaction() {
        for part in Self.journaledParts { part.apply(&self, .begin) }
        var saved = self
        for part in Self.journaledParts { part.empty(&saved) }
        undo = [saved]
    }

    public mutating func commitTransaction() {
        for part in Self.journaledParts { part.apply(&self, .commit) }
        undo = []
    }

    public mutating func rollbackTransaction() {
        guard var saved = undo.first else { return }
        for part in Self.journaledParts {
            part.apply(&self, .rollback)
            part.take(&saved, self)
        }
        self = saved
    }

    /// The parts that journal their own changes: each beacon's smoothing, deduplication, health, identity, each
    /// site's zone tracker, and two caches moved with them: the beacon ids they share, and the EIDs computed for the
    /// identity keys (an undone transaction tried again, after its connection was lost to the server's idle limit
    /// on a starved machine, must not pay for them again).
    private static var journaledParts: [JournaledPartAccess] {
        [
            .init(\.proximity), .init(\.telemetry), .init(\.sensorReadings), .init(\.health), .init(\.identities),
            .init(\.addresses), .init(\.zoneTrackers), .init(\.beaconIDs), .init(\.eids.computedEIDs),
        ]
    }

    /// How the transaction steps reach one journaled part.
    private struct JournaledPartAccess {
        let apply: (inout IngestPipeline, TransactionStep) -> Void
        /// Empties the part of a saved copy, so that changing it does not copy its tables.
        let empty: (inout IngestPipeline) -> Void
        /// Takes the part (as its journal left it) from another pipeline.
        let take: (inout IngestPipeline, IngestPipeline) -> Void

        init<Part: JournaledPart>(_ path: WritableKeyPath<IngestPipeline, Part>) {
            apply = { $0[keyPath: path].apply($1) }
            empty = { $0[keyPath: path] = $0[keyPath: path].emptied }
            take = { $0[keyPath: path] = $1[keyPath: path] }
        }
    }

    /// Log-distance model: d = 10^((P1m − rssi) / (10 n)).
    public static func distance(rssi: Double, powerAt1m: Double, exponent: Double) -> Double {
        pow(10, (powerAt1m - rssi) / (10 * exponent))
    }

    /// The sighting's beacon, with EIDs resolved from the registry and `mac:` frames attached to the identity
    /// last seen from the same address; its kind is the wire's, decided once here.
    private mutating func identity(of sighting: Sighting, site: String, timeMicros: Int64) -> ResolvedBeacon {
        let kind = sighting.beacon.identity?.kind
        var beacon = ResolvedBeacon(id: sighting.beacon.beaconID, kind: kind)
        if kind == .eid, let eid = sighting.beacon.identity?.bytes.reduce(UInt64(0), { $0 << 8 | UInt64($1) }),
            let resolution = eids.resolve(eid: eid, unixSeconds: timeMicros / 1_000_000, remembering: true)
        {
            beacon = ResolvedBeacon(id: resolution.identity.beaconID, kind: .eddystone)
        }
        let address = AddressKey(site: site, address: sighting.beacon.address)
        if kind == .mac, sighting.beacon.addressIsRandom, !privateAddresses.isEmpty,
            let registered = privateAddresses.beaconID(of: DeviceAddress(value: sighting.beacon.address, kind: .random))
        {
            return ResolvedBeacon(id: beaconIDs.intern(registered, holdingAtMost: 2 * maximumBeacons))
        }
        if kind == .mac {
            if let known = identities[address], timeMicros - known.timeMicros <= addressLifetimeMicros,
                timeMicros >= known.timeMicros - addressLifetimeMicros
            {
                beacon = known.beacon
            }
        } else if sighting.beacon.address != 0, kind != .anon {
            beacon.id = beaconIDs.intern(beacon.id, holdingAtMost: 2 * maximumBeacons)
            identities.update(address) { known in
                known = AddressIdentity(beacon: beacon, timeMicros: max(timeMicros, known?.timeMicros ?? .min))
            }
            return beacon
        }
        beacon.id = beaconIDs.intern(beacon.id, holdingAtMost: 2 * maximumBeacons)
        return beacon
    }

    /// A sighting's data frame: TLM telemetry, and the readings of every other format that has them, once per
    /// transmission.
    mutating func dataFrame(
        _ content: DataFrameContent, of beacon: BeaconKey, resolved: ResolvedBeacon, agent: AgentKey, timeMicros: Int64,
        into output: inout PipelineOutput
    ) {
        let beaconID = resolved.id
        let frame: BeaconFrame
        if case .eddystone(let bytes) = content {
            // TLM and eTLM (decrypted with the pipeline's EID resolutions); a URL is the beacon's, without readings.
            if bytes.first == Eddystone.urlFrameType {
                beaconURL(bytes, beacon: resolved, into: &output)
                return
            }
            guard bytes.first == Eddystone.tlmFrameType,
                let row = telemetryRow(bytes, beaconID: beaconID, agent: agent, timeMicros: timeMicros)
            else { return }
            // Its readings are the telemetry row's (the `sensor_readings` view shows them from `telemetry_raw`).
            let (new, rebooted) = telemetry.observe(beaconID: beaconID, tlm: row.tlm, timeMicros: timeMicros)
            if new { output.telemetry.append(NewTelemetry(row: row.row, rebooted: rebooted)) }
            health.kind(resolved, BeaconFrame.eddystoneTLM(row.tlm).typeName)
            return
        } else {
            let address = beacon.address == 0
                ? nil : DeviceAddress(value: beacon.address, kind: beacon.addressIsRandom ? .random : .public)
            do {
                guard let decoded = try frameDecoder.frame(of: content, address: address, unixSeconds: timeMicros / 1_000_000)
                else { return }
                frame = decoded
            } catch {
                output.undecodableFrames.append(
                    UndecodableFrame(beaconID: beaconID, reason: error.code.rawValue, message: error.description))
                return
            }
        }
        health.kind(resolved, frame.typeName)
        if case .bthome(let packet) = frame, packet.ciphertext != nil {
            output.undecodableFrames.append(
                UndecodableFrame(
                    beaconID: beaconID, reason: "no_bindkey",
                    message: "encrypted BTHome frame and no bthome_bindkey for this beacon in the sites file"))
            return
        }
        let readings = frame.sensorReadings
        guard !readings.isEmpty else { return }
        let hash = FrameHash.of(content)
        let tolerance = sensorReadings.tolerance(carriesCounter: frame.carriesCounter)
        guard sensorReadings.observe(beaconID: beaconID, frameHash: hash, timeMicros: timeMicros, toleranceMicros: tolerance)
        else { return }
        for reading in readings {
            output.sensorReadings.append(
                SensorReadingRow(
                    timeMicros: timeMicros, siteID: agent.site, agentID: agent.agent, beaconID: beaconID,
                    reading: reading, frameType: frame.typeName, frameHash: hash, toleranceMicros: tolerance))
        }
    }

    /// An Eddystone-URL frame: the beacon's URL in `beacons`; a frame that does not decode is counted like any other.
    private mutating func beaconURL(_ bytes: FrameBytes, beacon: ResolvedBeacon, into output: inout PipelineOutput) {
        let beaconID = beacon.id
        do {
            guard case .eddystoneURL(let frame) = try Eddystone.decode(Array(bytes)[...]) else { return }
            health.kind(beacon, BeaconFrame.eddystoneURL(frame).typeName)
            health.url(beaconID: beaconID, frame.url)
        } catch {
            output.undecodableFrames.append(
                UndecodableFrame(beaconID: beaconID, reason: error.code.rawValue, message: error.description))
        }
    }

    /// A GATT poll result: numeric characteristics are readings (`gatt-read`), Device Information strings and
    /// listed characteristics without a decoder (as hex) are `device_info`.
    private mutating func characteristicRead(
        _ read: CharacteristicRead, agent: AgentKey, timeMicros time: Int64, into output: inout PipelineOutput
    ) {
        let beaconID = read.beacon.beaconID
        let decoded = try? GATTCharacteristic.decode(read.characteristic, read.value)
        if let reading = decoded?.sensorReading {
            let hash = FrameHash.of(tag: 0x4_0000 | UInt32(read.characteristic), read.value, time: time)
            let tolerance = sensorReadings.repeatToleranceMicros
            guard sensorReadings.observe(beaconID: beaconID, frameHash: hash, timeMicros: time, toleranceMicros: tolerance)
            else { return }
            output.sensorReadings.append(
                SensorReadingRow(
                    timeMicros: time, siteID: agent.site, agentID: agent.agent, beaconID: beaconID, reading: reading,
                    frameType: "gatt-read", frameHash: hash, toleranceMicros: tolerance))
            return
        }
        let name: String
        let value: String
        if let information = decoded?.deviceInformation {
            (name, value) = information
        } else {
            name = "characteristic_" + hexString(UInt64(read.characteristic), digits: 4)
            value = read.value.hexString
        }
        output.deviceInfo.append(
            DeviceInfoRow(
                timeMicros: time, siteID: agent.site, agentID: agent.agent, beaconID: beaconID, name: name, value: value))
    }

    private mutating func telemetryRow(
        _ bytes: FrameBytes, beaconID: String, agent: AgentKey, timeMicros: Int64
    ) -> (row: TelemetryRow, tlm: EddystoneTLM)? {
        let tlm: EddystoneTLM
        switch try? Eddystone.decode(Array(bytes)[...]) {
        case .eddystoneTLM(let plain)?:
            tlm = plain
        case .eddystoneETLM(let encrypted)?:
            guard let (plain, _) = eids.decrypt(encrypted, beaconID: beaconID, unixSeconds: timeMicros / 1_000_000) else {
                return nil
            }
            tlm = plain
        default:
            return nil
        }
        let row = TelemetryRow(
            timeMicros: timeMicros, siteID: agent.site, agentID: agent.agent, beaconID: beaconID,
            batteryMillivolts: tlm.batteryMillivolts.map(Int32.init), temperatureCelsius: tlm.temperatureCelsius,
            advertisingCount: tlm.advertisingCount, uptimeSeconds: tlm.uptimeSeconds)
        return (row, tlm)
    }
}

public typealias AgentKey = AcknowledgementTracker.AgentKey


extension Int64 {
    /// `self − other`, or nil where that overflows (clocks come from the network).
    func subtractingSafely(_ other: Int64) -> Int64? {
        let (result, overflow) = subtractingReportingOverflow(other)
        return overflow ? nil : result
    }
}
