import Testing

@testable import BeaconIngest

/// The pipeline keeps one copy of each beacon id for all its tables.
struct BeaconIDInternerTests {
    /// Where a string's bytes live (nil for one stored inline).
    static func storage(_ text: String) -> UnsafeRawPointer? {
        var copy = text
        return copy.withUTF8 { $0.count > BeaconIDInterner.inlineBytes ? UnsafeRawPointer($0.baseAddress) : nil }
    }

    static func fresh(_ text: String) -> String { String(decoding: Array(text.utf8), as: UTF8.self) }

    @Test func equalIdsShareOneCopy() throws {
        let id = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
        let first = Self.fresh(id), second = Self.fresh(id)
        #expect(try #require(Self.storage(first)) != Self.storage(second), "two batches spell an id out twice")
        var interner = BeaconIDInterner()
        let kept = interner.intern(first, holdingAtMost: 10)
        let again = interner.intern(second, holdingAtMost: 10)
        #expect(again == id && Self.storage(again) == Self.storage(kept) && Self.storage(kept) == Self.storage(first))
        // Another id keeps its own.
        let other = interner.intern(Self.fresh("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3"), holdingAtMost: 10)
        #expect(Self.storage(other) != Self.storage(kept))
    }

    @Test func shortIdsAndAFullCacheAreHarmless() throws {
        var interner = BeaconIDInterner()
        #expect(interner.intern("mac:c0ffee", holdingAtMost: 1) == "mac:c0ffee")
        let a = interner.intern(Self.fresh("eddystone:00112233445566778899:aabbccddeeff"), holdingAtMost: 1)
        // Past its bound the cache starts afresh: the next copy of the same id is kept instead, still equal.
        _ = interner.intern(Self.fresh("eddystone:00112233445566778899:aabbccddee00"), holdingAtMost: 1)
        let later = Self.fresh("eddystone:00112233445566778899:aabbccddeeff")
        let b = interner.intern(later, holdingAtMost: 1)
        #expect(a == b && Self.storage(b) == Self.storage(later) && Self.storage(b) != Self.storage(a))
    }
}
