/// Two agents running with one agent id (a cloned SD card): each agent takes a new boot id when it starts, so the
/// statuses of one agent that restarts move from one boot id to the next and never go back, while two agents
/// sharing an id alternate between theirs. The second time an agent's statuses go back to the boot id they left,
/// it is reported, then at most once a `reportInterval`. One entry per agent of the sites file.
public struct SharedAgentIDs: Sendable {
    private struct Boots {
        var current: String
        var previous: String?
        /// Times the statuses went back to the boot id they had left.
        var returns = 0
        var reportedAtMicros: Int64?
    }

    static let reportInterval: Int64 = 60_000_000
    /// Returns before a report: one could be a status redelivered out of order.
    static let returnsToReport = 2

    private var boots: [AgentKey: Boots] = [:]

    public init() {}

    /// Notes the boot id of an agent's status; returns the two boot ids when they show two agents sharing its id.
    public mutating func observe(_ agent: AgentKey, bootID: String, atMicros now: Int64) -> (String, String)? {
        guard var known = boots[agent] else {
            boots[agent] = Boots(current: bootID)
            return nil
        }
        defer { boots[agent] = known }
        guard bootID != known.current else { return nil }
        if bootID == known.previous { known.returns += 1 }
        known.previous = known.current
        known.current = bootID
        guard known.returns >= Self.returnsToReport, known.reportedAtMicros.map({ now - $0 >= Self.reportInterval }) ?? true
        else { return nil }
        known.reportedAtMicros = now
        return (known.previous ?? "", bootID)
    }
}
