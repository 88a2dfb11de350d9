import CMosquitto
import Foundation
import Logging
import Synchronization

/// A libmosquitto failure: the operation, libmosquitto's error number and its text. Never holds a password.
public struct MQTTError: Error, Hashable, Sendable, CustomStringConvertible {
    public var operation: String
    /// A `MOSQ_ERR_*` value (or an MQTT v5 reason code for `operation == "connack"`).
    public var code: Int32
    public var message: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        message = String(cString: mosquitto_strerror(code))
    }

    public init(_ operation: String, message: String) {
        self.operation = operation
        self.code = -1
        self.message = message
    }

    public var description: String { "MQTT \(operation) failed: \(message) (\(code))" }

    /// A CONNACK refusal by name, with what usually causes it.
    static func refusal(reasonCode: Int32) -> String {
        let name = String(cString: mosquitto_reason_string(reasonCode))
        let hint: String
        switch reasonCode {
        case 134: hint = ": the broker does not know this user name and password (check the URL's user and the password file)"
        case 135: hint = ": this user may not connect, or not with this client id (the broker's password file and ACL)"
        case 133: hint = ": the broker refused the client id"
        case 136, 137: hint = ": the broker cannot take connections now; retrying"
        default: hint = ""
        }
        return "\(name) (reason \(reasonCode))\(hint)"
    }
}

/// What the client reports, in order, on `MQTTClient.events`.
public enum MQTTEvent: Sendable, Equatable {
    case connected(sessionPresent: Bool)
    /// A connection attempt failed or an established connection ended; the client retries after a backoff.
    case disconnected(reason: String)
    /// The broker acknowledged a QoS 1 publish (`reasonCode` ≥ 0x80 means refused, e.g. 135 not authorised).
    case published(messageID: Int32, reasonCode: Int32)
    case message(topic: String, payload: [UInt8], retained: Bool)
}

/// One MQTT v5 connection through libmosquitto, with its own network thread.
///
/// The thread connects (with the session-expiry property on every CONNECT, which libmosquitto's own reconnect
/// would leave out), runs `mosquitto_loop`, and reconnects with exponential backoff. Subscriptions are renewed on
/// every connect. Events go to `events` in the order libmosquitto reports them; it has one consumer (an
/// `AsyncStream` hands each event to only one iterator). Publishing is safe from any thread.
public final class MQTTClient: Sendable {
    public struct TLS: Sendable {
        /// PEM CA bundle; nil uses the system's CA directory.
        public var caFile: String?
        public var certificateFile: String?
        public var keyFile: String?

        public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public struct Will: Sendable {
        public var topic: String
        public var payload: [UInt8]
        public var retain: Bool

        public init(topic: String, payload: [UInt8], retain: Bool) {
            self.topic = topic
            self.payload = payload
            self.retain = retain
        }
    }

    /// A broker's host and port.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Further brokers of the same deployment (same TLS and credentials). After a failed attempt or a lost
        /// connection the client tries the next broker in turn (`host`:`port` first, then these, then `host`:`port`
        /// again), so it fails over and back without waiting for a broker that is gone.
        public var failover: [Endpoint] = []
        public var clientID: String
        public var username: String?
        public var password: String?
        public var tls: TLS?
        public var keepAliveSeconds: Int32 = 30
        /// How long the broker keeps the session (subscriptions, queued QoS 1 messages) after a disconnect.
        public var sessionExpirySeconds: UInt32 = 3600
        public var will: Will?
        public var reconnectDelayMinimum: Duration = .milliseconds(500)
        public var reconnectDelayMaximum: Duration = .seconds(30)

        public init(host: String, port: Int, clientID: String) {
            self.host = host
            self.port = port
            self.clientID = clientID
        }
    }

    private struct State: ~Copyable {
        var running = true
        var connected = false
        var broker: Endpoint?
        var subscriptions: [(topic: String, qos: Int32)] = []
        /// Topics given up: unsubscribed again at every connection, since a kept session still holds them.
        var unsubscriptions: Set<String> = []
    }

    /// What the C callbacks reach through `userdata`.
    private final class Context: Sendable {
        let continuation: AsyncStream<MQTTEvent>.Continuation
        let state: Mutex<State>
        let logger: Logger

        init(continuation: AsyncStream<MQTTEvent>.Continuation, logger: Logger) {
            self.continuation = continuation
            self.state = Mutex(State())
            self.logger = logger
        }
    }

    /// libmosquitto's handle. Its API is thread-safe once `mosquitto_threaded_set` is on.
    private struct Handle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    public let configuration: Configuration
    public let events: AsyncStream<MQTTEvent>
    private let handle: Handle
    private let context: Context
    private let stopped = Mutex<Bool>(false)
    private let threadDone = DispatchSemaphore(value: 0)
    /// Signalled when the client stops, so that a reconnect's backoff ends at once.
    private let stopping = NSCondition()

    private static let libraryInitialised: Void = { mosquitto_lib_init() }()

    public init(_ configuration: Configuration, logger: Logger) throws(MQTTError) {
        _ = Self.libraryInitialised
        self.configuration = configuration
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTEvent.self, bufferingPolicy: .unbounded)
        events = stream
        context = Context(continuation: continuation, logger: logger)
        guard let pointer = mosquitto_new(configuration.clientID, false, Unmanaged.passUnretained(context).toOpaque())
        else {
            throw MQTTError("create", message: "mosquitto_new returned nothing (out of memory or bad client id)")
        }
        handle = Handle(pointer: pointer)
        do {
            try check("protocol", mosquitto_int_option(pointer, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5))
            try check("tcp_nodelay", mosquitto_int_option(pointer, MOSQ_OPT_TCP_NODELAY, 1))
            try check("threaded", mosquitto_threaded_set(pointer, true))
            if configuration.username != nil || configuration.password != nil {
                try check("credentials", mosquitto_username_pw_set(pointer, configuration.username, configuration.password))
            }
            if let tls = configuration.tls {
                // libmosquitto says only "invalid function arguments" for a file it cannot read.
                for (file, what) in [(tls.caFile, "CA file"), (tls.certificateFile, "certificate file"), (tls.keyFile, "key file")] {
                    if let file { try Self.requireReadable(file, what) }
                }
                try check(
                    "tls",
                    mosquitto_tls_set(
                        pointer, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil, tls.certificateFile,
                        tls.keyFile, nil))
            }
            if let will = configuration.will {
                try check(
                    "will",
                    will.payload.withUnsafeBytes { raw in
                        mosquitto_will_set_v5(
                            pointer, will.topic, Int32(raw.count), raw.baseAddress, 1, will.retain, nil)
                    })
            }
        } catch {
            // Every stored property is set, so `deinit` runs and destroys the handle (destroying it here too freed
            // it twice).
            throw error
        }
        installCallbacks(pointer)
    }

    /// Throws an error naming the file, what it is for, and why it cannot be read (the errno).
    static func requireReadable(_ path: String, _ what: String) throws(MQTTError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw MQTTError(
                "tls", message: "the \(what) \(path) cannot be read: \(String(cString: strerror(code))) (errno \(code))")
        }
        close(descriptor)
    }

    deinit {
        stop()
        mosquitto_destroy(handle.pointer)
    }

    /// Connects, loops and reconnects on a thread of its own until the calling task is cancelled (under
    /// swift-service-lifecycle, `cancelOnGracefulShutdown()`); then disconnects cleanly (no will) and returns once
    /// the thread has ended, `events` finished.
    public func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                startNetworkThread { continuation.resume() }
            }
        } onCancel: {
            disconnect()
        }
        context.continuation.finish()
    }

    /// `run()` for a synchronous caller: starts the network thread, which `stop()` ends.
    package func start() {
        startedThread.withLock { $0 = true }
        startNetworkThread { [threadDone] in threadDone.signal() }
    }

    /// Ends what `start()` began: disconnects cleanly (no will) and waits for the network thread to end.
    package func stop() {
        let wasRunning = disconnect()
        if wasRunning, startedThread.withLock({ $0 }) { threadDone.wait() }
        context.continuation.finish()
    }

    private let startedThread = Mutex<Bool>(false)

    private func startNetworkThread(ended: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            runNetworkLoop()
            ended()
        }
        thread.name = "mqtt-\(configuration.clientID)"
        thread.start()
    }

    /// Asks the network thread to disconnect and end (once); returns whether it was running.
    @discardableResult
    private func disconnect() -> Bool {
        let wasStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return false }
        let wasRunning = context.state.withLock { state in
            defer { state.running = false }
            return state.running
        }
        // The network thread sends the DISCONNECT itself, and flushes it, before it ends (`closeCleanly`).
        stopping.lock()
        stopping.broadcast()
        stopping.unlock()
        return wasRunning
    }

    /// Publishes; returns the message id that `MQTTEvent.published` will carry. libmosquitto queues the message
    /// while disconnected (without bound: callers keep their own window).
    @discardableResult
    public func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        var messageID: Int32 = 0
        let rc = payload.withUnsafeBytes { raw in
            mosquitto_publish_v5(handle.pointer, &messageID, topic, Int32(raw.count), raw.baseAddress, qos, retain, nil)
        }
        try check("publish", rc)
        return messageID
    }

    /// Subscribes now (when connected) and again after every reconnect.
    public func subscribe(topic: String, qos: Int32 = 1) throws(MQTTError) {
        let connected = context.state.withLock { state in
            state.unsubscriptions.remove(topic)
            state.subscriptions.removeAll { $0.topic == topic }
            state.subscriptions.append((topic, qos))
            return state.connected
        }
        if connected { try check("subscribe", mosquitto_subscribe_v5(handle.pointer, nil, topic, qos, 0, nil)) }
    }

    /// Unsubscribes now (when connected) and again at every connection: a session the broker kept from before
    /// still holds the subscription. Messages the broker had already sent or queued may still arrive.
    public func unsubscribe(topic: String) throws(MQTTError) {
        let connected = context.state.withLock { state in
            state.subscriptions.removeAll { $0.topic == topic }
            state.unsubscriptions.insert(topic)
            return state.connected
        }
        if connected { try check("unsubscribe", mosquitto_unsubscribe_v5(handle.pointer, nil, topic, nil)) }
    }

    public var isConnected: Bool { context.state.withLock { $0.connected } }

    /// The broker of the current (or last) connection attempt.
    public var currentBroker: Endpoint { context.state.withLock { $0.broker } ?? endpoints[0] }

    private var endpoints: [Endpoint] {
        [Endpoint(host: configuration.host, port: configuration.port)] + configuration.failover
    }

    // MARK: Network thread

    private func runNetworkLoop() {
        var delay = configuration.reconnectDelayMinimum
        var properties: OpaquePointer? = nil
        mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), configuration.sessionExpirySeconds)
        defer { mosquitto_property_free_all(&properties) }
        let endpoints = endpoints
        var next = 0
        while context.state.withLock({ $0.running }) {
            let broker = endpoints[next]
            next = (next + 1) % endpoints.count
            context.state.withLock { $0.broker = broker }
            let rc = mosquitto_connect_bind_v5(
                handle.pointer, broker.host, Int32(broker.port), configuration.keepAliveSeconds, nil, properties)
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                var loopRC = MOSQ_ERR_SUCCESS.rawValue
                while context.state.withLock({ $0.running }), loopRC == MOSQ_ERR_SUCCESS.rawValue {
                    loopRC = mosquitto_loop(handle.pointer, 100, 1)
                }
                if context.state.withLock({ $0.connected }) {
                    delay = configuration.reconnectDelayMinimum
                }
                context.state.withLock { $0.connected = false }
                if !context.state.withLock({ $0.running }) {
                    closeCleanly()
                    break
                }
                context.continuation.yield(.disconnected(reason: MQTTError("loop", code: loopRC).message + tlsHint(loopRC)))
            } else {
                var error = rc == MOSQ_ERR_ERRNO.rawValue
                    ? MQTTError("connect", message: String(cString: strerror(errno)))
                    : MQTTError("connect", code: rc)
                error.message += tlsHint(rc)
                context.logger.warning(
                    "MQTT connect failed; retrying",
                    metadata: [
                        "host": "\(broker.host)", "port": .stringConvertible(broker.port), "error": "\(error.message)",
                        "retry_in": "\(delay)",
                    ])
                context.continuation.yield(.disconnected(reason: error.message))
            }
            sleep(delay)
            delay = min(delay * 2, configuration.reconnectDelayMaximum)
        }
    }

    /// Stopping: sends DISCONNECT (the broker then drops the will) and loops until libmosquitto has written it and
    /// closed the connection, TLS included, for at most a second. Called from another thread, or left to the
    /// process's exit, the DISCONNECT could stay queued behind a packet being written, and the broker would see the
    /// connection simply drop.
    private func closeCleanly() {
        guard mosquitto_disconnect_v5(handle.pointer, 0, nil) == MOSQ_ERR_SUCCESS.rawValue else { return }
        var loops = 0
        while loops < 20, mosquitto_loop(handle.pointer, 50, 1) == MOSQ_ERR_SUCCESS.rawValue { loops += 1 }
    }

    /// What a TLS failure usually means, for a `MOSQ_ERR_TLS`; empty for any other result.
    private func tlsHint(_ rc: Int32) -> String {
        guard rc == MOSQ_ERR_TLS.rawValue else { return "" }
        return configuration.tls?.caFile == nil
            ? " (the broker's certificate is not trusted by the system's CAs: give its CA with --ca-file; or its name does not match the host \(currentBroker.host))"
            : " (the broker's certificate is not signed by the CA of --ca-file, or its name does not match the host \(currentBroker.host))"
    }

    /// Waits out a backoff, or until the client stops.
    private func sleep(_ duration: Duration) {
        let deadline = Date(timeIntervalSinceNow: Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        stopping.lock()
        defer { stopping.unlock() }
        while context.state.withLock({ $0.running }), stopping.wait(until: deadline) {}
    }

    private func installCallbacks(_ pointer: OpaquePointer) {
        mosquitto_connect_v5_callback_set(pointer) { mosq, userdata, rc, flags, _ in
            let context = Unmanaged<Context>.fromOpaque(userdata!).takeUnretainedValue()
            guard rc == 0 else {
                let reason = MQTTError.refusal(reasonCode: rc)
                context.logger.error(
                    "MQTT broker refused the connection", metadata: ["reason": "\(reason)", "reason_code": .stringConvertible(rc)])
                context.continuation.yield(.disconnected(reason: reason))
                return
            }
            let (subscriptions, unsubscriptions) = context.state.withLock { state in
                state.connected = true
                return (state.subscriptions, state.unsubscriptions)
            }
            for topic in unsubscriptions.sorted() { mosquitto_unsubscribe_v5(mosq, nil, topic, nil) }
            for subscription in subscriptions {
                mosquitto_subscribe_v5(mosq, nil, subscription.topic, subscription.qos, 0, nil)
            }
            context.continuation.yield(.connected(sessionPresent: flags & 1 == 1))
        }
        mosquitto_publish_v5_callback_set(pointer) { _, userdata, messageID, reasonCode, _ in
            let context = Unmanaged<Context>.fromOpaque(userdata!).takeUnretainedValue()
            context.continuation.yield(.published(messageID: messageID, reasonCode: reasonCode))
        }
        mosquitto_message_v5_callback_set(pointer) { _, userdata, message, _ in
            let context = Unmanaged<Context>.fromOpaque(userdata!).takeUnretainedValue()
            guard let message = message?.pointee, let topic = message.topic else { return }
            // libmosquitto frees both after the callback returns: copy them now.
            let payload =
                message.payloadlen > 0 && message.payload != nil
                ? Array(UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))) : []
            context.continuation.yield(.message(topic: String(cString: topic), payload: payload, retained: message.retain))
        }
    }

}

private func check(_ operation: String, _ rc: Int32) throws(MQTTError) {
    guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(operation, code: rc) }
}
