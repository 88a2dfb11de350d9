import BeaconWire

/// Eddystone URL, TLM and eTLM frames carry no identity: they belong to the UID or EID beacon sending from the same
/// address. A beacon just heard may send one of them before its first identity frame; rather than reporting it as
/// a `mac:` device, such a frame is held until an identity frame comes from that address (then it is released
/// under that identity) or until `holdMicroseconds` of capture time have passed (then as it was). Memory is
/// bounded: at most `maximumPerAddress` frames per address and `maximumHeld` in all, the oldest released first
/// beyond that. Frames from devices that never send identity (sensors) are not held. A pure state machine.
struct IdentityHold: Sendable {
    var holdMicroseconds: Int64 = 10_000_000
    var maximumPerAddress = 32
    var maximumHeld = 4_096

    /// A sighting with its report's number in a replay.
    struct Frame: Sendable {
        var sighting: Sighting
        var ordinal: Int64?
    }

    private var held: [UInt64: [Frame]] = [:]
    private(set) var count = 0
    /// The capture time of the oldest held frame, to look for expired ones only when some may be.
    private var oldestMicros: Int64 = .max

    /// Appends to `ready` what goes into the batch now, in order: nothing when `sighting` is held, the frames held
    /// for its address under its identity when it is an identity frame, and any frames held too long. (A buffer
    /// the caller reuses: this runs for every advert.)
    mutating func admit(_ sighting: Sighting, address: UInt64, ordinal: Int64?, into ready: inout [Frame]) {
        if count > 0 { ready += expire(now: sighting.timeMicros) }
        let anonymous = sighting.beacon.identity?.kind.namesADevice ?? false
        if !anonymous, let waiting = held.removeValue(forKey: address) {
            count -= waiting.count
            for var frame in waiting {
                frame.sighting.beacon = sighting.beacon
                ready.append(frame)
            }
        }
        let frame = Frame(sighting: sighting, ordinal: ordinal)
        guard anonymous, sighting.carriesEddystoneData else {
            ready.append(frame)
            return
        }
        held[address, default: []].append(frame)
        count += 1
        oldestMicros = min(oldestMicros, sighting.timeMicros)
        if held[address]!.count > maximumPerAddress {
            ready.append(held[address]!.removeFirst())
            count -= 1
        }
        if count > maximumHeld { ready += releaseOldest(count - maximumHeld) }
    }

    /// Everything held, as it was (the input ended, or the agent stops).
    mutating func releaseAll() -> [Frame] {
        let all = held.values.flatMap { $0 }.sorted { $0.sighting.timeMicros < $1.sighting.timeMicros }
        held.removeAll()
        count = 0
        oldestMicros = .max
        return all
    }

    /// The report numbers of the held frames of a replay: a resumed replay reads them again.
    var heldOrdinals: [Int64] { held.values.flatMap { $0.compactMap(\.ordinal) }.sorted() }

    private mutating func expire(now: Int64) -> [Frame] {
        guard count > 0, isExpired(oldestMicros, now: now) else { return [] }
        var released: [Frame] = []
        var oldest = Int64.max
        for (address, frames) in held {
            let expired = frames.filter { isExpired($0.sighting.timeMicros, now: now) }
            let kept = frames.filter { !isExpired($0.sighting.timeMicros, now: now) }
            released += expired
            count -= expired.count
            if kept.isEmpty { held[address] = nil } else { held[address] = kept }
            for frame in kept { oldest = min(oldest, frame.sighting.timeMicros) }
        }
        oldestMicros = oldest
        return released.sorted { $0.sighting.timeMicros < $1.sighting.timeMicros }
    }

    /// Held longer than the hold (capture times are input: an overflowing difference counts as long).
    private func isExpired(_ timeMicros: Int64, now: Int64) -> Bool {
        let (age, overflow) = now.subtractingReportingOverflow(timeMicros)
        return overflow || age > holdMicroseconds
    }

    private mutating func releaseOldest(_ excess: Int) -> [Frame] {
        let oldest = held.flatMap { address, frames in frames.map { (address, $0.sighting.timeMicros) } }
            .sorted { $0.1 < $1.1 }.prefix(excess)
        var released: [Frame] = []
        for (address, _) in oldest {
            guard var frames = held[address], !frames.isEmpty else { continue }
            released.append(frames.removeFirst())
            held[address] = frames.isEmpty ? nil : frames
            count -= 1
        }
        return released
    }
}
