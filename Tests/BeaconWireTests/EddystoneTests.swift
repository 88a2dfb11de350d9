import Testing
@testable import BeaconWire

/// Frame layouts and tables from the Eddystone protocol specification (github.com/google/eddystone:
/// eddystone-uid, eddystone-url, eddystone-tlm/tlm-plain.md and tlm-encrypted.md, eddystone-eid).
@Suite struct EddystoneTests {
    func frame(_ hex: String) throws(DecodeError) -> BeaconFrame {
        try Eddystone.decode(bytes(hex)[...])
    }

    @Test func uidWithAndWithoutRFUBytes() throws {
        // Namespace e157bd5df90aad1dc2fb (the first 10 bytes of SHA-1 of a domain, the spec's suggested method).
        for hex in ["00e7e157bd5df90aad1dc2fb0000000000010000", "00e7e157bd5df90aad1dc2fb000000000001"] {
            guard case .eddystoneUID(let uid) = try frame(hex) else {
                Issue.record("not a UID frame")
                continue
            }
            #expect(uid.txPower == -25)
            #expect(uid.namespace == "e157bd5df90aad1dc2fb")
            #expect(uid.instanceHex == "000000000001")
            #expect(uid.beaconID == "eddystone:e157bd5df90aad1dc2fb:000000000001")
        }
    }

    @Test(arguments: [17, 19, 21])
    func uidOfAnotherLengthIsInvalid(length: Int) {
        let hex = "00e7" + String(repeating: "ab", count: length - 2)
        #expect(decodeError { _ = try frame(hex) }?.code == .invalidLength)
    }

    @Test func urlFromAPublishedHcitoolExample() throws {
        // `hcitool cmd 0x08 0x0008 ... 0e 16 aa fe 10 00 03 6d 79 70 2e 6d 65 3f 41`: https:// then "myp.me?A".
        let payload = bytes("020106 0303aafe 0e16aafe1000036d79702e6d653f41")
        let frames = try decodeFrames(payload)
        #expect(frames == [.eddystoneURL(try #require(EddystoneURL(txPower: 0, url: "https://myp.me?A")))])
    }

    @Test(arguments: [
        ("00", "http://www."), ("01", "https://www."), ("02", "http://"), ("03", "https://"),
    ])
    func everyScheme(code: String, prefix: String) throws {
        #expect(try frame("10f6" + code + "61") == .eddystoneURL(try #require(EddystoneURL(txPower: -10, url: prefix + "a"))))
    }

    @Test func everyExpansionCode() throws {
        let expected = [
            ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/", ".com", ".org", ".edu", ".net", ".info",
            ".biz", ".gov",
        ]
        for (code, expansion) in expected.enumerated() {
            let hex = "10f602" + "78" + hexString(UInt64(code), digits: 2)
            #expect(try frame(hex) == .eddystoneURL(try #require(EddystoneURL(txPower: -10, url: "http://x" + expansion))))
        }
    }

    @Test func invalidSchemeAndReservedBytesAreRejectedWithTheirOffset() {
        let scheme = decodeError { _ = try frame("10f60461") }
        #expect(scheme?.code == .invalidValue)
        #expect(scheme?.offset == 2)
        for reserved in ["0e", "20", "7f", "ff"] {
            let error = decodeError { _ = try frame("10f60361" + reserved) }
            #expect(error?.code == .invalidValue, "byte \(reserved)")
            #expect(error?.offset == 4)
        }
    }

    @Test func overlongURLIsRejected() throws {
        // 17 encoded bytes is the maximum (a 20-byte frame); 18 is one too many.
        _ = try frame("10f603" + String(repeating: "61", count: 17))
        #expect(decodeError { _ = try frame("10f603" + String(repeating: "61", count: 18)) }?.code == .invalidLength)
        #expect(decodeError { _ = try frame("10f6") }?.code == .invalidLength)
    }

    @Test func urlFrameKeepsItsEncodedBytes() throws {
        // All 17 bytes, so every packed position (0-7, 8-15, 16) is read back.
        let encoded = Array("abcdefghijklmnop".utf8) + [0x07]
        guard case .eddystoneURL(let url) = try frame("10f603" + encoded.hexString) else {
            Issue.record("not a URL frame")
            return
        }
        #expect(url.scheme == 3)
        #expect(url.encoded == encoded)
        #expect(url.url == "https://abcdefghijklmnop.com")
        // The same text sent as an expansion code and as literal characters: one URL, two different frames.
        guard case .eddystoneURL(let literal) = try frame("10f603" + Array("abcdefghijklmnop.com".utf8.prefix(17)).hexString)
        else { return }
        #expect(literal.url == "https://abcdefghijklmnop.")
        #expect(literal != url)
    }

    @Test func urlEncodingRoundTrips() throws {
        for url in ["https://www.example.com/", "http://goo.gl/S6zT6P", "https://beacon.info", "http://a.gov/x"] {
            let encoded = try #require(EddystoneURL.encode(url))
            #expect(try frame("10f6" + encoded.hexString) == .eddystoneURL(try #require(EddystoneURL(txPower: -10, url: url))))
        }
        #expect(EddystoneURL.encode("ftp://x") == nil)
        #expect(EddystoneURL.encode("https://" + String(repeating: "a", count: 18)) == nil)
    }

    @Test func tlmFields() throws {
        // VBATT 3000 mV, TEMP 23.5 °C (0x1780 in 8.8), ADV_CNT 0x1234, SEC_CNT 0xABCDEF tenths.
        guard case .eddystoneTLM(let tlm) = try frame("20000bb8178000001234 00abcdef".replacingOccurrences(of: " ", with: "")) else {
            Issue.record("not TLM")
            return
        }
        #expect(tlm.batteryMillivolts == 3000)
        #expect(tlm.temperatureCelsius == 23.5)
        #expect(tlm.advertisingCount == 0x1234)
        #expect(tlm.uptimeSeconds == 1_125_937.5)
    }

    @Test func tlmNegativeTemperatureAndUnsupportedValues() throws {
        guard case .eddystoneTLM(let negative) = try frame("20000bb8ff8000000001 00000001".replacingOccurrences(of: " ", with: "")) else {
            Issue.record("not TLM")
            return
        }
        #expect(negative.temperatureCelsius == -0.5)
        guard case .eddystoneTLM(let unsupported) = try frame("2000000080000000000100000001") else {
            Issue.record("not TLM")
            return
        }
        #expect(unsupported.batteryMillivolts == nil)
        #expect(unsupported.temperatureCelsius == nil)
        let json = BeaconFrame.eddystoneTLM(unsupported).json
        #expect(json["battery_mv"] == .null)
        #expect(json["temperature_c"] == .null)
    }

    @Test func unknownTLMVersionAndFrameType() {
        let version = decodeError { _ = try frame("2002" + String(repeating: "00", count: 12)) }
        #expect(version?.code == .unsupportedVersion)
        #expect(version?.offset == 1)
        #expect(decodeError { _ = try frame("40000000") }?.code == .unknownType)
        #expect(decodeError { _ = try frame("") }?.code == .truncated)
    }

    @Test func tlmAndETLMLengthsAreExact() {
        #expect(decodeError { _ = try frame("2000" + String(repeating: "00", count: 11)) }?.code == .invalidLength)
        #expect(decodeError { _ = try frame("2001" + String(repeating: "00", count: 15)) }?.code == .invalidLength)
        #expect(decodeError { _ = try frame("30f6" + String(repeating: "00", count: 7)) }?.code == .invalidLength)
    }

    @Test func etlmAndEIDRawFields() throws {
        guard case .eddystoneETLM(let etlm) = try frame("2001508a958a57ca8c6a8b1ba0c3beefa04d") else {
            Issue.record("not eTLM")
            return
        }
        #expect(etlm.ciphertext == bytes("508a958a57ca8c6a8b1ba0c3"))
        #expect(etlm.salt == 0xBEEF)
        #expect(etlm.mic == 0xA04D)
        #expect(etlm.decrypted == nil)
        guard case .eddystoneEID(let eid) = try frame("30f64cea4a8f8bcaaaea") else {
            Issue.record("not EID")
            return
        }
        #expect(eid.eidHex == "4cea4a8f8bcaaaea")
        #expect(eid.txPower == -10)
    }

    @Test func truncatedAtEveryByte() throws {
        for hex in [
            "00e7e157bd5df90aad1dc2fb0000000000010000", "10f6036578616d706c6507", "20000bb8178000001234 00abcdef",
            "2001508a958a57ca8c6a8b1ba0c3beefa04d", "30f64cea4a8f8bcaaaea",
        ] {
            let full = bytes(hex)
            for cut in 0..<full.count {
                do {
                    _ = try Eddystone.decode(full[..<cut])
                    // A URL frame cut inside its text is a shorter, still valid URL; a UID cut before its two RFU
                    // bytes is the 18-byte form.
                    #expect((full[0] == 0x10 && cut >= 3) || (full[0] == 0x00 && cut == 18), "\(hex) cut at \(cut) decoded")
                } catch {
                    #expect([.truncated, .invalidLength].contains(error.code))
                }
            }
        }
    }
}
