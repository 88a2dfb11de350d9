import BeaconWire
import TestServers
import Testing

@testable import BeaconIngest

/// What the writer holds about the data, across sessions and sites lost, without a database.
@Suite struct WriterStateTests {
    let agent = AgentKey(site: "hq", agent: "hq-a1")
    let start: Int64 = 1_767_225_600_000_000
    let first = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    let second = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3"

    func state() throws -> WriterState {
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)), servedSites: ["hq"])
        let batch = try BatchReader.decode(try batchPayload(sequence: 1, beaconID: first, count: 20, start: start))
        _ = state.pipeline.apply(state.timed(batch), nowMicros: start + 30_000_000, inOrder: true)
        _ = state.tracker.committed(agent, sequence: 1, firstUnacknowledged: 1)
        state.loadedAgents.insert(agent)
        return state
    }

    @Test func aSessionEndedTakesItsSitesProgressAndKeysAndKeepsThePipeline() throws {
        var state = try state()
        // The batch's readings wait in the site's tracker for the other agent.
        let waiting = state.pipeline.zoneTrackers["hq"]?.pendingReadings
        #expect(waiting == 20)
        state.sessionEnded()
        #expect(state.servedSites.isEmpty && state.loadedAgents.isEmpty)
        #expect(state.tracker.committedThrough(agent) == 0)
        // The pipeline stays; a site claimed again resumes from the database, which drops what it holds.
        #expect(state.pipeline.zoneTrackers["hq"]?.pendingReadings == waiting)
        #expect(state.pipeline.health.health(of: first) != nil)
    }

    @Test func aSiteForgottenDropsItsZonesAndItsAgentsProgressOnly() throws {
        var state = try state()
        state.forget(sites: ["hq"])
        #expect(state.servedSites.isEmpty && state.loadedAgents.isEmpty)
        #expect(state.pipeline.zoneTrackers["hq"]?.pendingReadings == 0)
        // Acknowledgements already committed stay as they were; only their reload is due.
        #expect(state.tracker.committedThrough(agent) == 1)
        state.sitesLost.formUnion(["hq"])
        #expect(state.takeSitesLost() == ["hq"])
        #expect(state.takeSitesLost().isEmpty)
    }

    @Test func aTransactionRolledBackUndoesTheProgressAndThePipeline() throws {
        var state = try state()
        state.beginTransaction()
        _ = state.tracker.committed(agent, sequence: 2, firstUnacknowledged: 1)
        let batch = try BatchReader.decode(try batchPayload(sequence: 2, beaconID: second, count: 20, start: start + 20_000_000))
        _ = state.pipeline.apply(state.timed(batch), nowMicros: start + 60_000_000, inOrder: true)
        #expect(state.pipeline.health.health(of: second) != nil)
        state.rollbackTransaction()
        #expect(state.tracker.committedThrough(agent) == 1)
        #expect(state.pipeline.health.health(of: second) == nil && state.pipeline.health.health(of: first) != nil)
    }
}
