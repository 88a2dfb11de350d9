/// Where the writer thread stands with PostgreSQL. A pure state machine; the writer thread does the I/O.
///
/// The state derived from the batches (`Detached`, the ingest pipeline) lives in exactly one place: in the
/// connected writer, or here while there is none, so a reconnect resumes with it and nothing copies it.
enum WriterLink<Writer, Detached> {
    /// Not connected: the state waits here, the next attempt comes after `retryDelay`, and `firstConnection` says
    /// whether a connection was ever made (the first one brings the schema up to date).
    case disconnected(Detached, retryDelay: Duration, firstConnection: Bool)
    case connected(Writer)

    struct Backoff {
        var minimum: Duration
        var maximum: Duration
    }

    static func start(_ state: Detached, backoff: Backoff) -> WriterLink {
        .disconnected(state, retryDelay: backoff.minimum, firstConnection: true)
    }

    var writer: Writer? {
        if case .connected(let writer) = self { writer } else { nil }
    }

    /// The state to connect with, and whether this is the first connection; nil when connected.
    var pendingConnection: (state: Detached, firstConnection: Bool)? {
        if case .disconnected(let state, _, let first) = self { (state, first) } else { nil }
    }

    mutating func didConnect(_ writer: Writer) {
        self = .connected(writer)
    }

    /// A failed attempt: returns how long to wait before the next, which waits twice as long up to the maximum.
    mutating func didFailToConnect(backoff: Backoff) -> Duration {
        guard case .disconnected(let state, let delay, let first) = self else { return backoff.minimum }
        self = .disconnected(state, retryDelay: min(delay * 2, backoff.maximum), firstConnection: first)
        return delay
    }

    /// The connection is gone: the writer's state waits for the next one, tried at once and then backing off.
    mutating func didLoseConnection(keeping state: Detached, backoff: Backoff) {
        self = .disconnected(state, retryDelay: backoff.minimum, firstConnection: false)
    }
}
