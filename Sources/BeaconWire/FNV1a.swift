/// FNV-1a, 64 bits: a fast digest that is the same in every process, run and platform, for telling things apart
/// and naming them (batch contents, frames, sites files, object ids), not against an adversary.
public struct FNV1a: Sendable {
    @usableFromInline var state: UInt64 = 0xcbf2_9ce4_8422_2325

    @inlinable public var value: UInt64 { state }

    @inlinable public init() {}

    @inlinable public mutating func add(_ byte: UInt8) { state = (state ^ UInt64(byte)) &* 0x100_0000_01b3 }

    @inlinable public mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { add(byte) }
    }

    /// The low `byteCount` bytes of `word`, least significant first.
    @inlinable public mutating func add(littleEndian word: UInt64, byteCount: Int = 8) {
        for index in 0..<byteCount { add(UInt8(truncatingIfNeeded: word >> UInt64(8 * index))) }
    }

    /// The digest of `bytes` alone.
    @inlinable public static func digest(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var digest = FNV1a()
        digest.add(bytes)
        return digest.value
    }
}
