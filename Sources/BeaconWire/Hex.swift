extension Sequence where Element == UInt8 {
    /// Lowercase hexadecimal, two digits a byte, no separators.
    public var hexString: String {
        var out = ""
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.unicodeScalars.append(hexDigits[Int(byte >> 4)])
            out.unicodeScalars.append(hexDigits[Int(byte & 0x0F)])
        }
        return out
    }
}

private let hexDigits: [Unicode.Scalar] = Array("0123456789abcdef".unicodeScalars)

/// Lowercase hexadecimal of the low `digits` nibbles of `value`, zero-padded.
public func hexString(_ value: UInt64, digits: Int) -> String {
    var out = ""
    out.reserveCapacity(digits)
    var shift = (digits - 1) * 4
    while shift >= 0 {
        out.unicodeScalars.append(hexDigits[Int((value >> UInt64(shift)) & 0xF)])
        shift -= 4
    }
    return out
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
