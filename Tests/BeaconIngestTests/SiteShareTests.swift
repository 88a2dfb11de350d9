@testable import BeaconIngest
import Foundation
import Testing

@Suite struct SiteShareTests {
    /// Instances applying `SiteShare.plan` in turn against one set of locks, as they do against PostgreSQL.
    struct Deployment {
        var sites: [String]
        var owners: [String: String] = [:]
        var instances: [String] = []

        func owned(by instance: String) -> Set<String> { Set(owners.filter { $0.value == instance }.keys) }

        /// One instance's rebalance: hand over, then claim what is still free. Returns whether anything moved.
        mutating func step(_ instance: String) -> Bool {
            let others = instances.filter { $0 != instance }.map { owned(by: $0).count }
            let share = SiteShare.plan(
                instance: instance, sites: sites, owned: owned(by: instance), others: others,
                free: Set(sites).subtracting(owners.keys))
            for site in share.release { owners[site] = nil }
            var claimed = 0
            for site in share.claim where claimed < share.claimLimit && owners[site] == nil {
                owners[site] = instance
                claimed += 1
            }
            return !share.release.isEmpty || claimed > 0
        }

        /// Rounds of every instance stepping until none moves; nil when it has not settled after 20 rounds.
        mutating func settle() -> Int? {
            for round in 1...20 {
                var moved = false
                for instance in instances { moved = step(instance) || moved }
                if !moved { return round }
            }
            return nil
        }

        /// Every site owned, and every instance within one site of the others.
        var isFair: Bool {
            let counts = instances.map { owned(by: $0).count }
            return owners.count == sites.count && (counts.max() ?? 0) - (counts.min() ?? 0) <= 1
        }
    }

    @Test func aLoneInstanceClaimsEverySite() {
        let share = SiteShare.plan(instance: "a", sites: ["s1", "s2", "s3"], owned: [], others: [], free: ["s1", "s2", "s3"])
        #expect(share.claimLimit == 3 && Set(share.claim) == ["s1", "s2", "s3"] && share.release.isEmpty)
    }

    @Test func anInstanceHoldingMoreThanItsShareHandsOverTheSurplus() {
        let sites = (1...5).map { "s\($0)" }
        let share = SiteShare.plan(instance: "a", sites: sites, owned: Set(sites), others: [0], free: [])
        #expect(share.release.count == 2 && share.claim.isEmpty)  // 5 sites, 2 instances: 3 and 2
        // The newcomer waits for free sites, and takes at most its share.
        let newcomer = SiteShare.plan(instance: "b", sites: sites, owned: [], others: [3], free: Set(share.release))
        #expect(newcomer.claimLimit == 3 && Set(newcomer.claim) == Set(share.release))
    }

    @Test func withAnotherBelowItsShareOneSiteIsHandedOverAndTheFreeOnesGoToIt() {
        let sites = (1...4).map { "s\($0)" }
        // 4 sites, 3 instances: between 1 and 2 each. "c" has none.
        let holder = SiteShare.plan(instance: "a", sites: sites, owned: ["s1", "s2"], others: [2, 0], free: [])
        #expect(holder.release.count == 1)
        // "b", at 1 with a free site, leaves it for "c" rather than going to 2.
        let other = SiteShare.plan(instance: "b", sites: sites, owned: ["s3"], others: [1, 0], free: ["s4"])
        #expect(other.claimLimit == 0 || other.claim.isEmpty)
        let short = SiteShare.plan(instance: "c", sites: sites, owned: [], others: [1, 1], free: ["s4"])
        #expect(short.claim == ["s4"] && short.claimLimit >= 1)
    }

    @Test func instancesRankSitesDifferently() {
        let sites = Set((1...50).map { "site-\($0)" })
        let first = SiteShare.rank(sites, instance: "ingest-a")
        let second = SiteShare.rank(sites, instance: "ingest-b")
        #expect(first != second && Set(first) == sites && first == SiteShare.rank(sites, instance: "ingest-a"))
        #expect(first.prefix(5) != second.prefix(5))
    }

    /// Joins, graceful leaves and deaths in many sizes: the instances always settle, within a round per instance,
    /// on a fair division with every site owned.
    @Test(arguments: [(1, 1), (1, 3), (3, 2), (4, 3), (7, 3), (10, 4), (50, 4), (50, 7)])
    func instancesSettleOnAFairDivision(sites count: Int, instances: Int) {
        var deployment = Deployment(sites: (1...count).map { "site-\($0)" })
        for index in 1...instances {
            deployment.instances.append("ingest-\(index)")
            let rounds = deployment.settle()
            // An instance above the lower share hands over one site per round: one round per instance at most.
            #expect(rounds != nil && rounds! <= index + 1, "joining \(index): \(String(describing: rounds)) rounds")
            #expect(deployment.isFair, "after \(index) joined: \(deployment.owners)")
        }
        // The first one dies: its sites are free, the others share them.
        let dead = deployment.instances.removeFirst()
        deployment.owners = deployment.owners.filter { $0.value != dead }
        if !deployment.instances.isEmpty {
            #expect(deployment.settle() != nil)
            #expect(deployment.isFair, "after a death: \(deployment.owners)")
        }
        // One more joins.
        deployment.instances.append("ingest-late")
        #expect(deployment.settle() != nil)
        #expect(deployment.isFair, "after a late join: \(deployment.owners)")
    }
}

@Suite struct UnservedSitesTests {
    let start = ContinuousClock.now

    @Test func aSiteCountsOnlyOnceUnservedForLongerThanTheBoundAndIsReportedOnce() {
        var unserved = UnservedSites(bound: .seconds(15))
        #expect(unserved.observe(unserved: ["hq"], now: start) == (0, []))
        #expect(unserved.observe(unserved: ["hq", "east"], now: start + .seconds(15)) == (0, []))
        #expect(unserved.observe(unserved: ["hq", "east"], now: start + .seconds(16)) == (1, ["hq"]))
        #expect(unserved.observe(unserved: ["hq", "east"], now: start + .seconds(31)) == (2, ["east"]))
        #expect(unserved.observe(unserved: ["hq", "east"], now: start + .seconds(40)) == (2, []))
    }

    @Test func aSiteServedAgainStartsAfresh() {
        var unserved = UnservedSites(bound: .seconds(15))
        _ = unserved.observe(unserved: ["hq"], now: start)
        #expect(unserved.observe(unserved: ["hq"], now: start + .seconds(20)) == (1, ["hq"]))
        #expect(unserved.observe(unserved: [], now: start + .seconds(21)) == (0, []))
        #expect(unserved.observe(unserved: ["hq"], now: start + .seconds(22)) == (0, []))
        #expect(unserved.observe(unserved: ["hq"], now: start + .seconds(38)) == (1, ["hq"]))
    }
}

@Suite struct CommitGroupTests {
    @Test func groupsHoldAtMostTheBatchesSightingsAndBeaconsAllowed() {
        #expect(Ingest.commitGroups(sightings: [], beacons: [], maximumBatches: 64, maximumSightings: 100, maximumBeacons: 1_000) == [])
        #expect(Ingest.commitGroups(sightings: [10, 20, 30, 40], beacons: [10, 20, 30, 40], maximumBatches: 64, maximumSightings: 100, maximumBeacons: 1_000) == [0..<4])
        #expect(Ingest.commitGroups(sightings: [10, 20, 30, 41], beacons: [10, 20, 30, 41], maximumBatches: 64, maximumSightings: 100, maximumBeacons: 1_000) == [0..<3, 3..<4])
        #expect(Ingest.commitGroups(sightings: [1, 1, 1, 1, 1], beacons: [1, 1, 1, 1, 1], maximumBatches: 2, maximumSightings: 100, maximumBeacons: 1_000) == [0..<2, 2..<4, 4..<5])
        // A batch above the bound goes alone.
        #expect(Ingest.commitGroups(sightings: [5, 500, 5], beacons: [5, 500, 5], maximumBatches: 64, maximumSightings: 100, maximumBeacons: 1_000) == [0..<1, 1..<2, 2..<3])
        // Batches of many distinct beacons go in smaller groups than their sightings allow.
        #expect(Ingest.commitGroups(sightings: [40, 40, 40, 40], beacons: [4, 40, 4, 4], maximumBatches: 64, maximumSightings: 1_000, maximumBeacons: 44) == [0..<2, 2..<4])
        #expect(Ingest.commitGroups(sightings: [40, 40], beacons: [50, 1], maximumBatches: 64, maximumSightings: 1_000, maximumBeacons: 44) == [0..<1, 1..<2])
    }
}

/// What a reload of the sites file changes, site by site.
@Suite struct SitesChangeTests {
    static func sites(_ text: String) throws -> SitesConfiguration {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sites-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try SitesConfiguration.load(path: path)
    }

    @Test func sitesAddedRemovedAndChangedAreToldApart() throws {
        let before = try Self.sites("""
            sites:
              - {id: a, zones: [{id: z1}], agents: [{id: a1, zone: z1}]}
              - {id: b, zones: [{id: z1}], agents: [{id: b1, zone: z1}]}
              - {id: c, zones: [{id: z1}], agents: [{id: c1, zone: z1}]}
            """)
        let after = try Self.sites("""
            sites:
              - {id: a, zones: [{id: z1}], agents: [{id: a1, zone: z1}]}
              - {id: b, zones: [{id: z1}, {id: z2}], agents: [{id: b1, zone: z1}]}
              - {id: d, zones: [{id: z1}], agents: [{id: d1, zone: z1}]}
            beacons:
              - {id: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", label: forklift}
            """)
        let change = SitesChange(from: before, to: after)
        #expect(change.added == ["d"] && change.removed == ["c"] && change.changed == ["b"] && change.registryChanged)
        #expect(change.handedOver == ["b", "c"] && change.restarted == ["b", "d"])
        #expect(SitesChange(from: after, to: after).isEmpty)
    }
}

/// The sightings one transaction takes follow what the last ones cost.
@Suite struct CommitPaceTests {
    @Test func theBoundFollowsTheCostOfASightingWithinItsLimits() {
        var pace = CommitPace(maximum: 100_000, target: .seconds(1))
        #expect(pace.sightingsLimit == 4_096)
        // Fast: at most doubles per commit, up to the maximum.
        pace.committed(sightings: 4_096, took: .milliseconds(10))
        #expect(pace.sightingsLimit == 8_192)
        for _ in 0..<10 { pace.committed(sightings: pace.sightingsLimit, took: .milliseconds(10)) }
        #expect(pace.sightingsLimit == 100_000)
        // Slow (a starved machine, a debug build): what fits in the target, at once.
        pace.committed(sightings: 100_000, took: .seconds(20))
        #expect(pace.sightingsLimit == 5_000)
        // A small group that took long lowers it too; nothing committed changes nothing.
        pace.committed(sightings: 150, took: .seconds(3))
        #expect(pace.sightingsLimit == 50)
        pace.committed(sightings: 0, took: .seconds(30))
        #expect(pace.sightingsLimit == 50)
        // A lost transaction halves it, never below one sighting (a batch above the bound goes alone).
        for _ in 0..<10 { pace.transactionLost() }
        #expect(pace.sightingsLimit == 1)
        pace.committed(sightings: 150, took: .milliseconds(1))
        #expect(pace.sightingsLimit == 2)
        #expect(CommitPace(maximum: 1_000, target: .seconds(1)).sightingsLimit == 1_000)
    }
}
