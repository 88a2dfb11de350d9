import BeaconWire
import LibCrypto

/// Turns advertising reports into sightings: which beacon, how loud, and any data frame worth sending.
///
/// `FrameClassifier` decides which frames name the beacon (Eddystone UID/EID, iBeacon, AltBeacon) and which carry
/// data without identity (Eddystone URL/TLM/eTLM, BTHome, GATT service data, Ruuvi). Data frames are attached to
/// the identity last seen from the same address within `associationWindowMicroseconds`, as Eddystone intends, and
/// otherwise to `mac:<address>` (or `anon:<keyed hash>` when the site pseudonymises addresses). Devices with neither
/// are left out unless `includeUnknownDevices` is set. A pure state machine.
public struct SightingExtractor: Sendable {
    public struct Configuration: Sendable {
        public var associationWindowMicroseconds = BeaconIdentity.associationWindowMicros
        /// Also report devices that send no beacon or sensor frame, as `mac:`/`anon:` sightings.
        public var includeUnknownDevices = false
        /// Also report devices that advertise from a resolvable private address (phones, watches), for the ingest to
        /// resolve with the registry's identity resolving keys.
        public var includePrivateAddresses = false
        /// When not empty, only beacons whose id or address starts with one of these are kept.
        public var allow: [String] = []
        /// Beacons whose id or address starts with one of these are dropped (checked after `allow`).
        public var deny: [String] = []
        /// The site's key for pseudonymising addresses (HMAC-SHA256); nil keeps `mac:<address>`.
        public var pseudonymKey: [UInt8]?

        public init() {}
    }

    /// Why an advertisement gave no sighting, for metrics (a bounded set of labels).
    public enum Skip: String, Sendable, CaseIterable {
        case malformed
        case unknownDevice = "unknown_device"
        case filtered
    }

    public var configuration: Configuration
    private var identities: [UInt64: KnownIdentity] = [:]
    private var lastPrune: Int64?
    /// Each report's classification, kept from one report to the next (`FrameClassifier.classify(_:into:)`).
    private var classified = ClassifiedAdvertisement()

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The identity last heard from an address, with the frame it was decoded from: a beacon repeats the same
    /// identity frame, and the same frame gives the same key without formatting its id again.
    private struct KnownIdentity {
        var key: BeaconKey
        var timeMicros: Int64
        var frame: IdentityFrame
    }

    /// The key made earlier from exactly this frame at this address, if any.
    private func repeatedIdentity(_ frame: IdentityFrame, address: DeviceAddress) -> BeaconKey? {
        guard let known = identities[address.value], known.frame == frame,
            known.key.addressIsRandom == (address.kind == .random),
            known.key.address == (configuration.pseudonymKey == nil ? address.value : 0)
        else { return nil }
        return known.key
    }

    /// The sighting of one report, or why there is none.
    public mutating func sighting(
        of report: AdvertisingReport, timeMicros: Int64
    ) -> Result<Sighting, SkipReason> {
        // A level no radio reports (the controller's "not available", 127, is nil already): the ingest would refuse
        // the whole batch for it.
        if let rssi = report.rssi, !BatchReader.rssiRange.contains(rssi) {
            return .failure(SkipReason(skip: .malformed, error: nil))
        }
        do {
            try FrameClassifier.classify(report.data[...], into: &classified)
        } catch {
            return .failure(SkipReason(skip: .malformed, error: error))
        }
        let address = report.address
        var identity: BeaconKey?
        if let frame = classified.identity {
            identity = repeatedIdentity(frame, address: address) ?? key(of: frame, address)
        }
        let content = classified.data
        prune(now: timeMicros)
        var beacon: BeaconKey
        if let identity, let frame = classified.identity {
            identities[address.value] = KnownIdentity(key: identity, timeMicros: timeMicros, frame: frame)
            beacon = identity
        } else if let known = identities[address.value],
            elapsed(from: known.timeMicros, to: timeMicros) <= configuration.associationWindowMicroseconds
        {
            beacon = known.key
        } else if !content.isEmpty || configuration.includeUnknownDevices
            || (configuration.includePrivateAddresses && ResolvablePrivateAddress.isResolvable(address))
        {
            beacon = anonymousKey(address)
        } else if let malformed = classified.malformed {
            return .failure(SkipReason(skip: .malformed, error: malformed))
        } else {
            return .failure(SkipReason(skip: .unknownDevice, error: nil))
        }
        guard isAllowed(beacon, address) else { return .failure(SkipReason(skip: .filtered, error: nil)) }
        beacon.advertisingEvent = report.advertisingEvent
        return .success(Sighting(timeMicros: timeMicros, beacon: beacon, rssi: report.rssi ?? -127, frames: content))
    }

    /// The beacon a device at `address` is, as of `timeMicros`: its identity when one was heard from it within
    /// the association window, else `mac:`/`anon:` (for GATT reads of a polled device).
    public func beaconKey(for address: DeviceAddress, timeMicros: Int64) -> BeaconKey {
        if let known = identities[address.value],
            elapsed(from: known.timeMicros, to: timeMicros) <= configuration.associationWindowMicroseconds
        {
            return known.key
        }
        return anonymousKey(address)
    }

    public struct SkipReason: Error, Sendable {
        public var skip: Skip
        public var error: DecodeError?
    }

    /// The key an identity frame gives the beacon at `address`.
    private func key(of frame: IdentityFrame, _ address: DeviceAddress) -> BeaconKey {
        let power: Int8
        switch frame {
        // Eddystone's tx power is at 0 m; 41 dB is the loss over the first metre (Eddystone spec).
        case .eddystoneUID(let uid): power = Int8(clamping: Int(uid.txPower) - 41)
        case .eddystoneEID(let txPower, _): power = Int8(clamping: Int(txPower) - 41)
        case .iBeacon(let beacon): power = beacon.measuredPower
        case .altBeacon(let beacon): power = beacon.referenceRSSI
        }
        // Without a binary id (an AltBeacon id1 of a length it cannot carry), the frame's text names it.
        let identity = frame.identity
        return key(identity?.description ?? frame.frame.beaconID ?? "", identity, address, power: power)
    }

    private func key(_ beaconID: String, _ identity: BeaconIdentity?, _ address: DeviceAddress, power: Int8?) -> BeaconKey {
        let hidden = configuration.pseudonymKey != nil
        return BeaconKey(
            beaconID: beaconID, identity: identity, address: hidden ? 0 : address.value,
            addressIsRandom: address.kind == .random, powerAt1mDbm: power)
    }

    private func anonymousKey(_ address: DeviceAddress) -> BeaconKey {
        let identity: BeaconIdentity
        if let secret = configuration.pseudonymKey {
            identity = .pseudonym(LibCrypto.hmacSHA256(key: secret, message: address.bytes))
        } else {
            identity = .device(address)
        }
        return key(identity.description, identity, address, power: nil)
    }

    private func isAllowed(_ beacon: BeaconKey, _ address: DeviceAddress) -> Bool {
        if configuration.allow.isEmpty, configuration.deny.isEmpty { return true }
        let names = [beacon.beaconID, address.description, address.description.lowercased()]
        func matches(_ prefixes: [String]) -> Bool {
            prefixes.contains { prefix in names.contains { $0.hasPrefix(prefix) } }
        }
        if !configuration.allow.isEmpty, !matches(configuration.allow) { return false }
        return !matches(configuration.deny)
    }

    /// Forgets addresses not heard for a window, at most once per window: memory stays bounded by the devices
    /// heard recently.
    private mutating func prune(now: Int64) {
        let window = configuration.associationWindowMicroseconds
        if let lastPrune, elapsed(from: lastPrune, to: now) < window { return }
        lastPrune = now
        identities = identities.filter { elapsed(from: $0.value.timeMicros, to: now) <= window }
    }

    /// `later - earlier`, saturating: capture timestamps are input, and may be anything.
    private func elapsed(from earlier: Int64, to later: Int64) -> Int64 {
        let (difference, overflow) = later.subtractingReportingOverflow(earlier)
        return overflow ? (later > earlier ? .max : .min) : difference
    }
}
