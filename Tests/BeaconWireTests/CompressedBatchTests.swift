import BeaconWire
import Deflate
import Foundation
import Testing

@Suite struct DeflateTests {
    @Test func roundTripsAndNamesWhatIsWrongWithBadData() throws {
        let text = Array(String(repeating: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:", count: 200).utf8)
        let compressed = try Deflate.compress(text)
        #expect(compressed.count < text.count / 20)
        #expect(try Deflate.inflate(compressed, limit: text.count) == text)
        #expect(try Deflate.inflate(try Deflate.compress([]), limit: 0) == [])

        func failure(_ bytes: [UInt8], limit: Int = 1 << 20) -> DeflateError? {
            do {
                _ = try Deflate.inflate(bytes, limit: limit)
                return nil
            } catch { return error }
        }
        #expect(failure(compressed, limit: text.count - 1)?.code == .tooLarge)
        #expect(failure(Array(compressed.dropLast(3)))?.code == .truncated)
        #expect(failure(compressed + [0])?.code == .trailingBytes)
        #expect(failure([0xFF, 0xFF, 0xFF])?.code == .corrupt)
        #expect(failure([])?.code == .truncated)
        let corrupt = try #require(failure([0x07]))  // block type 3 is reserved
        #expect("\(corrupt)" == "corrupt at byte 1: invalid block type", "\(corrupt)")
        // A small input that would inflate without bound stops at the limit.
        let bomb = try Deflate.compress([UInt8](repeating: 0, count: 8 << 20))
        #expect(bomb.count < 10_000)
        #expect(failure(bomb)?.code == .tooLarge)
        for length in 0..<min(compressed.count, 200) { _ = failure(Array(compressed[..<length])) }
    }
}

@Suite struct CompressedBatchTests {
    /// Why the reader refuses `batch` once `change` has edited it; nil when it reads it.
    func failure(of batch: WireBatch, _ change: (inout WireBatch) throws -> Void) throws -> BatchError? {
        var batch = batch
        try change(&batch)
        do {
            _ = try BatchReader.decode(try batch.serializedBytes())
            return nil
        } catch let error as BatchError { return error }
    }

    /// A compressed body holding only what `edit` sets.
    func deflatedBody(_ edit: (inout WireBatch) -> Void) throws -> Data {
        var body = WireBatch()
        edit(&body)
        return Data(try Deflate.compress(body.serializedBytes()))
    }

    func sealed(version: UInt32) throws -> WireBatch {
        var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 7)
        builder.configuration.formatVersion = version
        builder.configuration.maximumSightings = 100_000
        for sighting in busySite(beacons: 30, seconds: 2) { _ = builder.add(sighting, nowNanoseconds: 0) }
        let key = BeaconKey(beaconID: "mac:C0:FF:EE:00:00:42", address: 0xC0FF_EE00_0042, addressIsRandom: true)
        builder.add(CharacteristicRead(beacon: key, timeMicros: 1_763_800_000_000_000, characteristic: 0x2A19, value: [87]), nowNanoseconds: 0)
        let batch = builder.seal(sequence: 12, firstUnacknowledgedSequence: 10, agentClockMicros: 99)
        return try #require(batch)
    }

    /// Version 2 reads back exactly what version 1 does, in fewer bytes, with the header outside.
    @Test func versionTwoCarriesTheSameBatchCompressed() throws {
        let version1 = try sealed(version: 1).wireBytes()
        let version2 = try sealed(version: 2).wireBytes()
        let one = try BatchReader.decode(version1)
        let two = try BatchReader.decode(version2)
        #expect(one.sightings == two.sightings && one.characteristicReads == two.characteristicReads)
        #expect(one.header == two.header && one.agentClockMicros == two.agentClockMicros)
        #expect(two.sightings.contains { !$0.frames.isEmpty } && two.characteristicReads.count == 1)
        #expect(version2.count * 4 < version1.count * 3, "\(version2.count) vs \(version1.count)")
        let outside = try WireBatch(serializedBytes: version2)
        #expect(outside.sequence == 12 && outside.beacons.isEmpty && outside.sightingBeacon.isEmpty && !outside.deflatedBody.isEmpty)
        // Already compressed: serialized as it is.
        #expect(try outside.wireBytes() == version2)
    }

    /// Version 3 is version 2 with the time deltas in the unit the header names (a millisecond by default): the same
    /// sightings, each time within half a unit, in fewer bytes. A unit out of range, or deltas that it makes longer
    /// than a day, are refused with the field named and the header kept.
    @Test func versionThreeSendsTimesInTheUnitItNames() throws {
        let version2 = try sealed(version: 2).wireBytes()
        let version3 = try sealed(version: 3).wireBytes()
        let two = try BatchReader.decode(version2)
        let three = try BatchReader.decode(version3)
        #expect(three.header == two.header && three.characteristicReads == two.characteristicReads)
        #expect(three.sightings.count == two.sightings.count)
        #expect(zip(three.sightings, two.sightings).allSatisfy { abs($0.timeMicros - $1.timeMicros) <= 500 && $0.beacon == $1.beacon && $0.frames == $1.frames })
        #expect(version3.count < version2.count, "\(version3.count) vs \(version2.count)")
        let outside = try WireBatch(serializedBytes: version3)
        #expect(outside.sightingTimeUnitUs == 1000 && !outside.deflatedBody.isEmpty)

        func failure(_ change: (inout WireBatch) throws -> Void) throws -> BatchError? { try self.failure(of: outside, change) }
        for unit: UInt32 in [0, 1_000_001] {
            let refused = try failure { $0.sightingTimeUnitUs = unit }
            let error = try #require(refused)
            #expect(error.code == .invalidField && error.message.contains("sighting_time_unit_us \(unit)"), "\(error)")
            #expect(error.header?.sequence == 12)
        }
        let bodyRefused = try failure { $0.deflatedBody = try deflatedBody { $0.sightingTimeUnitUs = 1 } }
        let inBody = try #require(bodyRefused)
        #expect(inBody.code == .invalidField && inBody.message.contains("holds header fields"), "\(inBody)")
        // One sighting, `delta` units after base_time_us.
        func oneSighting(delta: UInt64, unit: UInt32) throws -> BatchError? {
            try failure { batch in
                batch.sightingTimeUnitUs = unit
                batch.deflatedBody = try deflatedBody { body in
                    var beacon = Beaconflow_V1_Beacon()
                    beacon.beaconID = "mac:00:00:00:00:00:01"
                    body.beacons = [beacon]
                    body.sightingBeacon = [0]
                    body.sightingTimeDeltaUs = [delta]
                    body.sightingRssi = [60]
                }
            }
        }
        #expect(try oneSighting(delta: 86_400_000, unit: 1000) == nil)
        // A day and a millisecond; a product past 64 bits.
        let tooLong = try #require(try oneSighting(delta: 86_400_001, unit: 1000))
        #expect(tooLong.code == .invalidField && tooLong.message.contains("more than a day"), "\(tooLong)")
        let overflowing = try #require(try oneSighting(delta: UInt64.max / 2, unit: 1_000_000))
        #expect(overflowing.code == .invalidField && overflowing.message.contains("more than a day"), "\(overflowing)")
    }

    /// A bad compressed body is refused with its reason, and with the header, so that the ingest can acknowledge
    /// the batch as refused.
    @Test func badCompressedBodiesAreRefusedWithTheirReason() throws {
        let valid = try WireBatch(serializedBytes: try sealed(version: 2).wireBytes())
        func failure(_ change: (inout WireBatch) throws -> Void) throws -> BatchError? { try self.failure(of: valid, change) }
        func body(_ edit: (inout WireBatch) -> Void) throws -> Data { try deflatedBody(edit) }
        let cases: [(BatchError.Code, String, (inout WireBatch) throws -> Void)] = [
            (.malformed, "deflated_body: corrupt", { $0.deflatedBody = Data([0xFF, 0xFF]) }),
            (.malformed, "deflated_body: truncated", { $0.deflatedBody = $0.deflatedBody.dropLast(4) }),
            (.tooLarge, "deflated_body: too_large", { $0.deflatedBody = Data(try Deflate.compress([UInt8](repeating: 0, count: 2 << 20))) }),
            (.malformed, "does not inflate to a protobuf Batch body", { $0.deflatedBody = Data(try Deflate.compress([0xFF, 0xFF, 0xFF])) }),
            (.invalidField, "deflated_body is empty", { $0.deflatedBody = Data() }),
            (.invalidField, "fields 9-14 are set", { $0.sightingRssi = [60] }),
            (.invalidField, "holds header fields", { $0.deflatedBody = try body { $0.sequence = 13 } }),
            (.invalidField, "holds header fields", { $0.deflatedBody = try body { $0.deflatedBody = Data([1]) } }),
            (.inconsistentColumns, "sighting columns differ", { $0.deflatedBody = try body { $0.sightingRssi = [60] } }),
            // An inflation bomb within 1 MiB: a kilobyte standing for 100,001 sightings of one beacon.
            (.tooLarge, "batch holds 100001 sightings, the limit is 100000", {
                $0.deflatedBody = try body { body in
                    var beacon = Beaconflow_V1_Beacon()
                    beacon.beaconID = "mac:00:00:00:00:00:01"
                    body.beacons = [beacon]
                    body.sightingBeacon = Array(repeating: 0, count: 100_001)
                    body.sightingTimeDeltaUs = Array(repeating: 0, count: 100_001)
                    body.sightingRssi = Array(repeating: 60, count: 100_001)
                }
                #expect($0.deflatedBody.count < 2_000, "\($0.deflatedBody.count) bytes")
            }),
            (.tooLarge, "characteristic reads", {
                $0.deflatedBody = try body { $0.characteristicReads = Array(repeating: Beaconflow_V1_CharacteristicRead(), count: 10_001) }
            }),
        ]
        for (code, text, change) in cases {
            let error = try #require(try failure(change), "\(text): accepted")
            #expect(error.code == code && error.message.contains(text), "\(text): \(error)")
            #expect(error.header?.sequence == 12, "\(text): \(error)")
        }
        #expect(try failure { _ in } == nil)
    }
}
