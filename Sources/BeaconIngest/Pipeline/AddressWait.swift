import BeaconWire

/// Eddystone URL, TLM and eTLM frames carry no identity: they are the UID or EID beacon's that sends from the same
/// address. An agent holds them until it hears that identity itself (`IdentityHold`), but the first frames of a
/// beacon coming into range often reach one receiver before any receiver of the site has heard its identity.
/// Here such frames wait, per site and address, for an identity frame from the same address at any receiver of
/// the site: claimed, they are stored as that beacon's; still unclaimed after `waitMicros` of the ingest's clock,
/// they are stored under the address, as before. Bounded: `maximumPerAddress` per address and `maximumPerSite`
/// per site, the oldest stored under their address beyond that. A pure state machine; the writer keeps each
/// waiting frame in the database too (`waiting_frames`), so that a restart or another instance taking the site
/// over finds them.
struct AddressWait: Sendable {
    /// A waiting frame: the sighting with its event time as `timeMicros`, the agent that heard it, and when the
    /// ingest took it (or took it back from the database).
    struct Frame: Sendable, Equatable {
        var agent: AgentKey
        var sighting: Sighting
        var arrivalMicros: Int64

        /// What the database keeps a waiting frame under.
        var key: Key { Key(site: agent.site, agent: agent.agent, address: sighting.beacon.address, timeMicros: sighting.timeMicros) }
    }

    /// A waiting frame in the database: one advert of one address heard by one agent at one moment.
    struct Key: Hashable, Sendable {
        var site: String
        var agent: String
        var address: UInt64
        var timeMicros: Int64
    }

    /// How long a frame waits for its identity, by the ingest's clock: an identity heard by another receiver
    /// comes within a batch interval or two (a second each by default); agents hold their own for 10 s first.
    static let waitMicros: Int64 = 15_000_000
    static let maximumPerAddress = 64
    static let maximumPerSite = 10_000

    private var held: [String: [UInt64: [Frame]]] = [:]
    /// Addresses whose frames waited in vain, per site, with when and the address beacon they were stored as: their
    /// frames are stored at once for the address lifetime (a beacon that sends only URL or TLM waits once, not at
    /// every frame), and an identity heard from the address within it merges that address beacon into its own
    /// (`tied`). At most `maximumPerSite`.
    private var waitedInVain: [String: [UInt64: StoredUnderAddress]] = [:]
    private(set) var count = 0
    /// The earliest arrival held, to look for expired frames only when some may be.
    private var earliestArrival: Int64 = .max

    /// An address whose frames were stored under it: its newest such frame's event time, and its beacon id (`mac:`).
    struct StoredUnderAddress: Sendable, Equatable {
        var timeMicros: Int64
        var beaconID: String
    }

    /// Whether `sighting` waits: an address's frame of an Eddystone beacon (URL, TLM, eTLM) that no identity of
    /// the site claims yet. Sensors that never send an identity (Ruuvi, BTHome) are stored at once.
    static func waits(_ sighting: Sighting) -> Bool {
        sighting.beacon.identity?.kind == .mac && sighting.beacon.address != 0 && !sighting.beacon.addressAsBefore
            && sighting.carriesEddystoneData
    }

    /// Holds a frame; returns those that no longer fit (oldest first), to be stored under their address.
    mutating func hold(_ frame: Frame) -> [Frame] {
        let site = frame.agent.site
        let address = frame.sighting.beacon.address
        held[site, default: [:]][address, default: []].append(frame)
        count += 1
        earliestArrival = min(earliestArrival, frame.arrivalMicros)
        var overflow: [Frame] = []
        if held[site]![address]!.count > Self.maximumPerAddress {
            overflow.append(held[site]![address]!.removeFirst())
            count -= 1
        }
        let siteCount = held[site]!.values.reduce(0) { $0 + $1.count }
        if siteCount > Self.maximumPerSite { overflow += takeOldest(siteCount - Self.maximumPerSite, site: site) }
        return overflow
    }

    /// The frames waiting for `address` at `site`, now claimed by the identity heard from it, in time order.
    mutating func claim(site: String, address: UInt64) -> [Frame] {
        guard count > 0, let frames = held[site]?.removeValue(forKey: address) else { return [] }
        count -= frames.count
        if held[site]?.isEmpty == true { held[site] = nil }
        return frames.sorted { $0.sighting.timeMicros < $1.sighting.timeMicros }
    }

    /// Whether frames from `address` at `site` are stored at once: its frames waited in vain less than
    /// `lifetimeMicros` before `timeMicros` (event time).
    func waitedInVain(site: String, address: UInt64, timeMicros: Int64, lifetimeMicros: Int64) -> Bool {
        guard let stored = waitedInVain[site]?[address] else { return false }
        return timeMicros &- stored.timeMicros <= lifetimeMicros
    }

    /// Whether any address of `site` had its frames stored under it (a lookup before `tied`, which most identity
    /// frames need not make).
    func storesUnderAddress(site: String) -> Bool { waitedInVain[site] != nil }

    /// An identity was heard from `address` at `site` at `timeMicros`: the address beacon its earlier frames were
    /// stored as within `lifetimeMicros`, to be merged into the identity's, once (the address is forgotten here).
    mutating func tied(site: String, address: UInt64, timeMicros: Int64, lifetimeMicros: Int64) -> String? {
        guard let stored = waitedInVain[site]?.removeValue(forKey: address) else { return nil }
        if waitedInVain[site]?.isEmpty == true { waitedInVain[site] = nil }
        return timeMicros &- stored.timeMicros <= lifetimeMicros ? stored.beaconID : nil
    }

    /// Remembers that frames of these addresses waited in vain (their newest event time), within the bound.
    mutating func rememberWaitedInVain(_ frames: [Frame]) {
        for frame in frames {
            remember(
                site: frame.agent.site, address: frame.sighting.beacon.address,
                StoredUnderAddress(timeMicros: frame.sighting.timeMicros, beaconID: frame.sighting.beacon.beaconID))
        }
    }

    /// Remembers address beacons of a site that an earlier owner (or this instance before a restart) stored, as
    /// `beacon_state` lists them: an identity heard from their address within its lifetime merges them still.
    mutating func rememberStoredUnderAddress(_ beacons: [(site: String, address: UInt64, stored: StoredUnderAddress)]) {
        for beacon in beacons { remember(site: beacon.site, address: beacon.address, beacon.stored) }
    }

    private mutating func remember(site: String, address: UInt64, _ stored: StoredUnderAddress) {
        var latest = stored
        if let known = waitedInVain[site]?[address], known.timeMicros > stored.timeMicros { latest.timeMicros = known.timeMicros }
        waitedInVain[site, default: [:]][address] = latest
        if waitedInVain[site]!.count > Self.maximumPerSite,
            let oldest = waitedInVain[site]!.min(by: { $0.value.timeMicros < $1.value.timeMicros })
        {
            waitedInVain[site]![oldest.key] = nil
        }
    }

    /// The frames of `sites` (nil: all) that have waited longer than `waitMicros` at `nowMicros`, in time order.
    mutating func expire(sites: Set<String>?, nowMicros: Int64) -> [Frame] {
        guard count > 0, nowMicros &- earliestArrival > Self.waitMicros else { return [] }
        var expired: [Frame] = []
        var earliest = Int64.max
        for (site, addresses) in held {
            for (address, frames) in addresses {
                let isExpired = { (frame: Frame) in
                    (sites?.contains(site) ?? true) && nowMicros &- frame.arrivalMicros > Self.waitMicros
                }
                let gone = frames.filter(isExpired)
                guard !gone.isEmpty else {
                    earliest = min(earliest, frames.map(\.arrivalMicros).min() ?? .max)
                    continue
                }
                let kept = frames.filter { !isExpired($0) }
                expired += gone
                count -= gone.count
                held[site]![address] = kept.isEmpty ? nil : kept
                earliest = min(earliest, kept.map(\.arrivalMicros).min() ?? .max)
            }
            if held[site]?.isEmpty == true { held[site] = nil }
        }
        earliestArrival = earliest
        return expired.sorted { $0.sighting.timeMicros < $1.sighting.timeMicros }
    }

    /// Forgets the frames of `sites` (handed over: the database keeps them for the new owner).
    mutating func forget(sites: Set<String>) {
        for site in sites {
            waitedInVain[site] = nil
            count -= held.removeValue(forKey: site)?.values.reduce(0) { $0 + $1.count } ?? 0
        }
    }

    /// The frames a site's earlier owner left waiting, taken back from the database: they wait again in full. The
    /// bounds held when they were kept, so none is stored here.
    mutating func restore(_ frames: [Frame]) {
        for frame in frames {
            held[frame.agent.site, default: [:]][frame.sighting.beacon.address, default: []].append(frame)
            count += 1
            earliestArrival = min(earliestArrival, frame.arrivalMicros)
        }
    }

    private mutating func takeOldest(_ excess: Int, site: String) -> [Frame] {
        guard let addresses = held[site] else { return [] }
        let oldest = addresses.flatMap { address, frames in frames.map { (address, $0.sighting.timeMicros) } }
            .sorted { $0.1 < $1.1 }.prefix(excess)
        var taken: [Frame] = []
        for (address, _) in oldest {
            guard var frames = held[site]?[address], !frames.isEmpty else { continue }
            taken.append(frames.removeFirst())
            held[site]![address] = frames.isEmpty ? nil : frames
            count -= 1
        }
        return taken
    }
}

/// What a batch (or the passing of time) changed in the frames waiting for their identity: the writer keeps the
/// `held` in the database and deletes the `done`, in the batch's transaction.
struct WaitingFrames: Sendable {
    var held: [AddressWait.Frame] = []
    var done: [AddressWait.Key] = []
    /// Frames claimed by their identity, and frames stored under their address after all.
    var claimed = 0
    var storedUnderAddress = 0

    mutating func append(_ other: WaitingFrames) {
        held += other.held
        done += other.done
        claimed += other.claimed
        storedUnderAddress += other.storedUnderAddress
    }
}
