import LibPQ

/// How a restart picked up each site's zone state.
public struct ZoneResumption: Sendable {
    /// Sites restored from their checkpoint, with the stored sightings read back after it.
    public var restoredSites = 0
    public var replayedSightings = 0
    /// The most stored readings a site's zone tracker held at once while reading them back.
    public var peakPendingReadings = 0
    /// The most stored sightings read into memory at once (a page).
    public var peakReadSightings = 0
    /// Sites whose checkpoint could not be used, with why (they resume from their open visits).
    public var unusableCheckpoints: [(site: String, error: CheckpointError)] = []
    /// Saved battery states that could not be read (their beacons' forecasts start afresh).
    public var unreadableBatteryStates = 0

    public init() {}
}

/// Restores sites' zone trackers from the database (`resume`).
struct ZoneResumer {
    let store: ZoneStore
    /// Called after each page read back and each page of readings applied: the read-back is progress, so the
    /// writer counts as turning (busy, not stuck) however long a large backlog takes.
    var pageApplied: () -> Void = {}

    /// How much event time one read of `replaySightings` covers at most, and how many sightings it aims at: a
    /// window that returned more makes the next one shorter (down to a second), so a busy stretch is read in
    /// pieces; each window is read in pages.
    static let replayWindowMicros: Int64 = 60_000_000
    static let replayWindowSightings = 50_000
    /// The most sightings read into memory at once, whatever their times: a window is read in pages of this many.
    static let replayPageSightings = 50_000

    /// Restores the sites' zone trackers from the checkpoint each site's last transaction with counted minutes
    /// saved and reads back the site's sightings stored after it, so that the zone tables come out as if one
    /// process had served the site throughout. A site that has not counted a minute yet reads back all its
    /// sightings. A site without a usable checkpoint that has counted minutes (a database written before
    /// checkpoints, an edited sites file) resumes from its open visits and last counted minute. What the trackers
    /// held before is dropped: the database is the reference.
    func resume(sites: Set<String>, into pipeline: inout IngestPipeline, nowMicros: Int64) throws(PostgresError) -> ZoneResumption {
        var resumption = ZoneResumption()
        pipeline.resetZones(sites: sites)
        var restored: Set<String> = []
        for checkpoint in try store.checkpoints(sites: sites) {
            // Read like wire input: a watermark out of range is damage, as is any value of the state.
            let watermark: Int64
            do throws(CheckpointError) {
                guard let time = checkpoint.watermarkMicros, let state = checkpoint.state else {
                    throw CheckpointError(code: .damaged, offset: 0)
                }
                try pipeline.restoreZones(site: checkpoint.site, checkpoint: state)
                watermark = time
            } catch {
                resumption.unusableCheckpoints.append((checkpoint.site, error))
                continue
            }
            restored.insert(checkpoint.site)
            resumption.restoredSites += 1
            let replay = try replaySightings(site: checkpoint.site, after: watermark, into: &pipeline, arrivalMicros: nowMicros)
            resumption.replayedSightings += replay.sightings
            resumption.peakPendingReadings = max(resumption.peakPendingReadings, replay.peakPending)
            resumption.peakReadSightings = max(resumption.peakReadSightings, replay.peakRead)
        }
        var others = sites.subtracting(restored)
        let lastMinutes = others.isEmpty ? [:] : try store.lastCountedMinutes(sites: others)
        for site in others.sorted() where lastMinutes[site] == nil {
            let replay = try replaySightings(site: site, after: nil, into: &pipeline, arrivalMicros: nowMicros)
            resumption.replayedSightings += replay.sightings
            resumption.peakPendingReadings = max(resumption.peakPendingReadings, replay.peakPending)
            resumption.peakReadSightings = max(resumption.peakReadSightings, replay.peakRead)
            others.remove(site)
        }
        if !others.isEmpty {
            pipeline.resumeZones(
                openVisits: try store.openVisits(sites: others), lastCountedMinutes: lastMinutes, sites: others,
                nowMicros: nowMicros)
        }
        return resumption
    }

    /// Gives a site's zone tracker the sightings stored after `watermark` (nil: all of them), a window of event
    /// time at a time, each window a page of at most `replayPageSightings` at a time; their agents count as live
    /// from `arrivalMicros`. After each page the tracker applies what every agent has passed, and the zone rows
    /// that moves are written (upserts: the previous owner may have written them already), so the readings held
    /// in memory stay within about a page whatever the backlog and whatever its times. More than a page of
    /// readings at one instant (which no radio hears) are applied as a page holds them; the rest of that instant
    /// counts as late, as it does when it arrives after the instant was applied live.
    /// Returns the number of sightings, the most readings the tracker held at once and the most read at once.
    private func replaySightings(
        site: String, after watermark: Int64?, into pipeline: inout IngestPipeline, arrivalMicros: Int64
    ) throws(PostgresError) -> (sightings: Int, peakPending: Int, peakRead: Int) {
        guard let (oldest, newest) = try store.sightingTimes(site: site, after: watermark) else { return (0, 0, 0) }
        var from = max(watermark ?? .min, oldest - 1)
        var replayed = 0
        var peakPending = 0
        var peakRead = 0
        var window = Self.replayWindowMicros
        var newestByAgent: [String: Int64] = [:]
        while from < newest {
            let through = from + min(window, newest - from)
            var count = 0
            try store.forEachSightingPage(site: site, after: from, through: through, pageSize: Self.replayPageSightings) {
                (readings, more) throws(PostgresError) in
                let times = readings.values.joined().map(\.timeMicros)
                let last = times.max() ?? .min
                peakRead = max(peakRead, times.count)
                // A page that ends inside an instant leaves that instant's readings to the next page, so that they
                // are applied together, unless the whole page is that instant.
                let passed = more && times.contains { $0 < last } ? last - 1 : last
                for (agent, list) in readings {
                    count += list.count
                    pipeline.replayZoneReadings(list, agent: AgentKey(site: site, agent: agent))
                    newestByAgent[agent] = max(newestByAgent[agent] ?? .min, min(passed, list.map(\.timeMicros).max() ?? .min))
                }
                peakPending = max(peakPending, pipeline.zoneTrackers[site]?.pendingReadings ?? 0)
                for (agent, time) in newestByAgent {
                    pipeline.agentProgressed(AgentKey(site: site, agent: agent), newestMicros: time, arrivalMicros: arrivalMicros)
                }
                // Readings held back by an agent behind the others may all be passed at once: a page at a time.
                repeat {
                    try store.write(pipeline.advanceZones(site: site, nowMicros: arrivalMicros, applyingAtMost: Self.replayPageSightings))
                    pageApplied()
                } while pipeline.zoneTrackers[site]?.hasReadyReadings == true
            }
            replayed += count
            from = through
            window = max(1_000_000, min(Self.replayWindowMicros, window * Int64(Self.replayWindowSightings) / Int64(max(count, 1))))
        }
        return (replayed, peakPending, peakRead)
    }
}
