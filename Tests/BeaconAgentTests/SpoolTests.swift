import BeaconMessaging
import BeaconWire
import Foundation
import LocalServers
import Logging
import Testing
@testable import BeaconAgent

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("beaconflow-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

func payload(_ sequence: UInt64, size: Int = 100) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: Int(sequence) &* 31 &+ $0) }
}

@Suite struct SpoolTests {
    let logger = Logger(label: "test")

    func open(_ directory: String, _ change: (inout Spool.Configuration) -> Void = { _ in }) throws -> Spool {
        var configuration = Spool.Configuration(directory: directory)
        change(&configuration)
        return try Spool(configuration, logger: logger)
    }

    @Test func crc32cCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test func batchesSurviveReopeningAndAcknowledgementsDeleteThem() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            let spool = try open(directory.path) { $0.segmentBytes = 1000 }
            for sequence in UInt64(1)...20 { try spool.append(sequence: sequence, payload: payload(sequence)) }
            #expect(spool.pendingCount == 20)
            try spool.acknowledge(through: 12)
        }
        let spool = try open(directory.path) { $0.segmentBytes = 1000 }
        #expect(spool.acknowledgedThrough == 12)
        #expect(spool.nextSequence == 21)
        #expect(spool.firstUnacknowledgedSequence == 13)
        let pending = try spool.pending(after: 0, limit: 100)
        #expect(pending.map(\.sequence) == Array(13...20))
        #expect(pending.allSatisfy { $0.payload == payload($0.sequence) })
        #expect(try spool.pending(after: 15, limit: 2).map(\.sequence) == [16, 17])
        // Segments wholly acknowledged are gone: 8 records of 116 bytes per 1000-byte segment.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".seg") }
        #expect(files.sorted() == ["00000000000000000009.seg", "00000000000000000017.seg"])

        try spool.acknowledge(through: 20)
        #expect(spool.pendingCount == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".seg") }.isEmpty)
        // The sequence carries on after everything was acknowledged and deleted.
        let reopened = try open(directory.path)
        #expect(reopened.nextSequence == 21)
        #expect(reopened.firstUnacknowledgedSequence == 21)
    }

    @Test func aTornLastRecordIsCutOffAtEveryLength() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let spool = try open(directory.path)
        for sequence in UInt64(1)...3 { try spool.append(sequence: sequence, payload: payload(sequence, size: 40)) }
        let segment = directory.path + "/00000000000000000001.seg"
        let complete = try Data(contentsOf: URL(fileURLWithPath: segment))
        let recordBytes = 16 + 40
        let twoRecords = complete.count - recordBytes
        for cut in twoRecords..<complete.count {
            try complete.prefix(cut).write(to: URL(fileURLWithPath: segment))
            let recovered = try open(directory.path)
            #expect(recovered.pendingCount == 2, "cut at \(cut)")
            #expect(recovered.nextSequence == 3)
            #expect(recovered.corruptRecords == 0)
            // Appending after recovery continues cleanly.
            try recovered.append(sequence: 3, payload: payload(3, size: 40))
            #expect(try open(directory.path).pending(after: 0, limit: 10).map(\.sequence) == [1, 2, 3])
        }
    }

    @Test func damageInAnOlderSegmentKeepsEverythingElse() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let spool = try open(directory.path) { $0.segmentBytes = 300 }
        for sequence in UInt64(1)...12 { try spool.append(sequence: sequence, payload: payload(sequence, size: 40)) }
        // Segment 1 holds 1-5 (8 + 5 × 56 = 288 bytes); flip a payload byte of record 4.
        let path = directory.path + "/00000000000000000001.seg"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[8 + 3 * 56 + 20] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: path))
        let recovered = try open(directory.path) { $0.segmentBytes = 300 }
        #expect(recovered.corruptRecords == 1)
        #expect(try recovered.pending(after: 0, limit: 20).map(\.sequence) == [1, 2, 3] + Array(6...12))
        #expect(recovered.nextSequence == 13)
    }

    @Test func aFullSpoolDropsItsOldestSegmentsAndCountsThem() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let spool = try open(directory.path) {
            $0.segmentBytes = 300
            $0.maximumBytes = 1000
        }
        for sequence in UInt64(1)...30 { try spool.append(sequence: sequence, payload: payload(sequence, size: 40)) }
        #expect(spool.byteCount <= 1000)
        #expect(spool.droppedBatches > 0)
        let pending = try spool.pending(after: 0, limit: 100).map(\.sequence)
        #expect(pending.count + spool.droppedBatches == 30)
        #expect(pending == Array((31 - UInt64(pending.count))...30))
        #expect(spool.firstUnacknowledgedSequence == pending.first)
        #expect(throws: SpoolError.self) { try spool.append(sequence: 31, payload: payload(31, size: 2000)) }
    }

    @Test func anAcknowledgementFromBeforeThisSpoolMovesTheSequenceOn() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let spool = try open(directory.path)
        try spool.acknowledge(through: 5000)
        #expect(spool.nextSequence == 5001)
        #expect(throws: SpoolError.self) { try spool.append(sequence: 1, payload: [1]) }
        try spool.append(sequence: 5001, payload: [1])
        #expect(try spool.pending(after: 0, limit: 5).map(\.sequence) == [5001])
    }

    @Test func anAcknowledgementFromAnEarlierLifeRenumbersThePendingBatches() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let spool = try open(directory.path)
        for sequence in UInt64(1)...3 { try spool.append(sequence: sequence, payload: payload(sequence)) }
        let moved = try spool.adoptAcknowledgement(beyondWritten: 5000) { newSequence, first, old in
            #expect(first == 5001)
            return Array("\(newSequence):".utf8) + old
        }
        #expect(moved == 3)
        let expected = (UInt64(1)...3).map { (5000 + $0, Array("\(5000 + $0):".utf8) + payload($0)) }
        func check(_ spool: Spool) throws {
            let pending = try spool.pending(after: 0, limit: 10)
            #expect(pending.map(\.sequence) == expected.map(\.0))
            #expect(pending.map(\.payload) == expected.map(\.1))
            #expect(spool.nextSequence == 5004)
            #expect(spool.acknowledgedThrough == 5000)
        }
        try check(spool)
        try check(try open(directory.path))
        // An ordinary acknowledgement goes the ordinary way.
        #expect(try spool.adoptAcknowledgement(beyondWritten: 5001) { _, _, _ in nil } == 0)
        #expect(try spool.pending(after: 0, limit: 10).map(\.sequence) == [5002, 5003])
    }

    @Test func anUnwritableDirectoryIsAClearError() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1])))
        do {
            _ = try open(file + "/spool")
            Issue.record("a spool under a regular file opened")
        } catch let error as SpoolError {
            #expect(error.code == .io)
            #expect(error.errno == ENOTDIR)
            #expect(error.description.contains("/file/spool"))
        }
    }
}

@Suite struct ReplayPositionTests {
    @Test func aReplayResumesAfterWhatTheSpoolHoldsWhereverItWasKilled() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let directory = temporary.path
        func resume(_ input: String, next: UInt64) -> [Int64] {
            let position = ReplayPosition.resume(input: input, directory: directory, nextSequence: next)
            return [position.reports] + position.unbatched
        }
        #expect(resume("capture:1:ab", next: 1) == [0])
        // Batch 5 holds reports up to 100 but 97, a TLM frame still waiting for its beacon's identity.
        try ReplayPosition(input: "capture:1:ab", sequence: 5, reports: 100, unbatched: [97], reportsBefore: 60, unbatchedBefore: [])
            .write(directory: directory, durable: true)
        // Killed before batch 5 reached the spool: its reports are read again.
        #expect(resume("capture:1:ab", next: 5) == [60])
        // Batch 5 is in the spool (or acknowledged): resume after it, with the frame that waited.
        #expect(resume("capture:1:ab", next: 6) == [100, 97])
        // Another capture starts from its beginning.
        #expect(resume("capture:2:cd", next: 6) == [0])
    }

    @Test func theIdentityIsTheContentNotThePath() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let directory = temporary.path
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory + "/a"))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory + "/b"))
        try Data([1, 2, 4]).write(to: URL(fileURLWithPath: directory + "/c"))
        let a = try CaptureReplaySource.identity(of: directory + "/a")
        #expect(a == (try CaptureReplaySource.identity(of: directory + "/b")))
        #expect(a != (try CaptureReplaySource.identity(of: directory + "/c")))
        #expect(throws: SourceError.self) { try CaptureReplaySource.identity(of: directory + "/missing") }
    }
}

@Suite struct IdentityHoldTests {
    let address: UInt64 = 0xC000_0000_00A1
    func sighting(_ id: String, at seconds: Int64, tlm: Bool = false) -> Sighting {
        Sighting(
            timeMicros: seconds * 1_000_000, beacon: BeaconKey(beaconID: id, address: address, addressIsRandom: true, powerAt1mDbm: nil),
            rssi: -60, data: tlm ? .eddystone([0x20, 0x00, 0x0B, 0xB8]) : nil)
    }

    func admit(_ hold: inout IdentityHold, _ sighting: Sighting, address: UInt64, ordinal: Int64?) -> [IdentityHold.Frame] {
        var ready: [IdentityHold.Frame] = []
        hold.admit(sighting, address: address, ordinal: ordinal, into: &ready)
        return ready
    }

    @Test func aFrameBeforeTheFirstIdentityIsAttachedToIt() {
        var hold = IdentityHold()
        #expect(admit(&hold, sighting("mac:C0:00:00:00:00:A1", at: 1, tlm: true), address: address, ordinal: 0).isEmpty)
        #expect(hold.heldOrdinals == [0])
        let released = admit(&hold, sighting("eddystone:0102030405060708090a:0000000000a1", at: 2), address: address, ordinal: 1)
        #expect(released.map(\.sighting.beacon.beaconID) == ["eddystone:0102030405060708090a:0000000000a1", "eddystone:0102030405060708090a:0000000000a1"])
        #expect(released.map(\.sighting.timeMicros) == [1_000_000, 2_000_000])
        #expect(released.map(\.ordinal) == [0, 1])
        #expect(hold.count == 0)
    }

    @Test func withoutAnIdentityTheFrameGoesAsItWasAfterTheHold() {
        var hold = IdentityHold()
        _ = admit(&hold, sighting("mac:C0:00:00:00:00:A1", at: 1, tlm: true), address: address, ordinal: nil)
        // A sensor frame (no Eddystone content) and other devices pass at once; the TLM waits 10 s.
        #expect(admit(&hold, sighting("mac:C0:00:00:00:00:B2", at: 5), address: 7, ordinal: nil).count == 1)
        let later = admit(&hold, sighting("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", at: 12), address: 8, ordinal: nil)
        #expect(later.map(\.sighting.beacon.beaconID) == ["mac:C0:00:00:00:00:A1", "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"])
        // Bounded per address: the oldest goes as it was.
        for second in 0..<40 { _ = admit(&hold, sighting("mac:C0:00:00:00:00:A1", at: 20, tlm: true), address: address, ordinal: Int64(second)) }
        #expect(hold.count == hold.maximumPerAddress)
        #expect(hold.releaseAll().count == hold.maximumPerAddress)
    }
}

@Suite struct BrokerAddressTests {
    /// An unreadable password file is named with the reason the system gives.
    @Test func anUnreadablePasswordFileNamesTheErrno() throws {
        var address = BrokerAddress(host: "127.0.0.1", port: 1883)
        do {
            try address.readPassword(file: "/nonexistent/agent.pw")
            Issue.record("a missing password file was read")
        } catch {
            #expect("\(error)" == "cannot read the password file /nonexistent/agent.pw: No such file or directory (errno 2)")
        }
        let directory = try makeTemporaryDirectory(prefix: "pw")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try address.readPassword(file: directory)
            Issue.record("a directory was read as a password file")
        } catch {
            #expect("\(error)".contains("is not UTF-8 text") || "\(error)".contains("Is a directory"), "\(error)")
        }
    }

    /// An empty password file (a packaged unit's default credential) is no password; a first line is one.
    @Test func anEmptyPasswordFileIsNoPassword() throws {
        let directory = try makeTemporaryDirectory(prefix: "pw")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var address = BrokerAddress(host: "127.0.0.1", port: 1883)
        try "".write(toFile: directory + "/empty.pw", atomically: true, encoding: .utf8)
        #expect(try !address.readPassword(file: directory + "/empty.pw"))
        #expect(address.password == nil)
        try "secret\nignored\n".write(toFile: directory + "/agent.pw", atomically: true, encoding: .utf8)
        #expect(try address.readPassword(file: directory + "/agent.pw"))
        #expect(address.password == "secret")
    }
}
