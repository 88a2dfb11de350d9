/// A dictionary whose changes since `beginTransaction()` can be undone. It keeps the previous value of each key the first
/// time the key changes, so undoing costs what changed, not a copy of everything: the per-beacon tables of the
/// pipeline grow with the beacons tracked, while a transaction touches only the beacons of its batches.
struct JournaledDictionary<Key: Hashable & Sendable, Value: Sendable>: Sendable, Sequence {
    private var storage: [Key: Value] = [:]
    /// Previous values (nil: the key was absent), while recording.
    private var journal: [Key: Value?] = [:]
    private var recording = false

    subscript(key: Key) -> Value? {
        get { storage[key] }
        set {
            remember(key)
            storage[key] = newValue
        }
    }

    /// Changes the value of `key` (nil: absent) in place: one lookup of the table, instead of a read and a write.
    mutating func update<Result>(_ key: Key, _ body: (inout Value?) throws -> Result) rethrows -> Result {
        remember(key)
        return try body(&storage[key])
    }

    /// Swaps the value of `key` with `value` (a placeholder going in), and returns where to put it back
    /// (`checkIn`) once changed; nil, and `value` unchanged, where the key is absent. Meanwhile the value holds the
    /// only reference to its storage, so changing its arrays copies nothing, and no key is hashed again. Nothing
    /// else may change the table in between.
    mutating func checkOut(_ key: Key, swapping value: inout Value) -> Dictionary<Key, Value>.Index? {
        remember(key)
        guard let slot = storage.index(forKey: key) else { return nil }
        swap(&value, &storage.values[slot])
        return slot
    }

    /// Puts back a value `checkOut` moved out.
    mutating func checkIn(_ value: Value, at slot: Dictionary<Key, Value>.Index) {
        storage.values[slot] = value
    }

    var count: Int { storage.count }
    var keys: Dictionary<Key, Value>.Keys { storage.keys }
    func makeIterator() -> Dictionary<Key, Value>.Iterator { storage.makeIterator() }

    mutating func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        for (key, value) in storage where shouldRemove(key, value) {
            remember(key)
            storage[key] = nil
        }
    }

    /// Keeps at most `maximum` entries: past it, forgets those with the oldest `time`, down to nine tenths of the
    /// maximum (so that the sort is paid once per tenth of it). Returns how many it forgot.
    @discardableResult
    mutating func evictOldest(keeping maximum: Int, by time: (Value) -> Int64) -> Int {
        guard storage.count > maximum else { return 0 }
        let excess = storage.count - maximum + maximum / 10
        let oldest = storage.map { (time: time($0.value), key: $0.key) }.sorted { $0.time < $1.time }.prefix(excess)
        for entry in oldest {
            remember(entry.key)
            storage[entry.key] = nil
        }
        return oldest.count
    }

    /// Starts recording; what changes from here can be undone by `rollbackTransaction()`.
    mutating func beginTransaction() {
        journal.removeAll()
        recording = true
    }

    /// Keeps the changes and stops recording.
    mutating func commitTransaction() {
        journal.removeAll()
        recording = false
    }

    /// Restores every key changed since `beginTransaction()` and stops recording.
    mutating func rollbackTransaction() {
        for (key, previous) in journal { storage[key] = previous }
        journal.removeAll()
        recording = false
    }

    private mutating func remember(_ key: Key) {
        guard recording, journal.index(forKey: key) == nil else { return }
        journal[key] = .some(storage[key])
    }
}
