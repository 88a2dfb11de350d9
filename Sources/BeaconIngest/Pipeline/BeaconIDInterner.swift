/// One copy of each beacon id the pipeline holds, so that its per-beacon tables (smoothing, zones, health,
/// addresses, deduplication) and the writer's dictionary share it, instead of each keeping the copy of the batch
/// it first came in: a batch spells out every id anew, and an id is 40-60 bytes on the heap. A cache: ids it
/// forgets are merely copied again.
struct BeaconIDInterner: Sendable {
    private var ids: Set<String> = []

    /// The copy of `id` held, or `id` itself from now on; past `limit` ids the cache starts afresh. Ids short
    /// enough to be stored inline are returned as they are.
    mutating func intern(_ id: String, holdingAtMost limit: Int) -> String {
        guard id.utf8.count > Self.inlineBytes else { return id }
        if ids.count >= limit { ids.removeAll(keepingCapacity: true) }
        return ids.insert(id).memberAfterInsert
    }

    /// The longest string Swift keeps inside the `String` value itself on 64-bit platforms.
    static let inlineBytes = 15
}
