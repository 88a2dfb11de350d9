/// Text from the network made safe for one log line: control characters (line breaks among them) and the Unicode
/// line and paragraph separators are written as `\u{XX}`, so that input can never start a line of its own.
public func escapedForLog(_ text: some StringProtocol) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
        switch scalar.value {
        case 0..<0x20, 0x7F..<0xA0, 0x2028, 0x2029:
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default:
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}
