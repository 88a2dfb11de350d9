@testable import BeaconIngest
import TestServers
import Testing

/// Checkpoints of the previous layout (version 1: readings without their level as heard, no crossings), as a
/// site's last checkpoint is after an upgrade, still restore: the beacons stay where they were.
@Suite struct ZoneCheckpointVersionTests {
    let site = try! SitesConfiguration.parse(testSites).sites[0]
    let start: Int64 = 1_767_225_600_000_000
    let second: Int64 = 1_000_000

    func versionOne() -> [UInt8] {
        var out = CheckpointWriter()
        out.int(Int64(1))
        out.strings(["lobby", "lab"])
        out.strings(["hq-a1", "hq-a2"])
        out.int(start + 50 * second)  // watermark
        out.optional(nil)  // next minute
        out.optional(start)  // first reading
        out.optional(start)  // first arrival
        out.strings([])  // unheard agents
        out.int(2)
        for agent in ["hq-a1", "hq-a2"] {
            out.string(agent)
            out.int(start + 50 * second)
            out.int(start + 50 * second)
        }
        ZonePatterns(zoneCount: 2, zoneOfAgent: [0, 1]).encode(into: &out)
        out.int(1)
        out.string("b")
        out.optional(0)  // in the lobby
        out.int(start)
        out.int(start + 50 * second)
        out.int(1)  // one reading: agent, time, smoothed level
        out.int(0)
        out.int(start + 50 * second)
        out.double(-60)
        out.int(0)  // no evidence
        out.int(start + 50 * second)
        out.optional(nil)  // appeared
        out.int(0)  // no filters
        out.int(0)  // no presence
        return out.bytes
    }

    @Test func aVersionOneCheckpointRestores() throws {
        var tracker = SiteZoneTracker(site: site)
        try tracker.restore(checkpoint: versionOne())
        #expect(tracker.zone(of: "b") == "lobby")
        #expect(tracker.watermarkMicros == start + 50 * second)
        // Saved again, it is of the current version, and restores the same.
        var again = SiteZoneTracker(site: site)
        try again.restore(checkpoint: tracker.takeCheckpoint())
        #expect(again.zone(of: "b") == "lobby")
        #expect(again.placements.map(\.enterMicros) == [start])
    }
}
