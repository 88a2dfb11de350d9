/// A bounds-checked cursor over bytes. Every read either succeeds or throws a `DecodeError` that names the field
/// and its offset; nothing traps on short input.
///
/// `base` is the offset of `bytes.startIndex` in the caller's input, so errors carry input-relative offsets.
@usableFromInline
struct ByteReader {
    @usableFromInline let bytes: ArraySlice<UInt8>
    @usableFromInline var index: Int
    @usableFromInline let base: Int

    @inlinable
    init(_ bytes: ArraySlice<UInt8>, base: Int = 0) {
        self.bytes = bytes
        self.index = bytes.startIndex
        self.base = base
    }

    /// Offset of the cursor in the caller's input.
    @inlinable var offset: Int { base + (index - bytes.startIndex) }
    @inlinable var remaining: Int { bytes.endIndex - index }
    @inlinable var isAtEnd: Bool { index >= bytes.endIndex }

    @inlinable
    func need(_ count: Int, for field: StaticString) throws(DecodeError) {
        if remaining < count {
            throw DecodeError(
                .truncated, at: offset,
                "\(field) needs \(count) byte\(count == 1 ? "" : "s"), \(remaining) left")
        }
    }

    @inlinable
    mutating func u8(_ field: StaticString) throws(DecodeError) -> UInt8 {
        try need(1, for: field)
        defer { index += 1 }
        return bytes[index]
    }

    @inlinable
    mutating func i8(_ field: StaticString) throws(DecodeError) -> Int8 {
        Int8(bitPattern: try u8(field))
    }

    @inlinable
    mutating func u16be(_ field: StaticString) throws(DecodeError) -> UInt16 {
        try need(2, for: field)
        defer { index += 2 }
        return UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
    }

    @inlinable
    mutating func u16le(_ field: StaticString) throws(DecodeError) -> UInt16 {
        try need(2, for: field)
        defer { index += 2 }
        return UInt16(bytes[index + 1]) << 8 | UInt16(bytes[index])
    }

    @inlinable
    mutating func u24le(_ field: StaticString) throws(DecodeError) -> UInt32 {
        try need(3, for: field)
        defer { index += 3 }
        return UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index])
    }

    @inlinable
    mutating func u32be(_ field: StaticString) throws(DecodeError) -> UInt32 {
        try need(4, for: field)
        defer { index += 4 }
        return UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16
            | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
    }

    @inlinable
    mutating func u32le(_ field: StaticString) throws(DecodeError) -> UInt32 {
        try need(4, for: field)
        defer { index += 4 }
        return UInt32(bytes[index + 3]) << 24 | UInt32(bytes[index + 2]) << 16
            | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index])
    }

    /// Reads `count` bytes as one big-endian unsigned integer (`count` ≤ 8).
    @inlinable
    mutating func uintBE(_ count: Int, _ field: StaticString) throws(DecodeError) -> UInt64 {
        try need(count, for: field)
        var value: UInt64 = 0
        for i in index..<(index + count) { value = value << 8 | UInt64(bytes[i]) }
        index += count
        return value
    }

    /// Reads `count` bytes as one little-endian unsigned integer (`count` ≤ 8).
    @inlinable
    mutating func uintLE(_ count: Int, _ field: StaticString) throws(DecodeError) -> UInt64 {
        try need(count, for: field)
        var value: UInt64 = 0
        var i = index + count
        while i > index {
            i -= 1
            value = value << 8 | UInt64(bytes[i])
        }
        index += count
        return value
    }

    @inlinable
    mutating func slice(_ count: Int, _ field: StaticString) throws(DecodeError) -> ArraySlice<UInt8> {
        try need(count, for: field)
        defer { index += count }
        return bytes[index..<(index + count)]
    }

    @inlinable
    mutating func rest() -> ArraySlice<UInt8> {
        defer { index = bytes.endIndex }
        return bytes[index...]
    }

    @inlinable
    mutating func skip(_ count: Int, _ field: StaticString) throws(DecodeError) {
        try need(count, for: field)
        index += count
    }
}
