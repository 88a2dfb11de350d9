import BeaconWire

/// A sighting's beacon as the pipeline files it: its id (an EID resolved to its beacon, an address tied to the
/// identity last heard from it) and the kind of identity the id is, taken from the wire's typed identity once, at
/// intake, so that nothing downstream reads a kind back out of the text.
public struct ResolvedBeacon: Hashable, Sendable {
    public var id: String
    /// Nil for an id that is no identity of a known kind (an address, or a reading's beacon known only by id,
    /// whose kind its sightings set).
    public var kind: BeaconIdentity.Kind?

    public init(id: String, kind: BeaconIdentity.Kind? = nil) {
        self.id = id
        self.kind = kind
    }
}
