import Foundation
import Testing
@testable import BeaconWire

/// A busy site as one agent hears it: `beacons` beacons advertising every 100 ms (±10 ms jitter), RSSI between
/// -95 and -45 dBm, over `seconds`; every tenth frame of a beacon is a TLM whose counters move.
func busySite(beacons: Int, seconds: Int, seed: UInt64 = 7) -> [Sighting] {
    var state = seed
    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    let start: Int64 = 1_763_800_000_000_000
    var sightings: [Sighting] = []
    for beacon in 0..<beacons {
        let key = BeaconKey(
            beaconID: "eddystone:0102030405060708090a:\(hexString(UInt64(beacon), digits: 12))",
            address: 0xC000_0000_0000 | UInt64(beacon), addressIsRandom: true, powerAt1mDbm: -59)
        for frame in 0..<(seconds * 10) {
            let time = start + Int64(frame) * 100_000 + Int64(next() % 20_000) - 10_000 + Int64(beacon) * 997
            let rssi = Int8(-95 + Int(next() % 51))
            var data: DataFrameContent?
            if frame % 10 == 9 {
                data = .eddystone(FrameBytes([0x20, 0x00, 0x0B, 0xB8, 0x16, 0x80] + bigEndian(UInt32(frame)) + bigEndian(UInt32(frame * 10))))
            }
            sightings.append(Sighting(timeMicros: time, beacon: key, rssi: rssi, data: data))
        }
    }
    return sightings.sorted { $0.timeMicros < $1.timeMicros }
}

func bigEndian(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }

func seal(_ sightings: [Sighting], configuration: BatchBuilder.Configuration = .init()) throws -> [UInt8] {
    var configuration = configuration
    configuration.maximumSightings = max(configuration.maximumSightings, sightings.count)
    var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 0xB007, configuration: configuration)
    for sighting in sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
    let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 42)
    let batch = try #require(sealed)
    return try batch.wireBytes()
}

@Suite struct BatchTests {
    @Test func roundTripKeepsEverySighting() throws {
        let sightings = busySite(beacons: 20, seconds: 2)
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 0xB007)
        builder.configuration.maximumSightings = sightings.count
        // Arrival order differs from capture order: the batch is in capture order.
        for sighting in sightings.reversed() { _ = builder.add(sighting, nowNanoseconds: 5) }
        let sealed = builder.seal(sequence: 9, firstUnacknowledgedSequence: 3, agentClockMicros: 1234)
        let wire = try #require(sealed)
        #expect(builder.count == 0)
        let decoded = try BatchReader.decode(try wire.wireBytes())
        #expect(decoded.siteID == "hq" && decoded.agentID == "hq-a1" && decoded.bootID == 0xB007)
        #expect(decoded.sequence == 9 && decoded.firstUnacknowledgedSequence == 3 && decoded.agentClockMicros == 1234)
        #expect(decoded.sightings.count == sightings.count)
        // Version 3 sends times to the millisecond: each is the nearest one.
        func rounded(_ sighting: Sighting) -> Sighting {
            var sighting = sighting
            sighting.timeMicros = (sighting.timeMicros + 500) / 1000 * 1000
            return sighting
        }
        #expect(Set(decoded.sightings) == Set(sightings.map(rounded)))
        #expect(decoded.sightings.map(\.timeMicros) == sightings.map { rounded($0).timeMicros }.sorted())
        #expect(zip(decoded.sightings.map(\.timeMicros), sightings.map(\.timeMicros).sorted()).allSatisfy { abs($0 - $1) <= 500 })
        // Version 2 keeps every microsecond.
        var version2Builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 0xB007)
        version2Builder.configuration.maximumSightings = sightings.count
        version2Builder.configuration.formatVersion = 2
        for sighting in sightings { _ = version2Builder.add(sighting, nowNanoseconds: 5) }
        let sealedInVersion2 = version2Builder.seal(sequence: 10, firstUnacknowledgedSequence: 3, agentClockMicros: 1234)
        let version2 = try #require(sealedInVersion2)
        #expect(version2.sightingTimeUnitUs == 0)
        let exact = try BatchReader.decode(try version2.wireBytes())
        #expect(Set(exact.sightings) == Set(sightings))
        #expect(exact.sightings.map(\.timeMicros) == sightings.map(\.timeMicros).sorted())
    }

    /// Version 3's time unit is any from a microsecond to a second; each sighting's time is rounded to the nearest
    /// multiple of it in Unix time, so the rounding never adds up over a batch.
    @Test func timesAreSentInTheUnitTheBatchNames() throws {
        let start: Int64 = 1_767_225_600_000_000
        let sightings = (0..<2000).map { index in
            Sighting(
                timeMicros: start + 123 + Int64(index) * 1_499, beacon: BeaconKey(beaconID: "mac:00:00:00:00:00:01", address: 1, addressIsRandom: false),
                rssi: -70)
        }
        for unit: UInt32 in [1, 1000, 1_000_000] {
            var configuration = BatchBuilder.Configuration()
            configuration.timeUnitMicros = unit
            configuration.maximumSightings = sightings.count
            var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1, configuration: configuration)
            for sighting in sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
            let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
            let batch = try #require(sealed)
            #expect(batch.formatVersion == 3 && batch.sightingTimeUnitUs == unit)
            let times = try BatchReader.decode(try batch.wireBytes()).sightings.map(\.timeMicros)
            let half = Int64(unit) / 2
            #expect(zip(times, sightings).allSatisfy { $0 - $1.timeMicros <= half && $1.timeMicros - $0 < half + 1 }, "unit \(unit)")
            #expect(times.allSatisfy { $0 % Int64(unit) == 0 }, "unit \(unit)")
            #expect(times == sightings.map { configuration.sentTime($0.timeMicros) }, "unit \(unit)")
        }
    }

    @Test func repeatedSightingsCostAtMostSixBytes() throws {
        // 100 beacons × 10 adverts/s = 1000 sightings per 1 s batch: the default flush size on a busy site.
        let site = busySite(beacons: 100, seconds: 1)
        let full = try seal(site)
        // The same batch with only each beacon's first sighting: the difference is what repeated sightings cost.
        var seen = Set<String>()
        let firsts = site.filter { seen.insert($0.beacon.beaconID).inserted }
        let base = try seal(firsts)
        let repeated = site.count - firsts.count
        let tlmBytes = try seal(site.map { var s = $0; s.data = nil; return s }).count
        let perRepeated = Double(tlmBytes - base.count) / Double(repeated)
        #expect(perRepeated <= 6.0, "\(perRepeated) bytes per repeated sighting")
        #expect(full.count > tlmBytes)  // the TLM frames travel too
        print("batch bytes: \(full.count) for \(site.count) sightings (\(Double(full.count) / Double(site.count)) per sighting with TLM frames); \(perRepeated) per repeated sighting")
    }

    @Test func unchangedDataFramesAreSentOncePerRefreshInterval() throws {
        let key = BeaconKey(beaconID: "eddystone:0102030405060708090a:0000000000a1", address: 1, addressIsRandom: false)
        let url = DataFrameContent.eddystone(FrameBytes([0x10, 0xEE, 0x03] + Array("example".utf8) + [0x07]))
        let tlm = { (count: UInt8) in DataFrameContent.eddystone([0x20, 0, 0x0B, 0xB8, 0x16, 0x80, 0, 0, 0, count, 0, 0, 0, 1]) }
        var builder = BatchBuilder(siteID: "hq", agentID: "a", bootID: 1)
        builder.configuration.dataRefreshMicroseconds = 10_000_000
        let frames: [(Int64, DataFrameContent)] = [
            (0, url), (1_000_000, url), (2_000_000, tlm(1)), (3_000_000, tlm(1)), (4_000_000, tlm(2)),
            (9_999_999, url), (10_000_000, url), (10_000_001, url),
        ]
        for (time, content) in frames {
            _ = builder.add(Sighting(timeMicros: time, beacon: key, rssi: -60, data: content), nowNanoseconds: 0)
        }
        let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let decoded = try BatchReader.decode(try #require(sealed).wireBytes())
        #expect(decoded.sightings.map(\.data) == [url, nil, tlm(1), nil, tlm(2), nil, url, nil])
    }

    @Test func dueBySizeAndByAge() {
        var builder = BatchBuilder(siteID: "hq", agentID: "a", bootID: 1)
        builder.configuration.maximumSightings = 3
        builder.configuration.maximumAgeNanoseconds = 1_000
        let sighting = Sighting(
            timeMicros: 0, beacon: BeaconKey(beaconID: "mac:00:00:00:00:00:01", address: 1, addressIsRandom: false),
            rssi: -70)
        #expect(!builder.isDue(nowNanoseconds: 10_000))
        #expect(builder.deadlineNanoseconds == nil)
        let fullAfterFirst = builder.add(sighting, nowNanoseconds: 500)
        #expect(!fullAfterFirst)
        #expect(builder.deadlineNanoseconds == 1_500)
        #expect(!builder.isDue(nowNanoseconds: 1_499))
        #expect(builder.isDue(nowNanoseconds: 1_500))
        let fullAfterSecond = builder.add(sighting, nowNanoseconds: 600)
        let fullAfterThird = builder.add(sighting, nowNanoseconds: 700)
        #expect(!fullAfterSecond && fullAfterThird)
        let first = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let second = builder.seal(sequence: 2, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        #expect(first?.sightingRssi.count == 3)
        #expect(second == nil)
    }

    /// A beacon heard as two advertising events is two dictionary entries; each sighting keeps its own, and a
    /// beacon without one (an agent that does not report it) stays without.
    @Test func eachSightingKeepsItsAdvertisingEvent() throws {
        let uid = BeaconKey(beaconID: "eddystone:0102030405060708090a:0000000000a1", address: 0xC0FF_EE00_0001, addressIsRandom: true)
        var nonconnectable = uid
        nonconnectable.advertisingEvent = 0x10
        var extended = uid
        extended.advertisingEvent = 0x00
        let sightings = [
            Sighting(timeMicros: 1_700_000_000_000_000, beacon: nonconnectable, rssi: -60),
            Sighting(timeMicros: 1_700_000_000_000_100, beacon: extended, rssi: -61, data: .eddystone([0x20, 0x00])),
            Sighting(timeMicros: 1_700_000_000_000_200, beacon: uid, rssi: -62),
        ]
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
        builder.configuration.timeUnitMicros = 1
        for sighting in sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
        let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let wire = try #require(sealed)
        #expect(wire.beacons.map(\.hasAdvertisingEvent) == [true, true, false])
        #expect(try BatchReader.decode(try wire.wireBytes()).sightings == sightings)
    }

    @Test func badBatchesAreRefusedWithTheirReason() throws {
        var valid = WireBatch()
        valid.formatVersion = 1
        valid.siteID = "hq"
        valid.agentID = "a1"
        valid.sequence = 5
        valid.firstUnacknowledgedSequence = 5
        var beacon = Beaconflow_V1_Beacon()
        beacon.beaconID = "mac:00:00:00:00:00:01"
        valid.beacons = [beacon]
        valid.sightingBeacon = [0]
        valid.sightingTimeDeltaUs = [0]
        valid.sightingRssi = [60]
        #expect(try BatchReader.decode(try valid.serializedBytes()).sightings.first?.rssi == -68)

        func code(_ change: (inout WireBatch) -> Void) throws -> BatchError.Code? {
            var batch = valid
            change(&batch)
            do {
                _ = try BatchReader.decode(try batch.serializedBytes())
                return nil
            } catch let error as BatchError { return error.code }
        }
        let cases: [(BatchError.Code, (inout WireBatch) -> Void)] = [
            (.unsupportedVersion, { $0.formatVersion = 4 }),
            (.invalidField, { $0.formatVersion = 2 }),  // its body must be in deflated_body
            (.invalidField, { $0.sightingTimeUnitUs = 1000 }),  // version 3 only
            (.invalidField, { $0.formatVersion = 3; $0.sightingTimeUnitUs = 1000 }),  // its body must be in deflated_body
            (.invalidField, { $0.deflatedBody = Data([0x03, 0x00]) }),  // version 1 has no deflated_body
            (.invalidField, { $0.siteID = "" }),
            (.invalidField, { $0.sequence = 0 }),
            (.invalidField, { $0.firstUnacknowledgedSequence = 6 }),
            (.inconsistentColumns, { $0.sightingRssi = [] }),
            (.inconsistentColumns, { $0.sightingBeacon = [1] }),
            (.invalidField, { $0.sightingRssi = [256] }),
            (.invalidField, { $0.sightingTimeDeltaUs = [UInt64.max] }),
            (.invalidField, { $0.beacons[0].address = 1 << 48 }),
            (.invalidField, { $0.beacons[0].powerAt1MDbm = 200 }),
            (.invalidField, { $0.beacons[0].advertisingEvent = 0x20 }),  // a data-status bit
            (.invalidField, { $0.dataFrames = [Beaconflow_V1_DataFrame()] }),
            (.inconsistentColumns, { var frame = Beaconflow_V1_DataFrame(); frame.sighting = 1; frame.eddystone = Data([0x20]); $0.dataFrames = [frame] }),
        ]
        for (index, (expected, change)) in cases.enumerated() {
            #expect(try code(change) == expected, "case \(index)")
        }

        // Extreme integers: refused with the field named, never a trap. Where the header is valid, the error
        // carries it, so that the ingest can acknowledge the batch as refused.
        func failure(_ change: (inout WireBatch) -> Void) throws -> BatchError? {
            var batch = valid
            change(&batch)
            do {
                _ = try BatchReader.decode(try batch.serializedBytes())
                return nil
            } catch let error as BatchError { return error }
        }
        var read = Beaconflow_V1_CharacteristicRead()
        read.characteristicUuid16 = 0x2A19
        read.timeUs = .min
        let extremes: [(field: String, headerKept: Bool, (inout WireBatch) -> Void)] = [
            ("agent_clock_us", true, { $0.agentClockUs = .min }),
            ("agent_clock_us", true, { $0.agentClockUs = .max }),
            ("base_time_us", true, { $0.baseTimeUs = .min }),
            ("base_time_us", true, { $0.baseTimeUs = BatchReader.latestMicros + 1 }),
            ("characteristic_reads[0].time_us", true, { $0.characteristicReads = [read] }),
            ("rssi 127 dBm", true, { $0.sightingRssi = [255] }),
            ("rssi 21 dBm", true, { $0.sightingRssi = [149] }),
            ("sequence", false, { $0.sequence = .max; $0.firstUnacknowledgedSequence = .max }),
            ("sequence", false, { $0.sequence = 1 << 63; $0.firstUnacknowledgedSequence = 1 << 63 }),
            ("site_id", false, { $0.siteID = "hq\nforged line" }),
            ("agent_id", false, { $0.agentID = "A1" }),
        ]
        for (field, headerKept, change) in extremes {
            let error = try #require(try failure(change), "\(field) accepted")
            #expect(error.code == .invalidField && error.message.contains(field), "\(field): \(error)")
            #expect((error.header?.sequence == 5) == headerKept, "\(field): \(error)")
        }
        #expect(try failure { $0.sightingRssi = [148] } == nil)  // +20 dBm, the top of the range
        #expect(try failure { $0.sequence = BatchReader.maximumSequence; $0.baseTimeUs = BatchReader.latestMicros } == nil)

        #expect(throws: BatchError.self) { try BatchReader.decode([0xFF, 0xFF, 0xFF]) }
        #expect((try? BatchReader.decode(Array(repeating: 0, count: BatchReader.maximumBytes + 1))) == nil)
        // Truncation anywhere gives an error, never a trap.
        let bytes: [UInt8] = try valid.serializedBytes()
        for length in 0..<bytes.count { _ = try? BatchReader.decode(Array(bytes[..<length])) }
    }
}

/// Writes seed batches for the FuzzBatch target: `BEACONFLOW_WRITE_FIXTURES=1 swift test --filter BatchSeeds`.
@Suite struct BatchSeeds {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["BEACONFLOW_WRITE_FIXTURES"] == "1"))
    func writeFuzzSeeds() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/Corpus/FuzzBatch").standardized
        for (name, beacons) in [("small", 2), ("busy", 20)] {
            for version: UInt32 in [1, 2, 3] {
                var configuration = BatchBuilder.Configuration()
                configuration.formatVersion = version
                let bytes = try seal(busySite(beacons: beacons, seconds: 1), configuration: configuration)
                try Data(bytes).write(to: directory.appendingPathComponent("\(name)-v\(version).batch"))
            }
        }
    }
}

@Suite struct CharacteristicReadBatchTests {
    @Test func gattReadsTravelAloneOrWithSightings() throws {
        let key = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:42", address: 0xC0FF_EE00_0042, addressIsRandom: true)
        let read = CharacteristicRead(beacon: key, timeMicros: 1_763_800_000_000_000, characteristic: 0x2A19, value: [87])
        var builder = BatchBuilder(siteID: "hq", agentID: "a1", bootID: 1)
        #expect(builder.isEmpty)
        builder.add(read, nowNanoseconds: 10)
        #expect(!builder.isEmpty && builder.count == 0)
        #expect(builder.isDue(nowNanoseconds: 10 + builder.configuration.maximumAgeNanoseconds))
        let alone = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)
        let decoded = try BatchReader.decode(try #require(alone).wireBytes())
        #expect(decoded.sightings.isEmpty)
        #expect(decoded.characteristicReads == [read])

        _ = builder.add(Sighting(timeMicros: 5, beacon: key, rssi: -70), nowNanoseconds: 20)
        builder.add(read, nowNanoseconds: 21)
        let mixed = builder.seal(sequence: 2, firstUnacknowledgedSequence: 2, agentClockMicros: 0)
        let both = try BatchReader.decode(try #require(mixed).wireBytes())
        #expect(both.sightings.count == 1 && both.characteristicReads == [read])
        #expect(try #require(mixed).beacons.count == 1)  // one dictionary entry serves both
    }
}

@Suite struct BeaconIdentityTests {
    /// Every kind of id the agent makes goes binary and comes back as the same text; ids not in canonical form
    /// stay text.
    @Test func idsInCanonicalFormGoBinaryAndComeBackTheSame() throws {
        let uid = EddystoneUID(txPower: -20, namespace: try [UInt8](hex: "0102030405060708090a"), instance: try [UInt8](hex: "0000000000a1"))
        let iBeacon = IBeacon(uuidHigh: 0xE2C5_6DB5_DFFB_48D2, uuidLow: 0xB060_D0F5_A710_96E0, major: 65535, minor: 7, measuredPower: -59)
        let altBeacon = try #require(try AltBeacon.decode(companyID: 0x0118, try [UInt8](hex: "beac00112233445566778899aabbccddeeff0002000bc500")[...]))
        let ids = [
            uid.beaconID, iBeacon.beaconID, altBeacon.beaconID, "eid:" + EddystoneEID(txPower: 0, eid: 0x0123_4567_89AB_CDEF).eidHex,
            "mac:" + DeviceAddress(value: 0xC000_0000_00A1, kind: .random).description, "anon:00112233445566ff",
        ]
        var sizes: [Int] = []
        for id in ids {
            let identity = try #require(BeaconIdentity(id), "\(id)")
            #expect(identity.description == id)
            #expect(BeaconIdentity(binary: identity.binary) == identity)
            #expect(BeaconIdentity.Kind(of: id) == identity.kind)
            sizes.append(identity.binary.count)
        }
        // The frames' and the agent's typed identities are the same as their text parsed.
        #expect([uid.identity, iBeacon.identity, altBeacon.identity, .eid(0x0123_4567_89AB_CDEF),
                 .device(DeviceAddress(value: 0xC000_0000_00A1, kind: .random))].map(\.?.description) == Array(ids.prefix(5)))
        #expect(BeaconIdentity.pseudonym([0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0xFF, 0x99]).description == ids[5])
        #expect([BeaconIdentity.Kind.mac, .anon].allSatisfy(\.namesADevice) && !BeaconIdentity.Kind.eid.namesADevice)
        #expect(sizes == [17, 21, 21, 9, 7, 9])
        #expect(BeaconIdentity("eddystone:0102030405060708090A:0000000000a1") == nil)  // not lowercase
        #expect(BeaconIdentity("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:65536:7") == nil)
        #expect(BeaconIdentity("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:007:7") == nil)
        #expect(BeaconIdentity("mac:c0:00:00:00:00:a1") == nil)
        #expect(BeaconIdentity("badge-17") == nil)
        #expect(BeaconIdentity(binary: [1] + Array(repeating: 0, count: 15)) == nil)
        #expect(BeaconIdentity(binary: [9] + Array(repeating: 0, count: 16)) == nil)
    }

    /// The agent sends binary ids; a batch with text ids (an earlier agent) reads the same; a bad binary id is
    /// refused with the field named.
    @Test func textAndBinaryDictionariesReadTheSame() throws {
        let sightings = busySite(beacons: 5, seconds: 1)
        var version1 = BatchBuilder.Configuration()
        version1.formatVersion = 1
        let binary = try WireBatch(serializedBytes: try seal(sightings, configuration: version1))
        #expect(binary.beacons.allSatisfy { $0.beaconID.isEmpty && !$0.identity.isEmpty })
        var text = binary
        for index in text.beacons.indices {
            text.beacons[index].beaconID = try #require(BeaconIdentity(binary: Array(text.beacons[index].identity))).description
            text.beacons[index].identity = Data()
        }
        let textBytes: [UInt8] = try text.serializedBytes()
        let binaryBytes: [UInt8] = try binary.serializedBytes()
        #expect(try BatchReader.decode(textBytes).sightings == BatchReader.decode(binaryBytes).sightings)
        #expect(textBytes.count > binaryBytes.count)
        var broken = binary
        broken.beacons[0].identity = Data([1, 2, 3])
        let brokenBytes: [UInt8] = try broken.serializedBytes()
        let error = #expect(throws: BatchError.self) { try BatchReader.decode(brokenBytes) }
        #expect(error?.message.contains("beacons[0].identity") == true)
    }
}

/// FNV-1a, 64 bits, against the reference vectors of its authors' test suite (isthe.com/chongo/tech/comp/fnv).
@Suite struct FNV1aTests {
    @Test func theReferenceVectors() {
        #expect(FNV1a.digest([UInt8]()) == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a.digest("a".utf8) == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a.digest("foobar".utf8) == 0x8594_4171_f739_67e8)
        var words = FNV1a()
        words.add(littleEndian: 0x6261, byteCount: 2)  // "ab"
        #expect(words.value == FNV1a.digest("ab".utf8))
    }
}
