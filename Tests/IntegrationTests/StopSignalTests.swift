import Foundation
import Testing
import WorkQueue

/// Threads that wait for a deadline or a stop wake at the stop, not at their next look at a flag.
@Suite struct StopSignalTests {
    @Test func aStopEndsAWaitAtOnce() async throws {
        let signal = StopSignal()
        async let waited = onThread { () -> (stopped: Bool, took: Duration) in
            let started = ContinuousClock.now
            let stopped = signal.wait(until: started + .seconds(30))
            return (stopped, ContinuousClock.now - started)
        }
        try await Task.sleep(for: .milliseconds(100))
        signal.stop()
        let (stopped, took) = try await waited
        #expect(stopped)
        #expect(took < .seconds(5), "\(took)")
    }

    @Test func aWaitWithoutAStopLastsUntilItsDeadline() {
        let signal = StopSignal()
        let started = ContinuousClock.now
        #expect(!signal.wait(until: started + .milliseconds(200)))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        signal.stop()
        #expect(signal.wait(until: .now + .seconds(30)))
    }
}
