/// A digest of what a batch says (its sightings and reads, not its header or encoding), the same in every process
/// and run: a batch sent again carries the same content even when its header changed (a resend names the oldest
/// unacknowledged batch anew) or it was encoded in another format version. FNV-1a, 64 bits: it tells a
/// redelivery from a reused sequence, which no adversary gains by forging (both are refused or ignored).
extension DecodedBatch {
    public var contentDigest: Int64 {
        var digest = ContentDigest()
        digest.add(UInt64(sightings.count))
        for sighting in sightings {
            digest.add(UInt64(bitPattern: sighting.timeMicros))
            digest.add(sighting.beacon)
            digest.add(UInt64(UInt8(bitPattern: sighting.rssi)))
            digest.add(UInt64(sighting.frames.count))
            for frame in sighting.frames {
                switch frame {
                case .eddystone(let data):
                    digest.add(0)
                    digest.add(data)
                case .serviceData(let uuid, let data):
                    digest.add(1 << 16 | UInt64(uuid))
                    digest.add(data)
                case .manufacturerData(let company, let data):
                    digest.add(2 << 16 | UInt64(company))
                    digest.add(data)
                }
            }
        }
        digest.add(UInt64(characteristicReads.count))
        for read in characteristicReads {
            digest.add(read.beacon)
            digest.add(UInt64(bitPattern: read.timeMicros))
            digest.add(UInt64(read.characteristic))
            digest.add(read.value)
        }
        return Int64(bitPattern: digest.value)
    }
}

private struct ContentDigest {
    private var digest = FNV1a()
    var value: UInt64 { digest.value }

    mutating func add(_ word: UInt64) { digest.add(littleEndian: word) }

    mutating func add(_ bytes: some Collection<UInt8>) {
        add(UInt64(bytes.count))
        digest.add(bytes)
    }

    mutating func add(_ beacon: BeaconKey) {
        add(Array(beacon.beaconID.utf8))
        add(beacon.address)
        add(UInt64(beacon.addressIsRandom ? 1 : 0))
        add(beacon.powerAt1mDbm.map { UInt64(UInt8(bitPattern: $0)) } ?? 0x100)
        // Only when reported, so that digests of batches from agents that do not report it stay as they were.
        if let event = beacon.advertisingEvent { add(0x1_0000 | UInt64(event)) }
    }
}
