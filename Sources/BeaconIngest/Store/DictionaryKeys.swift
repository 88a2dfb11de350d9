/// The writer's cache of dictionary keys. Keys learned inside a transaction are kept apart until it commits: a
/// rolled-back transaction may have inserted them. Bounded: past `maximumEntries` it starts again empty.
struct DictionaryKeys {
    /// Entries cached of each dictionary at most; past it the cache starts afresh (keys are read back as needed).
    var maximumEntries = 1_000_000

    private(set) var sources: [SightingSource: Int32] = [:]
    private(set) var beacons: [String: Int32] = [:]
    private var pendingSources: [SightingSource: Int32] = [:]
    private var pendingBeacons: [String: Int32] = [:]

    func source(_ source: SightingSource) -> Int32? { sources[source] ?? pendingSources[source] }
    func beacon(_ beaconID: String) -> Int32? { beacons[beaconID] ?? pendingBeacons[beaconID] }

    mutating func learned(source: SightingSource, key: Int32) { pendingSources[source] = key }
    mutating func learned(beacon: String, key: Int32) { pendingBeacons[beacon] = key }

    mutating func beginTransaction() { rollbackTransaction() }

    mutating func commitTransaction() {
        if sources.count + pendingSources.count > maximumEntries { sources.removeAll() }
        if beacons.count + pendingBeacons.count > maximumEntries { beacons.removeAll() }
        sources.merge(pendingSources) { _, new in new }
        beacons.merge(pendingBeacons) { _, new in new }
        rollbackTransaction()
    }

    mutating func rollbackTransaction() {
        pendingSources.removeAll()
        pendingBeacons.removeAll()
    }
}
