/// One advertisement as the controller reported it (Core Specification Vol 4, Part E, §7.7.65.2 and §7.7.65.13).
public struct AdvertisingReport: Hashable, Sendable {
    /// Legacy: 0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
    /// Extended: the event-type bit field (bit 0 connectable … bit 4 legacy, bits 5–6 data status).
    public var eventType: UInt16
    public var isExtended: Bool
    public var address: DeviceAddress
    /// dBm; nil when the controller reports 127 (not available).
    public var rssi: Int8?
    /// Extended reports only: the advertiser's transmit power in dBm; nil when not available.
    public var txPower: Int8?
    /// Extended reports only: the advertising set id (0xFF when none).
    public var sid: UInt8?
    public var primaryPHY: UInt8?
    public var secondaryPHY: UInt8?
    /// The advertising data, reassembled from all fragments of an extended report.
    public var data: [UInt8]
    /// The controller truncated the data (extended data status 0b10).
    public var isTruncated = false

    /// The five event-type bits of an extended report, without the data status: 0 connectable, 1 scannable,
    /// 2 directed, 3 scan response, 4 legacy PDU.
    public static let advertisingEventBits: UInt32 = 0x1F

    /// How the advertisement was sent, in the event-type bits of an extended report whatever the report's kind: a
    /// legacy report's type maps to the bits Core Vol 4, Part E, §7.7.65.13 gives its PDU (a legacy SCAN_RSP,
    /// which does not say what it answers, to a scannable one's, 0x1A).
    public var advertisingEvent: UInt16 {
        if isExtended { return eventType & UInt16(Self.advertisingEventBits) }
        switch eventType {
        case 0: return 0x13  // ADV_IND
        case 1: return 0x15  // ADV_DIRECT_IND
        case 2: return 0x12  // ADV_SCAN_IND
        case 4: return 0x1A  // SCAN_RSP
        default: return 0x10  // ADV_NONCONN_IND, and types no controller sends
        }
    }

    public init(
        eventType: UInt16, isExtended: Bool, address: DeviceAddress, rssi: Int8?, data: [UInt8]
    ) {
        self.eventType = eventType
        self.isExtended = isExtended
        self.address = address
        self.rssi = rssi
        self.data = data
    }
}

/// Decodes LE Meta events carrying advertising reports: LE Advertising Report (subevent 0x02, several reports an
/// event) and LE Extended Advertising Report (0x0D), whose fragments it reassembles per advertiser and set id.
/// Other events are not advertising reports and yield nothing.
public struct AdvertisingReportDecoder: Sendable {
    public static let leMetaEvent: UInt8 = 0x3E
    public static let legacyReportSubevent: UInt8 = 0x02
    public static let extendedReportSubevent: UInt8 = 0x0D

    /// Fragments of one advertisement: a scan response (event type bit 3) is reassembled apart from the
    /// advertisement it answers, and keeps its own event type.
    private struct FragmentKey: Hashable {
        var address: UInt64
        var kind: DeviceAddress.Kind
        var sid: UInt8
        var scanResponse: Bool
    }

    private var fragments: [FragmentKey: AdvertisingReport] = [:]
    /// Reassembly stops at the largest extended advertising data the Core Specification allows.
    public static let maximumExtendedDataLength = 1650
    /// Event type bit 3 of an extended report: the data is a scan response (Core Vol 4, Part E, §7.7.65.13).
    static let scanResponseBit: UInt16 = 0x0008

    public init() {}

    /// Extended fragments still waiting for their last part.
    public var pendingFragments: Int { fragments.count }

    /// Decodes one HCI event, starting at its event code. Returns the complete reports it finishes.
    public mutating func reports(fromEvent event: [UInt8]) throws(DecodeError) -> [AdvertisingReport] {
        try reports(fromEvent: event[...], base: 0)
    }

    public mutating func reports(fromEvent event: ArraySlice<UInt8>, base: Int) throws(DecodeError) -> [AdvertisingReport] {
        var reader = ByteReader(event, base: base)
        let code = try reader.u8("event code")
        let lengthOffset = reader.offset
        let length = Int(try reader.u8("event parameter length"))
        if length != reader.remaining {
            throw DecodeError(
                length > reader.remaining ? .lengthOverrun : .invalidLength, at: lengthOffset,
                "event parameter length \(length) does not match the \(reader.remaining) bytes that follow")
        }
        guard code == Self.leMetaEvent else { return [] }
        let subevent = try reader.u8("LE meta subevent")
        switch subevent {
        case Self.legacyReportSubevent: return try legacyReports(&reader)
        case Self.extendedReportSubevent: return try extendedReports(&reader)
        default: return []
        }
    }

    private func legacyReports(_ reader: inout ByteReader) throws(DecodeError) -> [AdvertisingReport] {
        let count = Int(try reader.u8("number of reports"))
        var reports: [AdvertisingReport] = []
        reports.reserveCapacity(count)
        for _ in 0..<count {
            let eventType = try reader.u8("report event type")
            let addressType = try reader.u8("report address type")
            let address = try DeviceAddress.readHCI(&reader, type: addressType)
            let lengthOffset = reader.offset
            let length = Int(try reader.u8("report data length"))
            if length > 31 {
                throw DecodeError(
                    .invalidLength, at: lengthOffset, "legacy report data length \(length) is above the maximum of 31")
            }
            if length + 1 > reader.remaining {
                throw DecodeError(
                    .lengthOverrun, at: lengthOffset,
                    "report data length \(length) runs past the end of the event (\(reader.remaining) bytes left)")
            }
            let data = Array(try reader.slice(length, "report data"))
            let rssi = try reader.i8("report RSSI")
            reports.append(
                AdvertisingReport(
                    eventType: UInt16(eventType), isExtended: false, address: address, rssi: rssi == 127 ? nil : rssi,
                    data: data))
        }
        return reports
    }

    private mutating func extendedReports(_ reader: inout ByteReader) throws(DecodeError) -> [AdvertisingReport] {
        let count = Int(try reader.u8("number of reports"))
        var complete: [AdvertisingReport] = []
        for _ in 0..<count {
            let eventType = try reader.u16le("report event type")
            let addressType = try reader.u8("report address type")
            let address = try DeviceAddress.readHCI(&reader, type: addressType)
            let primaryPHY = try reader.u8("primary PHY")
            let secondaryPHY = try reader.u8("secondary PHY")
            let sid = try reader.u8("advertising SID")
            let txPower = try reader.i8("tx power")
            let rssi = try reader.i8("RSSI")
            try reader.skip(2 + 1 + 6, "periodic interval and direct address")
            let lengthOffset = reader.offset
            let length = Int(try reader.u8("report data length"))
            if length > reader.remaining {
                throw DecodeError(
                    .lengthOverrun, at: lengthOffset,
                    "report data length \(length) runs past the end of the event (\(reader.remaining) bytes left)")
            }
            let data = try reader.slice(length, "report data")
            let status = (eventType >> 5) & 0x03

            let key = FragmentKey(
                address: address.value, kind: address.kind, sid: sid, scanResponse: eventType & Self.scanResponseBit != 0)
            var report =
                fragments.removeValue(forKey: key)
                ?? AdvertisingReport(eventType: eventType, isExtended: true, address: address, rssi: nil, data: [])
            report.eventType = eventType & ~(0x03 << 5)
            report.rssi = rssi == 127 ? nil : rssi
            report.txPower = txPower == 127 ? nil : txPower
            report.sid = sid
            report.primaryPHY = primaryPHY
            report.secondaryPHY = secondaryPHY
            report.data += data
            if report.data.count > Self.maximumExtendedDataLength {
                report.data.removeLast(report.data.count - Self.maximumExtendedDataLength)
                report.isTruncated = true
                complete.append(report)
                continue
            }
            switch status {
            case 0b01: fragments[key] = report  // more to come
            case 0b10:
                report.isTruncated = true
                complete.append(report)
            default: complete.append(report)
            }
        }
        return complete
    }

    /// Builds an LE Advertising Report event (subevent 0x02) with one report, as a controller would send it.
    public static func legacyReportEvent(
        eventType: UInt8 = 0x03, address: DeviceAddress, rssi: Int8, data: [UInt8]
    ) -> [UInt8] {
        precondition(data.count <= 31, "legacy advertising data is at most 31 bytes")
        let parameters: [UInt8] =
            [legacyReportSubevent, 1, eventType, address.kind == .random ? 1 : 0] + address.hciBytes
            + [UInt8(data.count)] + data + [UInt8(bitPattern: rssi)]
        return [leMetaEvent, UInt8(parameters.count)] + parameters
    }
}
