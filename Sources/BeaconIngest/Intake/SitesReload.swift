import Foundation

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

/// SIGHUP's reads of the sites file: on a thread of their own, so that a large file never holds the writer; the
/// writer applies the newest file read between two transactions.
struct SitesReloads: Sendable {
    /// The newest file read (or the configuration's): what the next read is compared with.
    var latest: SitesConfiguration
    /// Read and not applied yet (a newer read replaces it).
    var pending: SitesConfiguration?
    var reading = false
    /// Asked again while reading: read once more when done.
    var again = false
}

extension Ingest {
    /// Reads the sites file on a thread of its own (`SitesReloads`); a request while one is read reads once more.
    func startReadingSitesFile() {
        let start = reloads.withLock { reloads in
            if reloads.reading {
                reloads.again = true
                return false
            }
            reloads.reading = true
            return true
        }
        guard start else { return }
        Thread.detachNewThread { [self] in
            while true {
                let current = reloads.withLock { $0.latest }
                let loaded = loadSitesAgain(current: current)
                let readAgain = reloads.withLock { reloads in
                    if let loaded {
                        reloads.latest = loaded
                        reloads.pending = loaded
                    }
                    defer { reloads.again = false }
                    reloads.reading = reloads.again
                    return reloads.again
                }
                if !readAgain { return }
            }
        }
    }

    /// The sites file read again (SIGHUP): the new sites, or nil when the file is the same or does not load (then
    /// it is refused with its reason, counted, and the running sites kept). A file that differs only in its text
    /// (comments, layout) changes nothing but its digest.
    func loadSitesAgain(current: SitesConfiguration) -> SitesConfiguration? {
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
        return loaded == current ? nil : loaded
    }
}
