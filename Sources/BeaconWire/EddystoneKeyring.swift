/// A beacon registered for Eddystone-EID resolution and eTLM decryption.
public struct EddystoneIdentity: Hashable, Sendable {
    /// The stable id reported for this beacon (the registry id, e.g. `eddystone:<ns>:<instance>`).
    public var beaconID: String
    /// The 128-bit identity key shared with the beacon at registration.
    public var identityKey: [UInt8]
    /// K: the EID rotates every 2^K seconds. When nil, every K from 0 to 15 is tried for EID resolution.
    public var rotationExponent: UInt8?
    /// The beacon's time counter minus Unix time, in seconds (0 when the beacon counts Unix seconds).
    public var clockOffsetSeconds: Int64

    public init(beaconID: String, identityKey: [UInt8], rotationExponent: UInt8? = nil, clockOffsetSeconds: Int64 = 0) {
        precondition(identityKey.count == 16, "identity keys are 16 bytes")
        precondition(rotationExponent.map { $0 <= 15 } ?? true, "the rotation exponent is 0 to 15")
        self.beaconID = beaconID
        self.identityKey = identityKey
        self.rotationExponent = rotationExponent
        self.clockOffsetSeconds = clockOffsetSeconds
    }
}

/// An EID matched to a registered beacon.
public struct EIDResolution: Hashable, Sendable {
    public var identity: EddystoneIdentity
    public var rotationExponent: UInt8
    /// The beacon's time counter at the start of the rotation period the EID belongs to.
    public var beaconTime: UInt32
}

/// The Eddystone-EID and eTLM cryptography (eddystone-eid/eid-computation.md, eddystone-tlm/tlm-encrypted.md),
/// and resolution against registered identity keys with a clock-skew window.
public struct EddystoneKeyring: Sendable {
    public var identities: [EddystoneIdentity]
    /// How far a beacon's clock may drift from its registered offset, in seconds.
    public var clockSkewSeconds: Int64

    public init(identities: [EddystoneIdentity] = [], clockSkewSeconds: Int64 = 300) {
        self.identities = identities
        self.clockSkewSeconds = clockSkewSeconds
    }

    public var isEmpty: Bool { identities.isEmpty }

    /// The beacon time counter with its K lowest bits cleared: the start of its rotation period.
    static func quantumStart(_ beaconTime: UInt32, rotationExponent: UInt8) -> UInt32 {
        beaconTime & ~((UInt32(1) << UInt32(rotationExponent)) &- 1)
    }

    /// The 8-byte EID a beacon with this key broadcasts at `beaconTime` (eid-computation.md).
    public static func eid(identityKey: [UInt8], rotationExponent: UInt8, beaconTime: UInt32) -> UInt64 {
        var temporaryKeyData = [UInt8](repeating: 0, count: 16)
        temporaryKeyData[11] = 0xFF
        temporaryKeyData[14] = UInt8(beaconTime >> 24)
        temporaryKeyData[15] = UInt8((beaconTime >> 16) & 0xFF)
        let temporaryKey = AES128(key: identityKey).encrypt(temporaryKeyData)

        let quantum = quantumStart(beaconTime, rotationExponent: rotationExponent)
        var eidData = [UInt8](repeating: 0, count: 16)
        eidData[11] = rotationExponent
        eidData[12] = UInt8(quantum >> 24)
        eidData[13] = UInt8((quantum >> 16) & 0xFF)
        eidData[14] = UInt8((quantum >> 8) & 0xFF)
        eidData[15] = UInt8(quantum & 0xFF)
        let block = AES128(key: temporaryKey).encrypt(eidData)
        return block.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The 48-bit eTLM nonce: the rotation-period start (big-endian) then the salt (big-endian).
    private static func etlmNonce(beaconTime: UInt32, rotationExponent: UInt8, salt: UInt16) -> [UInt8] {
        let quantum = quantumStart(beaconTime, rotationExponent: rotationExponent)
        return [
            UInt8(quantum >> 24), UInt8((quantum >> 16) & 0xFF), UInt8((quantum >> 8) & 0xFF), UInt8(quantum & 0xFF),
            UInt8(salt >> 8), UInt8(salt & 0xFF),
        ]
    }

    /// Encrypts plain TLM fields into an eTLM frame, as a beacon would (used by the simulator and tests).
    public static func encrypt(
        _ tlm: EddystoneTLM, identityKey: [UInt8], rotationExponent: UInt8, beaconTime: UInt32, salt: UInt16
    ) -> EddystoneETLM {
        let nonce = etlmNonce(beaconTime: beaconTime, rotationExponent: rotationExponent, salt: salt)
        let sealed = EAX.seal(key: identityKey, nonce: nonce, plaintext: tlm.fieldBytes, tagLength: 2)
        return EddystoneETLM(
            ciphertext: sealed.ciphertext, salt: salt, mic: UInt16(sealed.tag[0]) << 8 | UInt16(sealed.tag[1]))
    }

    /// Decrypts with a known key and rotation period; nil when the MIC does not match.
    public static func decrypt(
        _ frame: EddystoneETLM, identityKey: [UInt8], rotationExponent: UInt8, beaconTime: UInt32
    ) -> EddystoneTLM? {
        let nonce = etlmNonce(beaconTime: beaconTime, rotationExponent: rotationExponent, salt: frame.salt)
        guard
            let plaintext = EAX.open(
                key: identityKey, nonce: nonce, ciphertext: frame.ciphertext,
                tag: [UInt8(frame.mic >> 8), UInt8(frame.mic & 0xFF)])
        else { return nil }
        var reader = ByteReader(plaintext[...])
        return try? EddystoneTLM(fields: &reader)
    }

    /// The rotation exponents an identity's EIDs are tried with: its own, or every one when it is not known.
    static func candidateExponents(_ identity: EddystoneIdentity) -> ClosedRange<UInt8> {
        identity.rotationExponent.map { $0...$0 } ?? 0...15
    }

    /// How many rotation periods either side of the expected one are tried: as many as the clock skew spans, at
    /// least one.
    func skewPeriods(rotationExponent: UInt8) -> Int64 {
        let period = Int64(1) << Int64(rotationExponent)
        return max(1, (clockSkewSeconds + period - 1) / period)
    }

    /// Rotation periods to try around the expected beacon time: the current one first, then outwards.
    private func candidateTimes(expected: Int64, rotationExponent: UInt8) -> [UInt32] {
        let period = Int64(1) << Int64(rotationExponent)
        let steps = skewPeriods(rotationExponent: rotationExponent)
        var times: [UInt32] = []
        for step in 0...steps {
            for sign: Int64 in step == 0 ? [1] : [1, -1] {
                times.append(UInt32(truncatingIfNeeded: expected + sign * step * period))
            }
        }
        return times
    }

    /// Finds the registered beacon that broadcasts `eid` around `unixSeconds`, computing every candidate's EID
    /// (`EIDResolver` indexes them instead).
    public func resolve(eid: UInt64, unixSeconds: Int64) -> EIDResolution? {
        for identity in identities {
            for exponent in Self.candidateExponents(identity) {
                for time in candidateTimes(expected: unixSeconds + identity.clockOffsetSeconds, rotationExponent: exponent) {
                    // The temporary key takes the time's upper 16 bits, which a period's start keeps (K <= 15).
                    let quantum = Self.quantumStart(time, rotationExponent: exponent)
                    if Self.eid(identityKey: identity.identityKey, rotationExponent: exponent, beaconTime: quantum) == eid {
                        return EIDResolution(identity: identity, rotationExponent: exponent, beaconTime: quantum)
                    }
                }
            }
        }
        return nil
    }

    /// Decrypts an eTLM frame paired with the EID its beacon sent (the spec's pairing by address), trying the
    /// EID's rotation period and its neighbours.
    public func decrypt(_ frame: EddystoneETLM, pairedWith resolution: EIDResolution) -> EddystoneTLM? {
        let period = Int64(1) << Int64(resolution.rotationExponent)
        for delta: Int64 in [0, period, -period] {
            let time = UInt32(truncatingIfNeeded: Int64(resolution.beaconTime) + delta)
            if let tlm = Self.decrypt(
                frame, identityKey: resolution.identity.identityKey, rotationExponent: resolution.rotationExponent,
                beaconTime: time)
            {
                return tlm
            }
        }
        return nil
    }

    /// Decrypts an eTLM frame seen without its EID, trying each identity whose rotation exponent is known, in the
    /// expected rotation period and its neighbours. Without a known exponent the 16-bit MIC is too weak to search.
    public func decrypt(_ frame: EddystoneETLM, unixSeconds: Int64) -> (EddystoneTLM, EddystoneIdentity)? {
        for identity in identities {
            guard let exponent = identity.rotationExponent else { continue }
            let expected = UInt32(truncatingIfNeeded: unixSeconds + identity.clockOffsetSeconds)
            let resolution = EIDResolution(
                identity: identity, rotationExponent: exponent,
                beaconTime: Self.quantumStart(expected, rotationExponent: exponent))
            if let tlm = decrypt(frame, pairedWith: resolution) { return (tlm, identity) }
        }
        return nil
    }
}
