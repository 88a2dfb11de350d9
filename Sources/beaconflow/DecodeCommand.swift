import ArgumentParser
import BeaconWire
import Foundation

struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode advertising data, HCI events, beacon frames or capture files to JSON lines.",
        discussion: """
            Prints one JSON object per advertisement (or per value). Malformed input prints \
            {"error": {"code": ..., "offset": ..., "message": ...}} and exits with status 1.

            Examples:
              beaconflow decode \\
                --hex 0201060303aafe1516aafe00e70102030405060708090a0000000000a10000
              beaconflow decode --as hci-event \\
                --hex 3e1c02010301b8abc05d4cd91002010407160918470800fe04160f185bb3
              beaconflow decode --hex 10f6036578616d706c6507 --as eddystone
              beaconflow decode --as manufacturer \\
                --hex 4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5
              beaconflow decode --hex 6c01 --as characteristic:2A6E
              beaconflow decode --hex 6cf1 --as sfloat
              beaconflow decode --btsnoop examples/mixed-beacons.btsnoop
              beaconflow decode --pcap examples/mixed-beacons.pcapng
            """
    )

    @Option(name: .long, help: "Bytes to decode, in hex (spaces and colons are ignored).")
    var hex: String?

    @Option(
        name: .customLong("as"),
        help: "How to read --hex: ad, hci-event, eddystone, manufacturer, characteristic:UUID, sfloat or float.")
    var interpretation: String = "ad"

    @Option(name: .long, help: "A btsnoop capture (datalink 1001, 1002 or btmon's 2001).")
    var btsnoop: String?

    @Option(name: .long, help: "A pcap or pcapng capture with link type 201 (Bluetooth HCI H4 with direction) or 187.")
    var pcap: String?

    @Option(
        name: .long,
        help: "An Eddystone identity key for EID resolution and eTLM decryption: BEACON_ID=KEYHEX[:K[:CLOCK_OFFSET_S]]. Repeatable."
    )
    var identityKey: [String] = []

    @Option(name: .long, help: "A BTHome bindkey: AA:BB:CC:DD:EE:FF=KEYHEX. Repeatable.")
    var bindkey: [String] = []

    @Option(name: .long, help: "Unix time in seconds at which --hex input was received (for EID resolution); default now.")
    var unixTime: Int64?

    func validate() throws {
        let sources = [hex, btsnoop, pcap].compactMap { $0 }
        guard sources.count == 1 else {
            throw ValidationError("Give exactly one of --hex, --btsnoop or --pcap.")
        }
        if let unixTime, !(0...BatchReader.latestMicros / 1_000_000).contains(unixTime) {
            throw ValidationError("--unix-time must be between 0 (1970) and 7258118400 (2200-01-01).")
        }
    }

    func run() throws {
        var decoder = FrameDecoder(keyring: try parseIdentityKeys(), bindkeys: try parseBindkeys())
        var output = JSONLineWriter()
        let ok: Bool
        if let hex {
            ok = decodeHex(hex, decoder: &decoder, output: &output)
        } else {
            ok = decodeCapture(path: (btsnoop ?? pcap)!, decoder: &decoder, output: &output)
        }
        output.flush()
        if !ok { throw ExitCode(1) }
    }

    private func parseIdentityKeys() throws -> EddystoneKeyring {
        var identities: [EddystoneIdentity] = []
        for entry in identityKey {
            guard let separator = entry.lastIndex(of: "=") else {
                throw ValidationError("--identity-key '\(entry)' is not BEACON_ID=KEYHEX[:K[:CLOCK_OFFSET_S]]")
            }
            let id = String(entry[..<separator])
            let parts = entry[entry.index(after: separator)...].split(separator: ":", omittingEmptySubsequences: false)
            guard let keyText = parts.first, let key = try? [UInt8](hex: keyText), key.count == 16 else {
                throw ValidationError("--identity-key for \(id): the key must be 32 hex digits")
            }
            var exponent: UInt8? = nil
            if parts.count > 1 {
                guard let k = UInt8(parts[1]), k <= 15 else {
                    throw ValidationError("--identity-key for \(id): the rotation exponent K must be 0 to 15")
                }
                exponent = k
            }
            var offset: Int64 = 0
            if parts.count > 2 {
                guard let value = Int64(parts[2]) else {
                    throw ValidationError("--identity-key for \(id): the clock offset must be whole seconds")
                }
                offset = value
            }
            identities.append(
                EddystoneIdentity(beaconID: id, identityKey: key, rotationExponent: exponent, clockOffsetSeconds: offset))
        }
        return EddystoneKeyring(identities: identities)
    }

    private func parseBindkeys() throws -> [UInt64: [UInt8]] {
        var keys: [UInt64: [UInt8]] = [:]
        for entry in bindkey {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let address = DeviceAddress(String(parts[0])) else {
                throw ValidationError("--bindkey '\(entry)' is not AA:BB:CC:DD:EE:FF=KEYHEX")
            }
            guard let key = try? [UInt8](hex: parts[1]), key.count == 16 else {
                throw ValidationError("--bindkey for \(address): the key must be 32 hex digits")
            }
            keys[address.value] = key
        }
        return keys
    }

    private func decodeHex(_ text: String, decoder: inout FrameDecoder, output: inout JSONLineWriter) -> Bool {
        let now = unixTime ?? Int64(Date().timeIntervalSince1970)
        do throws(DecodeError) {
            let bytes = try [UInt8](hex: text)
            switch interpretation.lowercased() {
            case "ad":
                let data = try AdvertisingData(parsing: bytes)
                let frames = try decoder.frames(in: data, address: nil, unixSeconds: now)
                output.write(DecodedAdvertisement(address: nil, rssi: nil, timestamp: nil, data: data, frames: frames).json)
            case "hci-event":
                var reports = AdvertisingReportDecoder()
                for report in try reports.reports(fromEvent: bytes) {
                    output.write(try decodeReport(report, timestamp: nil, decoder: &decoder, unixSeconds: now).json)
                }
            case "eddystone":
                var data = AdvertisingData()
                data.serviceData = [ServiceData(uuid: .uuid16(Eddystone.serviceUUID), data: bytes, offset: 0)]
                for frame in try decoder.frames(in: data, address: nil, unixSeconds: now) { output.write(frame.json) }
            case "manufacturer":
                guard bytes.count >= 2 else {
                    throw DecodeError(.truncated, at: 0, "manufacturer data needs a 2-byte company identifier")
                }
                var data = AdvertisingData()
                let company = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
                data.manufacturerData = [ManufacturerData(companyID: company, data: Array(bytes[2...]), offset: 2)]
                let frames = try decoder.frames(in: data, address: nil, unixSeconds: now)
                if frames.isEmpty {
                    output.write(.object(data.jsonFields.filter { $0.key == "manufacturer_data" } + [JSONField("frames", .array([]))]))
                }
                for frame in frames { output.write(frame.json) }
            case "sfloat":
                guard bytes.count == 2 else { throw DecodeError(.invalidLength, at: 0, "an SFLOAT is 2 bytes, got \(bytes.count)") }
                output.write(MedicalFloat(sfloat: UInt16(bytes[0]) | UInt16(bytes[1]) << 8).json)
            case "float":
                guard bytes.count == 4 else { throw DecodeError(.invalidLength, at: 0, "a FLOAT is 4 bytes, got \(bytes.count)") }
                let raw = bytes.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                output.write(MedicalFloat(float: raw).json)
            case let kind where kind.hasPrefix("characteristic:"):
                let uuidText = kind.dropFirst("characteristic:".count)
                guard let uuid = UInt16(uuidText.replacingOccurrences(of: "0x", with: ""), radix: 16) else {
                    output.write(usageError("characteristic UUID '\(uuidText)' is not a 16-bit hex UUID"))
                    return false
                }
                output.write(try GATTCharacteristic.decode(uuid, bytes).json)
            default:
                output.write(usageError("--as \(interpretation) is not one of ad, hci-event, eddystone, manufacturer, characteristic:UUID, sfloat, float"))
                return false
            }
            return true
        } catch {
            output.write(error.json)
            return false
        }
    }

    private func usageError(_ message: String) -> JSONValue {
        .object([JSONField("error", .object([
            JSONField("code", .string("usage")), JSONField("offset", .int(0)), JSONField("message", .string(message)),
        ]))])
    }

    private func decodeReport(
        _ report: AdvertisingReport, timestamp: Int64?, decoder: inout FrameDecoder, unixSeconds: Int64
    ) throws(DecodeError) -> DecodedAdvertisement {
        let data = try AdvertisingData(parsing: report.data)
        let frames = try decoder.frames(in: data, address: report.address, unixSeconds: unixSeconds)
        return DecodedAdvertisement(
            address: report.address, rssi: report.rssi, timestamp: timestamp, data: data, frames: frames)
    }

    /// Streams a capture: every advertisement in it, one line each; a malformed advertisement prints an error line
    /// with the record's file offset and decoding goes on, so one bad report loses nothing else.
    private func decodeCapture(path: String, decoder: inout FrameDecoder, output: inout JSONLineWriter) -> Bool {
        guard let file = FileHandle(forReadingAtPath: path) else {
            output.write(.object([JSONField("error", .object([
                JSONField("code", .string("unreadable_file")), JSONField("offset", .int(0)),
                JSONField("message", .string("cannot open \(path): \(String(cString: strerror(errno)))")),
            ]))]))
            return false
        }
        defer { try? file.close() }
        var reader = CaptureReader()
        var reports = AdvertisingReportDecoder()
        var ok = true
        do {
            while true {
                let chunk = try file.read(upToCount: 1 << 20) ?? Data()
                if chunk.isEmpty { break }
                reader.append(chunk)
                while let record = try reader.next() {
                    guard record.kind == .event else { continue }
                    do {
                        for report in try reports.reports(fromEvent: record.packet[...], base: 0) {
                            output.write(
                                try decodeReport(
                                    report, timestamp: record.timestamp, decoder: &decoder,
                                    unixSeconds: record.timestamp / 1_000_000
                                ).json)
                        }
                    } catch {
                        ok = false
                        output.write(recordError(error, recordOffset: record.offset))
                    }
                }
            }
            try reader.finish()
        } catch let error as DecodeError {
            output.write(error.json)
            ok = false
        } catch {
            output.write(.object([JSONField("error", .object([
                JSONField("code", .string("read_failed")), JSONField("offset", .int(Int64(reader.consumed))),
                JSONField("message", .string("reading \(path) failed: \(error)")),
            ]))]))
            ok = false
        }
        return ok
    }

    private func recordError(_ error: DecodeError, recordOffset: Int) -> JSONValue {
        guard case .object(var fields) = error.json, case .object(var inner) = fields[0].value else { return error.json }
        inner.append(JSONField("record_offset", .number(recordOffset)))
        fields[0].value = .object(inner)
        return .object(fields)
    }
}

/// Buffers JSON lines and writes them to standard output in large blocks.
struct JSONLineWriter {
    private var buffer = ""

    mutating func write(_ value: JSONValue) {
        value.write(to: &buffer)
        buffer += "\n"
        if buffer.utf8.count > 1 << 16 { flush() }
    }

    mutating func flush() {
        guard !buffer.isEmpty else { return }
        FileHandle.standardOutput.write(Data(buffer.utf8))
        buffer = ""
    }
}
