/// The EIDs every identity of a keyring broadcasts in the rotation periods around the times resolved so far,
/// indexed by value: a new EID is one lookup, and each candidate's two AES blocks are computed once, as the times
/// seen move on, instead of every identity's candidates being tried for each EID. A cache: its answers are the
/// keyring's (`EddystoneKeyring.resolve`), bounded by `bound` entries, past which EIDs are tried one by one.
public struct EIDCandidates: Sendable {
    /// Unix seconds whose candidate periods are all indexed (nil: none).
    public private(set) var covered: ClosedRange<Int64>?
    private var byValue: [UInt64: Candidate] = [:]

    /// None indexed.
    public init() {}

    /// An identity (its index in the keyring), a rotation exponent and the start of a rotation period.
    private struct Candidate: Sendable {
        var identity: Int32
        var rotationExponent: UInt8
        var periodStart: UInt32
    }

    /// How far the indexed times may spread before the index starts afresh around the newest: old periods are not
    /// kept for ever, and one more window costs what 10 minutes of new periods do.
    static let coveredSpanSeconds: Int64 = 600

    /// How many candidate EIDs are indexed.
    public var count: Int { byValue.count }

    /// How many candidates the keyring's identities have around one time.
    static func windowSize(of keyring: EddystoneKeyring) -> Int {
        var total: Int64 = 0
        for identity in keyring.identities {
            for exponent in EddystoneKeyring.candidateExponents(identity) { total += 2 * keyring.skewPeriods(rotationExponent: exponent) + 1 }
        }
        return Int(total)
    }

    /// The keyring's answer for `eid` heard at `unixSeconds`, from the index when it can hold the periods around
    /// that time within `bound` entries.
    mutating func resolve(_ eid: UInt64, unixSeconds: Int64, keyring: EddystoneKeyring, bound: Int) -> EIDResolution? {
        guard cover(unixSeconds, keyring: keyring, bound: bound) else { return keyring.resolve(eid: eid, unixSeconds: unixSeconds) }
        guard let found = byValue[eid], keyring.identities.indices.contains(Int(found.identity)) else { return nil }
        let identity = keyring.identities[Int(found.identity)]
        // Indexed for another time: an answer only inside this time's own window, as the keyring gives it.
        let exponent = found.rotationExponent
        let period = Int64(1) << Int64(exponent)
        let expected = Self.periodStart(unixSeconds + identity.clockOffsetSeconds, exponent)
        let distance = Int64(Int32(bitPattern: found.periodStart &- UInt32(truncatingIfNeeded: expected)))
        guard abs(distance) <= keyring.skewPeriods(rotationExponent: exponent) * period else { return nil }
        return EIDResolution(identity: identity, rotationExponent: exponent, beaconTime: found.periodStart)
    }

    /// Indexes the periods around `time`: the ones the covered times do not have yet, or all of them again when the
    /// time is far from those or the covered span grew too wide. False when they would take more than `bound`.
    private mutating func cover(_ time: Int64, keyring: EddystoneKeyring, bound: Int) -> Bool {
        if let covered, covered.contains(time) { return true }
        let window = Self.windowSize(of: keyring)
        guard window <= bound else { return false }
        if let covered, max(covered.upperBound, time) - min(covered.lowerBound, time) <= Self.coveredSpanSeconds {
            let wider = min(covered.lowerBound, time)...max(covered.upperBound, time)
            if byValue.count + Self.added(from: covered, to: wider, keyring: keyring) <= bound {
                index(from: covered, to: wider, keyring: keyring)
                self.covered = wider
                return true
            }
        }
        byValue.removeAll(keepingCapacity: true)
        index(from: nil, to: time...time, keyring: keyring)
        covered = time...time
        return true
    }

    /// How many candidates widening the covered times from `old` to `new` adds.
    private static func added(from old: ClosedRange<Int64>, to new: ClosedRange<Int64>, keyring: EddystoneKeyring) -> Int {
        var total = 0
        forEachPeriod(addedFrom: old, to: new, keyring: keyring) { _, _, _, _ in total += 1 }
        return total
    }

    /// Computes the candidates of the times `new` covers and `old` (when given) does not.
    private mutating func index(from old: ClosedRange<Int64>?, to new: ClosedRange<Int64>, keyring: EddystoneKeyring) {
        Self.forEachPeriod(addedFrom: old, to: new, keyring: keyring) { number, identity, exponent, first in
            let periodStart = UInt32(truncatingIfNeeded: first)
            let value = EddystoneKeyring.eid(identityKey: identity.identityKey, rotationExponent: exponent, beaconTime: periodStart)
            byValue[value] = Candidate(identity: Int32(number), rotationExponent: exponent, periodStart: periodStart)
        }
    }

    /// Calls `body` with each candidate period of the times `new` covers and `old` (when given) does not: the
    /// identity's number in the keyring, the identity, the rotation exponent and the period's start.
    private static func forEachPeriod(
        addedFrom old: ClosedRange<Int64>?, to new: ClosedRange<Int64>, keyring: EddystoneKeyring,
        _ body: (Int, EddystoneIdentity, UInt8, Int64) -> Void
    ) {
        for (number, identity) in keyring.identities.enumerated() {
            for exponent in EddystoneKeyring.candidateExponents(identity) {
                let period = Int64(1) << Int64(exponent)
                let reach = keyring.skewPeriods(rotationExponent: exponent) * period
                // The periods the keyring tries for a time t are t's own and `reach` either side of it.
                func start(_ time: Int64) -> Int64 { periodStart(time + identity.clockOffsetSeconds, exponent) }
                let all: (low: Int64, high: Int64) = (start(new.lowerBound) - reach, start(new.upperBound) + reach)
                var ranges: [(low: Int64, high: Int64)] = [all]
                if let old {
                    let had: (low: Int64, high: Int64) = (start(old.lowerBound) - reach, start(old.upperBound) + reach)
                    ranges = [(all.low, had.low - period), (had.high + period, all.high)]
                }
                for range in ranges {
                    // Empty when the bounds cross.
                    for first in stride(from: range.low, through: range.high, by: Int(period)) { body(number, identity, exponent, first) }
                }
            }
        }
    }

    /// The start of the rotation period holding `time` (its K lowest bits cleared; a multiple of the period below
    /// it for times before 0).
    private static func periodStart(_ time: Int64, _ exponent: UInt8) -> Int64 {
        time & ~((Int64(1) << Int64(exponent)) - 1)
    }
}
