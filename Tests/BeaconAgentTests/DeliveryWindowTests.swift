import BeaconMessaging
import BeaconWire
import Testing
@testable import BeaconAgent

@Suite struct DeliveryWindowTests {
    @Test func publishesInOrderWithinTheWindow() {
        var window = DeliveryWindow(maximumInFlight: 3, acknowledgementTimeoutNanoseconds: 1_000)
        #expect(window.capacity(nowNanoseconds: 0) == 0)  // not connected
        window.connected()
        #expect(window.capacity(nowNanoseconds: 0) == 3)
        for sequence in UInt64(1)...3 { window.published(sequence, nowNanoseconds: 10) }
        #expect(window.capacity(nowNanoseconds: 20) == 0)
        window.acknowledge(through: 2)
        #expect(window.capacity(nowNanoseconds: 20) == 2)
        #expect(window.highestPublished == 3)
        window.acknowledge(through: 1)  // stale: ignored
        #expect(window.acknowledged == 2)
    }

    @Test func aLateAcknowledgementSendsAgainFromTheOldest() {
        var window = DeliveryWindow(maximumInFlight: 4, acknowledgementTimeoutNanoseconds: 1_000)
        window.connected()
        window.acknowledge(through: 4)
        for sequence in UInt64(5)...7 { window.published(sequence, nowNanoseconds: 100) }
        #expect(window.capacity(nowNanoseconds: 1_099) == 1)
        #expect(window.capacity(nowNanoseconds: 1_100) == 4)
        #expect(window.highestPublished == 4)  // 5, 6, 7 go out again
        #expect(window.resends == 1)
    }

    /// An agent no ingest acknowledges (its site served by none) counts its timeouts in a row; an acknowledgement
    /// that moves ends the stretch, a reconnect does not.
    @Test func timeoutsInARowAreCountedUntilAnAcknowledgementMoves() {
        var window = DeliveryWindow(maximumInFlight: 2, acknowledgementTimeoutNanoseconds: 1_000)
        window.connected()
        for round in UInt64(0)..<3 {
            let now = round * 2_000
            _ = window.capacity(nowNanoseconds: now)
            window.published(window.highestPublished + 1, nowNanoseconds: now)
        }
        _ = window.capacity(nowNanoseconds: 10_000)
        #expect(window.timeoutsWithoutAcknowledgement == 3)
        window.disconnected()
        window.connected()
        #expect(window.timeoutsWithoutAcknowledgement == 3)
        window.acknowledge(through: 0)
        #expect(window.timeoutsWithoutAcknowledgement == 3, "an acknowledgement that does not move says nothing new")
        window.acknowledge(through: 1)
        #expect(window.timeoutsWithoutAcknowledgement == 0)
    }

    @Test func aReconnectSendsEverythingUnacknowledgedAgain() {
        var window = DeliveryWindow(maximumInFlight: 4, acknowledgementTimeoutNanoseconds: 1_000_000)
        window.connected()
        window.published(1, nowNanoseconds: 0)
        window.published(2, nowNanoseconds: 0)
        window.disconnected()
        #expect(window.capacity(nowNanoseconds: 1) == 0)
        window.connected()
        #expect(window.highestPublished == 0)
        #expect(window.capacity(nowNanoseconds: 1) == 4)
    }
}

@Suite struct AcknowledgementTests {
    func action(_ json: String, retained: Bool = false, acknowledged: UInt64 = 3, next: UInt64 = 11) -> Acknowledgement.Action {
        Acknowledgement.action(payload: Array(json.utf8), retained: retained, acknowledged: acknowledged, nextSequence: next)
    }

    @Test func onlyWhatTheAgentSealedCanBeAcknowledged() {
        #expect(action(#"{"committed_through": 7}"#) == .acknowledge(7))
        #expect(action(#"{"committed_through": 10}"#) == .acknowledge(10))  // the newest batch sealed
        #expect(action(#"{"committed_through": 2}"#) == .none)
        // Live, beyond the newest batch sealed: forged or confused; nothing is deleted.
        guard case .refuse(let reason) = action(#"{"committed_through": 14}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(reason == "committed_through 14 is beyond the newest batch sealed, 10")
        // Retained from an earlier life of the agent: adopted (its batches move past it), but never near the end of
        // the sequence space.
        #expect(action(#"{"committed_through": 14}"#, retained: true) == .adopt(14))
        #expect(action(#"{"committed_through": 9223372036854775807}"#, retained: true)
            == .refuse("committed_through 9223372036854775807 is beyond the largest sequence allowed, 2^62"))
        #expect(action(#"{"committed_through": 18446744073709551615}"#, retained: true) != .adopt(18_446_744_073_709_551_615))
    }

    /// A retained acknowledgement is adopted only when the batches renumbered after it, and room for 2^40 more,
    /// stay below 2^62: the ingest would refuse anything past it, and the agent would resend forever.
    @Test func anAdoptionNeverRenumbersPastTheLargestSequence() {
        let limit = BatchReader.maximumSequence
        let edge = limit - Acknowledgement.sequenceHeadroom - 6
        func adopt(_ sequence: UInt64, pending: Int) -> Acknowledgement.Action {
            Acknowledgement.action(
                payload: Array(#"{"committed_through": \#(sequence)}"#.utf8), retained: true, acknowledged: 3,
                nextSequence: 11, pending: pending)
        }
        #expect(adopt(edge, pending: 5) == .adopt(edge))
        #expect(adopt(edge, pending: 6) != .adopt(edge))
        for sequence in [limit - 1, limit - 8, limit - Acknowledgement.sequenceHeadroom] {
            guard case .refuse(let reason) = adopt(sequence, pending: 8) else {
                Issue.record("\(sequence) adopted")
                continue
            }
            #expect(reason.contains("leaves too few sequences below 2^62"), "\(reason)")
        }
    }

    /// In both formats: the header stays outside the compressed body of version 2.
    @Test(arguments: [UInt32(1), 2]) func aResentBatchNamesTheOldestBatchStillHeld(formatVersion: UInt32) throws {
        var wire = WireBatch()
        wire.formatVersion = formatVersion
        wire.siteID = "hq"
        wire.agentID = "a1"
        wire.sequence = 90
        wire.firstUnacknowledgedSequence = 3
        wire.baseTimeUs = 1_767_225_600_000_000
        var beacon = Beaconflow_V1_Beacon()
        beacon.beaconID = "mac:00:00:00:00:00:01"
        wire.beacons = [beacon]
        wire.sightingBeacon = [0]
        wire.sightingTimeDeltaUs = [0]
        wire.sightingRssi = [60]
        let payload = try wire.wireBytes()
        #expect(AgentEngine.firstUnacknowledged(of: payload) == 3)
        let updated = AgentEngine.updatingFirstUnacknowledged(payload, sealedWith: 3, to: 77)
        let decoded = try BatchReader.decode(updated)
        #expect(decoded.firstUnacknowledgedSequence == 77 && decoded.sequence == 90)
        #expect(decoded.sightings.map(\.rssi) == [-68])
        #expect(updated.count == payload.count + 2)
        #expect(AgentEngine.updatingFirstUnacknowledged(payload, sealedWith: 3, to: 3) == payload)
        #expect(AgentEngine.updatingFirstUnacknowledged(payload, sealedWith: nil, to: 77) == payload)
    }

    @Test func malformedAcknowledgementsAreRefused() {
        for payload in [#"{"committed_through": -1}"#, #"{"committed_through": 1e300}"#, "{}", "14", #"{"committed_through": 18446744073709551616}"#] {
            #expect(action(payload) == .refuse(#"the payload is not {"committed_through": N}"#), "\(payload)")
        }
    }
}
