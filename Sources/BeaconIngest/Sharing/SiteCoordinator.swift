import BeaconMessaging
import LibPQ
import Mosquitto

/// Which sites this instance serves, on the writer thread: claims and hands over sites as `SiteShare` says, and
/// keeps the topics it is subscribed to equal to the sites its writer serves. Across a lost PostgreSQL connection
/// the sites stay subscribed (intake pauses) until the next connection's claims.
struct SiteCoordinator {
    let configuration: IngestConfiguration
    /// The sites file in force (read again on SIGHUP).
    var sites: SitesConfiguration
    let client: BrokerConnections
    let instruments: IngestInstruments
    /// The sites whose topics are subscribed.
    private(set) var subscribed: Set<String> = []
    private var unserved: UnservedSites
    private var idle: IdleInstances
    /// How long one rebalance claims sites at most before it lets the writer take batches again.
    var claimBudget: Duration = .milliseconds(250)
    /// Whether every live instance ran with this sites file at the last look.
    private var filesAgreed = true

    init(configuration: IngestConfiguration, client: BrokerConnections, instruments: IngestInstruments) {
        self.configuration = configuration
        sites = configuration.sites
        self.client = client
        self.instruments = instruments
        unserved = UnservedSites(bound: configuration.unservedSiteBound)
        idle = IdleInstances(patience: configuration.unservedSiteBound / 3)
    }

    /// The topic filters of a site's batches and statuses, as an instance of `group` subscribes to them.
    static func subscriptionFilters(site: String, group: String?) -> [String] {
        let batches = AgentTopics.siteFilter(site: site, kind: .batch)
        return [group.map { "$share/\($0)/\(batches)" } ?? batches]
    }

    /// Claims and hands over sites as `SiteShare` says, then subscribes to the topics of the sites served (and
    /// only those). Claims stop after `claimBudget` of the writer's time (a thousand sites added by a reload, say),
    /// so that batches go in between; returns whether more are to be claimed (at the writer's next turn).
    @discardableResult
    mutating func rebalance(_ writer: BatchWriter, state: inout WriterState) throws(PostgresError) -> Bool {
        let sites = self.sites.sites.map(\.id)
        let (others, free, notServed, digests) = try writer.observeInstances(sites: sites)
        instruments.record(
            .sitesFilesCompared(differing: Set(digests.filter { !$0.value.isEmpty && $0.value != self.sites.digest }.keys), digest: self.sites.digest))
        let filesAgree = digests.values.allSatisfy { $0 == self.sites.digest }
        if filesAgree, !writer.registryPruned || !filesAgreed {
            // Every live instance runs with this sites file now: what it does not have (rows of a file no instance
            // runs with any more) is deleted.
            try writer.writeRegistry(self.sites)
        }
        filesAgreed = filesAgree
        let overdue = unserved.observe(unserved: notServed, now: .now)
        instruments.record(.sitesUnserved(count: overdue.count, newlyOverdue: overdue.newlyOverdue, bound: unserved.bound))
        let counted = idle.observe(others: others, free: free, now: .now)
        let share = SiteShare.plan(
            instance: configuration.mqtt.clientID, sites: sites, owned: state.servedSites, others: Array(counted.values), free: free)
        if !share.release.isEmpty {
            try handOver(Set(share.release), writer, state: &state)
        }
        let started = ContinuousClock.now
        var moreToClaim = false
        var claimed: [String] = []
        var takenOver = 0
        var resumption = ZoneResumption()
        for site in share.claim where claimed.count < share.claimLimit {
            if ContinuousClock.now - started > claimBudget {
                moreToClaim = true
                break
            }
            // Subscribed before the read-back, which may take a while: the agents' batches sent meanwhile wait in
            // the queue instead of reaching no subscriber.
            let served = state.servedSites
            guard let claim = try writer.claim(site: site, state: &state, leased: { match(served.union([site])) }) else { continue }
            claimed.append(site)
            if claim.takenOver { takenOver += 1 }
            resumption.restoredSites += claim.resumption.restoredSites
            resumption.replayedSightings += claim.resumption.replayedSightings
            resumption.unusableCheckpoints += claim.resumption.unusableCheckpoints
            resumption.unreadableBatteryStates += claim.resumption.unreadableBatteryStates
        }
        // Also after a reconnect that claimed none of the sites subscribed before.
        match(state.servedSites)
        guard !claimed.isEmpty else { return moreToClaim }
        instruments.record(
            .sitesClaimed(
                claimed: claimed, takenOver: takenOver, resumption: resumption, serving: state.servedSites.count,
                otherInstances: others.count))
        return moreToClaim
    }

    /// Unsubscribes from the sites' topics, then hands them over on the database (`BatchWriter.release`).
    mutating func handOver(_ sites: Set<String>, _ writer: BatchWriter, state: inout WriterState) throws(PostgresError) {
        guard !sites.isEmpty else { return }
        match(state.servedSites.subtracting(sites))
        for site in sites.sorted() { try writer.release(site: site, state: &state) }
        instruments.record(.sitesHandedOver(sites, serving: state.servedSites.count))
    }

    /// Sites whose leases another instance took over (this one was frozen or cut off for longer than a lease):
    /// nothing more is written for them here, and their topics are left to the new owner.
    mutating func sitesLost(_ sites: Set<String>, servedSites: Set<String>) {
        guard !sites.isEmpty else { return }
        match(servedSites)
        instruments.record(.sitesLost(sites, serving: servedSites.count))
    }

    private mutating func match(_ served: Set<String>) {
        do throws(MQTTError) {
            for site in subscribed.subtracting(served).sorted() {
                for filter in Self.subscriptionFilters(site: site, group: configuration.sharedSubscriptionGroup) {
                    try client.unsubscribe(topic: filter)
                }
                subscribed.remove(site)
            }
            for site in served.subtracting(subscribed).sorted() {
                for filter in Self.subscriptionFilters(site: site, group: configuration.sharedSubscriptionGroup) {
                    try client.subscribe(topic: filter, qos: 1)
                }
                subscribed.insert(site)
            }
        } catch {
            // libmosquitto refuses only for a bad topic or when out of memory; the next claim tries again.
            instruments.logger.error("Site subscriptions could not be changed", metadata: ["error": "\(error)"])
        }
    }
}
