import LibCrypto
import Testing
@testable import BeaconWire

/// Block cipher modes against published vectors, and the Eddystone and BTHome constructions against values
/// computed independently with PyCryptodome from the specifications' descriptions.
@Suite struct CryptoTests {
    @Test func aesFIPS197AppendixC1() {
        let cipher = AES128(key: bytes("000102030405060708090a0b0c0d0e0f"))
        #expect(cipher.encrypt(bytes("00112233445566778899aabbccddeeff")) == bytes("69c4e0d86a7b0430d8cdb78070b4c55a"))
    }

    @Test func sha256FIPS180() {
        // FIPS 180-2 appendix B.1 and B.2.
        #expect(Array("abc".utf8).withUnsafeBytes { LibCrypto.sha256($0) } == bytes("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        let twoBlocks = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(twoBlocks.withUnsafeBytes { LibCrypto.sha256($0) } == bytes("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"))
        #expect([UInt8]().withUnsafeBytes { LibCrypto.sha256($0) } == bytes("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
    }

    @Test func hmacSHA256RFC4231() {
        // RFC 4231 §4.2 and §4.3 (test cases 1 and 2).
        #expect(
            LibCrypto.hmacSHA256(key: Array(repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
                == bytes("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        #expect(
            LibCrypto.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == bytes("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test func cmacRFC4493() {
        // RFC 4493 §4, examples 1–4.
        let cipher = AES128(key: bytes("2b7e151628aed2a6abf7158809cf4f3c"))
        let message = bytes(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52ef"
                + "f69f2445df4f9b17ad2b417be66c3710")
        #expect(cmac(cipher, []) == bytes("bb1d6929e95937287fa37d129b756746"))
        #expect(cmac(cipher, Array(message[..<16])) == bytes("070a16b46b4d4144f79bdd9dd04a287c"))
        #expect(cmac(cipher, Array(message[..<40])) == bytes("dfa66747de9ae63030ca32611497c827"))
        #expect(cmac(cipher, message) == bytes("51f0bebf7e3b9d92fc49741779363cfe"))
    }

    @Test(arguments: [
        // Bellare, Rogaway, Wagner, "The EAX Mode of Operation", appendix test vectors.
        ("233952DEE4D5ED5F9B9C6D6FF80FF478", "62EC67F9C3A4A407FCB2A8C49031A8B3", "6BFB914FD07EAE6B", "", "",
         "E037830E8389F27B025A2D6527E79D01"),
        ("91945D3F4DCBEE0BF45EF52255F095A4", "BECAF043B0A23D843194BA972C66DEBD", "FA3BFD4806EB53FA", "F7FB", "19DD",
         "5C4C9331049D0BDAB0277408F67967E5"),
        ("01F74AD64077F2E704C0F60ADA3DD523", "70C3DB4F0D26368400A10ED05D2BFF5E", "234A3463C1264AC6", "1A47CB4933",
         "D851D5BAE0", "3A59F238A23E39199DC9266626C40F80"),
    ])
    func eaxPaperVectors(key: String, nonce: String, header: String, message: String, ciphertext: String, tag: String) {
        let sealed = EAX.seal(key: bytes(key), nonce: bytes(nonce), header: bytes(header), plaintext: bytes(message), tagLength: 16)
        #expect(sealed.ciphertext == bytes(ciphertext))
        #expect(sealed.tag == bytes(tag))
        #expect(EAX.open(key: bytes(key), nonce: bytes(nonce), header: bytes(header), ciphertext: bytes(ciphertext), tag: bytes(tag)) == bytes(message))
        var bad = bytes(tag)
        bad[0] ^= 1
        #expect(EAX.open(key: bytes(key), nonce: bytes(nonce), header: bytes(header), ciphertext: bytes(ciphertext), tag: bad) == nil)
    }

    @Test func ccmRFC3610PacketVector1WithoutAssociatedData() {
        // RFC 3610 packet vector #1's key, nonce and payload, with no associated data (PyCryptodome).
        let sealed = CCM.seal(
            key: bytes("C0C1C2C3C4C5C6C7C8C9CACBCCCDCECF"), nonce: bytes("00000003020100A0A1A2A3A4A5"),
            plaintext: bytes("08090A0B0C0D0E0F101112131415161718191A1B1C1D1E"), tagLength: 8)
        #expect(sealed.ciphertext == bytes("588c979a61c663d2f066d0c2c0f989806d5f6b61dac384"))
        #expect(sealed.tag == bytes("7c2051a7ae200bcf"))
    }

    @Test(arguments: [
        (UInt8(10), UInt32(0x1234_5678), "4cea4a8f8bcaaaea"),
        (UInt8(0), UInt32(0), "86fa4d7184d3d2cf"),
        (UInt8(15), UInt32.max, "f16dd2fa40de0f7c"),
    ])
    func eidComputation(exponent: UInt8, time: UInt32, expected: String) {
        let key = bytes("e2c56db5dffb48d2b060d0f5a71096e0")
        #expect(hexString(EddystoneKeyring.eid(identityKey: key, rotationExponent: exponent, beaconTime: time), digits: 16) == expected)
    }

    @Test func eidIsConstantWithinItsRotationPeriod() {
        let key = bytes("e2c56db5dffb48d2b060d0f5a71096e0")
        let start: UInt32 = 0x1234_5400  // a multiple of 2^10
        let eid = EddystoneKeyring.eid(identityKey: key, rotationExponent: 10, beaconTime: start)
        #expect(EddystoneKeyring.eid(identityKey: key, rotationExponent: 10, beaconTime: start + 1023) == eid)
        #expect(EddystoneKeyring.eid(identityKey: key, rotationExponent: 10, beaconTime: start + 1024) != eid)
    }

    @Test func eidResolutionWithinTheSkewWindow() {
        let key = bytes("e2c56db5dffb48d2b060d0f5a71096e0")
        let identity = EddystoneIdentity(beaconID: "cart-7", identityKey: key, rotationExponent: 10, clockOffsetSeconds: -1_000_000)
        let keyring = EddystoneKeyring(identities: [identity], clockSkewSeconds: 600)
        let unix: Int64 = 1_700_000_000
        let beaconTime = UInt32(unix - 1_000_000)
        let eid = EddystoneKeyring.eid(identityKey: key, rotationExponent: 10, beaconTime: beaconTime)
        // The resolver's clock is 500 s ahead of the beacon's: still inside the window.
        let resolution = keyring.resolve(eid: eid, unixSeconds: unix + 500)
        #expect(resolution?.identity.beaconID == "cart-7")
        #expect(resolution?.beaconTime == beaconTime & ~1023)
        #expect(keyring.resolve(eid: eid, unixSeconds: unix + 5000) == nil)
        #expect(keyring.resolve(eid: eid ^ 1, unixSeconds: unix) == nil)
        // Without a known exponent every K is tried.
        let anyK = EddystoneKeyring(identities: [EddystoneIdentity(beaconID: "x", identityKey: key, clockOffsetSeconds: -1_000_000)])
        #expect(anyK.resolve(eid: eid, unixSeconds: unix)?.rotationExponent == 10)
    }

    @Test func etlmVectorAndRoundTrip() throws {
        let key = bytes("e2c56db5dffb48d2b060d0f5a71096e0")
        let tlm = EddystoneTLM(batteryMillivolts: 3000, temperatureRaw: 0x1780, advertisingCount: 0x1234, uptimeTenths: 0xABCDEF)
        let etlm = EddystoneKeyring.encrypt(tlm, identityKey: key, rotationExponent: 10, beaconTime: 0x1234_5678, salt: 0xBEEF)
        // AES-EAX with the 48-bit nonce (rotation-period start, salt) and a 2-byte tag, computed with PyCryptodome.
        #expect(etlm.ciphertext == bytes("508a958a57ca8c6a8b1ba0c3"))
        #expect(etlm.mic == 0xA04D)
        #expect(EddystoneKeyring.decrypt(etlm, identityKey: key, rotationExponent: 10, beaconTime: 0x1234_5400) == tlm)
        var tampered = etlm
        tampered.ciphertext[0] ^= 0x01
        #expect(EddystoneKeyring.decrypt(tampered, identityKey: key, rotationExponent: 10, beaconTime: 0x1234_5678) == nil)
    }

    /// A beacon's key (rotation exponent 12), a time, the EID it sends then, and an eTLM frame of that period.
    func pairedFrames() -> (key: [UInt8], unix: Int64, eid: UInt64, tlm: EddystoneTLM, etlm: EddystoneETLM) {
        let key = bytes("e2c56db5dffb48d2b060d0f5a71096e0")
        let unix: Int64 = 1_700_000_000
        let eid = EddystoneKeyring.eid(identityKey: key, rotationExponent: 12, beaconTime: UInt32(unix))
        let tlm = EddystoneTLM(batteryMillivolts: 2900, temperatureRaw: 0x1600, advertisingCount: 77, uptimeTenths: 12345)
        let etlm = EddystoneKeyring.encrypt(tlm, identityKey: key, rotationExponent: 12, beaconTime: UInt32(unix), salt: 0x0102)
        return (key, unix, eid, tlm, etlm)
    }

    @Test func etlmPairsWithTheEIDFromTheSameAddress() throws {
        let (key, unix, eid, tlm, etlm) = pairedFrames()
        // No rotation exponent registered: the EID search finds K, and the eTLM pairs through the address.
        var decoder = FrameDecoder(keyring: EddystoneKeyring(identities: [EddystoneIdentity(beaconID: "tag-1", identityKey: key)]))
        let address = DeviceAddress(value: 0xC0FFEE_000001, kind: .random)
        let eidPayload = serviceData16(0xFEAA, [0x30, 0xF6] + (0..<8).map { UInt8((eid >> UInt64(56 - 8 * $0)) & 0xFF) })
        let eidFrames = try decoder.frames(in: AdvertisingData(parsing: eidPayload), address: address, unixSeconds: unix)
        #expect(eidFrames.first?.beaconID == "tag-1")
        let etlmPayload = serviceData16(0xFEAA, [0x20, 0x01] + etlm.ciphertext + [0x01, 0x02, UInt8(etlm.mic >> 8), UInt8(etlm.mic & 0xFF)])
        let frames = try decoder.frames(in: AdvertisingData(parsing: etlmPayload), address: address, unixSeconds: unix + 5)
        guard case .eddystoneETLM(let decoded) = frames.first else {
            Issue.record("no eTLM frame")
            return
        }
        #expect(decoded.decrypted == tlm)
        #expect(decoded.beaconID == "tag-1")
        // From another address, with no exponent registered, it stays encrypted.
        let other = try decoder.frames(in: AdvertisingData(parsing: etlmPayload), address: DeviceAddress(value: 1, kind: .random), unixSeconds: unix)
        guard case .eddystoneETLM(let unpaired) = other.first else {
            Issue.record("no eTLM frame")
            return
        }
        #expect(unpaired.decrypted == nil)
    }

    /// The ingest's way (remembering each EID, pairing eTLM frames by the beacon they name) and the decoder's (each
    /// frame at its own time, pairing by address within the window) are one resolver's.
    /// The resolver computes each candidate period's EID once and reuses it for the next EIDs; what it answers is
    /// what the keyring computes afresh: for each beacon, in the window and past it, after the keyring changes
    /// and past the bound.
    /// Indexed (a bound the identities' windows fit in) or tried one by one (a bound they do not), the resolver
    /// answers as the keyring does: for EIDs of each identity's own period, of the periods at the edges of the clock
    /// skew and just past them, heard at times that move on, go back and jump.
    @Test(arguments: [1_000, 200_000])
    func theResolverAnswersAsTheKeyring(bound: Int) {
        var random = SystemRandomNumberGenerator()
        var identities: [EddystoneIdentity] = []
        for index in 0..<8 {
            let key: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
            let exponent: UInt8? = index == 0 ? nil : UInt8(8 + index % 4)
            identities.append(
                EddystoneIdentity(
                    beaconID: "tag-\(index)", identityKey: key, rotationExponent: exponent, clockOffsetSeconds: Int64(index) * 1_000))
        }
        let keyring = EddystoneKeyring(identities: identities, clockSkewSeconds: 600)
        var resolver = EIDResolver(keyring: keyring)
        resolver.maximumRemembered = bound
        let unix: Int64 = 1_700_000_000
        var resolved = 0
        var refused = 0
        for identity in identities {
            for heardAfter: Int64 in [0, 450, -300, 5_000, 5_007] {
                let exponent = identity.rotationExponent ?? 9
                let period = Int64(1) << Int64(exponent)
                let steps = max(1, (keyring.clockSkewSeconds + period - 1) / period)
                for shift in [0, steps, steps + 1, -steps, -steps - 1] {
                    let beaconTime = UInt32(unix + identity.clockOffsetSeconds + shift * period)
                    let eid = EddystoneKeyring.eid(identityKey: identity.identityKey, rotationExponent: exponent, beaconTime: beaconTime)
                    let expected = keyring.resolve(eid: eid, unixSeconds: unix + heardAfter)
                    #expect(resolver.resolve(eid: eid, unixSeconds: unix + heardAfter) == expected, "\(identity.beaconID) \(heardAfter) s, \(shift) periods")
                    #expect(resolver.resolve(eid: eid ^ 0xFF, unixSeconds: unix + heardAfter) == nil)
                    if expected != nil { resolved += 1 } else { refused += 1 }
                }
            }
        }
        #expect(resolved >= identities.count * 6 && refused >= identities.count * 8, "\(resolved) resolved, \(refused) refused")
        #expect((resolver.computedEIDs.count > 0) == (bound > EIDCandidates.windowSize(of: keyring)))
        #expect(resolver.computedEIDs.count <= bound)
        // A keyring without the first identity no longer resolves its EIDs, whatever was computed before.
        resolver.keyring = EddystoneKeyring(identities: Array(identities.dropFirst()), clockSkewSeconds: 600)
        let first = identities[0]
        let firstEID = EddystoneKeyring.eid(identityKey: first.identityKey, rotationExponent: 9, beaconTime: UInt32(unix))
        #expect(resolver.resolve(eid: firstEID, unixSeconds: unix) == nil)
    }

    /// A copy saved without the computed EIDs and given back those computed since answers as it did when saved
    /// (what was resolved since is forgotten) without computing them again: the ingest's undone transaction.
    @Test func aSavedResolverTakesBackTheEIDsComputedSince() {
        let (key, unix, eid, _, _) = pairedFrames()
        var resolver = EIDResolver(keyring: EddystoneKeyring(identities: [EddystoneIdentity(beaconID: "tag-1", identityKey: key)]))
        var saved = resolver
        saved.computedEIDs = EIDCandidates()
        #expect(resolver.resolve(eid: eid, unixSeconds: unix, remembering: true)?.identity.beaconID == "tag-1")
        #expect(resolver.computedEIDs.count > 0)
        saved.computedEIDs = resolver.computedEIDs
        #expect(saved.computedEIDs.count == resolver.computedEIDs.count)
        // Remembered by the resolver, not by the copy: much later only the resolver still answers.
        #expect(resolver.resolve(eid: eid, unixSeconds: unix + 100_000, remembering: true) != nil)
        #expect(saved.resolve(eid: eid, unixSeconds: unix + 100_000, remembering: true) == nil)
    }

    @Test func theResolverRemembersPairsAndStaysBounded() throws {
        let (key, unix, eid, tlm, etlm) = pairedFrames()
        let keyring = EddystoneKeyring(identities: [EddystoneIdentity(beaconID: "tag-1", identityKey: key)])
        let address = DeviceAddress(value: 0xC0FFEE_000001, kind: .random)

        var remembering = EIDResolver(keyring: keyring)
        #expect(remembering.resolve(eid: eid, unixSeconds: unix, remembering: true)?.identity.beaconID == "tag-1")
        // Remembered: the same EID much later still stands for its beacon (the keyring alone would refuse it).
        #expect(keyring.resolve(eid: eid, unixSeconds: unix + 100_000) == nil)
        #expect(remembering.resolve(eid: eid, unixSeconds: unix + 100_000, remembering: true)?.identity.beaconID == "tag-1")
        #expect(remembering.resolve(eid: eid, unixSeconds: unix + 100_000) == nil, "not remembering: resolved at its time")
        // An eTLM of the beacon a sighting names decrypts with its resolution, whatever the address.
        #expect(remembering.decrypt(etlm, beaconID: "tag-1", unixSeconds: unix + 100_000)?.tlm == tlm)
        #expect(remembering.decrypt(etlm, beaconID: "tag-2", unixSeconds: unix + 100_000) == nil)

        var pairing = EIDResolver(keyring: keyring)
        pairing.pairingWindowSeconds = 60
        #expect(pairing.resolve(eid: eid, unixSeconds: unix, address: address) != nil)
        #expect(pairing.decrypt(etlm, address: address, unixSeconds: unix + 60)?.identity.beaconID == "tag-1")
        #expect(pairing.decrypt(etlm, address: address, unixSeconds: unix + 61) == nil, "past the pairing window")

        // Bounded: past the bound a table starts afresh, and what it forgot is resolved again.
        var bounded = EIDResolver(keyring: keyring)
        bounded.maximumRemembered = 2
        for other in 1...5 { _ = bounded.resolve(eid: eid ^ UInt64(other), unixSeconds: unix, remembering: true) }
        #expect(bounded.resolve(eid: eid, unixSeconds: unix, remembering: true) != nil)
    }
}
