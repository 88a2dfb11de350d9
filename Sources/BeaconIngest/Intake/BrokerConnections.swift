import Logging
import Mosquitto

/// The ingest's connections, one per broker of the deployment: subscriptions go to every broker, and so do
/// acknowledgements and rejection notices, to those connected now (an acknowledgement is retained and published
/// again at the agent's next commit; one queued for a broker that is gone would wait in memory).
final class BrokerConnections: Sendable {
    let clients: [MQTTClient]

    /// A client for `configuration`'s broker and one for each of its `failover` brokers.
    init(_ configuration: MQTTClient.Configuration, logger: Logger) throws(MQTTError) {
        let brokers = [MQTTClient.Endpoint(host: configuration.host, port: configuration.port)] + configuration.failover
        clients = try brokers.map { broker throws(MQTTError) in
            var single = configuration
            single.host = broker.host
            single.port = broker.port
            single.failover = []
            return try MQTTClient(single, logger: logger)
        }
    }

    var connectedCount: Int { clients.count { $0.isConnected } }

    func subscribe(topic: String, qos: Int32) throws(MQTTError) {
        for client in clients { try client.subscribe(topic: topic, qos: qos) }
    }

    func unsubscribe(topic: String) throws(MQTTError) {
        for client in clients { try client.unsubscribe(topic: topic) }
    }

    /// Publishes to every connected broker; throws the last failure when it reached none.
    func publish(topic: String, payload: [UInt8], qos: Int32, retain: Bool = false) throws(MQTTError) {
        var failure = MQTTError("publish", message: "no broker is connected")
        var published = false
        for client in clients where client.isConnected || clients.count == 1 {
            do {
                try client.publish(topic: topic, payload: payload, qos: qos, retain: retain)
                published = true
            } catch { failure = error }
        }
        if !published { throw failure }
    }

    /// Runs every connection until the task is cancelled (`MQTTClient.run`).
    func run() async {
        await withDiscardingTaskGroup { group in
            for client in clients { group.addTask { await client.run() } }
        }
    }
}
