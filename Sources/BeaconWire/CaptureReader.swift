/// The capture formats `CaptureReader` recognises from their first bytes.
public enum CaptureFormat: Hashable, Sendable {
    /// btsnoop version 1 with its datalink: 1001 (HCI without H4 type), 1002 (H4, Android), 2001 (btmon -w).
    case btsnoop(datalink: UInt32)
    /// libpcap with its link type: 201 (Bluetooth H4 with a 4-byte direction header) or 187 (plain H4).
    case pcap(linkType: UInt32)
    case pcapng
}

/// One HCI packet from a capture.
public struct CaptureRecord: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        case command
        case acl
        case sco
        case event
        case iso
        /// Capture metadata (btmon notes, index events) and unknown packet types.
        case other
    }

    /// Microseconds since the Unix epoch, UTC.
    public var timestamp: Int64
    public var kind: Kind
    /// True for packets from the controller to the host.
    public var received: Bool
    /// The HCI packet without its H4 type byte (an event starts at its event code).
    public var packet: [UInt8]
    /// Offset of the record in the file.
    public var offset: Int
}

/// An incremental reader for btsnoop, pcap and pcapng captures of HCI traffic: feed it bytes as they are read,
/// take records as they complete. It never reads past what it was given; a partial record waits for more bytes,
/// and `finish()` reports one left at the end.
public struct CaptureReader: Sendable {
    public private(set) var format: CaptureFormat?
    /// Total bytes consumed so far: the file offset of the next record.
    public private(set) var consumed = 0

    private var buffer: [UInt8] = []
    private var start = 0
    private var bigEndian = true
    /// pcap: timestamp fraction is nanoseconds rather than microseconds.
    private var nanosecondPcap = false
    /// pcapng: per interface, link type and ticks per second.
    private var interfaces: [(linkType: UInt32, ticksPerSecond: UInt64)] = []

    /// The difference between btsnoop's epoch (year 0) and Unix time, in microseconds.
    public static let btsnoopEpochOffset: Int64 = 0x00DC_DDB3_0F2F_8000
    /// Records larger than this are rejected as corrupt rather than buffered.
    public static let maximumRecordLength = 1 << 20

    public init() {}

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 65_536, start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    private var available: Int { buffer.count - start }

    /// Reports a partial record or header left at the end of the input.
    public func finish() throws(DecodeError) {
        if available > 0 {
            throw DecodeError(
                .truncated, at: consumed,
                "capture ends inside a record: \(available) byte\(available == 1 ? "" : "s") left over")
        }
        if format == nil {
            throw DecodeError(.truncated, at: 0, "capture is empty")
        }
    }

    /// The next complete record, or nil when more bytes are needed.
    public mutating func next() throws(DecodeError) -> CaptureRecord? {
        while true {
            if format == nil {
                guard try readFileHeader() else { return nil }
            }
            switch format {
            case .btsnoop(let datalink)?:
                return try nextBtsnoop(datalink: datalink)
            case .pcap(let linkType)?:
                return try nextPcap(linkType: linkType)
            case .pcapng?:
                switch try nextPcapngBlock() {
                case .needMore: return nil
                case .record(let record): return record
                case .skipped: continue
                }
            case nil:
                return nil
            }
        }
    }

    // MARK: Field access on the buffer

    private func u16(_ at: Int) -> UInt32 {
        let a = UInt32(buffer[start + at]), b = UInt32(buffer[start + at + 1])
        return bigEndian ? a << 8 | b : b << 8 | a
    }

    private func u32(_ at: Int) -> UInt32 {
        bigEndian ? u32be(at) : u16(at) | u16(at + 2) << 16
    }

    private func u32be(_ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 << 8 | UInt32(buffer[start + at + $1]) }
    }

    private mutating func consume(_ count: Int) {
        start += count
        consumed += count
    }

    private func bytes(_ range: Range<Int>) -> [UInt8] {
        Array(buffer[(start + range.lowerBound)..<(start + range.upperBound)])
    }

    // MARK: File headers

    private mutating func readFileHeader() throws(DecodeError) -> Bool {
        guard available >= 4 else { return false }
        let magic = u32be(0)
        switch magic {
        case 0x6274_736E:  // "btsn"
            guard available >= 16 else { return false }
            guard bytes(0..<8) == Array("btsnoop\0".utf8) else {
                throw DecodeError(.badMagic, at: 0, "file starts like btsnoop but its magic is not \"btsnoop\\0\"")
            }
            bigEndian = true
            let version = u32(8)
            guard version == 1 else {
                throw DecodeError(.unsupportedVersion, at: 8, "btsnoop version \(version) is not 1")
            }
            let datalink = u32(12)
            guard [1001, 1002, 2001].contains(datalink) else {
                throw DecodeError(
                    .unsupportedDatalink, at: 12, "btsnoop datalink \(datalink) is not 1001, 1002 or 2001")
            }
            format = .btsnoop(datalink: datalink)
            consume(16)
        case 0xA1B2_C3D4, 0xD4C3_B2A1, 0xA1B2_3C4D, 0x4D3C_B2A1:
            guard available >= 24 else { return false }
            bigEndian = magic == 0xA1B2_C3D4 || magic == 0xA1B2_3C4D
            nanosecondPcap = magic == 0xA1B2_3C4D || magic == 0x4D3C_B2A1
            let linkType = u32(20) & 0x0FFF_FFFF
            guard linkType == 201 || linkType == 187 else {
                throw DecodeError(
                    .unsupportedDatalink, at: 20,
                    "pcap link type \(linkType) is not 201 (Bluetooth HCI H4 with direction) or 187 (H4)")
            }
            format = .pcap(linkType: linkType)
            consume(24)
        case 0x0A0D_0D0A:
            format = .pcapng
        default:
            throw DecodeError(
                .badMagic, at: 0, "not a btsnoop, pcap or pcapng capture (first bytes \(bytes(0..<4).hexString))")
        }
        return true
    }

    // MARK: btsnoop

    private mutating func nextBtsnoop(datalink: UInt32) throws(DecodeError) -> CaptureRecord? {
        guard available >= 24 else { return nil }
        let included = Int(u32(4))
        guard included <= Self.maximumRecordLength else {
            throw DecodeError(
                .invalidLength, at: consumed + 4, "btsnoop record claims \(included) bytes, more than any HCI packet")
        }
        guard available >= 24 + included else { return nil }
        let flags = u32(8)
        let rawTime = Int64(bitPattern: UInt64(u32(16)) << 32 | UInt64(u32(20)))
        let timestamp = rawTime &- Self.btsnoopEpochOffset
        var packet = bytes(24..<(24 + included))
        let offset = consumed
        consume(24 + included)

        var kind: CaptureRecord.Kind
        var received = flags & 0x01 != 0
        switch datalink {
        case 1001:
            // bit 0: 1 received; bit 1: 1 command or event, 0 data.
            kind = flags & 0x02 == 0 ? .acl : (received ? .event : .command)
        case 1002:
            guard let h4 = packet.first else {
                throw DecodeError(.truncated, at: offset + 24, "btsnoop 1002 record has no H4 packet type")
            }
            kind = Self.kind(h4: h4)
            packet.removeFirst()
        default:
            // btmon: flags = adapter index << 16 | opcode.
            switch flags & 0xFFFF {
            case 2: (kind, received) = (.command, false)
            case 3: (kind, received) = (.event, true)
            case 4: (kind, received) = (.acl, false)
            case 5: (kind, received) = (.acl, true)
            case 6: (kind, received) = (.sco, false)
            case 7: (kind, received) = (.sco, true)
            case 18: (kind, received) = (.iso, false)
            case 19: (kind, received) = (.iso, true)
            default: (kind, received) = (.other, false)
            }
        }
        return CaptureRecord(timestamp: timestamp, kind: kind, received: received, packet: packet, offset: offset)
    }

    static func kind(h4: UInt8) -> CaptureRecord.Kind {
        switch h4 {
        case 0x01: return .command
        case 0x02: return .acl
        case 0x03: return .sco
        case 0x04: return .event
        case 0x05: return .iso
        default: return .other
        }
    }

    // MARK: pcap

    private mutating func nextPcap(linkType: UInt32) throws(DecodeError) -> CaptureRecord? {
        guard available >= 16 else { return nil }
        let included = Int(u32(8))
        guard included <= Self.maximumRecordLength else {
            throw DecodeError(
                .invalidLength, at: consumed + 8, "pcap record claims \(included) bytes, more than any HCI packet")
        }
        guard available >= 16 + included else { return nil }
        let seconds = Int64(u32(0))
        let fraction = Int64(u32(4))
        let timestamp = seconds * 1_000_000 + (nanosecondPcap ? fraction / 1000 : fraction)
        let offset = consumed
        let data = bytes(16..<(16 + included))
        consume(16 + included)
        return try h4Record(data, linkType: linkType, timestamp: timestamp, offset: offset, dataOffset: offset + 16)
    }

    private func h4Record(
        _ data: [UInt8], linkType: UInt32, timestamp: Int64, offset: Int, dataOffset: Int
    ) throws(DecodeError) -> CaptureRecord {
        var packet = data[...]
        var received = false
        if linkType == 201 {
            guard packet.count >= 5 else {
                throw DecodeError(
                    .truncated, at: dataOffset, "H4 record of \(packet.count) bytes lacks its direction and packet type")
            }
            // The direction header is big-endian whatever the file's byte order: 0 sent, 1 received.
            received = packet[packet.startIndex + 3] & 0x01 != 0
            packet = packet.dropFirst(4)
        }
        guard let h4 = packet.first else {
            throw DecodeError(.truncated, at: dataOffset, "H4 record has no packet type")
        }
        let kind = Self.kind(h4: h4)
        if linkType == 187 { received = kind == .event }
        return CaptureRecord(
            timestamp: timestamp, kind: kind, received: received, packet: Array(packet.dropFirst()), offset: offset)
    }

    // MARK: pcapng

    private enum BlockResult {
        case needMore
        case record(CaptureRecord)
        case skipped
    }

    private mutating func nextPcapngBlock() throws(DecodeError) -> BlockResult {
        guard available >= 12 else { return .needMore }
        let blockType = u32be(0)
        if blockType == 0x0A0D_0D0A {
            // The section header's byte-order magic decides how everything in the section is read.
            let byteOrder = u32be(8)
            switch byteOrder {
            case 0x1A2B_3C4D: bigEndian = true
            case 0x4D3C_2B1A: bigEndian = false
            default:
                throw DecodeError(.badMagic, at: consumed + 8, "pcapng byte-order magic \(hexString(UInt64(byteOrder), digits: 8)) is invalid")
            }
            interfaces = []
        }
        let type = u32(0)
        let length = Int(u32(4))
        guard length >= 12, length % 4 == 0, length <= Self.maximumRecordLength else {
            throw DecodeError(.invalidLength, at: consumed + 4, "pcapng block length \(length) is invalid")
        }
        guard available >= length else { return .needMore }
        let offset = consumed
        defer { consume(length) }
        switch type {
        case 1:  // Interface Description Block
            guard length >= 20 else {
                throw DecodeError(.invalidLength, at: offset + 4, "pcapng interface block is \(length) bytes")
            }
            let linkType = u16(8)
            var ticks: UInt64 = 1_000_000
            var position = 16
            while position + 4 <= length - 4 {
                let code = u16(position)
                let optionLength = Int(u16(position + 2))
                if code == 0 { break }
                if code == 9, optionLength >= 1, position + 4 < length - 4 {
                    let resolution = buffer[start + position + 4]
                    let exponent = UInt64(resolution & 0x7F)
                    if exponent < 20 || resolution & 0x80 != 0 && exponent < 63 {
                        ticks = resolution & 0x80 != 0 ? 1 << exponent : (0..<exponent).reduce(1) { r, _ in r * 10 }
                    }
                }
                position += 4 + (optionLength + 3) / 4 * 4
            }
            interfaces.append((linkType, ticks))
            return .skipped
        case 6:  // Enhanced Packet Block
            guard length >= 32 else {
                throw DecodeError(.invalidLength, at: offset + 4, "pcapng packet block is \(length) bytes")
            }
            let interface = Int(u32(8))
            guard interface < interfaces.count else {
                throw DecodeError(
                    .invalidValue, at: offset + 8, "pcapng packet names interface \(interface), which was not described")
            }
            let (linkType, ticksPerSecond) = interfaces[interface]
            guard linkType == 201 || linkType == 187 else {
                throw DecodeError(
                    .unsupportedDatalink, at: offset + 8,
                    "pcapng interface link type \(linkType) is not 201 or 187")
            }
            let ticks = UInt64(u32(12)) << 32 | UInt64(u32(16))
            let captured = Int(u32(20))
            guard 28 + captured <= length - 4 else {
                throw DecodeError(
                    .lengthOverrun, at: offset + 20, "pcapng packet length \(captured) runs past its block")
            }
            let timestamp = Int64(ticks / ticksPerSecond) * 1_000_000
                + Int64((ticks % ticksPerSecond) * 1_000_000 / ticksPerSecond)
            let data = bytes(28..<(28 + captured))
            return .record(
                try h4Record(data, linkType: linkType, timestamp: timestamp, offset: offset, dataOffset: offset + 28))
        default:
            return .skipped
        }
    }
}

/// Writes btsnoop version 1 captures with datalink 1002 (H4), the format Android and `btmon -r` read.
public enum BtsnoopWriter {
    public static let fileHeader: [UInt8] = Array("btsnoop\0".utf8) + [0, 0, 0, 1] + [0, 0, 0x03, 0xEA]

    /// One record: `packet` without its H4 byte, timestamp in Unix microseconds.
    public static func record(kind: CaptureRecord.Kind, received: Bool, packet: [UInt8], timestamp: Int64) -> [UInt8] {
        let h4: UInt8
        switch kind {
        case .command: h4 = 0x01
        case .acl: h4 = 0x02
        case .sco: h4 = 0x03
        case .event: h4 = 0x04
        case .iso: h4 = 0x05
        case .other: h4 = 0xFF
        }
        let length = UInt32(packet.count + 1)
        let isCommandOrEvent = kind == .command || kind == .event
        let flags = UInt32(received ? 1 : 0) | UInt32(isCommandOrEvent ? 2 : 0)
        let time = UInt64(bitPattern: timestamp &+ CaptureReader.btsnoopEpochOffset)
        var out: [UInt8] = []
        out.reserveCapacity(24 + packet.count + 1)
        for word in [length, length, flags, 0] {
            out += [UInt8(word >> 24), UInt8((word >> 16) & 0xFF), UInt8((word >> 8) & 0xFF), UInt8(word & 0xFF)]
        }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((time >> UInt64(shift)) & 0xFF)) }
        out.append(h4)
        out += packet
        return out
    }
}
