import BeaconWire

/// A batch with its event times: each sighting's and read's time less its agent's clock offset (`AgentClocks`),
/// computed once when the writer takes the batch (`IngestPipeline.timed`), and the UTC days they fall on, which
/// the partition budget and the partitions made before its transaction both use.
public struct TimedBatch: Sendable {
    public let batch: DecodedBatch
    /// In the order of `batch.sightings` and `batch.characteristicReads`.
    public let sightingTimes: [Int64]
    public let readTimes: [Int64]
    /// Unix days.
    public let days: Set<Int64>

    init(_ batch: DecodedBatch, offsetMicros: Int64) {
        self.batch = batch
        sightingTimes = batch.sightings.map { $0.timeMicros - offsetMicros }
        readTimes = batch.characteristicReads.map { $0.timeMicros - offsetMicros }
        let day = { (time: Int64) in time.floorDivided(by: 86_400_000_000) }
        days = Set(sightingTimes.lazy.map(day)).union(readTimes.lazy.map(day))
    }
}

extension IngestPipeline {
    /// The batch's event times, by its agent's clock offset as measured now.
    public func timed(_ batch: DecodedBatch) -> TimedBatch {
        TimedBatch(batch, offsetMicros: clocks.offset(AgentKey(site: batch.siteID, agent: batch.agentID)))
    }
}
