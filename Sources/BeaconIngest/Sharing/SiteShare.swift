import BeaconWire

/// How the ingest instances on one database divide the sites among themselves. A pure function of what one
/// instance sees; each instance applies it on its own, at start and then every `IngestConfiguration.rebalanceInterval`.
///
/// With `n` sites and `live` instances, every instance holds between ⌊n/live⌋ and ⌈n/live⌉ sites once things
/// settle. An instance above ⌈n/live⌉ hands over its surplus; one above ⌊n/live⌋ hands over one site when another
/// instance is below ⌊n/live⌋ and no site is free. An instance claims free sites up to ⌈n/live⌉ (only to ⌊n/live⌋
/// while another is below it, so that the one below gets them). Each instance ranks the sites by a hash of its
/// name and the site's, and claims in that order and hands over in the reverse: two instances claiming at once
/// mostly try different sites, and the same instance prefers the same sites after a restart.
public struct SiteShare: Sendable, Equatable {
    /// Free sites to try to claim, in order; claim at most `claimLimit` of them (some may be taken meanwhile).
    public var claim: [String] = []
    public var claimLimit = 0
    /// Owned sites to hand over.
    public var release: [String] = []

    /// - Parameters:
    ///   - sites: every site of the sites file.
    ///   - owned: the sites this instance holds.
    ///   - others: how many sites each other live instance holds.
    ///   - free: the sites nobody holds.
    public static func plan(
        instance: String, sites: [String], owned: Set<String>, others: [Int], free: Set<String>
    ) -> SiteShare {
        let live = others.count + 1
        let lower = sites.count / live
        let upper = lower + (sites.count % live == 0 ? 0 : 1)
        let anotherIsShort = others.contains { $0 < lower }
        var share = SiteShare()
        let mine = owned.count
        let surplus = mine > upper ? mine - upper : (mine > lower && anotherIsShort && free.isEmpty ? 1 : 0)
        if surplus > 0 {
            share.release = Array(rank(owned, instance: instance).reversed().prefix(surplus))
            return share
        }
        let limit = (anotherIsShort ? lower : upper) - mine
        if limit > 0, !free.isEmpty {
            share.claim = rank(free.subtracting(owned), instance: instance)
            share.claimLimit = limit
        }
        return share
    }

    /// The sites in this instance's order of preference.
    static func rank(_ sites: Set<String>, instance: String) -> [String] {
        sites.map { (site: $0, weight: preference(instance: instance, site: $0)) }
            .sorted { ($0.weight, $0.site) > ($1.weight, $1.site) }
            .map(\.site)
    }

    /// FNV-1a over the instance's name, a separator and the site's: stable across runs and platforms.
    static func preference(instance: String, site: String) -> UInt64 {
        FNV1a.digest(Array(instance.utf8) + [0] + Array(site.utf8))
    }
}
