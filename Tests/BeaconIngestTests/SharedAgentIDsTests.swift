import BeaconIngest
import Testing

@Suite struct SharedAgentIDsTests {
    let agent = AgentKey(site: "hq", agent: "hq-a1")

    /// An agent that restarts moves on to a new boot id each time and is never reported.
    @Test func restartsAreNotASharedID() {
        var shared = SharedAgentIDs()
        for (index, boot) in ["a", "a", "b", "b", "c", "d", "e"].enumerated() {
            #expect(shared.observe(agent, bootID: boot, atMicros: Int64(index) * 1_000_000) == nil)
        }
    }

    /// Two agents alternate: reported at the second return to a boot id left before (one return may be a status
    /// redelivered late), then at most once a minute; another agent is watched apart.
    @Test func alternatingBootIDsAreReportedOnceAMinute() {
        var shared = SharedAgentIDs()
        #expect(shared.observe(agent, bootID: "a", atMicros: 0) == nil)
        #expect(shared.observe(agent, bootID: "b", atMicros: 1_000_000) == nil)
        #expect(shared.observe(agent, bootID: "a", atMicros: 2_000_000) == nil)
        let report = shared.observe(agent, bootID: "b", atMicros: 3_000_000)
        #expect(report?.0 == "a" && report?.1 == "b")
        #expect(shared.observe(agent, bootID: "a", atMicros: 4_000_000) == nil)
        #expect(shared.observe(agent, bootID: "b", atMicros: 62_000_000) == nil)
        #expect(shared.observe(agent, bootID: "a", atMicros: 63_000_000) != nil)
        let other = AgentKey(site: "hq", agent: "hq-a2")
        #expect(shared.observe(other, bootID: "a", atMicros: 65_000_000) == nil)
        #expect(shared.observe(other, bootID: "c", atMicros: 66_000_000) == nil)
    }
}
