/// A dictionary whose changes since `beginTransaction()` can be undone. It keeps the previous value of each key the first
/// time the key changes, so undoing costs what changed, not a copy of everything: the per-beacon tables of the
/// pipeline grow with the beacons tracked, while a transaction touches only the beacons of its batches.
///
/// The values live in a dense array, and the hash table holds only each key and its value's slot: a hash table is
/// at most three quarters full and its size a power of two, so at 100,000 beacons it has 262,144 buckets, and a
/// value stored in the buckets would take 2.6 times its size.
struct JournaledDictionary<Key: Hashable & Sendable, Value: Sendable>: Sendable, Sequence {
    /// Where a value is, in `values`.
    typealias Slot = Int
    private var slots: [Key: Int32] = [:]
    private var values: ContiguousArray<Value?> = []
    /// Slots of `values` freed by removals, reused first.
    private var freeSlots: [Int32] = []
    /// Previous values (nil: the key was absent), while recording.
    private var journal: [Key: Value?] = [:]
    private var recording = false

    subscript(key: Key) -> Value? {
        get { slots[key].map { values[Int($0)]! } }
        set {
            remember(key)
            store(newValue, at: key)
        }
    }

    /// Changes the value of `key` (nil: absent) in place: one lookup of the table, instead of a read and a write.
    mutating func update<Result>(_ key: Key, _ body: (inout Value?) throws -> Result) rethrows -> Result {
        remember(key)
        if let slot = slots[key] {
            let result = try body(&values[Int(slot)])
            if values[Int(slot)] == nil { release(key, slot) }
            return result
        }
        var value: Value?
        let result = try body(&value)
        if let value { insert(value, at: key) }
        return result
    }

    /// Swaps the value of `key` with `value` (a placeholder going in), and returns where to put it back
    /// (`checkIn`) once changed; nil, and `value` unchanged, where the key is absent. Meanwhile the value holds the
    /// only reference to its storage, so changing its arrays copies nothing, and no key is hashed again. Nothing
    /// else may change the table in between.
    mutating func checkOut(_ key: Key, swapping value: inout Value) -> Slot? {
        remember(key)
        guard let slot = slots[key].map(Int.init) else { return nil }
        swap(&value, &values[slot]!)
        return slot
    }

    /// Puts back a value `checkOut` moved out, by swapping it with the placeholder (left in `value`): no reference
    /// it holds is counted again.
    mutating func checkIn(_ value: inout Value, at slot: Slot) {
        swap(&value, &values[slot]!)
    }

    var count: Int { slots.count }

    func makeIterator() -> Iterator { Iterator(slots: slots.makeIterator(), values: values) }

    struct Iterator: IteratorProtocol {
        fileprivate var slots: Dictionary<Key, Int32>.Iterator
        fileprivate let values: ContiguousArray<Value?>

        mutating func next() -> (key: Key, value: Value)? {
            slots.next().map { ($0.key, values[Int($0.value)]!) }
        }
    }

    mutating func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        for (key, value) in self where shouldRemove(key, value) {
            remember(key)
            store(nil, at: key)
        }
    }

    /// Keeps at most `maximum` entries: past it, forgets those with the oldest `time`, down to nine tenths of the
    /// maximum (so that the sort is paid once per tenth of it). Returns how many it forgot.
    @discardableResult
    mutating func evictOldest(keeping maximum: Int, by time: (Value) -> Int64) -> Int {
        guard slots.count > maximum else { return 0 }
        let excess = slots.count - maximum + maximum / 10
        let oldest = slots.map { (time: time(values[Int($0.value)]!), key: $0.key) }.sorted { $0.time < $1.time }.prefix(excess)
        for entry in oldest {
            remember(entry.key)
            store(nil, at: entry.key)
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
        for (key, previous) in journal { store(previous, at: key) }
        journal.removeAll()
        recording = false
    }

    private mutating func remember(_ key: Key) {
        guard recording, journal.index(forKey: key) == nil else { return }
        journal[key] = .some(self[key])
    }

    private mutating func store(_ value: Value?, at key: Key) {
        if let slot = slots[key] {
            if let value { values[Int(slot)] = value } else { release(key, slot) }
        } else if let value {
            insert(value, at: key)
        }
    }

    private mutating func insert(_ value: Value, at key: Key) {
        if let slot = freeSlots.popLast() {
            values[Int(slot)] = value
            slots[key] = slot
        } else {
            slots[key] = Int32(values.count)
            values.append(value)
        }
    }

    private mutating func release(_ key: Key, _ slot: Int32) {
        slots[key] = nil
        values[Int(slot)] = nil
        freeSlots.append(slot)
    }
}
