import BeaconWire

/// The agent a sighting was heard by, as the pipeline files its rows: its number among the RSSI filters, its
/// placement from the sites file and the source its rows are stored under.
struct HeardBy {
    var agent: AgentKey
    var number: UInt32
    var placement: IngestPipeline.Placement
    var source: SightingSource
}

/// What one sighting adds, and the frames that wait for their address's identity (`AddressWait`).
extension IngestPipeline {
    /// The sighting's rows as `beacon`'s: the sighting, its data frames' telemetry and readings, and fleet health;
    /// returns its part in zone decisions (none for a copy of an identity, which does not move the beacon's zone).
    mutating func record(
        _ sighting: Sighting, at time: Int64, as beacon: ResolvedBeacon, heardBy: HeardBy, into output: inout PipelineOutput
    ) -> SiteZoneTracker.BeaconReading? {
        let (rssi, filtered) = smoothedReading(
            beaconID: beacon.id, agent: heardBy.number, placement: heardBy.placement, rssi: Double(sighting.rssi), timeMicros: time)
        // A sighting whose address is unknown (left out, and not yet learnt) leaves the address last heard as it was.
        let heardAs = sighting.beacon.addressAsBefore ? nil : HeardAs(sighting.beacon)
        let copy = health.seen(beacon, siteID: heardBy.agent.site, timeMicros: time, heardAs: heardAs)
        output.sightings.append(
            SightingRow(
                timeMicros: time, source: heardBy.source, beaconID: beacon.id, rssi: sighting.rssi,
                powerAt1mDbm: sighting.beacon.powerAt1mDbm, smoothedRSSI: filtered))
        for content in sighting.frames {
            dataFrame(content, of: sighting.beacon, resolved: beacon, agent: heardBy.agent, timeMicros: time, into: &output)
        }
        return copy ? nil : SiteZoneTracker.BeaconReading(beaconID: beacon.id, timeMicros: time, rssi: rssi)
    }

    /// How a site's agent is filed (`HeardBy`).
    mutating func heardBy(_ agent: AgentKey) -> HeardBy {
        let placement = placements[agent] ?? Placement()
        return HeardBy(
            agent: agent, number: proximity.number(of: agent), placement: placement,
            source: SightingSource(
                siteID: agent.site, agentID: agent.agent, zoneID: placement.zone, rssiOffsetDb: placement.rssiOffsetDb,
                pathLossExponent: placement.pathLossExponent))
    }

    /// An address's frame that no identity claims yet waits for one (its event time kept with it).
    mutating func wait(_ sighting: Sighting, at time: Int64, heardBy agent: AgentKey, nowMicros: Int64, into output: inout PipelineOutput) {
        var timed = sighting
        timed.timeMicros = time
        let frame = AddressWait.Frame(agent: agent, sighting: timed, arrivalMicros: nowMicros)
        output.waitingFrames.held.append(frame)
        storeUnderAddress(waiting.hold(frame), into: &output)
    }

    /// The frames waiting for `address` at `site`, stored as the identity just heard from it.
    mutating func claimWaiting(site: String, address: UInt64, as beacon: ResolvedBeacon, into output: inout PipelineOutput) {
        let claimed = waiting.claim(site: site, address: address)
        guard !claimed.isEmpty else { return }
        output.waitingFrames.claimed += claimed.count
        store(claimed, claimedBy: beacon, into: &output)
    }

    /// The frames that waited their time (of `sites`; nil: every site), stored under their addresses.
    mutating func expireWaiting(sites: Set<String>?, nowMicros: Int64) -> PipelineOutput {
        var output = PipelineOutput()
        let expired = waiting.expire(sites: sites, nowMicros: nowMicros)
        waiting.rememberWaitedInVain(expired)
        storeUnderAddress(expired, into: &output)
        return output
    }

    /// The waiting frames a site's earlier owner (or this instance before a restart) kept in the database (after
    /// `resetZones` of their sites): they wait again in full.
    public mutating func restoreWaitingFrames(_ frames: [(agent: AgentKey, sighting: Sighting)], nowMicros: Int64) {
        waiting.restore(frames.map { .init(agent: $0.agent, sighting: $0.sighting, arrivalMicros: nowMicros) })
    }

    /// Frames waiting now, over every site.
    public var framesWaiting: Int { waiting.count }

    private mutating func storeUnderAddress(_ frames: [AddressWait.Frame], into output: inout PipelineOutput) {
        guard !frames.isEmpty else { return }
        output.waitingFrames.storedUnderAddress += frames.count
        store(frames, claimedBy: nil, into: &output)
    }

    /// Rows for frames that waited, as the identity that claimed them or (nil) under their addresses; they are
    /// done waiting.
    private mutating func store(_ frames: [AddressWait.Frame], claimedBy identity: ResolvedBeacon?, into output: inout PipelineOutput) {
        var agents: [AgentKey: HeardBy] = [:]
        var readings: [AgentKey: [SiteZoneTracker.BeaconReading]] = [:]
        for frame in frames {
            let heardBy = agents[frame.agent] ?? heardBy(frame.agent)
            agents[frame.agent] = heardBy
            let resolved = identity
                ?? ResolvedBeacon(id: beaconIDs.intern(frame.sighting.beacon.beaconID, holdingAtMost: 2 * maximumBeacons), kind: .mac)
            if let reading = record(frame.sighting, at: frame.sighting.timeMicros, as: resolved, heardBy: heardBy, into: &output) {
                readings[frame.agent, default: []].append(reading)
            }
            output.waitingFrames.done.append(frame.key)
        }
        for (agent, agentReadings) in readings { zoneTrackers[agent.site]?.add(agentReadings, agent: agent.agent) }
    }
}
