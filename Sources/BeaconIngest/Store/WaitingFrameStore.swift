import BeaconWire
import LibPQ

/// The frames waiting for their address's identity (`AddressWait`), kept in `waiting_frames` with the transactions
/// that change them, so that a restart or another instance taking a site over finds them.
struct WaitingFrameStore {
    let connection: PostgresConnection

    /// Keeps the frames `changes` began to hold and deletes those it stored (a frame both held and stored within
    /// one transaction never reaches the table).
    func write(_ changes: WaitingFrames) throws(PostgresError) {
        let done = Set(changes.done)
        let held = changes.held.filter { !done.contains($0.key) }
        let heldKeys = Set(changes.held.map(\.key))
        let deleted = changes.done.filter { !heldKeys.contains($0) }
        if !deleted.isEmpty {
            try connection.query(
                """
                DELETE FROM beaconflow.waiting_frames w
                USING unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS d(site_id, agent_id, address, ts)
                WHERE w.site_id = d.site_id AND w.agent_id = d.agent_id AND w.address = d.address AND w.ts = d.ts
                """,
                [deleted.map(\.site), deleted.map(\.agent), deleted.map { Int64(bitPattern: $0.address) }, deleted.map(\.timeMicros)])
        }
        guard !held.isEmpty else { return }
        try connection.query(
            """
            INSERT INTO beaconflow.waiting_frames (site_id, agent_id, address, ts, frame)
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bytea[])
            ON CONFLICT DO NOTHING
            """,
            [
                held.map(\.agent.site), held.map(\.agent.agent), held.map { Int64(bitPattern: $0.sighting.beacon.address) },
                held.map(\.sighting.timeMicros), held.map { PostgresBytes(Self.encode($0)) },
            ])
    }

    /// The frames waiting at `sites`, in time order; a row that no longer reads as a frame is left out (and stays).
    func frames(sites: Set<String>) throws(PostgresError) -> [(agent: AgentKey, sighting: Sighting)] {
        var frames: [(agent: AgentKey, sighting: Sighting)] = []
        for row in try connection.query(
            "SELECT site_id, agent_id, frame FROM beaconflow.waiting_frames WHERE site_id = ANY($1::text[]) ORDER BY ts",
            [sites.sorted()])
        {
            let agent = AgentKey(site: try row.decode(0), agent: try row.decode(1))
            guard let batch = try? BatchReader.decode(try row.decode(2, as: PostgresBytes.self).bytes),
                let sighting = batch.sightings.first
            else { continue }
            frames.append((agent, sighting))
        }
        return frames
    }

    /// Files each address beacon's stored rows under the beacon its address turned out to be (`AddressMerge`,
    /// `merge_address_beacon`); returns the rows moved.
    @discardableResult
    func merge(_ merges: [AddressMerge]) throws(PostgresError) -> Int {
        var moved = 0
        for merge in merges {
            let rows = try connection.query(
                "SELECT beaconflow.merge_address_beacon($1, $2, $3)", [merge.site, merge.addressBeaconID, merge.beaconID])
            moved += Int(try rows.first?.decode(0, as: Int64.self) ?? 0)
        }
        return moved
    }

    /// The address beacons of Eddystone frames (`mac:`, of kind `eddystone-tlm` or `eddystone-url`) stored at
    /// `sites` and heard since `sinceMicros` (event time): an identity heard from their address still merges them.
    func addressBeacons(sites: Set<String>, sinceMicros: Int64) throws(PostgresError)
        -> [(site: String, address: UInt64, beaconID: String, lastSeenMicros: Int64)]
    {
        var beacons: [(site: String, address: UInt64, beaconID: String, lastSeenMicros: Int64)] = []
        for row in try connection.query(
            """
            SELECT site_id, beacon_id, (extract(epoch FROM last_seen) * 1000000)::bigint FROM beaconflow.beacon_state
            WHERE site_id = ANY($1::text[]) AND beacon_id LIKE 'mac:%' AND kind IN ('eddystone-tlm', 'eddystone-url')
              AND last_seen >= $2
            """,
            [sites.sorted(), PostgresTimestamp(unixMicros: sinceMicros)])
        {
            let beaconID: String = try row.decode(1)
            guard let address = DeviceAddress(String(beaconID.dropFirst(BeaconIdentity.Kind.mac.prefix.count))) else { continue }
            beacons.append((try row.decode(0), address.value, beaconID, try row.decode(2, as: Int64.self)))
        }
        return beacons
    }

    /// A waiting frame's sighting as a batch of one, in the wire format, its time to the microsecond.
    static func encode(_ frame: AddressWait.Frame) -> [UInt8] {
        var configuration = BatchBuilder.Configuration()
        configuration.timeUnitMicros = 1
        configuration.omitsKnownAddresses = false
        var builder = BatchBuilder(siteID: frame.agent.site, agentID: frame.agent.agent, bootID: 0, configuration: configuration)
        _ = builder.add(frame.sighting, nowNanoseconds: 0)
        // A batch of one sighting always seals and serializes.
        return (try? builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: 0)?.wireBytes()) ?? []
    }
}
