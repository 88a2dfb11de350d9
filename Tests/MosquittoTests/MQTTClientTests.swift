import Foundation
import LocalServers
import Logging
@testable import Mosquitto
import TestServers
import Testing

@Suite(.enabled(if: MosquittoServer.executable != nil, "mosquitto is not installed"), .timeLimit(.minutes(1)))
struct MQTTClientTests {
    let logger = Logger(label: "test")

    func client(_ broker: MosquittoServer, id: String, _ change: (inout MQTTClient.Configuration) -> Void = { _ in })
        throws -> (MQTTClient, Collector<MQTTEvent>)
    {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: id)
        configuration.reconnectDelayMinimum = .milliseconds(50)
        configuration.reconnectDelayMaximum = .milliseconds(200)
        change(&configuration)
        let client = try MQTTClient(configuration, logger: logger)
        return (client, Collector(client.events))
    }

    @Test func publishSubscribeAndRetainedMessages() async throws {
        let broker = try MosquittoServer()
        let (publisher, published) = try client(broker, id: "pub")
        let (subscriber, received) = try client(broker, id: "sub")
        defer {
            publisher.stop()
            subscriber.stop()
        }
        publisher.start()
        try await published.first { $0 == .connected(sessionPresent: false) }
        let retainedID = try publisher.publish(topic: "t/ack", payload: Array("41".utf8), retain: true)
        try await published.first { isAcknowledged($0, retainedID) }

        try subscriber.subscribe(topic: "t/#")
        subscriber.start()
        try await received.first { $0 == .message(topic: "t/ack", payload: Array("41".utf8), retained: true) }
        let payload = (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        let id = try publisher.publish(topic: "t/batch", payload: payload)
        try await published.first { isAcknowledged($0, id) }
        try await received.first { $0 == .message(topic: "t/batch", payload: payload, retained: false) }
    }

    @Test func reconnectsAndResubscribesAfterABrokerRestart() async throws {
        let broker = try MosquittoServer()
        let (subscriber, received) = try client(broker, id: "sub-restart")
        let (publisher, published) = try client(broker, id: "pub-restart")
        defer {
            publisher.stop()
            subscriber.stop()
        }
        try subscriber.subscribe(topic: "r/#")
        subscriber.start()
        publisher.start()
        try await received.first { if case .connected = $0 { true } else { false } }
        try await published.first { if case .connected = $0 { true } else { false } }

        broker.stop()
        try await received.first { if case .disconnected = $0 { true } else { false } }
        received.reset()
        published.reset()
        try broker.start()
        // The broker kept the session (session expiry is set on every CONNECT, persistence is on).
        try await received.first { $0 == .connected(sessionPresent: true) }
        try await published.first { if case .connected = $0 { true } else { false } }
        let id = try publisher.publish(topic: "r/x", payload: [1, 2, 3])
        try await published.first { isAcknowledged($0, id) }
        try await received.first { $0 == .message(topic: "r/x", payload: [1, 2, 3], retained: false) }
    }

    /// A topic given up gets nothing more, now and after a restart on a session the broker kept (which still
    /// holds the subscription until the client unsubscribes again at its connection).
    @Test func anUnsubscribedTopicStaysUnsubscribedAcrossAKeptSession() async throws {
        let broker = try MosquittoServer()
        let (publisher, published) = try client(broker, id: "pub-unsub")
        defer { publisher.stop() }
        publisher.start()
        try await published.first { if case .connected = $0 { true } else { false } }
        /// Subscribes to `topic` and publishes on it until a message arrives: a subscription change sent before
        /// that subscription has then taken effect.
        func sync(_ client: MQTTClient, _ received: Collector<MQTTEvent>, _ topic: String) async throws {
            try client.subscribe(topic: topic)
            let deadline = ContinuousClock.now + .seconds(30)
            repeat {
                _ = try publisher.publish(topic: topic, payload: [1])
                if (try? await received.first(within: .milliseconds(300)) { if case .message(topic, _, _) = $0 { true } else { false } }) != nil {
                    return
                }
            } while ContinuousClock.now < deadline
            Issue.record("\(topic) never arrived")
        }
        func heard(_ received: Collector<MQTTEvent>, _ topic: String) -> Bool {
            received.all.contains { if case .message(topic, _, _) = $0 { true } else { false } }
        }

        let (first, firstReceived) = try client(broker, id: "keeper") { $0.sessionExpirySeconds = 600 }
        try first.subscribe(topic: "u/a")
        first.start()
        try await sync(first, firstReceived, "u/1")
        try first.unsubscribe(topic: "u/a")
        try await sync(first, firstReceived, "u/2")
        _ = try publisher.publish(topic: "u/a", payload: [3])
        try await sync(first, firstReceived, "u/3")
        #expect(!heard(firstReceived, "u/a"))

        // The session, with u/a again, is kept by the broker.
        try first.subscribe(topic: "u/a")
        try await sync(first, firstReceived, "u/4")
        first.stop()
        let (second, secondReceived) = try client(broker, id: "keeper") { $0.sessionExpirySeconds = 600 }
        defer { second.stop() }
        try second.unsubscribe(topic: "u/a")
        second.start()
        try await secondReceived.first { $0 == .connected(sessionPresent: true) }
        try await sync(second, secondReceived, "u/5")
        _ = try publisher.publish(topic: "u/a", payload: [7])
        try await sync(second, secondReceived, "u/6")
        #expect(!heard(secondReceived, "u/a"))
    }

    /// Independent brokers of one deployment: when the one in use goes, the client moves to the next, and back.
    @Test func failsOverToTheNextBrokerAndBack() async throws {
        let first = try MosquittoServer()
        let second = try MosquittoServer()
        let (client, events) = try client(first, id: "failover") {
            $0.failover = [MQTTClient.Endpoint(host: "127.0.0.1", port: second.port)]
        }
        defer { client.stop() }
        client.start()
        try await events.first { if case .connected = $0 { true } else { false } }
        #expect(client.currentBroker.port == first.port)

        events.reset()
        first.kill()
        try await events.first { if case .connected = $0 { true } else { false } }
        #expect(client.currentBroker.port == second.port)
        let id = try client.publish(topic: "f/x", payload: [1])
        try await events.first { isAcknowledged($0, id) }

        try first.start()
        events.reset()
        second.kill()
        try await events.first { if case .connected = $0 { true } else { false } }
        #expect(client.currentBroker.port == first.port)
    }

    @Test func anUnreachableBrokerIsReportedAndRetried() async throws {
        let port = try freeLoopbackPort()
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: port, clientID: "nobody")
        configuration.reconnectDelayMinimum = .milliseconds(20)
        configuration.reconnectDelayMaximum = .milliseconds(40)
        let client = try MQTTClient(configuration, logger: logger)
        let events = Collector(client.events)
        client.start()
        defer { client.stop() }
        try await events.first { $0 == .disconnected(reason: "Connection refused") }
        // It keeps trying: a broker that appears later is connected to.
        let broker = try MosquittoServer(port: port)
        try await events.first { if case .connected = $0 { true } else { false } }
        broker.stop()
    }

    /// `run()` ends when its task is cancelled, also in the middle of a long wait before reconnecting.
    @Test func aCancelledRunEndsDuringTheBackoff() async throws {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: try freeLoopbackPort(), clientID: "patient")
        configuration.reconnectDelayMinimum = .seconds(60)
        configuration.reconnectDelayMaximum = .seconds(60)
        let client = try MQTTClient(configuration, logger: logger)
        let events = Collector(client.events)
        let running = Task { await client.run() }
        // Generous waits: the suite's parallel load can hold a two-core machine's threads for seconds.
        try await events.first(within: .seconds(30)) { $0 == .disconnected(reason: "Connection refused") }
        let cancelled = ContinuousClock.now
        running.cancel()
        await running.value
        #expect(ContinuousClock.now - cancelled < .seconds(20), "the run waited out its 60 s backoff")
    }

    @Test(.enabled(if: findExecutable("openssl") != nil, "openssl is not installed"))
    func tlsWithATestCertificateAuthority() async throws {
        let openssl = try #require(findExecutable("openssl"))
        let pki = try makeTemporaryDirectory(prefix: "pki")
        defer { try? FileManager.default.removeItem(atPath: pki) }
        try await makeTestPKI(openssl: openssl, in: pki)
        let port = try freeLoopbackPort()
        let broker = try MosquittoServer(
            configuration: """
                listener \(port) 127.0.0.1
                allow_anonymous true
                cafile \(pki)/ca.pem
                certfile \(pki)/server.pem
                keyfile \(pki)/server.key
                """, port: port)
        let (trusted, trustedEvents) = try client(broker, id: "tls-ok") {
            $0.tls = MQTTClient.TLS(caFile: pki + "/ca.pem")
        }
        trusted.start()
        defer { trusted.stop() }
        try await trustedEvents.first { if case .connected = $0 { true } else { false } }
        let id = try trusted.publish(topic: "tls/x", payload: [7])
        try await trustedEvents.first { isAcknowledged($0, id) }

        // Without our CA (system CAs only), the broker's certificate is not trusted.
        let (untrusted, untrustedEvents) = try client(broker, id: "tls-bad") { $0.tls = MQTTClient.TLS() }
        untrusted.start()
        defer { untrusted.stop() }
        let refusal = try await untrustedEvents.first { if case .disconnected = $0 { true } else { false } }
        #expect(!untrustedEvents.all.contains { if case .connected = $0 { true } else { false } })
        // The reason says what to do about it.
        guard case .disconnected(let reason) = refusal else { return }
        #expect(reason.contains("not trusted by the system's CAs: give its CA with --ca-file"), "\(reason)")

        // A CA file that is not there is named, with the errno, before any connection is tried.
        do {
            _ = try client(broker, id: "tls-missing") { $0.tls = MQTTClient.TLS(caFile: pki + "/nosuch.pem") }
            Issue.record("a missing CA file was accepted")
        } catch {
            #expect("\(error)" == "MQTT tls failed: the CA file \(pki)/nosuch.pem cannot be read: No such file or directory (errno 2) (-1)")
        }
    }

    @Test func refusalsAreNamedWithTheirUsualCause() {
        #expect(MQTTError.refusal(reasonCode: 135).hasPrefix("Not authorized (reason 135): this user may not connect"))
        #expect(MQTTError.refusal(reasonCode: 134).contains("password file"))
    }
}

/// A PUBACK for `messageID` that is not a refusal (16, "no matching subscribers", is a success).
func isAcknowledged(_ event: MQTTEvent, _ messageID: Int32) -> Bool {
    if case .published(messageID, let reasonCode) = event { return reasonCode < 0x80 }
    return false
}
