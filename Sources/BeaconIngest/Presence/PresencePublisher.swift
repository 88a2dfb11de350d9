import BeaconMessaging
import Foundation
import MetricFamilies
import Metrics

/// How the ingest publishes live presence (`--presence`, docs/presence.md).
public struct PresenceConfiguration: Sendable {
    /// Per-beacon topics for every beacon, not only the registry's.
    public var allBeacons = false
    /// Messages a second at most, over all topics.
    public var messagesPerSecond = 50.0
    /// A beacon's battery and temperature at most this often.
    public var conditionInterval: Duration = .seconds(60)
    /// Home Assistant MQTT discovery under this prefix; nil: none.
    public var discoveryPrefix: String?
    /// With discovery, the binary sensors too: a zone occupied, a beacon in a zone.
    public var discoveryBinarySensors = false

    var discovery: HomeAssistantDiscovery? {
        discoveryPrefix.map { HomeAssistantDiscovery(prefix: $0, binarySensors: discoveryBinarySensors) }
    }

    public init() {}
}

/// Sends live presence to the brokers, retained, at most `messagesPerSecond`: a topic's newer message replaces one
/// still waiting, so what waits is bounded by the number of topics and each topic ends at its latest state. Zones,
/// registry beacons, availability and discovery go first; beacons outside the registry (`allBeacons`) after them,
/// and at most `unregisteredWaitingLimit` of theirs wait (a new one past it is dropped and counted; the beacon's
/// next change is published). Runs on the writer thread; publishing only queues in libmosquitto.
final class PresencePublisher {
    static let unregisteredWaitingLimit = 10_000
    private var board: PresenceBoard
    private let configuration: PresenceConfiguration
    private var waiting: [String: [UInt8]] = [:]
    /// Topics waiting, oldest first: the registry's, zones' and configs', then the unregistered beacons'.
    private var order: [String] = []
    private var unregisteredOrder: [String] = []
    private var tokens: Double
    private var refilled = ContinuousClock.now
    private var conditionSent: [String: ContinuousClock.Instant] = [:]
    private var conditionHeld: [String: PresenceBoard.Message] = [:]
    private var discoveryDone = false
    private let publishedCounter = Counter(IngestMetrics.presenceMessages)
    private let replacedCounter = Counter(IngestMetrics.presenceReplaced)
    private let waitingGauge = Gauge(IngestMetrics.presenceWaiting)
    private let droppedCounter = Counter(IngestMetrics.presenceDropped)

    init(sites: SitesConfiguration, configuration: PresenceConfiguration) {
        self.configuration = configuration
        board = PresenceBoard(
            sites: sites, allBeacons: configuration.allBeacons,
            discovery: configuration.discovery)
        tokens = configuration.messagesPerSecond
    }

    var discovery: HomeAssistantDiscovery? { board.discovery }

    /// Follows the sites the writer serves: a site claimed has its whole state published from its tracker.
    func follow(servedSites: Set<String>, pipeline: IngestPipeline) {
        for site in board.servedSites.subtracting(servedSites) { board.forget(site: site) }
        for site in servedSites.subtracting(board.servedSites).sorted() {
            enqueue(board.serve(site: site, placements: pipeline.placements(site: site)))
        }
    }

    /// The sites file read again: every served site's state, and the zones' configs, are published again from
    /// the new sites as they are followed.
    func reconfigure(sites: SitesConfiguration) {
        board = PresenceBoard(sites: sites, allBeacons: configuration.allBeacons, discovery: board.discovery)
        if discoveryDone { enqueue(board.zoneDiscovery) }
    }

    /// After a broker reconnected: every site's state, and the configs, are published again as the sites are
    /// followed.
    func forgetAll() {
        let zoneConfigs = discoveryDone ? board.zoneDiscovery : []
        board.forgetAll()
        enqueue(zoneConfigs)
    }

    func committed(_ changes: [ZoneChange], health: [BeaconHealth], readings: [SensorReadingRow]) {
        enqueue(board.apply(changes))
        let now = ContinuousClock.now
        // Configs go at once; a beacon's condition and readings at most once per `conditionInterval` each.
        let (configs, states) = board.readings(readings)
        enqueue(configs)
        for message in board.condition(health) + states {
            if let sent = conditionSent[message.topic], now - sent < configuration.conditionInterval {
                conditionHeld[message.topic] = message
            } else {
                conditionSent[message.topic] = now
                enqueue([message])
            }
        }
    }

    /// The discovery configs found retained on the broker (by key, with the state topics each reads): removes what
    /// the registry and sites file no longer have, and publishes every zone's.
    func discoveryFound(_ found: [String: Set<String>]) {
        discoveryDone = true
        enqueue(board.discoveryFound(found) + board.zoneDiscovery)
    }

    /// Publishes what the rate allows, oldest topic first.
    func flush(to client: BrokerConnections) {
        let now = ContinuousClock.now
        let elapsed = (now - refilled).seconds
        refilled = now
        tokens = min(configuration.messagesPerSecond, tokens + elapsed * configuration.messagesPerSecond)
        for (topic, message) in conditionHeld where now - (conditionSent[topic] ?? now) >= configuration.conditionInterval {
            conditionHeld[topic] = nil
            conditionSent[topic] = now
            enqueue([message])
        }
        send(&order, to: client)
        send(&unregisteredOrder, to: client)
        waitingGauge.record(waiting.count)
    }

    /// Sends the oldest of `topics` while the rate allows.
    private func send(_ topics: inout [String], to client: BrokerConnections) {
        var sent = 0
        while sent < topics.count, tokens >= 1 {
            let topic = topics[sent]
            sent += 1
            guard let payload = waiting.removeValue(forKey: topic) else { continue }
            // A broker away: the message is dropped, and the whole state is published again at the next claim.
            try? client.publish(topic: topic, payload: payload, qos: 1, retain: true)
            tokens -= 1
            publishedCounter.increment()
        }
        topics.removeFirst(sent)
    }

    private func enqueue(_ messages: [PresenceBoard.Message]) {
        for message in messages {
            if waiting[message.topic] != nil {
                waiting[message.topic] = message.payload
                replacedCounter.increment()
            } else if message.unregistered {
                guard unregisteredOrder.count < Self.unregisteredWaitingLimit else {
                    droppedCounter.increment()
                    continue
                }
                waiting[message.topic] = message.payload
                unregisteredOrder.append(message.topic)
            } else {
                waiting[message.topic] = message.payload
                order.append(message.topic)
            }
        }
    }
}
