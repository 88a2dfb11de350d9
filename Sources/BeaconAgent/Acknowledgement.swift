import BeaconMessaging
import BeaconWire

/// Checking the ingest's acknowledgements: the spool deletes what an acknowledgement covers, so the agent checks
/// each one before believing it.
extension Acknowledgement {
    /// The sequences an adopted acknowledgement must leave free above the pending batches: 2^40 batches, 35,000
    /// years at one a second.
    public static let sequenceHeadroom: UInt64 = 1 << 40

    /// What to do with an acknowledgement message.
    public enum Action: Equatable, Sendable {
        /// Nothing new (an acknowledgement already applied).
        case none
        /// Delete the batches through this sequence from the spool.
        case acknowledge(UInt64)
        /// A retained acknowledgement beyond every batch this spool wrote: it is about an earlier life of the same
        /// agent (a wiped state directory); the pending batches move past it (`Spool.adoptAcknowledgement`).
        case adopt(UInt64)
        /// Not believable: nothing is deleted.
        case refuse(String)
    }

    /// Checks an acknowledgement against what the agent has: the newest sequence it sealed is `nextSequence - 1`,
    /// and no acknowledgement may delete past it; only a retained one (what the broker kept from an earlier life)
    /// may lie beyond, and only so far that the `pending` batches renumbered after it, and `sequenceHeadroom`
    /// more, stay within the largest sequence the wire allows.
    public static func action(
        payload: [UInt8], retained: Bool, acknowledged: UInt64, nextSequence: UInt64, pending: Int = 0
    ) -> Action {
        guard let ack = Acknowledgement(payload: payload) else {
            return .refuse("the payload is not {\"committed_through\": N}")
        }
        let sequence = ack.committedThrough
        if sequence <= acknowledged { return .none }
        if sequence < nextSequence { return .acknowledge(sequence) }
        guard retained else {
            return .refuse("committed_through \(sequence) is beyond the newest batch sealed, \(nextSequence - 1)")
        }
        guard sequence < BatchReader.maximumSequence else {
            return .refuse("committed_through \(sequence) is beyond the largest sequence allowed, 2^62")
        }
        let room = BatchReader.maximumSequence - sequence
        guard room > UInt64(max(pending, 0)) + sequenceHeadroom else {
            return .refuse(
                "committed_through \(sequence) leaves too few sequences below 2^62 for this agent's batches; "
                    + "clear the retained acknowledgement on the broker if the agent's state was wiped")
        }
        return .adopt(sequence)
    }
}
