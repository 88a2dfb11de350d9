import BeaconWire

/// The device addresses one beacon identity was heard from, to tell a copy from the beacon itself. Pure.
///
/// An iBeacon, AltBeacon or Eddystone-UID identity is a constant anyone can advertise. A beacon changes its
/// address now and then (a private address every 15 minutes or so), but the old one falls silent as the new one
/// starts; two devices advertising the same identity are heard from two addresses at once. So the identity is
/// flagged once two of its addresses have both been heard, in event time, over an overlap of `overlapMicros`,
/// since the later of the two was first heard; the address heard first is taken for the beacon's and the other
/// for the copy's. An address unheard for `BeaconIdentity.addressLifetimeMicros` is forgotten, and with it the
/// flag, once only one is left.
///
/// Not detected: a copy that advertises from the same address as the beacon (the radio cannot tell two
/// transmitters of one address apart), copies at a site that hides addresses (`--pseudonym-key-file`), and
/// copies of rotating identities (EID), whose identity is resolved anew from every frame.
struct CloneDetection: Sendable, Equatable {
    struct Span: Sendable, Equatable {
        var address: UInt64
        var firstMicros: Int64
        var lastMicros: Int64
    }

    /// How long two addresses must have been heard together.
    static let overlapMicros: Int64 = 60_000_000
    /// Addresses remembered per identity (the beacon, a copy or two, a rotation under way).
    static let maximumSpans = 4

    private(set) var spans: [Span] = []
    /// Since when two addresses have been heard together, or nil.
    private(set) var clonedSinceMicros: Int64?

    /// Records a sighting of the identity from `address` at `time`; true when that address is a copy's.
    mutating func heard(_ address: UInt64, at time: Int64) -> Bool {
        if let index = spans.firstIndex(where: { $0.address == address }) {
            spans[index].firstMicros = min(spans[index].firstMicros, time)
            spans[index].lastMicros = max(spans[index].lastMicros, time)
        } else {
            spans.append(Span(address: address, firstMicros: time, lastMicros: time))
            if spans.count > Self.maximumSpans, let stalest = spans.indices.min(by: { spans[$0].lastMicros < spans[$1].lastMicros }) {
                spans.remove(at: stalest)
            }
        }
        // The usual case, one address: nothing to compare it with.
        if spans.count == 1 {
            clonedSinceMicros = nil
            return false
        }
        let newest = spans.lazy.map(\.lastMicros).max() ?? time
        spans.removeAll { newest - $0.lastMicros > BeaconIdentity.addressLifetimeMicros }
        guard let original = spans.min(by: { ($0.firstMicros, $0.address) < ($1.firstMicros, $1.address) }) else { return false }
        clonedSinceMicros = spans.lazy.filter { $0.address != original.address }
            .filter { min($0.lastMicros, original.lastMicros) - max($0.firstMicros, original.firstMicros) >= Self.overlapMicros }
            .map { max($0.firstMicros, original.firstMicros) }.min()
        return clonedSinceMicros != nil && address != original.address
    }
}
