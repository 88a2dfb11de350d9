import BeaconMessaging
import BoundedYAML
import LibPQ

/// Agents' status messages, on the writer thread: the clock they report feeds the pipeline's clock offsets, their
/// boot ids tell two agents given one id apart, and the status is recorded in `agent_state`.
struct StatusIntake {
    let sites: SitesConfiguration
    let instruments: IngestInstruments

    func record(
        topic: String, agentTopics: AgentTopics?, payload: [UInt8], receivedAtMicros: Int64, retained: Bool,
        writer: BatchWriter, pipeline: inout IngestPipeline
    ) throws(PostgresError) {
        guard let agentTopics else {
            instruments.record(.statusIgnored(topic: topic, .notAnAgentTopic))
            return
        }
        guard sites.agent(site: agentTopics.site, agent: agentTopics.agent) != nil else {
            instruments.record(.statusIgnored(topic: topic, unknown(agentTopics)))
            return
        }
        let status: AgentStatus
        do {
            status = try AgentStatus(json: payload)
        } catch {
            instruments.record(.statusIgnored(topic: topic, .invalid("\(error)")))
            return
        }
        let agent = AgentKey(site: agentTopics.site, agent: agentTopics.agent)
        if let bootID = status.bootID, let bootIDs = pipeline.sharedAgentIDs.observe(agent, bootID: bootID, atMicros: receivedAtMicros) {
            instruments.record(.agentIDShared(agent, bootIDs: bootIDs))
        }
        var offsetMillis: Double?
        var stale = false
        if let clock = status.clockMicros {
            stale = !pipeline.clocks.isNewest(agent, statusClockMicros: clock)
            if !stale, status.online {
                pipeline.clocks.observe(agent, agentClockMicros: clock, receivedAtMicros: receivedAtMicros, retained: retained)
            }
        }
        offsetMillis = pipeline.clocks.estimateMicros(agent).map { Double($0) / 1000 }
        guard !stale else {
            instruments.record(.statusIgnored(topic: topic, .older))
            return
        }
        try writer.recordStatus(agent, status, clockOffsetMillis: offsetMillis)
    }

    /// An agent the sites file does not have: its site unknown (with the nearest site id), or the site known and
    /// the agent not (with the nearest agent id of the site).
    private func unknown(_ agentTopics: AgentTopics) -> IngestEvent.StatusIgnored {
        guard let site = sites.sites.first(where: { $0.id == agentTopics.site }) else {
            return .unknownSite(site: agentTopics.site, agent: agentTopics.agent, nearest: BoundedYAML.nearestKey(to: agentTopics.site, among: sites.sites.map(\.id)))
        }
        return .unknownAgent(site: site.id, agent: agentTopics.agent, nearest: BoundedYAML.nearestKey(to: agentTopics.agent, among: site.agents.map(\.id)))
    }
}
