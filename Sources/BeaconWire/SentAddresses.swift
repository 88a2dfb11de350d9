/// What a batch builder remembers of the device addresses it sent, to leave out of a version 3 batch those the
/// ingest knows (`Beacon.address_as_before`, docs/wire-format.md). A pure state machine over batch base times (µs).
///
/// A `mac:` id's address is the id itself: always left out. Another identity's address is left out when it was sent
/// less than `BatchReader.addressAsBeforeMicros` ago and the identity has been heard from no other address for twice
/// that, so that every batch of the window that sent an address for it sent this one.
struct SentAddresses: Sendable {
    private struct Sent {
        var address: UInt64
        /// When the address was last sent; `.min` when it must be sent again.
        var sentMicros: Int64
        /// When the id was last heard from the address.
        var heardMicros: Int64
        /// When the id was last heard from another address, or `.min`.
        var otherMicros: Int64
    }

    private var sent: [String: Sent] = [:]
    private var prunedMicros: Int64 = .min

    /// The beacon ids among a batch's dictionary `keys` whose address the batch leaves out; the batch's addresses
    /// are remembered.
    mutating func known(_ keys: [BeaconKey], batchMicros: Int64) -> Set<String> {
        var known: Set<String> = []
        // Per id, its address in this batch, or nil when it was heard from several.
        var heard: [String: UInt64?] = [:]
        for key in keys where key.address != 0 && !key.addressAsBefore {
            guard let identity = key.identity else { continue }
            if let device = identity.deviceAddress {
                if device == key.address { known.insert(key.beaconID) }
            } else if identity.addressMayBeLeftOut {
                if let previous = heard[key.beaconID] {
                    if previous != key.address { heard[key.beaconID] = .some(nil) }
                } else {
                    heard[key.beaconID] = key.address
                }
            }
        }
        let window = BatchReader.addressAsBeforeMicros
        for (beaconID, address) in heard {
            guard let address else {
                sent[beaconID] = Sent(
                    address: sent[beaconID]?.address ?? 0, sentMicros: .min, heardMicros: batchMicros, otherMicros: batchMicros)
                continue
            }
            guard var entry = sent[beaconID] else {
                sent[beaconID] = Sent(address: address, sentMicros: batchMicros, heardMicros: batchMicros, otherMicros: .min)
                continue
            }
            if entry.address != address {
                entry = Sent(
                    address: address, sentMicros: .min, heardMicros: batchMicros,
                    otherMicros: max(entry.heardMicros, entry.otherMicros))
            }
            let (sinceSent, sentOverflow) = batchMicros.subtractingReportingOverflow(entry.sentMicros)
            let (sinceOther, otherOverflow) = batchMicros.subtractingReportingOverflow(entry.otherMicros)
            if !sentOverflow, (0..<window).contains(sinceSent), otherOverflow || sinceOther >= 2 * window {
                known.insert(beaconID)
            } else {
                entry.sentMicros = batchMicros
            }
            entry.heardMicros = max(entry.heardMicros, batchMicros)
            sent[beaconID] = entry
        }
        prune(batchMicros: batchMicros)
        return known
    }

    /// Forgets ids unheard for twice the window, at most once per window: memory stays bounded by the beacons heard
    /// recently.
    private mutating func prune(batchMicros: Int64) {
        let window = BatchReader.addressAsBeforeMicros
        if prunedMicros == .min {
            prunedMicros = batchMicros
        } else if batchMicros.subtractingReportingOverflow(prunedMicros).partialValue >= window || batchMicros < prunedMicros {
            prunedMicros = batchMicros
            sent = sent.filter { batchMicros.subtractingReportingOverflow($0.value.heardMicros).partialValue < 2 * window }
        }
    }
}
