/// How much louder a transmitter is heard than the site's radio model expects, learned from its own readings: a
/// beacon that transmits at another power than the one the site was calibrated with, or a site whose model is not
/// its own (no calibration walk), is heard louder or quieter at every receiver alike, which a fixed model reads as
/// nearer or farther from all of them at once. Each second heard by enough receivers, the readings' excess over what
/// the belief after them expects (`PositionBelief.excessLevel`) moves the level by a share that falls as seconds
/// come, to at least `1 / windowSeconds` (an online expectation-maximization step: the belief given the level, the
/// level given the belief). A pure value.
public struct TransmitterLevel: Sendable, Equatable {
    /// What the transmitter is heard above the site's model, dB: taken off each reading before it moves the belief.
    public private(set) var offsetDb = 0.0
    /// Seconds learned from.
    private var seconds = 0

    /// A second heard by fewer receivers does not move the level: a level and a position on the floor are three
    /// unknowns, which three readings can explain either way.
    public static let leastReceivers = 4
    /// The level starts at the site's model as if it had been seen this many seconds: the first seconds' beliefs
    /// are wide and move it least.
    static let priorSeconds = 5
    /// At most this many seconds make up the level, so that it follows a beacon whose level drifts (a battery, a
    /// case, a body): on the sets for choosing, 30, 60 and 120 s differed by centimetres.
    static let windowSeconds = 60
    /// The level moves at most this far from the site's model, dB: beacons' transmit powers span about this much.
    static let boundDb = 30.0

    public init() {}

    /// Learns from a second's excess level (dB, with the level taken off already) heard by `receivers` receivers.
    public mutating func learn(excessDb: Double, receivers: Int) {
        guard receivers >= Self.leastReceivers, excessDb.isFinite else { return }
        seconds += 1
        let share = 1 / Double(min(seconds + Self.priorSeconds, Self.windowSeconds))
        offsetDb = min(Self.boundDb, max(-Self.boundDb, offsetDb + share * excessDb))
    }
}
