import BeaconWire
import Foundation

/// Home Assistant MQTT discovery for live presence (`--home-assistant`, docs/presence.md): retained configs under
/// `<prefix>/sensor/beaconflow/<object id>/config` for a device per registry beacon (a zone sensor per site it has
/// been placed at, with battery and temperature sensors there) and a device per site (an occupancy sensor per
/// zone). Object and unique ids come from the beacon, site and zone ids only, so they stay the same across
/// restarts and ingest instances.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String

    public init(prefix: String = "homeassistant") {
        self.prefix = prefix
    }

    /// The filter of every config this integration publishes (to find the ones to remove).
    public var filter: String { "\(prefix)/sensor/beaconflow/+/config" }

    public func topic(objectID: String) -> String { "\(prefix)/sensor/beaconflow/\(objectID)/config" }

    /// The object id in a config topic of `filter`, or nil.
    public func objectID(inTopic topic: String) -> String? {
        let head = "\(prefix)/sensor/beaconflow/"
        guard topic.hasPrefix(head), topic.hasSuffix("/config") else { return nil }
        let id = topic.dropFirst(head.count).dropLast("/config".count)
        return id.isEmpty || id.contains("/") ? nil : String(id)
    }

    public struct Config: Sendable, Equatable {
        public var objectID: String
        public var payload: [UInt8]
    }

    /// A beacon's object ids start with this: a digest of its id (beacon ids may hold characters object ids may not).
    public static func beaconKey(_ beaconID: String) -> String {
        "b" + hexString(FNV1a.digest(beaconID.utf8), digits: 16)
    }

    /// The zone sensor of a beacon at a site, and its battery, battery voltage and temperature sensors there.
    public func beaconConfigs(site: String, beaconID: String, label: String?) -> [Config] {
        guard let presence = PresenceTopics.beacon(site: site, beaconID: beaconID),
            let condition = PresenceTopics.beaconCondition(site: site, beaconID: beaconID)
        else { return [] }
        let key = Self.beaconKey(beaconID)
        let device: JSONValue = .object([
            JSONField("identifiers", .array([.string("beaconflow_\(key)")])), JSONField("name", .string(label ?? beaconID)),
            JSONField("manufacturer", .string("beaconflow")), JSONField("model", .string(beaconID)),
        ])
        func sensor(_ suffix: String, name: String, state: String, template: String, extra: [JSONField]) -> Config {
            let objectID = "\(key)_\(site)_\(suffix)"
            return Config(
                objectID: objectID,
                payload: encode(
                    [
                        JSONField("name", .string(name)), JSONField("unique_id", .string("beaconflow_\(objectID)")),
                        JSONField("object_id", .string("beaconflow_\(objectID)")), JSONField("state_topic", .string(state)),
                        JSONField("value_template", .string(template)), JSONField("device", device),
                    ] + extra))
        }
        let measurement = JSONField("state_class", .string("measurement"))
        return [
            sensor(
                "zone", name: "Zone at \(site)", state: presence,
                template: "{{ value_json.zone if value_json.present else 'away' }}",
                extra: [JSONField("json_attributes_topic", .string(presence)), JSONField("icon", .string("mdi:map-marker"))]),
            sensor(
                "battery", name: "Battery at \(site)", state: condition, template: "{{ value_json.battery_pct }}",
                extra: [JSONField("device_class", .string("battery")), JSONField("unit_of_measurement", .string("%")), measurement]),
            sensor(
                "battery_voltage", name: "Battery voltage at \(site)", state: condition, template: "{{ value_json.battery_mv }}",
                extra: [JSONField("device_class", .string("voltage")), JSONField("unit_of_measurement", .string("mV")), measurement]),
            sensor(
                "temperature", name: "Temperature at \(site)", state: condition, template: "{{ value_json.temperature_c }}",
                extra: [JSONField("device_class", .string("temperature")), JSONField("unit_of_measurement", .string("°C")), measurement]),
        ]
    }

    /// A zone's occupancy sensor, on its site's device.
    public func zoneConfig(site: String, zone: String) -> Config {
        let objectID = "site_\(site)_\(zone)_occupancy"
        let device: JSONValue = .object([
            JSONField("identifiers", .array([.string("beaconflow_site_\(site)")])), JSONField("name", .string(site)),
            JSONField("manufacturer", .string("beaconflow")), JSONField("model", .string("site")),
        ])
        return Config(
            objectID: objectID,
            payload: encode([
                JSONField("name", .string("\(zone) occupancy")), JSONField("unique_id", .string("beaconflow_\(objectID)")),
                JSONField("object_id", .string("beaconflow_\(objectID)")),
                JSONField("state_topic", .string(PresenceTopics.zone(site: site, zone: zone))),
                JSONField("value_template", .string("{{ value_json.occupants }}")), JSONField("unit_of_measurement", .string("beacons")),
                JSONField("state_class", .string("measurement")), JSONField("icon", .string("mdi:account-group")),
                JSONField("device", device),
            ]))
    }

    /// Whether a config of `objectID` belongs to a beacon (`beaconKey`) rather than a site.
    public static func isBeaconObject(_ objectID: String) -> Bool { !objectID.hasPrefix("site_") }

    private func encode(_ fields: [JSONField]) -> [UInt8] {
        let availability = [
            JSONField("availability_topic", .string(PresenceTopics.availability)),
            JSONField("payload_available", .string("online")), JSONField("payload_not_available", .string("offline")),
        ]
        return Array(JSONValue.object(fields + availability).text.utf8)
    }
}
