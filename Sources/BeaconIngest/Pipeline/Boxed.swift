/// A value held on the heap and copied on write, like the standard collections: a part of a struct that few of
/// its values have costs one reference in each of them.
struct Boxed<Value: Sendable>: Sendable {
    private final class Storage: @unchecked Sendable {
        // Mutated only through a uniquely held reference (`value`'s accessors), as an array's buffer is.
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var storage: Storage

    init(_ value: Value) { storage = Storage(value) }

    var value: Value {
        get { storage.value }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.value) }
            yield &storage.value
        }
    }
}
