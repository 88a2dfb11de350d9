import Dispatch
import Foundation
import LibPQ
import Synchronization

/// The leases' own PostgreSQL session, renewed on a thread of its own: every lease this instance holds is renewed
/// each quarter lease whatever the writer thread is doing (a claim's read-back, a long commit, compaction, a
/// reload, a slow statement), so the writer never loses a site it still serves for being busy. The instance is
/// counted among the live ones by this session (`join_instances`), and each lease's holder is this session once
/// renewed: when the process or this session ends, its leases end with it.
///
/// A writer thread that has not turned for `writerStallBound` (it is stuck, not busy) gets no more renewals, so
/// that its sites go to an instance that can serve them. Renewal waits on a semaphore, woken early only to stop.
final class LeaseKeeper: Sendable {
    let instance: String
    let duration: Duration
    /// How long the writer thread may go without a turn before the leases are let go.
    let writerStallBound: Duration
    private let session: Mutex<PostgresConnection>
    private let state: Mutex<State>
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    private struct State {
        /// The epoch of each lease held: a site claimed again by anyone has a newer one.
        var epochs: [String: Int64] = [:]
        /// Sites whose renewal found them taken over, not yet taken by the writer.
        var lost: Set<String> = []
        /// What ended the session, for the writer to reconnect.
        var failure: PostgresError?
        var writerTurn: ContinuousClock.Instant
        var started = false
        var stopping = false
        var leaveOnStop = false
        /// The instance's figures the writer gave last, and those recorded last.
        var status: String?
        var statusRecorded: String?
    }

    /// Opens the session and counts `instance` among the live instances for one lease; `start()` begins renewing.
    init(conninfo: String, instance: String, duration: Duration, writerStallBound: Duration) throws(PostgresError) {
        self.instance = instance
        self.duration = duration
        self.writerStallBound = writerStallBound
        let connection = try PostgresConnection(conninfo)
        try LeaseStore(connection: connection).joinInstances(instance, leaseSeconds: duration.seconds)
        session = Mutex(connection)
        state = Mutex(State(writerTurn: .now))
    }

    /// How often the leases are renewed: four times per lease, so that three renewals can be late or lost.
    var renewalInterval: Duration { duration / 4 }

    private static func interval(_ duration: Duration) -> DispatchTimeInterval { .microseconds(Int(duration.microseconds)) }

    func start() {
        state.withLock { $0.started = true }
        Thread.detachNewThread { [self] in
            renewUntilStopped()
            finished.signal()
        }
    }

    /// Stops renewing and closes nothing yet (the session ends with this object); with `leave`, the instance
    /// leaves the live ones first. Waits for the renewing thread at most a lease.
    func stop(leave: Bool) {
        let running = state.withLock { state in
            defer {
                state.stopping = true
                state.leaveOnStop = leave
            }
            return state.started && !state.stopping
        }
        guard running else { return }
        wake.signal()
        _ = finished.wait(timeout: .now() + Self.interval(duration))
    }

    // MARK: The writer thread's side

    /// The writer thread turned: it is busy or idle, not stuck.
    func writerTurned(now: ContinuousClock.Instant = .now) { state.withLock { $0.writerTurn = now } }

    /// The error that ended the session, if it has: the writer reconnects (its own session too).
    var failure: PostgresError? { state.withLock { $0.failure } }

    /// Sites taken over by another instance since the last call.
    func takeLost() -> Set<String> {
        state.withLock { state in
            defer { state.lost = [] }
            return state.lost
        }
    }

    func epoch(of site: String) -> Int64? { state.withLock { $0.epochs[site] } }

    func held(_ site: String, epoch: Int64) { state.withLock { $0.epochs[site] = epoch } }

    /// Forgets a lease (handed over, or found taken over); returns its epoch.
    @discardableResult
    func forget(_ site: String) -> Int64? { state.withLock { $0.epochs.removeValue(forKey: site) } }

    /// The instance's own figures (`InstanceStatus`), recorded with the next renewal when they changed.
    func report(status: String) { state.withLock { $0.status = status } }

    /// Records the digest of the sites file this instance runs with, in its row among the live instances.
    func publish(sitesDigest: String) throws(PostgresError) {
        try session.withLock { (connection) throws(PostgresError) in
            try LeaseStore(connection: connection).setSitesDigest(instance, digest: sitesDigest)
        }
    }

    // MARK: The renewing thread

    private func renewUntilStopped() {
        while true {
            _ = wake.wait(timeout: .now() + Self.interval(renewalInterval))
            let (stopping, leave, writerTurn) = state.withLock { ($0.stopping, $0.leaveOnStop, $0.writerTurn) }
            if stopping {
                if leave {
                    _ = try? session.withLock { (connection) throws(PostgresError) in
                        try LeaseStore(connection: connection).leaveInstances(instance)
                    }
                }
                return
            }
            // A stuck writer serves nothing: its leases lapse and another instance takes its sites.
            if ContinuousClock.now - writerTurn > writerStallBound { continue }
            do throws(PostgresError) {
                try renew()
                try recordStatus()
            } catch {
                state.withLock { $0.failure = error }
                return
            }
        }
    }

    /// Records the figures the writer gave, when they changed since they were last recorded.
    private func recordStatus() throws(PostgresError) {
        guard let status = state.withLock({ $0.status == $0.statusRecorded ? nil : $0.status }) else { return }
        try session.withLock { (connection) throws(PostgresError) in
            try LeaseStore(connection: connection).setInstanceStatus(instance, status: status)
        }
        state.withLock { $0.statusRecorded = status }
    }

    /// Renews every lease held; the sites whose lease was taken over meanwhile go to `lost`.
    private func renew() throws(PostgresError) {
        let held = state.withLock { $0.epochs }.sorted { $0.key < $1.key }
        let renewed = try session.withLock { (connection) throws(PostgresError) -> Set<String> in
            try LeaseStore(connection: connection).renewSites(
                instance, held: held.map { (site: $0.key, epoch: $0.value) }, leaseSeconds: duration.seconds)
        }
        state.withLock { state in
            // Only leases of the epoch renewed: one claimed again or handed over meanwhile is the writer's to say.
            for (site, epoch) in held where !renewed.contains(site) && state.epochs[site] == epoch {
                state.epochs[site] = nil
                state.lost.insert(site)
            }
        }
    }
}
