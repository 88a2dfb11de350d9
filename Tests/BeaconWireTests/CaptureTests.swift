import Foundation
import TestServers
import Testing
@testable import BeaconWire

/// A capture of the repository's examples/, or else of the tests' Fixtures/.
func fixturePath(_ name: String) throws -> String {
    let example = exampleFile(name)
    if FileManager.default.fileExists(atPath: example) { return example }
    return try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil)).path
}

func fixture(_ name: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: try fixturePath(name))))
}

/// Reads a whole capture in chunks of `chunk` bytes and returns its records.
func readCapture(_ bytes: [UInt8], chunk: Int = 4096) throws -> [CaptureRecord] {
    var reader = CaptureReader()
    var records: [CaptureRecord] = []
    var index = 0
    while index < bytes.count {
        reader.append(bytes[index..<min(bytes.count, index + chunk)])
        index += chunk
        while let record = try reader.next() { records.append(record) }
    }
    try reader.finish()
    return records
}

func advertisingReports(_ records: [CaptureRecord]) throws -> (events: [Int: Int], reports: [AdvertisingReport]) {
    var decoder = AdvertisingReportDecoder()
    var events: [Int: Int] = [:]
    var reports: [AdvertisingReport] = []
    for record in records where record.kind == .event && record.packet.first == 0x3E && record.packet.count > 2 {
        events[Int(record.packet[2]), default: 0] += 1
        reports += try decoder.reports(fromEvent: record.packet)
    }
    return (events, reports)
}

@Suite struct CaptureTests {
    @Test func realLegacyCapture() throws {
        let records = try readCapture(try fixture("wban-python-btsnoop_hci.log"))
        #expect(records.count == 3046)
        let (events, reports) = try advertisingReports(records)
        // Counts as tshark reports them (Fixtures/README.md).
        #expect(events[0x02] == 2565)
        #expect(reports.count >= 2565)
        #expect(RFC3339.format(microseconds: records[0].timestamp).hasPrefix("2020-01-31T"))
        // Two reports in this capture are corrupt (their AD data starts inside the address field, so the first AD
        // length byte is 0x20 with 24 bytes left): exactly those two fail, every other report decodes.
        var malformed: [DecodeError] = []
        for report in reports {
            do { _ = try AdvertisingData(parsing: report.data) } catch { malformed.append(error) }
        }
        #expect(malformed.count == 2)
        #expect(malformed.allSatisfy { $0.code == .lengthOverrun && $0.offset == 0 })
    }

    @Test func realExtendedCapture() throws {
        let records = try readCapture(try fixture("mabip-btsnoop_hci.log"), chunk: 777)
        #expect(records.count == 3853)
        let (events, reports) = try advertisingReports(records)
        #expect(events[0x0D] == 1164)
        #expect(!reports.isEmpty && reports.allSatisfy { $0.isExtended })
        #expect(RFC3339.format(microseconds: records[0].timestamp).hasPrefix("2024-09-24T"))
        let serviceUUIDs = Set(try reports.flatMap { try AdvertisingData(parsing: $0.data).serviceData.map(\.uuid.description) })
        #expect(serviceUUIDs.contains("fef3"))
    }

    @Test func btsnoopWriterRoundTrip() throws {
        let event = AdvertisingReportDecoder.legacyReportEvent(address: DeviceAddress(value: 0x1122_3344_5566, kind: .public), rssi: -70, data: [2, 1, 6])
        let timestamps: [Int64] = [1_700_000_000_123_456, 0, -1]
        var file = BtsnoopWriter.fileHeader
        for ts in timestamps { file += BtsnoopWriter.record(kind: .event, received: true, packet: event, timestamp: ts) }
        file += BtsnoopWriter.record(kind: .command, received: false, packet: [0x0C, 0x20, 0x02, 0x01, 0x00], timestamp: 5)
        let records = try readCapture(file, chunk: 7)
        #expect(records.map(\.timestamp) == timestamps + [5])
        #expect(records.map(\.kind) == [.event, .event, .event, .command])
        #expect(records.map(\.received) == [true, true, true, false])
        #expect(records[0].packet == event)
        #expect(RFC3339.format(microseconds: timestamps[0]) == "2023-11-14T22:13:20.123456Z")
        #expect(RFC3339.format(microseconds: -1) == "1969-12-31T23:59:59.999999Z")
    }

    func btsnoop(datalink: UInt32, records: [(flags: UInt32, data: [UInt8])]) -> [UInt8] {
        var file = Array("btsnoop\0".utf8) + [0, 0, 0, 1] + withUnsafeBytes(of: datalink.bigEndian, Array.init)
        for (flags, data) in records {
            let length = UInt32(data.count)
            for word in [length, length, flags, 0] { file += withUnsafeBytes(of: word.bigEndian, Array.init) }
            file += withUnsafeBytes(of: (Int64(1_000) + CaptureReader.btsnoopEpochOffset).bigEndian, Array.init)
            file += data
        }
        return file
    }

    @Test func btsnoopDatalinks1001And2001() throws {
        let event = bytes("3e0101")
        let plain = try readCapture(btsnoop(datalink: 1001, records: [(3, event), (2, bytes("0c2002")), (1, bytes("0100"))]))
        #expect(plain.map(\.kind) == [.event, .command, .acl])
        #expect(plain[0].packet == event && plain[0].timestamp == 1000)
        let monitor = try readCapture(btsnoop(datalink: 2001, records: [(0x0000_0003, event), (0x0001_0002, bytes("0c20")), (12, Array("note".utf8))]))
        #expect(monitor.map(\.kind) == [.event, .command, .other])
        #expect(monitor[0].packet == event)
    }

    @Test func pcapAndPcapng() throws {
        let event = bytes("3e2602010301b8abc05d4cd91a0201040909384242414334394407160918470800fe04160f185bb3")
        let packet = [0, 0, 0, 1, 0x04] + event
        // pcap, little-endian, microseconds, link type 201.
        var pcap: [UInt8] = [0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0] + [UInt8](repeating: 0, count: 8) + [0xFF, 0xFF, 0, 0, 201, 0, 0, 0]
        for word: UInt32 in [1_700_000_000, 250, UInt32(packet.count), UInt32(packet.count)] { pcap += withUnsafeBytes(of: word.littleEndian, Array.init) }
        pcap += packet
        let fromPcap = try readCapture(pcap, chunk: 5)
        #expect(fromPcap.map(\.timestamp) == [1_700_000_000_000_250])
        #expect(fromPcap.first?.packet == event && fromPcap.first?.received == true)

        // pcapng, little-endian: section header, interface (link type 201, nanosecond resolution), enhanced packet.
        func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
            let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
            let length = UInt32(12 + padded.count)
            return withUnsafeBytes(of: type.littleEndian, Array.init) + withUnsafeBytes(of: length.littleEndian, Array.init) + padded
                + withUnsafeBytes(of: length.littleEndian, Array.init)
        }
        let shb = block(0x0A0D_0D0A, [0x4D, 0x3C, 0x2B, 0x1A, 1, 0, 0, 0] + [UInt8](repeating: 0xFF, count: 8))
        let idb = block(1, [201, 0, 0, 0, 0, 0, 1, 0] + [9, 0, 1, 0, 9, 0, 0, 0] + [0, 0, 0, 0])
        let ticks: UInt64 = 1_700_000_000_123_456_789
        var epb: [UInt8] = withUnsafeBytes(of: UInt32(0).littleEndian, Array.init)
        epb += withUnsafeBytes(of: UInt32(ticks >> 32).littleEndian, Array.init) + withUnsafeBytes(of: UInt32(ticks & 0xFFFF_FFFF).littleEndian, Array.init)
        epb += withUnsafeBytes(of: UInt32(packet.count).littleEndian, Array.init) + withUnsafeBytes(of: UInt32(packet.count).littleEndian, Array.init) + packet
        let pcapng = shb + idb + block(6, epb)
        let fromPcapng = try readCapture(pcapng, chunk: 3)
        #expect(fromPcapng.map(\.timestamp) == [1_700_000_000_123_456])
        #expect(fromPcapng.first?.packet == event)
    }

    @Test func badAndTruncatedCaptures() throws {
        #expect(decodeError { _ = try readCapture(Array("not a capture".utf8)) }?.code == .badMagic)
        #expect(decodeError { _ = try readCapture(btsnoop(datalink: 1003, records: [])) }?.code == .unsupportedDatalink)
        var pcap: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4, 0, 2, 0, 4] + [UInt8](repeating: 0, count: 12) + [0, 0, 0, 1]
        #expect(decodeError { _ = try readCapture(pcap) }?.code == .unsupportedDatalink)
        pcap.removeAll()

        // A file cut inside its last record keeps every earlier record and reports where the rest went missing.
        let file = try fixture("wban-python-btsnoop_hci.log")
        let cut = Array(file[..<(file.count - 10)])
        var reader = CaptureReader()
        reader.append(cut)
        var count = 0
        while try reader.next() != nil { count += 1 }
        #expect(count == 3045)
        let error = decodeError { try reader.finish() }
        #expect(error?.code == .truncated)
        #expect(error?.offset == reader.consumed)
        #expect(decodeError { try CaptureReader().finish() }?.code == .truncated)
    }
}
