import BeaconWire

/// Phones and watches by their identity resolving keys (the registry's `irk`): a `mac:` sighting from a
/// resolvable private address is the registry beacon whose IRK resolves it, whatever address the device has
/// rotated to. Each address is tried once against every key (one AES block each) and the answer kept, at most
/// `maximumRemembered` addresses (then they are forgotten all at once and tried again as they come).
public struct PrivateAddressResolver: Sendable {
    private var keys: [(beaconID: String, irk: [UInt8])]
    private var answers: [UInt64: String?] = [:]
    public var maximumRemembered = 100_000

    public init(keys: [(beaconID: String, irk: [UInt8])]) {
        self.keys = keys
    }

    public var isEmpty: Bool { keys.isEmpty }

    /// The registry beacon of a resolvable private address, if any key resolves it.
    public mutating func beaconID(of address: DeviceAddress) -> String? {
        guard !keys.isEmpty, ResolvablePrivateAddress.isResolvable(address) else { return nil }
        if let answer = answers[address.value] { return answer }
        if answers.count >= maximumRemembered { answers.removeAll(keepingCapacity: true) }
        let found = keys.first { ResolvablePrivateAddress.resolves(address, irk: $0.irk) }?.beaconID
        answers[address.value] = .some(found)
        return found
    }
}
