/// The stored history of a site with `zone_history: confirmed`: the live decisions, dated where the readings
/// turned, with the stays the likeliest path (`ZonePath`) rules out replaced by the path's zones.
///
/// The live rule's costliest mistake is a bounce: a stretch of shadowing gathers enough evidence to move the
/// beacon from its zone into a neighbour and, once it passes, back. When the first second of such a stay is
/// decided, the history lag behind the readings, the bounce is over; if the path does not pass through the
/// stay's zone over what is left of the stay (in the seconds decided then or its trace of those still undecided),
/// those seconds are stored in the path's zones. Every other stay is kept as the live rule dated it: a beacon's
/// first, one still going on, and a pass through a zone on the way from one to another (a corridor crossed in
/// seconds, which the path's change cost tends to skip). At a beacon's end (it left, or the readings ended), a zone
/// the path moved into after the last live stay began, and held to the end, is stored from the path's move on: the
/// live rule had no time to make that move before the beacon was gone.
extension SiteZoneTracker {
    /// A stay in a zone as the live decisions dated it.
    struct LiveStay: Sendable, Equatable {
        var zone: Int
        /// The zone of the stay before, where the live rule moved the beacon here (nil: placed on arrival).
        var previousZone: Int?
        var startMicros: Int64
        /// Whether its seconds are stored in its zone (once known, it holds for the rest of the stay).
        var kept: Bool

        /// Whether a second begins in the stay or after it (a second belongs to the stay begun before its middle).
        func covers(_ second: Int64) -> Bool { startMicros <= second * 1_000_000 + 500_000 }
    }

    /// Replaces the zones of the path's `decided` seconds by the live stays' where those are kept, leaves out the
    /// seconds before the first (the beacon was heard but the live rule had not placed it: a beacon heard for less
    /// than the entry dwell has no history, as it has no live zone), and forgets the stays wholly decided. With
    /// `final` (the beacon's last seconds), the path's last move after the last live stay began stands.
    func confirm(_ decided: inout [(second: Int64, zone: Int)], of beacon: inout Beacon, final: Bool = false) {
        guard !decided.isEmpty else { return }
        guard let lastStay = beacon.stays.last else {
            decided = []
            return
        }
        // The path's last zone, from where it moved into it, where that is another zone than the live one and the
        // move came after the live stay began.
        var tail: (from: Int, zone: Int)?
        if final, let last = decided.last, last.zone != lastStay.zone {
            var from = decided.count - 1
            while from > 0, decided[from - 1].zone == last.zone { from -= 1 }
            if from > 0, lastStay.covers(decided[from].second) { tail = (from, last.zone) }
        }
        // The path's view, made once a bounce needs it: the seconds decided now, then its trace of those still
        // undecided. Only seconds from the one being checked on are looked at, and those are the path's still.
        var view: [(second: Int64, zone: Int)]?
        var stay = 0
        var unplaced = 0
        for index in decided.indices {
            let second = decided[index].second
            while stay + 1 < beacon.stays.count, beacon.stays[stay + 1].covers(second) { stay += 1 }
            // The first stay also takes the second it began in (its start is the beacon's first reading).
            guard beacon.stays[stay].covers(second) || beacon.stays[stay].startMicros < (second + 1) * 1_000_000 else {
                unplaced += 1
                continue
            }
            if !beacon.stays[stay].kept {
                let next = stay + 1 < beacon.stays.count ? beacon.stays[stay + 1] : nil
                let zone = beacon.stays[stay].zone
                if let next, next.zone == beacon.stays[stay].previousZone {
                    if view == nil { view = decided + (beacon.path?.traceBySecond() ?? []) }
                    beacon.stays[stay].kept = view!.contains { $0.second >= second && $0.zone == zone && !next.covers($0.second) }
                } else {
                    beacon.stays[stay].kept = true
                }
            }
            if beacon.stays[stay].kept { decided[index].zone = beacon.stays[stay].zone }
        }
        if let tail {
            for index in tail.from..<decided.count { decided[index].zone = tail.zone }
        }
        // The seconds not covered are the first ones.
        decided.removeFirst(unplaced)
        guard let oldestUndecided = beacon.path.map({ $0.decidedThrough + 1 }) else { return }
        while beacon.stays.count > 1, beacon.stays[1].covers(oldestUndecided) { beacon.stays.removeFirst() }
    }
}

extension ZonePath {
    /// `trace()` with each zone's second.
    func traceBySecond() -> [(second: Int64, zone: Int)] {
        trace().enumerated().map { (decidedThrough + 1 + Int64($0.offset), $0.element) }
    }
}
