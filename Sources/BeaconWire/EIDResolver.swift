/// Resolves Eddystone EIDs to their beacons and decrypts eTLM frames with a keyring, remembering what it learns;
/// the decoder and the ingest both resolve through it. An eTLM is decrypted with the key of the beacon it is
/// known to belong to, else of the EID last resolved from the same address within `pairingWindowSeconds`
/// (Eddystone's intended association), else by trying each key. A pure state machine, bounded.
public struct EIDResolver: Sendable {
    public var keyring: EddystoneKeyring {
        didSet { computedEIDs = EIDCandidates() }
    }
    /// How long an EID resolution stays usable for pairing eTLM frames from the same address, in seconds.
    public var pairingWindowSeconds: Int64 = 60
    /// Entries each table holds at most: past it the table starts afresh (what it forgot is resolved again).
    public var maximumRemembered = 200_000

    /// Resolutions by EID, and by the beacon id they resolved to (for its eTLM frames).
    private var byEID: [UInt64: EIDResolution] = [:]
    private var byBeacon: [String: EIDResolution] = [:]
    private var unresolvable: Set<UInt64> = []
    private var lastByAddress: [UInt64: (resolution: EIDResolution, unixSeconds: Int64)] = [:]
    /// The identities' EIDs around the times seen, by value: a cache of the keyring's (each a function of its key,
    /// exponent and period alone), which a copy saved earlier may take while its answers go back to what they were.
    public var computedEIDs = EIDCandidates()

    public init(keyring: EddystoneKeyring = EddystoneKeyring()) { self.keyring = keyring }

    public var isEmpty: Bool { keyring.isEmpty }

    /// The beacon an EID heard at `unixSeconds` (from `address`, when known) stands for, or nil without its key.
    /// With `remembering`, an EID once resolved (or not) is answered the same until forgotten, as for a stream
    /// where each EID recurs for its whole rotation period; without it each frame is resolved at its own time.
    public mutating func resolve(
        eid: UInt64, unixSeconds: Int64, address: DeviceAddress? = nil, remembering: Bool = false
    ) -> EIDResolution? {
        if remembering {
            if let known = byEID[eid] { return known }
            if unresolvable.contains(eid) { return nil }
        }
        guard let resolution = computedEIDs.resolve(eid, unixSeconds: unixSeconds, keyring: keyring, bound: maximumRemembered) else {
            if remembering { Self.insert(eid, into: &unresolvable, bound: maximumRemembered) }
            return nil
        }
        if remembering {
            Self.store(resolution, at: eid, in: &byEID, bound: maximumRemembered)
            Self.store(resolution, at: resolution.identity.beaconID, in: &byBeacon, bound: maximumRemembered)
        }
        if let address { Self.store((resolution, unixSeconds), at: address.value, in: &lastByAddress, bound: maximumRemembered) }
        return resolution
    }

    /// Decrypts an eTLM frame heard at `unixSeconds`, of `beaconID` when the sighting names its beacon, from
    /// `address` when known. Returns the telemetry and the beacon it belongs to.
    public func decrypt(
        _ frame: EddystoneETLM, beaconID: String? = nil, address: DeviceAddress? = nil, unixSeconds: Int64
    ) -> (tlm: EddystoneTLM, identity: EddystoneIdentity)? {
        if let beaconID, let resolution = byBeacon[beaconID], let tlm = keyring.decrypt(frame, pairedWith: resolution) {
            return (tlm, resolution.identity)
        }
        if let address, let paired = lastByAddress[address.value], unixSeconds - paired.unixSeconds <= pairingWindowSeconds,
            let tlm = keyring.decrypt(frame, pairedWith: paired.resolution)
        {
            return (tlm, paired.resolution.identity)
        }
        return keyring.decrypt(frame, unixSeconds: unixSeconds).map { ($0.0, $0.1) }
    }

    private static func store<Key: Hashable, Value>(_ value: Value, at key: Key, in table: inout [Key: Value], bound: Int) {
        if table.count >= bound, table[key] == nil { table.removeAll() }
        table[key] = value
    }

    private static func insert<Key: Hashable>(_ key: Key, into set: inout Set<Key>, bound: Int) {
        if set.count >= bound { set.removeAll() }
        set.insert(key)
    }
}
