/// Zones: each site's `SiteZoneTracker` fed the readings with their agent's offset, moved as far as its watermark
/// allows, saved to and restored from its checkpoint, resumed or forgotten when sites change hands.
extension IngestPipeline {
    /// One reading's part in zone decisions: the agent's RSSI offset from the sites file, then the site's zone
    /// tracker (which smooths it). `apply` does the same for a whole batch; the accuracy harness feeds simulated
    /// readings here one by one.
    public mutating func zoneReading(beaconID: String, agent: AgentKey, rssi heard: Double, timeMicros: Int64) {
        let rssi = heard + (placements[agent] ?? Placement()).rssiOffsetDb
        zoneTrackers[agent.site]?.add(beaconID: beaconID, agent: agent.agent, timeMicros: timeMicros, rssi: rssi)
    }

    /// A site's zone state to save with the transaction, for a restart to resume from.
    public struct ZoneCheckpoint: Sendable {
        public var site: String
        /// The tracker's watermark: the state holds every reading up to it, the database every one after.
        public var watermarkMicros: Int64
        public var state: [UInt8]
    }

    /// The checkpoints of those of `sites` that counted minutes since their last one.
    public mutating func takeZoneCheckpoints(sites: Set<String>) -> [ZoneCheckpoint] {
        sites.sorted().compactMap { site in
            guard zoneTrackers[site]?.checkpointDue == true, let state = zoneTrackers[site]?.takeCheckpoint(),
                let watermark = zoneTrackers[site]?.watermarkMicros
            else { return nil }
            return ZoneCheckpoint(site: site, watermarkMicros: watermark, state: state)
        }
    }

    /// Restores a site's zone tracker from its checkpoint; the site's sightings newer than the checkpoint's
    /// watermark are then to be given to `replayZoneReadings`.
    public mutating func restoreZones(site: String, checkpoint: [UInt8]) throws(CheckpointError) {
        try zoneTrackers[site]?.restore(checkpoint: checkpoint)
    }

    /// Stored sightings of one agent (RSSI as heard) back into its site's zone tracker, after `restoreZones`.
    public mutating func replayZoneReadings(_ readings: [SiteZoneTracker.BeaconReading], agent: AgentKey) {
        let offset = (placements[agent] ?? Placement()).rssiOffsetDb
        zoneTrackers[agent.site]?.add(readings.map { .init(beaconID: $0.beaconID, timeMicros: $0.timeMicros, rssi: $0.rssi + offset) }, agent: agent.agent)
    }

    /// Resumes the zone tracking of sites without a usable checkpoint from what the database holds (see
    /// `SiteZoneTracker.resume`).
    public mutating func resumeZones(
        openVisits: [String: [SiteZoneTracker.OpenVisit]], lastCountedMinutes: [String: Int64], sites: Set<String>, nowMicros: Int64
    ) {
        for site in sites where zoneTrackers[site] != nil {
            zoneTrackers[site]?.resume(
                openVisits: openVisits[site] ?? [], lastCountedMinuteMicros: lastCountedMinutes[site], nowMicros: nowMicros)
        }
    }

    /// Forgets the sites' zone state: trackers as at the start, before `restoreZones` or `resumeZones`, or for a
    /// site handed over to another instance.
    public mutating func resetZones(sites: Set<String>) {
        for site in self.sites.sites where sites.contains(site.id) { zoneTrackers[site.id] = SiteZoneTracker(site: site) }
        // Their waiting frames are in the database, for whoever serves the sites next.
        waiting.forget(sites: sites)
    }

    /// Moves a site's zone decisions as far as its watermark allows, applying at most `limit` readings
    /// (`SiteZoneTracker.advance`).
    public mutating func advanceZones(site: String, nowMicros: Int64, applyingAtMost limit: Int = .max) -> [ZoneChange] {
        zoneTrackers[site]?.advance(nowMicros: nowMicros, applyingAtMost: limit) ?? []
    }

    /// The sites', for when no batch arrives (idle agents stop holding a site back).
    public mutating func advanceZones(sites: Set<String>, nowMicros: Int64) -> [ZoneChange] {
        sites.sorted().flatMap { advanceZones(site: $0, nowMicros: nowMicros) }
    }

    /// The beacons placed in a zone of `site` now (`SiteZoneTracker.placements`).
    public func placements(site: String) -> [(beaconID: String, zone: String, enterMicros: Int64)] {
        zoneTrackers[site]?.placements ?? []
    }

    /// `SiteZoneTracker.finish()` of the sites (nil: of every site), for the end of the data.
    public mutating func finishZones(sites: Set<String>? = nil, closingVisits: Bool = false) -> [ZoneChange] {
        (sites.map { $0.sorted() } ?? zoneTrackers.keys.sorted()).flatMap { zoneTrackers[$0]?.finish(closingVisits: closingVisits) ?? [] }
    }
}
