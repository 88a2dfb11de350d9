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
