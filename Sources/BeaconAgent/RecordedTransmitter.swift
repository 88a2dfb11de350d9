import BeaconWire

/// A recording's `transmitter` column (docs/recordings.md): a device address, a beacon id, or a name of the
/// recording's own. An address is the device itself. A beacon id (`ibeacon:`, `altbeacon:`, `eddystone:`, `mac:`)
/// is sent from an address of its own with the frame that carries it, so that the pipeline knows the beacon by that
/// id; a name is a device at an address of its own. Each address not given is a static random address derived from
/// the text, the same in every run.
public struct RecordedTransmitter: Sendable, Equatable {
    public var address: DeviceAddress
    /// What it sends where the recording kept no advertising data: the frame of its beacon id; nothing for an
    /// address or a name.
    public var data: [UInt8]
    /// The name it has in the recording, when it is neither an address nor a beacon id.
    public var name: String?

    /// The longest name, in bytes.
    public static let maximumNameBytes = 64

    /// The transmitter `text` names, or what is wrong with it.
    public static func read(_ text: Substring) throws(RecordingError) -> RecordedTransmitter {
        if looksLikeAddress(text) {
            guard let address = RecordingReader.address(text) else {
                throw RecordingError(line: 0, "transmitter '\(text.prefix(80))' is no address: AA:BB:CC:DD:EE:FF, or 12 hex digits, optionally /public or /random")
            }
            return RecordedTransmitter(address: address, data: [])
        }
        if let kind = BeaconIdentity.Kind(of: text) {
            guard let identity = BeaconIdentity(String(text)) else {
                throw RecordingError(line: 0, "transmitter '\(text.prefix(80))' is no \(kind.prefix.dropLast()) beacon id in its canonical form (docs/wire-format.md)")
            }
            if let address = identity.deviceAddress { return RecordedTransmitter(address: DeviceAddress(value: address, kind: .random), data: []) }
            // The usual level at 1 m: a recording does not say.
            guard let data = identity.advertisingData(powerAt1m: BeaconIdentity.usualPowerAt1m) else {
                throw RecordingError(line: 0, "transmitter '\(text.prefix(80))' names no frame a beacon sends (an EID is resolved from its key, a pseudonym from its data)")
            }
            return RecordedTransmitter(address: derivedAddress(text), data: data)
        }
        guard !text.isEmpty, text.utf8.count <= maximumNameBytes, text.unicodeScalars.allSatisfy({ !$0.properties.generalCategory.isControl }) else {
            throw RecordingError(line: 0, "transmitter '\(text.prefix(80))' is no address, beacon id or name of 1-\(maximumNameBytes) bytes")
        }
        return RecordedTransmitter(address: derivedAddress(text), data: [], name: String(text))
    }

    /// Whether `text` is meant as an address: with a `/` kind, 12 hex digits, or pairs of letters and digits
    /// between colons (a mistyped address is said, not taken as a name).
    static func looksLikeAddress(_ text: Substring) -> Bool {
        if text.contains("/") { return true }
        if text.count == 12, text.allSatisfy(\.isHexDigit) { return true }
        let groups = text.split(separator: ":", omittingEmptySubsequences: false)
        return groups.count > 1 && groups.allSatisfy { $0.count == 2 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    }

    /// A static random address (the two top bits set) from a digest of `text`.
    static func derivedAddress(_ text: Substring) -> DeviceAddress {
        DeviceAddress(value: FNV1a.digest(text.utf8) & 0x3FFF_FFFF_FFFF | 0xC000_0000_0000, kind: .random)
    }
}

extension Unicode.GeneralCategory {
    fileprivate var isControl: Bool { self == .control || self == .format || self == .lineSeparator || self == .paragraphSeparator }
}
