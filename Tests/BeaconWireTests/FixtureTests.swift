import Foundation
import TestServers
import Testing
@testable import BeaconWire

/// The bundled demo capture: a deterministic mix of every beacon family, written with `BtsnoopWriter` and read
/// back through the capture reader, the HCI decoder and the frame decoders.
@Suite struct FixtureTests {
    static func mixedBeaconsCapture() -> [UInt8] {
        let uidAddress = DeviceAddress(value: 0xC0_01_00_00_00_01, kind: .random)
        let uid = EddystoneUID(txPower: -20, namespace: bytes("0102030405060708090a"), instance: bytes("0000000000a1"))
        let eddystoneHeader = ad(0x01, [0x06]) + ad(0x03, [0xAA, 0xFE])
        let ibeacon = IBeacon(uuidHigh: 0xE2C5_6DB5_DFFB_48D2, uuidLow: 0xB060_D0F5_A710_96E0, major: 7, minor: 42, measuredPower: -59)
        let alt = AltBeacon(manufacturerID: 0x0118, id1: Array(0x10..<0x20), id2: 3, id3: 9, referenceRSSI: -62, manufacturerReserved: 0)
        var file = BtsnoopWriter.fileHeader
        let start: Int64 = 1_763_800_000_000_000  // 2025-11-22T08:26:40Z
        for second in 0..<10 {
            let t = start + Int64(second) * 1_000_000
            var adverts: [(DeviceAddress, [UInt8])] = [
                (uidAddress, eddystoneHeader + serviceData16(0xFEAA, [0x00, 0xEC] + uid.namespaceBytes + uid.instanceBytes + [0, 0])),
                (DeviceAddress(value: 0xC0_02_00_00_00_02, kind: .random), ad(0x01, [0x06]) + ad(0xFF, [0x4C, 0x00] + ibeacon.payload)),
                (DeviceAddress(value: 0xC0_03_00_00_00_03, kind: .random), ad(0xFF, [0x18, 0x01] + alt.payload)),
                (DeviceAddress(value: 0xC0_04_00_00_00_04, kind: .random),
                 ad(0x01, [0x06]) + ad(0xFF, bytes("9904" + "0512FC5394C37C0004FFFC040CAC36") + [UInt8(second)] + bytes("00CDCBB8334C884F"))),
                (DeviceAddress(value: 0x54_48_E6_8F_80_A5, kind: .public),
                 ad(0x01, [0x06]) + serviceData16(0xFCD2, [0x40, 0x00, UInt8(second), 0x01, 0x5E, 0x02, 0x82, 0x08])),
                (DeviceAddress(value: 0xD9_4C_5D_C0_AB_B8, kind: .random),
                 ad(0x01, [0x04]) + serviceData16(0x1809, bytes("470800fe")) + serviceData16(0x180F, [0x5B])),
            ]
            if second % 3 == 0 {
                let tlm = EddystoneTLM(batteryMillivolts: 3000 - UInt16(second), temperatureRaw: 0x1680, advertisingCount: UInt32(100 + second * 10), uptimeTenths: UInt32(5000 + second * 10))
                adverts.append((uidAddress, eddystoneHeader + serviceData16(0xFEAA, [0x20, 0x00] + tlm.fieldBytes)))
            }
            if second == 5 {
                adverts.append((uidAddress, eddystoneHeader + serviceData16(0xFEAA, [0x10, 0xEC] + EddystoneURL.encode("https://example.com/cart7")!)))
            }
            for (index, (address, payload)) in adverts.enumerated() {
                let event = AdvertisingReportDecoder.legacyReportEvent(address: address, rssi: Int8(-50 - index * 5 - second % 4), data: payload)
                file += BtsnoopWriter.record(kind: .event, received: true, packet: event, timestamp: t + Int64(index) * 10_000)
            }
        }
        return file
    }

    /// The same records as pcapng (link type 201, Bluetooth HCI H4 with a direction header), timestamps in µs.
    static func pcapng(fromBtsnoop btsnoop: [UInt8]) throws -> [UInt8] {
        func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
            let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
            return le32(type) + le32(UInt32(12 + padded.count)) + padded + le32(UInt32(12 + padded.count))
        }
        var file = block(0x0A0D_0D0A, le32(0x1A2B_3C4D) + [1, 0, 0, 0] + [UInt8](repeating: 0xFF, count: 8))
        file += block(1, [201, 0, 0, 0] + le32(65_535))
        for record in try readCapture(btsnoop) {
            let packet = le32(UInt32(record.received ? 1 : 0).bigEndian) + [0x04] + record.packet
            let time = UInt64(record.timestamp)
            file += block(
                6, le32(0) + le32(UInt32(time >> 32)) + le32(UInt32(time & 0xFFFF_FFFF)) + le32(UInt32(packet.count))
                    + le32(UInt32(packet.count)) + packet)
        }
        return file
    }

    /// examples/ holds the capture as btsnoop and as pcapng; `BEACONFLOW_WRITE_FIXTURES=1` writes them again.
    @Test func bundledCaptureMatchesItsGenerator() throws {
        let generated = Self.mixedBeaconsCapture()
        let pcapng = try Self.pcapng(fromBtsnoop: generated)
        if ProcessInfo.processInfo.environment["BEACONFLOW_WRITE_FIXTURES"] == "1" {
            try Data(generated).write(to: URL(fileURLWithPath: exampleFile("mixed-beacons.btsnoop")))
            try Data(pcapng).write(to: URL(fileURLWithPath: exampleFile("mixed-beacons.pcapng")))
        }
        #expect(try fixture("mixed-beacons.btsnoop") == generated)
        #expect(try fixture("mixed-beacons.pcapng") == pcapng)
        let fromPcapng = try readCapture(pcapng)
        let fromBtsnoop = try readCapture(generated)
        #expect(fromPcapng.map(\.packet) == fromBtsnoop.map(\.packet) && fromPcapng.map(\.timestamp) == fromBtsnoop.map(\.timestamp))
    }

    @Test func bundledCaptureDecodesToEveryFamily() throws {
        let records = try readCapture(try fixture("mixed-beacons.btsnoop"))
        let (_, reports) = try advertisingReports(records)
        #expect(reports.count == 65)
        var decoder = FrameDecoder()
        var types: [String: Int] = [:]
        for (report, record) in zip(reports, records) {
            let frames = try decoder.frames(in: AdvertisingData(parsing: report.data), address: report.address, unixSeconds: record.timestamp / 1_000_000)
            for frame in frames { types[frame.json["type"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "?", default: 0] += 1 }
        }
        #expect(types == [
            "eddystone-uid": 10, "eddystone-tlm": 4, "eddystone-url": 1, "ibeacon": 10, "altbeacon": 10, "ruuvi": 10,
            "bthome": 10, "gatt": 20,
        ])
    }
}

extension EddystoneUID {
    var namespaceBytes: [UInt8] { (0..<8).map { UInt8((namespaceHigh >> UInt64(56 - 8 * $0)) & 0xFF) } + [UInt8(namespaceLow >> 8), UInt8(namespaceLow & 0xFF)] }
    var instanceBytes: [UInt8] { (0..<6).map { UInt8((instance >> UInt64(40 - 8 * $0)) & 0xFF) } }
}
