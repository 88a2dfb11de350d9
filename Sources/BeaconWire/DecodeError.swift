/// A decoding failure: what went wrong, and the byte offset in the input where it was found.
///
/// Offsets count from the start of the input handed to the public entry point (the AD payload, the HCI event,
/// the capture file), so a user can find the byte in a hex dump.
public struct DecodeError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The input ended before a field that must be there.
        public static let truncated = Code(rawValue: "truncated")
        /// A length field points past the end of its container.
        public static let lengthOverrun = Code(rawValue: "length_overrun")
        /// A structure has a size its type does not allow.
        public static let invalidLength = Code(rawValue: "invalid_length")
        /// A field holds a value its specification reserves or forbids.
        public static let invalidValue = Code(rawValue: "invalid_value")
        /// A version field names a version this decoder does not know.
        public static let unsupportedVersion = Code(rawValue: "unsupported_version")
        /// A frame or packet type is not one this decoder knows.
        public static let unknownType = Code(rawValue: "unknown_type")
        /// A file does not start with the magic of its format.
        public static let badMagic = Code(rawValue: "bad_magic")
        /// A capture uses a link type or datalink this reader does not decode.
        public static let unsupportedDatalink = Code(rawValue: "unsupported_datalink")
        /// An authenticated frame's integrity check does not match (wrong key, or tampered data).
        public static let authenticationFailed = Code(rawValue: "authentication_failed")
        /// Text that should be hexadecimal is not.
        public static let invalidHex = Code(rawValue: "invalid_hex")
    }

    public var code: Code
    public var offset: Int
    public var message: String

    public init(_ code: Code, at offset: Int, _ message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }

    public var description: String { "\(code) at byte \(offset): \(message)" }

    /// The same error, with its offset moved by `base` (for a decoder that ran on a part of a larger input).
    public func shifted(by base: Int) -> DecodeError {
        DecodeError(code, at: offset + base, message)
    }
}
