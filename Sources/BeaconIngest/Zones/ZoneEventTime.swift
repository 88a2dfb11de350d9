extension SiteZoneTracker {
    /// A site's event time: how far each agent has got, the readings waiting for the watermark, and the watermark
    /// they allow. Pure; the tracker applies what the watermark passes.
    ///
    /// The watermark is the oldest newest-reading over the site's live agents. Every agent of the sites file is
    /// live until it has sent nothing for the rules' allowed lateness of the ingest's own time (counted from the
    /// first batch for one never heard), so agents that replay at different speeds wait for each other. More than
    /// `maximumPending` readings waiting releases the slowest agent. When every agent has been silent past the
    /// lateness, the watermark follows the ingest's clock from each agent's newest reading on, up to two minutes
    /// past the counting lag after the site's newest reading.
    struct EventTime: Sendable {
        /// Readings the watermark has not passed yet.
        private(set) var pending: [Reading] = []
        var agents: [String: AgentProgress] = [:]
        /// Agents of the sites file not heard yet, and when the first batch came.
        var unheardAgents: Set<String>
        var firstArrivalMicros: Int64?
        var watermarkMicros: Int64 = .min
        /// Readings the watermark has passed are still waiting: a bounded `takeReady` left them for the next call.
        var readyLeft = false
        /// `pending` is in the order readings are applied (nothing added since it was sorted).
        private var pendingInOrder = true
        /// Readings that came behind the watermark (stored as sightings, but too late to move zones).
        var lateReadings = 0
        var maximumPending = 2_000_000
        /// Each agent's state as last reported (`ZoneChange.agentState`); after a restart, reported again.
        var reportedStates: [String: AgentZoneState] = [:]

        init(agents: some Sequence<String>) { unheardAgents = Set(agents) }

        /// Queues readings the watermark has not passed; counts the others as late.
        mutating func add(_ readings: [BeaconReading], agentNumber: Int) {
            for reading in readings {
                if reading.timeMicros <= watermarkMicros {
                    lateReadings += 1
                    continue
                }
                pending.append(
                    Reading(beaconID: reading.beaconID, agentNumber: agentNumber, timeMicros: reading.timeMicros, rssi: reading.rssi))
                pendingInOrder = false
            }
        }

        /// Forgets the waiting readings (a restored checkpoint: they are read back from the database).
        mutating func dropPending() {
            pending = []
            pendingInOrder = true
            readyLeft = false
        }

        /// Files the waiting readings of `beaconID` under `newID` (an address beacon merged into its identity).
        mutating func rename(_ beaconID: String, to newID: String) {
            for index in pending.indices where pending[index].beaconID == beaconID {
                pending[index].beaconID = newID
                pendingInOrder = false
            }
        }

        /// An agent's batch arrived, holding readings up to `newestMicros`.
        mutating func progressed(_ agent: String, newestMicros: Int64, arrivalMicros: Int64) {
            var progress = agents[agent] ?? AgentProgress(newestMicros: newestMicros, lastArrivalMicros: arrivalMicros)
            progress.newestMicros = max(progress.newestMicros, newestMicros)
            progress.lastArrivalMicros = max(progress.lastArrivalMicros, arrivalMicros)
            agents[agent] = progress
            unheardAgents.remove(agent)
            if firstArrivalMicros == nil { firstArrivalMicros = arrivalMicros }
        }

        /// The site's newest reading, over every agent.
        var newestMicros: Int64? { agents.values.map(\.newestMicros).max() }

        /// Moves the watermark as far as the live agents allow by the ingest's clock `nowMicros`; nil when it does
        /// not move (waiting for every agent's first batch, or no agent beyond it).
        mutating func advance(nowMicros: Int64, rules: ZoneRules, countingLagMicros: Int64) -> Int64? {
            guard let newest = newestMicros, let first = firstArrivalMicros else { return nil }
            let firstBatchWait = min(rules.firstBatchWaitMicros, rules.allowedLatenessMicros)
            if !unheardAgents.isEmpty, nowMicros - first <= firstBatchWait, pending.count <= maximumPending {
                return nil
            }
            var live = agents.values.filter { nowMicros - $0.lastArrivalMicros <= rules.allowedLatenessMicros }.map(\.newestMicros)
            if pending.count > maximumPending, let slowest = live.min() { live.removeAll { $0 == slowest } }
            // With every agent silent past the lateness, the site's event time goes on at the ingest clock's pace
            // from where each agent left it, less the lateness. Not beyond that: the minutes of a dark site are
            // unknown, not empty.
            let dark = agents.values.map { $0.newestMicros &+ max(0, nowMicros - $0.lastArrivalMicros - rules.allowedLatenessMicros) }
            let watermark = live.min() ?? max(newest, min(dark.max() ?? newest, newest &+ countingLagMicros &+ 2 * SiteZoneTracker.minute))
            guard watermark > watermarkMicros else { return nil }
            watermarkMicros = watermark
            return watermark
        }

        /// Takes the waiting readings up to `watermark` (all of them when nil), in the order they are applied, at
        /// most `limit` of them: `readyLeft` says whether some the watermark passed are still waiting.
        mutating func takeReady(through watermark: Int64? = nil, atMost limit: Int = .max) -> [Reading] {
            // Sorted once for all the pieces of a backlog taken a piece at a time.
            if !pendingInOrder {
                pending.sort(by: SiteZoneTracker.inOrder)
                pendingInOrder = true
            }
            let passed = watermark.map { limit in pending.partitioningIndex { $0.timeMicros > limit } } ?? pending.count
            let ready = min(passed, limit)
            readyLeft = ready < passed
            defer { pending.removeFirst(ready) }
            return Array(pending[..<ready])
        }

        /// An agent's state by the ingest's clock `nowMicros`, and when it began (where the clock tells); `newest`
        /// is the site's newest reading.
        func state(
            of agent: String, nowMicros: Int64, newest: Int64?, rules: ZoneRules
        ) -> (state: AgentZoneState, sinceMicros: Int64) {
            let firstBatchWait = min(rules.firstBatchWaitMicros, rules.allowedLatenessMicros)
            guard let progress = agents[agent] else {
                guard let first = firstArrivalMicros, nowMicros - first > firstBatchWait else { return (.awaited, nowMicros) }
                return (.letGo, first &+ firstBatchWait)
            }
            let silence = nowMicros - progress.lastArrivalMicros
            if silence > rules.allowedLatenessMicros { return (.letGo, progress.lastArrivalMicros &+ rules.allowedLatenessMicros) }
            if silence > AgentZoneState.holdingAfterMicros {
                return (.holding, progress.lastArrivalMicros &+ AgentZoneState.holdingAfterMicros)
            }
            let lag = (newest ?? progress.newestMicros) - progress.newestMicros
            return lag > AgentZoneState.holdingAfterMicros ? (.holding, nowMicros) : (.live, nowMicros)
        }

        /// The agents (of `agentIDs`, in order) whose state differs from the one last reported.
        mutating func stateChanges(
            site: String, agentIDs: [String], nowMicros: Int64, rules: ZoneRules
        ) -> [ZoneChange] {
            var changes: [ZoneChange] = []
            let newest = newestMicros
            for agent in agentIDs {
                let (state, since) = state(of: agent, nowMicros: nowMicros, newest: newest, rules: rules)
                guard reportedStates[agent] != state else { continue }
                reportedStates[agent] = state
                changes.append(.agentState(site: site, agent: agent, state: state, sinceMicros: since))
            }
            return changes
        }
    }
}
