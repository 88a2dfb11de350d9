import BeaconWire

/// What the writer thread holds in memory about the data: the pipeline derived from the batches, each agent's
/// acknowledgement progress, the dictionary keys known, and the sites served. It outlives a PostgreSQL session:
/// the database layer (`BatchWriter`) keeps none of it and is handed it on every call. A transaction's changes to
/// the pipeline, the progress and the keys are rolled back with it (`TransactionalState`).
public struct WriterState: TransactionalState {
    public var pipeline: IngestPipeline
    public internal(set) var tracker = AcknowledgementTracker()
    var keys = DictionaryKeys()
    /// Agents whose progress was read from the database in this session.
    var loadedAgents: Set<AgentKey> = []
    /// The sites whose zones this writer moves: those whose leases its session holds (`BatchWriter.claim`).
    public internal(set) var servedSites: Set<String>
    /// Sites found taken over by another instance and not reported yet (`takeSitesLost`).
    var sitesLost: Set<String> = []

    /// `servedSites` nil: every site of the pipeline's sites file, without claiming them.
    public init(pipeline: IngestPipeline, servedSites: Set<String>? = nil) {
        self.pipeline = pipeline
        keys.maximumEntries = pipeline.maximumBeacons
        self.servedSites = servedSites ?? Set(pipeline.sites.sites.map(\.id))
    }

    /// The PostgreSQL session ended: its leases, and with them the sites served, went with it, and the progress
    /// and keys are read again in the next. The pipeline stays; a site claimed again resumes from the database.
    mutating func sessionEnded() {
        tracker = AcknowledgementTracker()
        keys = DictionaryKeys()
        keys.maximumEntries = pipeline.maximumBeacons
        loadedAgents = []
        servedSites = []
        sitesLost = []
    }

    /// The batch's event times, by its agent's clock offset as measured now (`IngestPipeline.timed`).
    public func timed(_ batch: DecodedBatch) -> TimedBatch { pipeline.timed(batch) }

    /// Stops serving sites whose lease is gone: their zone state and agents' progress are dropped
    /// (`BatchWriter.forget` lets the leases go too).
    mutating func forget(sites: Set<String>) {
        guard !sites.isEmpty else { return }
        servedSites.subtract(sites)
        pipeline.resetZones(sites: sites)
        pipeline.health.forgetRestoring(sites: sites)
        loadedAgents = loadedAgents.filter { !sites.contains($0.site) }
    }

    /// The sites found taken over by another instance since the last call: this writer no longer serves them.
    public mutating func takeSitesLost() -> Set<String> {
        defer { sitesLost = [] }
        return sitesLost
    }

    mutating func beginTransaction() { apply(.begin) }
    mutating func commitTransaction() { apply(.commit) }
    mutating func rollbackTransaction() { apply(.rollback) }

    private mutating func apply(_ step: TransactionStep) {
        pipeline.apply(step)
        tracker.apply(step)
        keys.apply(step)
    }
}

extension AcknowledgementTracker: TransactionalState {}
extension DictionaryKeys: TransactionalState {}
