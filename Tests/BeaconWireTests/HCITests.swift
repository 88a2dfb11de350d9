import Testing
@testable import BeaconWire

/// LE Advertising Report (Core Specification Vol 4, Part E, §7.7.65.2) and LE Extended Advertising Report (§7.7.65.13).
@Suite struct HCITests {
    @Test func legacyReportFromAPublishedHcidump() throws {
        // `hcidump -X` of a Freetec PX-1737 thermometer (a public question-and-answer thread), without the H4 byte.
        let event = bytes("3e2602010301b8abc05d4cd91a0201040909384242414334394407160918470800fe04160f185bb3")
        var decoder = AdvertisingReportDecoder()
        let reports = try decoder.reports(fromEvent: event)
        #expect(reports.count == 1)
        let report = try #require(reports.first)
        #expect(report.address.description == "D9:4C:5D:C0:AB:B8")
        #expect(report.address.kind == .random)
        #expect(report.eventType == 3)
        #expect(report.rssi == -77)
        #expect(try AdvertisingData(parsing: report.data).localName == "8BBAC49D")
    }

    @Test func severalReportsInOneEvent() throws {
        let first = AdvertisingReportDecoder.legacyReportEvent(address: DeviceAddress(value: 1, kind: .public), rssi: -40, data: [2, 1, 6])
        let second = AdvertisingReportDecoder.legacyReportEvent(eventType: 4, address: DeviceAddress(value: 2, kind: .random), rssi: 127, data: [])
        // Merge both reports into one event: header, count 2, then each report's fields.
        let parameters: [UInt8] = [0x02, 2] + first[4...] + second[4...]
        let event = [0x3E, UInt8(parameters.count)] + parameters
        var decoder = AdvertisingReportDecoder()
        let reports = try decoder.reports(fromEvent: event)
        #expect(reports.map(\.address.value) == [1, 2])
        #expect(reports.map(\.rssi) == [-40, nil])
        #expect(reports.map(\.data) == [[2, 1, 6], []])
    }

    @Test func otherEventsYieldNothing() throws {
        var decoder = AdvertisingReportDecoder()
        // Command Complete for LE Set Scan Enable, and an LE Connection Complete subevent.
        #expect(try decoder.reports(fromEvent: bytes("0e04010c2000")).isEmpty)
        #expect(try decoder.reports(fromEvent: bytes("3e0101")).isEmpty)
    }

    @Test func malformedEvents() {
        var decoder = AdvertisingReportDecoder()
        let good = bytes("3e2602010301b8abc05d4cd91a0201040909384242414334394407160918470800fe04160f185bb3")
        for cut in 0..<good.count {
            let error = decodeError { _ = try decoder.reports(fromEvent: Array(good[..<cut])) }
            #expect(error != nil, "cut at \(cut)")
        }
        var longData = good
        longData[12] = 0x30  // report data length 48 > 31
        #expect(decodeError { _ = try decoder.reports(fromEvent: longData) }?.code == .invalidLength)
        var overrun = good
        overrun[12] = 0x1B  // one more than is there
        #expect(decodeError { _ = try decoder.reports(fromEvent: overrun) }?.offset == 12)
    }

    func extendedEvent(
        status: UInt16, sid: UInt8 = 1, address: UInt64 = 0xAABBCCDDEEFF, data: [UInt8], txPower: Int8 = -4, type: UInt16 = 0
    ) -> [UInt8] {
        let eventType = type | status << 5
        var report: [UInt8] = [UInt8(eventType & 0xFF), UInt8(eventType >> 8), 0x01]
        report += DeviceAddress(value: address, kind: .random).hciBytes
        report += [0x01, 0x02, sid, UInt8(bitPattern: txPower), UInt8(bitPattern: Int8(-61)), 0, 0, 0] + [UInt8](repeating: 0, count: 6)
        report += [UInt8(data.count)] + data
        let parameters: [UInt8] = [0x0D, 1] + report
        return [0x3E, UInt8(parameters.count)] + parameters
    }

    @Test func extendedReportFragmentsAreReassembled() throws {
        let payload = serviceData16(0xFEAA, bytes("00e7e157bd5df90aad1dc2fb0000000000010000")) + ad(0x09, Array("long name to spill".utf8))
        var decoder = AdvertisingReportDecoder()
        #expect(try decoder.reports(fromEvent: extendedEvent(status: 1, data: Array(payload[..<10]))).isEmpty)
        // Another advertiser's complete report passes while the first waits.
        let other = try decoder.reports(fromEvent: extendedEvent(status: 0, address: 1, data: [2, 1, 6]))
        #expect(other.map(\.address.value) == [1])
        #expect(decoder.pendingFragments == 1)
        #expect(try decoder.reports(fromEvent: extendedEvent(status: 1, data: Array(payload[10..<20]))).isEmpty)
        let done = try decoder.reports(fromEvent: extendedEvent(status: 0, data: Array(payload[20...])))
        #expect(done.count == 1)
        let report = try #require(done.first)
        #expect(report.data == payload)
        #expect(report.isExtended && !report.isTruncated)
        #expect(report.txPower == -4 && report.rssi == -61 && report.sid == 1 && report.secondaryPHY == 2)
        #expect(decoder.pendingFragments == 0)
        #expect(try FrameClassifier.classify(report.data[...]).identity?.frame.beaconID == "eddystone:e157bd5df90aad1dc2fb:000000000001")
    }

    /// A scan response (event type 0x000B: connectable, scannable, scan response) arriving while the advertisement it
    /// answers is still in fragments is a report of its own, with its own event type; neither takes the other's data.
    @Test func aScanResponseKeepsItsEventTypeAndItsData() throws {
        var decoder = AdvertisingReportDecoder()
        #expect(try decoder.reports(fromEvent: extendedEvent(status: 1, data: [2, 1, 6], type: 0x0003)).isEmpty)
        let response = try decoder.reports(fromEvent: extendedEvent(status: 0, data: ad(0x09, Array("tag".utf8)), type: 0x000B))
        #expect(response.map(\.eventType) == [0x000B])
        #expect(response.first?.data == ad(0x09, Array("tag".utf8)))
        let advert = try decoder.reports(fromEvent: extendedEvent(status: 0, data: [3, 0xFF, 0x59, 0x00], type: 0x0003))
        #expect(advert.map(\.eventType) == [0x0003])
        #expect(advert.first?.data == [2, 1, 6, 3, 0xFF, 0x59, 0x00])
    }

    /// Legacy report types map to the extended event bits Core Vol 4, Part E, §7.7.65.13 gives their PDUs; an
    /// extended report keeps its bits without the data status.
    @Test func everyReportSaysHowItWasSentInExtendedEventBits() throws {
        let address = DeviceAddress(value: 1, kind: .public)
        let legacy: [(UInt16, UInt16)] = [(0, 0x13), (1, 0x15), (2, 0x12), (3, 0x10), (4, 0x1A)]
        for (type, bits) in legacy {
            let report = AdvertisingReport(eventType: type, isExtended: false, address: address, rssi: -60, data: [])
            #expect(report.advertisingEvent == bits, "legacy type \(type)")
        }
        var decoder = AdvertisingReportDecoder()
        let reports = try decoder.reports(fromEvent: extendedEvent(status: 2, data: [2, 1, 6], type: 0x001B))
        #expect(reports.map(\.advertisingEvent) == [0x1B])
        let extended = try decoder.reports(fromEvent: extendedEvent(status: 0, data: [2, 1, 6], type: 0x0000))
        #expect(extended.map(\.advertisingEvent) == [0x00])
    }

    @Test func truncatedExtendedData() throws {
        var decoder = AdvertisingReportDecoder()
        _ = try decoder.reports(fromEvent: extendedEvent(status: 1, data: [2, 1]))
        let reports = try decoder.reports(fromEvent: extendedEvent(status: 2, data: [6]))
        #expect(reports.first?.isTruncated == true)
        #expect(reports.first?.data == [2, 1, 6])
    }
}
