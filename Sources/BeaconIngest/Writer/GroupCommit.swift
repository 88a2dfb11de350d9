import BeaconMessaging
import BeaconWire
import Dispatch
import LibPQ
import Logging

/// One group of messages on the writer thread: validated, committed (several batches per transaction), refused or
/// held, then acknowledged.
extension Ingest {
    /// Validates and commits one group of messages; fails only when the connection is lost (the group is then
    /// retried whole on the next connection: what committed is recognised as duplicate).
    func process(
        _ items: [Item], writer: BatchWriter, state: inout WriterState, intake: BatchIntake, statuses: StatusIntake,
        client: BrokerConnections, coordinator: inout SiteCoordinator, pace: inout CommitPace, budgets: inout AgentBudgets
    ) -> Result<Void, PostgresError> {
        Result { () throws(PostgresError) in
            var accepted: [AcceptedBatch] = []
            var newestReceived: Int64 = 0
            for item in items {
                switch item {
                case .status(_, let agentTopics, _, _, _) where isServedElsewhere(agentTopics, servedSites: state.servedSites, sites: intake.sites):
                    break
                case .batch(_, let agentTopics, _, _) where isServedElsewhere(agentTopics, servedSites: state.servedSites, sites: intake.sites):
                    // Claimed by another instance since it was queued: the agent sends it again, to the owner.
                    instruments.record(.batchesNotServed(1))
                case .status(let topic, let agentTopics, let payload, let receivedAt, let retained):
                    do throws(PostgresError) {
                        try statuses.record(
                            topic: topic, agentTopics: agentTopics, payload: payload, receivedAtMicros: receivedAt,
                            retained: retained, writer: writer, pipeline: &state.pipeline)
                    } catch where !error.isConnectionFailure {
                        instruments.record(.statementError(error, "An agent status could not be recorded"))
                    }
                case .batch(let topic, let agentTopics, let payload, let receivedAt):
                    newestReceived = max(newestReceived, receivedAt)
                    switch intake.check(topic: topic, parsed: agentTopics, payload: payload, nowMicros: clock.nowMicros()) {
                    case .success(let batch):
                        let agent = AgentKey(site: batch.siteID, agent: batch.agentID)
                        let timed = state.timed(batch)
                        let now = ContinuousClock.now
                        // Past its agent's budget of new days or sightings: it waits with the agent, which sends it
                        // again. Days first: a day admitted stays free for the batch's resend.
                        guard budgets.days.admit(agent, days: try writer.daysWithoutPartition(timed), now: now),
                            budgets.sightings.admit(agent, sightings: batch.sightings.count, now: now)
                        else {
                            instruments.record(.batchDeferred)
                            continue
                        }
                        accepted.append(AcceptedBatch(timed: timed, topic: topic, agentTopics: agentTopics, payload: payload))
                    case .failure(let failure):
                        do throws(PostgresError) {
                            try reject(
                                topic: topic, agentTopics: agentTopics, payload: payload, failure.rejection,
                                header: failure.header, sequence: failure.sequence, writer: writer, state: &state, client: client)
                        } catch where !error.isConnectionFailure {
                            instruments.record(.statementError(error, "A rejected batch could not be recorded"))
                        }
                    }
                }
            }
            for range in Self.commitGroups(
                sightings: accepted.map(\.batch.sightings.count), beacons: accepted.map(\.batch.beaconEntries),
                maximumBatches: configuration.maximumGroup, maximumSightings: pace.sightingsLimit,
                maximumBeacons: configuration.maximumGroupBeacons)
            {
                let started = ContinuousClock.now
                do throws(PostgresError) {
                    try commit(Array(accepted[range]), writer: writer, state: &state, client: client)
                } catch {
                    pace.transactionLost()
                    throw error
                }
                pace.committed(sightings: accepted[range].reduce(0) { $0 + $1.batch.sightings.count }, took: .now - started)
                coordinator.sitesLost(state.takeSitesLost(), servedSites: state.servedSites)
            }
            if newestReceived > 0 {
                instruments.record(.lag(seconds: Double(clock.nowMicros() - newestReceived) / 1e6))
            }
        }
    }

    /// Consecutive groups of batches, one transaction each: at most `maximumBatches` batches, `maximumSightings`
    /// sightings and `maximumBeacons` beacon entries (a batch with more goes alone).
    static func commitGroups(
        sightings: [Int], beacons: [Int], maximumBatches: Int, maximumSightings: Int, maximumBeacons: Int
    ) -> [Range<Int>] {
        var groups: [Range<Int>] = []
        var start = 0
        while start < sightings.count {
            var end = start + 1
            var total = sightings[start]
            var entries = beacons[start]
            while end < min(start + maximumBatches, sightings.count), total + sightings[end] <= maximumSightings,
                entries + beacons[end] <= maximumBeacons
            {
                total += sightings[end]
                entries += beacons[end]
                end += 1
            }
            groups.append(start..<end)
            start = end
        }
        return groups
    }

    /// Whether the topic is of a site of the sites file that this instance does not serve (now): its owner
    /// records it. A topic of no known site is this instance's to refuse.
    private func isServedElsewhere(_ agentTopics: AgentTopics?, servedSites: Set<String>, sites: SitesConfiguration) -> Bool {
        guard let site = agentTopics?.site else { return false }
        return !servedSites.contains(site) && sites.sites.contains { $0.id == site }
    }

    private struct AcceptedBatch {
        var timed: TimedBatch
        var batch: DecodedBatch { timed.batch }
        var topic: String
        var agentTopics: AgentTopics?
        var payload: [UInt8]
    }

    private func commit(
        _ group: [AcceptedBatch], writer: BatchWriter, state: inout WriterState, client: BrokerConnections
    ) throws(PostgresError) {
        let started = DispatchTime.now().uptimeNanoseconds
        let result: BatchWriter.GroupResult
        do {
            result = try writer.commit(timed: group.map(\.timed), state: &state)
        } catch where !error.isConnectionFailure && group.count > 1 {
            // One batch the database refuses must not hold back the others: commit them one by one.
            for batch in group { try commit([batch], writer: writer, state: &state, client: client) }
            return
        } catch where !error.isConnectionFailure && !error.isAboutTheData {
            // A condition of the database, not of the batch: it waits, unacknowledged, and commits once it clears.
            let header = group[0].batch.header
            instruments.record(.batchHeld(topic: group[0].topic, agent: AgentKey(site: header.siteID, agent: header.agentID), error))
            return
        } catch where !error.isConnectionFailure {
            do throws(PostgresError) {
                try reject(
                    topic: group[0].topic, agentTopics: group[0].agentTopics, payload: group[0].payload,
                    Rejection(.refusedByDatabase, error.description), header: group[0].batch.header, writer: writer,
                    state: &state, client: client)
            } catch where !error.isConnectionFailure {
                instruments.record(.statementError(error, "A rejected batch could not be recorded"))
            }
            return
        }
        var counts = IngestEvent.CommittedGroup(
            agents: Set(group.map { AgentKey(site: $0.batch.siteID, agent: $0.batch.agentID) }), telemetry: result.telemetryRows,
            sensorReadings: result.sensorReadingRows, lateReadings: result.lateReadings,
            evictedBeacons: result.evictedBeacons, framesWaiting: result.framesWaiting,
            framesStoredUnderAddress: result.framesStoredUnderAddress, addressBeaconsMerged: result.addressBeaconsMerged,
            newlyCloned: result.newlyCloned, undecodableFrames: result.undecodableFrames,
            nanoseconds: Int64(DispatchTime.now().uptimeNanoseconds - started))
        for (outcome, accepted) in zip(result.outcomes, group) {
            switch outcome {
            case .committed(let sightings):
                counts.committed += 1
                counts.sightings += sightings
            case .duplicate:
                counts.duplicates += 1
            case .notServed:
                // Taken over since it was queued: the agent sends it again, to the new owner.
                counts.notServed += 1
            case .sequenceReused(let difference):
                // Not a redelivery: kept with the reason, so that it is seen (the committed batch stays).
                do throws(PostgresError) {
                    try reject(
                        topic: accepted.topic, agentTopics: accepted.agentTopics, payload: accepted.payload,
                        Rejection(.sequenceReused, difference), header: accepted.batch.header, writer: writer, state: &state,
                        client: client)
                } catch where !error.isConnectionFailure {
                    instruments.record(.statementError(error, "A rejected batch could not be recorded"))
                }
            }
        }
        instruments.record(.groupCommitted(counts))
        publish(result.acknowledgements, client: client)
        zonesChanged(result.zoneChanges, health: result.healthChanges, readings: result.sensorReadings)
    }

    /// Publishes each agent's retained "committed through N" (only after the commit that made it true).
    private func publish(_ acknowledgements: [AgentKey: UInt64], client: BrokerConnections) {
        for (agent, through) in acknowledgements {
            do {
                try client.publish(
                    topic: AgentTopics(site: agent.site, agent: agent.agent).ack,
                    payload: Acknowledgement(committedThrough: through).payload, qos: 1, retain: true)
            } catch {
                // The next commit for this agent acknowledges again; until then the agent waits or resends.
                logger.warning("Acknowledgement not published", metadata: ["agent": "\(agent.agent)", "error": "\(error)"])
            }
        }
    }

    /// Records a refused batch, acknowledges it when its header allows, and tells the agent; `sequence` is the
    /// batch's when its header was readable but does not allow acknowledging.
    private func reject(
        topic: String, agentTopics: AgentTopics?, payload: [UInt8], _ rejection: Rejection, header: BatchHeader?,
        sequence: UInt64? = nil, writer: BatchWriter, state: inout WriterState, client: BrokerConnections
    ) throws(PostgresError) {
        let acknowledgements = try writer.recordRejection(
            topic: topic, payload: payload, reason: rejection.reason.rawValue, message: rejection.message, header: header, state: &state)
        instruments.record(.batchRejected(topic: topic, rejection))
        publish(acknowledgements, client: client)
        if let topics = agentTopics {
            notify(topics, rejection, sequence: header?.sequence ?? sequence, acknowledged: !acknowledgements.isEmpty, client: client)
        }
    }

    /// Tells the agent why its batch was refused, at most once per agent and reason per 10 s
    /// (an agent resends what is not acknowledged, and one notice says as much as a hundred).
    private func notify(
        _ topics: AgentTopics, _ rejection: Rejection, sequence: UInt64?, acknowledged: Bool, client: BrokerConnections
    ) {
        let due = noticesSent.withLock { sent in
            sent.isDue(topics.site + "/" + topics.agent + " " + rejection.reason.rawValue, now: ContinuousClock.now)
        }
        guard due else { return }
        let notice = RejectionNotice(sequence: sequence, rejection: rejection, acknowledged: acknowledged)
        do {
            try client.publish(topic: topics.rejection, payload: notice.payload, qos: 1)
        } catch {
            logger.warning("Rejection notice not published", metadata: ["agent": "\(topics.agent)", "error": "\(error)"])
        }
    }
}
