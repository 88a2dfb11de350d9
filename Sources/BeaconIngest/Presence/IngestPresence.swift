import BeaconMessaging
import Mosquitto

/// What the brokers' threads tell the presence publisher on the writer thread.
struct PresenceEvents: Sendable {
    /// A broker (re)connected: the whole state is published again (it may have lost what was retained).
    var republish = false
    var firstConnected: ContinuousClock.Instant?
    /// Home Assistant configs found retained on the broker, until they are looked at: by key, the state topics
    /// each reads.
    var discoveryFound: [String: Set<String>] = [:]
    var discoveryScanned = false
}

extension Ingest {
    /// How long after the first connection the retained discovery configs are looked at (the broker sends them
    /// right after the subscription).
    static let discoveryScanDelay: Duration = .seconds(3)

    /// Handles a broker event for live presence; true when the event was presence's alone.
    func presenceEvent(_ event: MQTTEvent, client: MQTTClient) -> Bool {
        guard let presenceConfiguration = configuration.presence else { return false }
        // From the configuration: every broker event passes here, and the publisher's lock is the writer's.
        let discovery = presenceConfiguration.discovery
        switch event {
        case .connected:
            try? client.subscribe(topic: PresenceTopics.availability)
            let scanned = presenceEvents.withLock { $0.discoveryScanned }
            if let discovery, !scanned { for filter in discovery.filters { try? client.subscribe(topic: filter) } }
            _ = try? client.publish(topic: PresenceTopics.availability, payload: PresenceTopics.online, retain: true)
            presenceEvents.withLock { events in
                events.republish = true
                if events.firstConnected == nil { events.firstConnected = .now }
            }
            return false
        case .message(let topic, let payload, _) where topic == PresenceTopics.availability:
            // Another instance's will (or its stop): presence goes on here.
            if payload == PresenceTopics.offline, !stopRequested.isStopped {
                _ = try? client.publish(topic: PresenceTopics.availability, payload: PresenceTopics.online, retain: true)
            }
            return true
        case .message(let topic, let payload, _):
            guard let key = discovery?.key(inTopic: topic) else { return false }
            if !payload.isEmpty {
                let stateTopics = HomeAssistantDiscovery.stateTopics(inConfig: payload)
                presenceEvents.withLock { events in if !events.discoveryScanned { events.discoveryFound[key] = stateTopics } }
            }
            return true
        default:
            return false
        }
    }

    /// On the writer thread, between steps: follows the sites served, looks at the discovery configs found once,
    /// and publishes what the rate allows.
    func presencePublish(_ state: WriterState, client: BrokerConnections) {
        guard configuration.presence != nil else { return }
        let (republish, found) = presenceEvents.withLock { events -> (Bool, [String: Set<String>]?) in
            defer { events.republish = false }
            guard !events.discoveryScanned, let first = events.firstConnected, ContinuousClock.now - first >= Self.discoveryScanDelay
            else { return (events.republish, nil) }
            events.discoveryScanned = true
            defer { events.discoveryFound = [:] }
            return (events.republish, events.discoveryFound)
        }
        presence.withLock { publisher in
            guard let publisher else { return }
            if republish { publisher.forgetAll() }
            publisher.follow(servedSites: state.servedSites, pipeline: state.pipeline)
            if let found {
                publisher.discoveryFound(found)
                if let discovery = publisher.discovery { for filter in discovery.filters { try? client.unsubscribe(topic: filter) } }
            }
            publisher.flush(to: client)
        }
    }
}
