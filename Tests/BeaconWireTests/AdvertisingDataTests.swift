import Testing
@testable import BeaconWire

/// AD structures: Core Specification Vol 3, Part C, §11 and the Assigned Numbers' common data types.
@Suite struct AdvertisingDataTests {
    @Test func parsesEveryKnownADType() throws {
        let payload =
            ad(0x01, [0x06]) + ad(0x03, [0xAA, 0xFE, 0x0F, 0x18]) + ad(0x05, [0x78, 0x56, 0x34, 0x12])
            + ad(0x07, Array(0..<16)) + ad(0x09, Array("Cart 7".utf8)) + ad(0x0A, [0xF4]) + ad(0x19, [0x41, 0x03])
            + ad(0x20, [0x01, 0x02, 0x03, 0x04, 0xAB]) + ad(0x21, Array(0..<16) + [0xCD])
            + ad(0xFF, [0x59, 0x00, 0x01, 0x02])
        let data = try AdvertisingData(parsing: payload)
        #expect(data.flags == 6)
        #expect(data.serviceUUIDs.map(\.description) == ["feaa", "180f", "12345678", "0f0e0d0c-0b0a-0908-0706-050403020100"])
        #expect(data.localName == "Cart 7")
        #expect(data.localNameIsComplete)
        #expect(data.txPowerLevel == -12)
        #expect(data.appearance == 0x0341)
        #expect(data.serviceData.map(\.uuid.description) == ["04030201", "0f0e0d0c-0b0a-0908-0706-050403020100"])
        #expect(data.serviceData.map(\.data) == [[0xAB], [0xCD]])
        #expect(data.manufacturerData == [ManufacturerData(companyID: 0x0059, data: [1, 2], offset: payload.count - 2)])
    }

    @Test func shortenedNameIsNotComplete() throws {
        let data = try AdvertisingData(parsing: ad(0x08, Array("Ca".utf8)))
        #expect(data.localName == "Ca")
        #expect(!data.localNameIsComplete)
    }

    /// Core Specification Supplement Part A §1.2: a shortened name is the start of the complete one; the complete
    /// name is kept whichever comes first.
    @Test func theCompleteNameWinsOverAShortenedOne() throws {
        for payload in [ad(0x09, Array("Cart 7".utf8)) + ad(0x08, Array("Ca".utf8)), ad(0x08, Array("Ca".utf8)) + ad(0x09, Array("Cart 7".utf8))] {
            let data = try AdvertisingData(parsing: payload)
            #expect(data.localName == "Cart 7" && data.localNameIsComplete)
        }
    }

    @Test func zeroLengthEndsThePayload() throws {
        // Legacy PDUs are zero-padded to 31 bytes; what follows a zero length is not read.
        let payload = ad(0x01, [0x06]) + [0x00, 0x05, 0xFF]
        let data = try AdvertisingData(parsing: payload)
        #expect(data.flags == 6)
        #expect(data.manufacturerData.isEmpty)
    }

    @Test func lengthPastTheEndCarriesItsOffset() {
        let payload = ad(0x01, [0x06]) + [0x05, 0xFF, 0x4C, 0x00]
        let error = decodeError { _ = try AdvertisingData(parsing: payload) }
        #expect(error?.code == .lengthOverrun)
        #expect(error?.offset == 3)
    }

    @Test func truncationAtEveryByteIsAnErrorOrAShorterPayload() throws {
        let payload = ad(0x01, [0x06]) + ad(0x03, [0xAA, 0xFE]) + serviceData16(0xFEAA, bytes("00e70102030405060708090a0000000000a10000"))
        #expect(try FrameClassifier.classify(payload[...]).identity != nil)
        for cut in 0..<payload.count {
            let prefix = Array(payload[..<cut])
            // Either the cut falls between structures (fewer structures, no error), or it is reported.
            do {
                _ = try AdvertisingData(parsing: prefix)
                _ = try FrameClassifier.classify(prefix[...])
            } catch {
                #expect([.lengthOverrun, .invalidLength, .truncated].contains(error.code), "cut at \(cut)")
                #expect(error.offset <= cut)
            }
        }
    }

    @Test(arguments: [
        (ad(0x0A, [0x01, 0x02]), "tx power level"),
        (ad(0x19, [0x01]), "appearance"),
        (ad(0x03, [0xAA, 0xFE, 0x0F]), "16-bit"),
        (ad(0x05, [0x01, 0x02]), "32-bit"),
        (ad(0x07, Array(0..<15)), "128-bit"),
        (ad(0x16, [0xAA]), "service data"),
        (ad(0x21, Array(0..<10)), "service data"),
        (ad(0xFF, [0x4C]), "manufacturer"),
        (ad(0x01, []), "flags"),
    ])
    func wrongSizesAreInvalidLength(payload: [UInt8], mentions: String) {
        let error = decodeError { _ = try AdvertisingData(parsing: payload) }
        #expect(error?.code == .invalidLength)
        #expect(error?.offset == 0)
        #expect(error?.message.contains(mentions) == true, "\(error?.message ?? "")")
    }

    @Test func lengthOffByOneEitherWay() {
        let good = ad(0xFF, [0x4C, 0x00, 0x01])
        var long = good
        long[0] += 1
        #expect(decodeError { _ = try AdvertisingData(parsing: long) }?.code == .lengthOverrun)
        var short = good
        short[0] -= 1
        // One byte shorter leaves the last byte as a structure of its own, running past the end.
        #expect(decodeError { _ = try AdvertisingData(parsing: short) }?.offset == 4)
    }

    @Test func unknownTypesAreSkipped() throws {
        let data = try AdvertisingData(parsing: ad(0x2A, [1, 2, 3]) + ad(0x01, [0x1A]))
        #expect(data.flags == 0x1A)
    }
}

@Suite struct HexTests {
    @Test func acceptsSeparatorsAndPrefix() throws {
        #expect(try [UInt8](hex: "0x02 01:06-aA") == [0x02, 0x01, 0x06, 0xAA])
    }

    @Test func rejectsOddAndNonHex() {
        #expect(decodeError { _ = try [UInt8](hex: "abc") }?.code == .invalidHex)
        let error = decodeError { _ = try [UInt8](hex: "01zz") }
        #expect(error?.code == .invalidHex)
        #expect(error?.offset == 2)
    }
}

@Suite struct FrameClassifierTests {
    /// The classifier reads common identity frames straight from memory; on every input it must find what the
    /// bounds-checked decoders find, errors included.
    @Test func fastReadsAgreeWithTheGeneralDecoders() throws {
        var payloads: [[UInt8]] = [
            bytes("0201060303aafe1516aafe00e7e157bd5df90aad1dc2fb0000000000010000"),
            bytes("0201060303aafe1316aafe00e7e157bd5df90aad1dc2fb000000000001"),
            bytes("0201060303aafe1116aafe20000bb8178000001234 00abcdef".replacingOccurrences(of: " ", with: "")),
            bytes("0201060303aafe0d16aafe30f64cea4a8f8bcaaaea"),
            bytes("0201060303aafe0e16aafe1000036d79702e6d653f41"),
            bytes("0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"),
            bytes("1bff1801beac0102030405060708090a0b0c0d0e0f10000100020bc500"),
            bytes("0316aafe"), bytes("0416aafe20"), bytes("05ff4c000215"), bytes("05ff4c00beac"),
        ]
        for record in try readCapture(try fixture("mixed-beacons.btsnoop")) {
            payloads += try AdvertisingReportDecoder().reportsCopy(record.packet).map(\.data)
        }
        var identities = 0
        for payload in payloads {
            for cut in 0...payload.count {
                let prefix = Array(payload[..<cut])
                var mutated = prefix
                if !mutated.isEmpty { mutated[mutated.count / 2] ^= 0x5A }
                for input in [prefix, mutated] {
                    let classified = Result { () throws(DecodeError) in try FrameClassifier.classify(input[...]) }
                    let general = Result { () throws(DecodeError) in try generalIdentity(input[...]) }
                    let withoutData = classified.map { ClassifiedAdvertisement(identity: $0.identity, malformed: $0.malformed) }
                    #expect(withoutData == general, "\(input.hexString)")
                    if case .success(let found) = classified, found.identity != nil { identities += 1 }
                }
            }
        }
        #expect(identities > 50)
    }

    /// The identity frames of a payload as the bounds-checked decoders alone find them.
    private func generalIdentity(_ payload: ArraySlice<UInt8>) throws(DecodeError) -> ClassifiedAdvertisement {
        var identity: BeaconFrame?
        var malformed: DecodeError?
        var iterator = ADIterator(payload)
        while let structure = try iterator.next() {
            let data = structure.data
            guard structure.type == ADType.serviceData16 || structure.type == ADType.manufacturerData else { continue }
            guard data.count >= 2 else { throw DecodeError(.invalidLength, at: structure.offset, "short") }
            let prefix = UInt16(data[data.startIndex]) | UInt16(data[data.startIndex + 1]) << 8
            let body = data[(data.startIndex + 2)...]
            do throws(DecodeError) {
                if structure.type == ADType.serviceData16 {
                    if prefix == Eddystone.serviceUUID, let type = body.first,
                        type == Eddystone.uidFrameType || type == Eddystone.eidFrameType
                    {
                        identity = try Eddystone.decode(body, base: structure.dataOffset + 2)
                    }
                } else if prefix == IBeacon.companyID, let beacon = try IBeacon.decode(body, base: structure.dataOffset + 2) {
                    identity = .iBeacon(beacon)
                } else if let beacon = try AltBeacon.decode(companyID: prefix, body, base: structure.dataOffset + 2) {
                    identity = .altBeacon(beacon)
                }
            } catch {
                if malformed == nil { malformed = error }
            }
        }
        return ClassifiedAdvertisement(identity: identity.flatMap(IdentityFrame.init), malformed: malformed)
    }

    /// Which frames name a beacon, which are data, and which are left out.
    @Test func framesAreSortedIntoIdentityDataAndIgnored() throws {
        let uid = serviceData16(0xFEAA, bytes("00e7e157bd5df90aad1dc2fb000000000001"))
        let tlm = serviceData16(0xFEAA, bytes("20000bb81780000012340000abcd"))
        let ruuvi = ad(0xFF, bytes("9904") + Array(repeating: 0, count: 24))
        let bthome = serviceData16(0xFCD2, bytes("4002c409"))
        let appleOther = ad(0xFF, bytes("4c001005031c"))
        let unknownService = serviceData16(0x1234, [1, 2])
        let classified = try FrameClassifier.classify((uid + tlm + ruuvi + bthome + appleOther + unknownService)[...])
        #expect(classified.identity?.frame.beaconID == "eddystone:e157bd5df90aad1dc2fb:000000000001")
        // In the order of the advertisement.
        #expect(classified.data == [
            .eddystone(FrameBytes(bytes("20000bb81780000012340000abcd"))),
            .manufacturerData(companyID: 0x0499, FrameBytes(Array(repeating: 0, count: 24))),
            .serviceData(uuid16: 0xFCD2, FrameBytes(bytes("4002c409"))),
        ])
        #expect(classified.malformed == nil)
        // A truncated iBeacon is reported, and the advertisement's other frames still count.
        let broken = try FrameClassifier.classify((ad(0xFF, bytes("4c000215e2c5")) + tlm)[...])
        #expect(broken.identity == nil && broken.data.count == 1)
        #expect(broken.malformed?.code == .invalidLength)
        #expect(broken.malformed?.offset == 4)
        // One result classified into advert after advert holds only the last one's.
        var reused = ClassifiedAdvertisement()
        for payload in [uid + tlm + ruuvi + bthome + appleOther, ad(0xFF, bytes("4c000215e2c5")) + tlm, uid, ruuvi] {
            try FrameClassifier.classify(payload[...], into: &reused)
            #expect(reused == (try FrameClassifier.classify(payload[...])))
        }
        #expect(reused.identity == nil && reused.data.count == 1 && reused.malformed == nil)
    }
}

extension AdvertisingReportDecoder {
    func reportsCopy(_ event: [UInt8]) throws -> [AdvertisingReport] {
        var decoder = self
        return try decoder.reports(fromEvent: event)
    }
}
