import BeaconWire

/// A deterministic corpus of advertising payloads laid end to end, as a scanner sees them: 40 % Eddystone-UID,
/// 20 % Eddystone-URL, 20 % Eddystone-TLM and 20 % iBeacon, each wrapped in the AD structures real beacons send
/// (flags, the 0xFEAA service list, then the service data; flags then manufacturer data for iBeacon).
public struct Corpus: Sendable {
    public enum Mix: Sendable {
        case mixed
        case uid
        case tlm
        case iBeacon
        case url
    }

    public let bytes: [UInt8]
    public let lengths: [UInt16]
    /// Start of each payload in `bytes`.
    public let offsets: [Int]

    public var count: Int { lengths.count }

    public init(count: Int, mix: Mix = .mixed) {
        var bytes: [UInt8] = []
        var lengths: [UInt16] = []
        var offsets: [Int] = []
        bytes.reserveCapacity(count * 30)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            // splitmix64: deterministic, no Foundation.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let eddystoneHeader: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE]
        let urls = ["https://example.com/", "http://www.beacon.org/a7", "https://goo.gl/S6zT6P", "https://x.info"]
        for _ in 0..<count {
            let r = next()
            let pick: Mix
            switch mix {
            case .mixed:
                switch r % 10 {
                case 0...3: pick = .uid
                case 4, 5: pick = .url
                case 6, 7: pick = .tlm
                default: pick = .iBeacon
                }
            default: pick = mix
            }
            var payload: [UInt8]
            switch pick {
            case .uid:
                let frame: [UInt8] = [0x00, 0xEC] + (0..<10).map { UInt8(truncatingIfNeeded: r >> ($0 % 8 * 8)) } + (0..<6).map { UInt8(truncatingIfNeeded: r >> ($0 * 3)) } + [0, 0]
                payload = eddystoneHeader + [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame
            case .url:
                let frame: [UInt8] = [0x10, 0xEC] + EddystoneURL.encode(urls[Int(r >> 8) % urls.count])!
                payload = eddystoneHeader + [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame
            case .tlm:
                let tlm = EddystoneTLM(batteryMillivolts: 2800 + UInt16(r % 400), temperatureRaw: Int16(truncatingIfNeeded: r >> 16) & 0x1FFF, advertisingCount: UInt32(truncatingIfNeeded: r >> 20), uptimeTenths: UInt32(truncatingIfNeeded: r >> 32))
                let frame: [UInt8] = [0x20, 0x00] + tlm.fieldBytes
                payload = eddystoneHeader + [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame
            case .iBeacon, .mixed:
                let beacon = IBeacon(uuidHigh: 0xE2C5_6DB5_DFFB_48D2, uuidLow: 0xB060_D0F5_A710_96E0, major: UInt16(truncatingIfNeeded: r), minor: UInt16(truncatingIfNeeded: r >> 16), measuredPower: -59)
                payload = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00] + beacon.payload
            }
            offsets.append(bytes.count)
            lengths.append(UInt16(payload.count))
            bytes += payload
        }
        self.bytes = bytes
        self.lengths = lengths
        self.offsets = offsets
    }
}
