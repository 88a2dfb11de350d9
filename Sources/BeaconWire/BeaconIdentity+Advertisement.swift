extension BeaconIdentity {
    /// The calibrated level at 1 m most beacons are sent with, for a frame whose source does not say its own.
    public static let usualPowerAt1m: Int8 = -59

    /// The advertising data of the frame that carries this identity, as its beacon would send it: an iBeacon
    /// (Apple's company id), an AltBeacon (company id 0xFFFF, the one reserved for tests: an id does not say whose
    /// beacon it is) or an Eddystone UID, each with `powerAt1m` as its calibrated level (Eddystone's is at 0 m, 41 dB
    /// above). Empty for a device address (the device is its address); nil for an EID or a pseudonym, which no
    /// frame carries as they are, and for an AltBeacon id other than 16 bytes, two and two.
    public func advertisingData(powerAt1m: Int8) -> [UInt8]? {
        func structure(_ type: UInt8, _ content: [UInt8]) -> [UInt8] { [UInt8(content.count + 1), type] + content }
        let power = UInt8(bitPattern: powerAt1m)
        switch kind {
        case .iBeacon:
            return structure(0xFF, [0x4C, 0x00, 0x02, 0x15] + bytes + [power])
        case .altBeacon:
            guard bytes.count == 20 else { return nil }
            return structure(0xFF, [0xFF, 0xFF, 0xBE, 0xAC] + bytes + [power, 0])
        case .eddystone:
            let atZero = UInt8(bitPattern: Int8(clamping: Int(powerAt1m) + 41))
            return structure(0x16, [0xAA, 0xFE, 0x00, atZero] + bytes + [0, 0])
        case .mac:
            return []
        case .eid, .anon:
            return nil
        }
    }
}
