/// What reading the sites file again changes: the sites added and removed, those whose definition changed
/// (zones, agents, settings), and whether the beacon registry changed. Pure.
struct SitesChange: Equatable, Sendable {
    var added: Set<String> = []
    var removed: Set<String> = []
    var changed: Set<String> = []
    var registryChanged = false

    init(from old: SitesConfiguration, to new: SitesConfiguration) {
        let before = Dictionary(old.sites.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(new.sites.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        added = Set(after.keys).subtracting(before.keys)
        removed = Set(before.keys).subtracting(after.keys)
        changed = Set(after.keys.filter { before[$0] != nil && before[$0] != after[$0] })
        registryChanged = old.beacons != new.beacons
    }

    var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty && !registryChanged }

    /// Sites this instance stops serving: removed ones, and changed ones, which are claimed again and resume from
    /// the database under their new definition.
    var handedOver: Set<String> { removed.union(changed) }

    /// Sites whose zone tracking starts anew.
    var restarted: Set<String> { added.union(changed) }
}

extension Ingest {
    /// The sites file read again (SIGHUP): the new sites and what changed, or nil when the file is the same or
    /// does not load (then it is refused with its reason, counted, and the running sites kept). A file that
    /// differs only in its text (comments, layout) changes nothing but its digest.
    func loadSitesAgain(current: SitesConfiguration) -> (sites: SitesConfiguration, change: SitesChange)? {
        guard let path = configuration.sitesPath else {
            instruments.record(.sitesReloadRefused(path: nil, reason: "the ingest was not started with a sites file"))
            return nil
        }
        let loaded: SitesConfiguration
        do {
            loaded = try SitesConfiguration.load(path: path)
        } catch {
            instruments.record(.sitesReloadRefused(path: path, reason: error.message))
            return nil
        }
        let change = SitesChange(from: current, to: loaded)
        instruments.record(.sitesReloaded(path: path, change))
        return loaded == current ? nil : (loaded, change)
    }
}
