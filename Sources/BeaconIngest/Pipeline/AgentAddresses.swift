import BeaconWire

/// The device addresses agents leave out of their batches (`Beacon.address_as_before`, docs/wire-format.md), filled
/// in from what each agent sent before. Pure; its table is journaled with the pipeline's transactions.
///
/// An agent leaves an identity's address out only when it sent that address in an earlier batch less than
/// `BatchReader.addressAsBeforeMicros` before and heard the identity from no other address for twice that, so any
/// earlier batch of the window names the same address. An address this table does not have (the ingest started
/// since, or took the site over, or the batches came out of order) stays unknown: 0, with the flag kept, for at
/// most a minute, when the agent sends it again.
struct AgentAddresses: Sendable {
    private struct Key: Hashable {
        var beaconID: String
        var agent: UInt32
    }

    private struct Sent {
        var address: UInt64
        var sequence: UInt64
        /// The batch's first time, µs.
        var batchMicros: Int64
    }

    private var sent = JournaledDictionary<Key, Sent>()
    private var agentNumbers: [AgentKey: UInt32] = [:]

    var count: Int { sent.count }

    /// Fills in the left-out addresses of `batch` that an earlier batch of its agent sent, then remembers the
    /// addresses it sends (under the pipeline's copy of each beacon id, from `beaconIDs`).
    mutating func resolve(_ batch: inout DecodedBatch, beaconIDs: inout BeaconIDInterner, holdingAtMost limit: Int) {
        guard let batchMicros = batch.sightings.first?.timeMicros ?? batch.characteristicReads.first?.timeMicros else { return }
        let agentKey = AgentKey(site: batch.siteID, agent: batch.agentID)
        let agent = agentNumbers[agentKey] ?? {
            let next = UInt32(agentNumbers.count)
            agentNumbers[agentKey] = next
            return next
        }()
        var resolved: [String: UInt64?] = [:]
        var explicit: [String: UInt64] = [:]
        func known(_ beaconID: String) -> UInt64? {
            if let address = resolved[beaconID] { return address }
            var address: UInt64?
            if let earlier = sent[Key(beaconID: beaconID, agent: agent)], earlier.sequence < batch.sequence {
                let (age, overflow) = batchMicros.subtractingReportingOverflow(earlier.batchMicros)
                if !overflow, (0..<BatchReader.addressAsBeforeMicros).contains(age) { address = earlier.address }
            }
            resolved[beaconID] = .some(address)
            return address
        }
        func fill(_ key: inout BeaconKey) {
            if key.addressAsBefore {
                if let address = known(key.beaconID) {
                    key.address = address
                    key.addressAsBefore = false
                }
            } else if key.address != 0, key.identity?.addressMayBeLeftOut == true {
                explicit[key.beaconID] = key.address
            }
        }
        for index in batch.sightings.indices { fill(&batch.sightings[index].beacon) }
        for index in batch.characteristicReads.indices { fill(&batch.characteristicReads[index].beacon) }
        for (beaconID, address) in explicit {
            let entry = Sent(address: address, sequence: batch.sequence, batchMicros: batchMicros)
            let key = Key(beaconID: beaconID, agent: agent)
            if let earlier = sent[key] {
                // A known key keeps the id it was stored with.
                if earlier.sequence <= batch.sequence { sent[key] = entry }
            } else {
                sent[Key(beaconID: beaconIDs.intern(beaconID, holdingAtMost: limit), agent: agent)] = entry
            }
        }
    }

    /// Forgets a site's entries no batch can use any more: sent more than twice `BatchReader.addressAsBeforeMicros`
    /// before `timeMicros`, a reading's time corrected for its agent's clock (per site: sites may be at different
    /// event times).
    mutating func prune(site: String, before timeMicros: Int64) {
        let agents = Set(agentNumbers.filter { $0.key.site == site }.values)
        sent.removeAll { key, entry in
            agents.contains(key.agent) && timeMicros - entry.batchMicros > 2 * BatchReader.addressAsBeforeMicros
        }
    }

    /// Keeps at most `maximum` entries, forgetting those of the oldest batches.
    mutating func evict(keeping maximum: Int) {
        sent.evictOldest(keeping: maximum) { $0.batchMicros }
    }

    mutating func apply(_ step: TransactionStep) {
        sent.apply(step)
    }
}
