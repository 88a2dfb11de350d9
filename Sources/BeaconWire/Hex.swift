extension Sequence where Element == UInt8 {
    /// Lowercase hexadecimal, two digits a byte, no separators.
    public var hexString: String {
        withContiguousStorageIfAvailable { bytes in
            String(unsafeUninitializedCapacity: bytes.count * 2) { text in
                for (index, byte) in bytes.enumerated() {
                    text[2 * index] = hexDigit(byte >> 4)
                    text[2 * index + 1] = hexDigit(byte & 0x0F)
                }
                return bytes.count * 2
            }
        } ?? Array(self).hexString
    }
}

/// The ASCII code of a hexadecimal digit (0-15), lowercase.
@inline(__always)
func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }

/// Lowercase hexadecimal of the low `digits` nibbles of `value`, zero-padded.
public func hexString(_ value: UInt64, digits: Int) -> String {
    String(unsafeUninitializedCapacity: digits) { text in
        writeHex(value, digits: digits, into: text, at: 0)
        return digits
    }
}

/// Writes the low `digits` nibbles of `value` as lowercase hexadecimal at `offset`.
@inline(__always)
func writeHex(_ value: UInt64, digits: Int, into text: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
    for index in 0..<digits {
        text[offset + index] = hexDigit(UInt8(truncatingIfNeeded: value >> UInt64(4 * (digits - 1 - index))) & 0x0F)
    }
}

/// The low `count` bytes of `value`, most significant first.
func bigEndianBytes(_ value: UInt64, count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> UInt64(8 * (count - 1 - $0))) }
}

extension Array where Element == UInt8 {
    /// Parses hexadecimal text. Spaces, colons, dashes and a leading `0x` are ignored, so `"02 01 06"`,
    /// `"AA:BB"` and `"0x0201"` all work.
    public init(hex text: some StringProtocol) throws(DecodeError) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var pending: UInt8? = nil
        var utf8 = Array(text.utf8)
        if utf8.count >= 2, utf8[0] == UInt8(ascii: "0"), utf8[1] | 0x20 == UInt8(ascii: "x") {
            utf8.removeFirst(2)
        }
        for (position, char) in utf8.enumerated() {
            let nibble: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = char - UInt8(ascii: "A") + 10
            case UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "\n"), UInt8(ascii: "\t"):
                continue
            default:
                throw DecodeError(.invalidHex, at: position, "character at position \(position) is not a hex digit")
            }
            if let high = pending {
                bytes.append(high << 4 | nibble)
                pending = nil
            } else {
                pending = nibble
            }
        }
        if pending != nil {
            throw DecodeError(.invalidHex, at: utf8.count, "odd number of hex digits")
        }
        self = bytes
    }
}
