import BeaconWire
import Foundation

/// Home Assistant MQTT discovery for live presence (`--home-assistant`, docs/presence.md): retained configs under
/// `<prefix>/<component>/beaconflow/<object id>/config` for a device per registry beacon (per site it has been
/// placed at: a device tracker, home while present there, a zone sensor, battery and temperature sensors, and with
/// `binarySensors` a binary sensor per zone of the site) and a device per site (an occupancy sensor per zone, and
/// with `binarySensors` an occupied binary sensor). Object and unique ids come from the beacon, site and zone ids
/// only, so they stay the same across restarts and ingest instances.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    /// Whether to publish the binary sensors (`--home-assistant-binary-sensors`).
    public let binarySensors: Bool

    public init(prefix: String = "homeassistant", binarySensors: Bool = false) {
        self.prefix = prefix
        self.binarySensors = binarySensors
    }

    static let components = ["sensor", "device_tracker", "binary_sensor"]

    /// The filters of every config this integration publishes (to find the ones to remove): one per component, as
    /// the broker's ACL grants them.
    public var filters: [String] { Self.components.map { "\(prefix)/\($0)/beaconflow/+/config" } }

    /// A config's topic, by its key (`<component>/<object id>`).
    public func topic(key: String) -> String {
        let parts = key.split(separator: "/", maxSplits: 1)
        return "\(prefix)/\(parts.first ?? "")/beaconflow/\(parts.count == 2 ? parts[1] : "")/config"
    }

    /// The key (`<component>/<object id>`) of a config topic of `filters`, or nil.
    public func key(inTopic topic: String) -> String? {
        guard topic.hasPrefix(prefix + "/"), topic.hasSuffix("/config") else { return nil }
        let levels = topic.dropFirst(prefix.count + 1).dropLast("/config".count).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 3, Self.components.contains(String(levels[0])), levels[1] == "beaconflow", !levels[2].isEmpty else { return nil }
        return "\(levels[0])/\(levels[2])"
    }

    /// The topics a retained config reads its states from (`state_topic`, `json_attributes_topic`), for clearing
    /// them with it; none from a payload that is not a config.
    public static func stateTopics(inConfig payload: [UInt8]) -> Set<String> {
        guard payload.count <= 16_384, let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return [] }
        return Set(["state_topic", "json_attributes_topic"].compactMap { object[$0] as? String }.filter { !$0.isEmpty && !$0.contains("#") && !$0.contains("+") })
    }

    public struct Config: Sendable, Equatable {
        public var component: String
        public var objectID: String
        public var payload: [UInt8]

        /// `<component>/<object id>`: what tells two configs apart.
        public var key: String { "\(component)/\(objectID)" }
    }

    /// A beacon's object ids start with this: a digest of its id (beacon ids may hold characters object ids may not).
    public static func beaconKey(_ beaconID: String) -> String {
        "b" + hexString(FNV1a.digest(beaconID.utf8), digits: 16)
    }

    /// The device tracker and zone sensor of a beacon at a site, its battery, battery voltage and temperature
    /// sensors there, and with `binarySensors` one binary sensor per zone of `zones`.
    public func beaconConfigs(site: String, beaconID: String, label: String?, zones: [String]) -> [Config] {
        guard let presence = PresenceTopics.beacon(site: site, beaconID: beaconID),
            let condition = PresenceTopics.beaconCondition(site: site, beaconID: beaconID)
        else { return [] }
        let key = Self.beaconKey(beaconID)
        let device = beaconDevice(key: key, beaconID: beaconID, label: label)
        func sensor(
            _ suffix: String, component: String = "sensor", name: String, state: String, template: String, extra: [JSONField]
        ) -> Config {
            let objectID = "\(key)_\(site)_\(suffix)"
            return Config(
                component: component, objectID: objectID,
                payload: encode(
                    [
                        JSONField("name", .string(name)), JSONField("unique_id", .string("beaconflow_\(objectID)")),
                        JSONField("object_id", .string("beaconflow_\(objectID)")), JSONField("state_topic", .string(state)),
                        JSONField("value_template", .string(template)), JSONField("device", device),
                    ] + extra))
        }
        let measurement = JSONField("state_class", .string("measurement"))
        let zoneSensors =
            binarySensors
            ? zones.map { zone in
                sensor(
                    "in_\(zone)", component: "binary_sensor", name: "In \(zone) at \(site)", state: presence,
                    template: "{{ 'ON' if value_json.present and value_json.zone == '\(zone)' else 'OFF' }}",
                    extra: [JSONField("device_class", .string("presence"))])
            } : []
        return [
            // home while present at the site, not_home otherwise; its zone and position as attributes. A person in
            // Home Assistant can have it as a tracker.
            sensor(
                "tracker", component: "device_tracker", name: "At \(site)", state: presence,
                template: "{{ 'home' if value_json.present else 'not_home' }}",
                extra: [
                    JSONField("json_attributes_topic", .string(presence)), JSONField("source_type", .string("bluetooth_le")),
                    JSONField("payload_home", .string("home")), JSONField("payload_not_home", .string("not_home")),
                    JSONField("icon", .string("mdi:map-marker-radius")),
                ]),
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
        ] + zoneSensors
    }

    /// Quantities the beacon's own sensors show already (from its condition): no entity of their own.
    static let conditionQuantities: Set = ["temperature", "battery", "battery_voltage"]

    /// Home Assistant's unit and device class for a reading's unit (`sensor_readings`' names), and the device class
    /// a quantity takes when its unit alone does not say (as Home Assistant's BTHome integration names them).
    static let units: [String: (unit: String?, deviceClass: String?)] = [
        "celsius": ("°C", "temperature"), "percent": ("%", nil), "hectopascal": ("hPa", "pressure"), "millivolt": ("mV", "voltage"),
        "volt": ("V", "voltage"), "ampere": ("A", "current"), "watt": ("W", "power"), "kilowatt_hour": ("kWh", "energy"),
        "lux": ("lx", "illuminance"), "kilogram": ("kg", "weight"), "ppm": ("ppm", nil), "microgram_per_cubic_metre": ("µg/m³", nil),
        "metre": ("m", "distance"), "second": ("s", "duration"), "metre_per_second": ("m/s", "speed"), "litre": ("L", "volume"),
        "cubic_metre": ("m³", "gas"), "cubic_metre_per_hour": ("m³/h", "volume_flow_rate"), "microsiemens_per_centimetre": ("µS/cm", "conductivity"),
        "millimetre": ("mm", "precipitation"), "dbm": ("dBm", "signal_strength"), "degree": ("°", nil), "degree_per_second": ("°/s", nil),
        "metre_per_second_squared": ("m/s²", nil), "revolutions_per_minute": ("rpm", nil), "count": (nil, nil), "index": (nil, nil),
    ]
    static let quantityClasses: [String: String] = [
        "humidity": "humidity", "moisture": "moisture", "battery": "battery", "carbon_dioxide": "carbon_dioxide", "pm25": "pm25",
        "pm10": "pm10", "volatile_organic_compounds": "volatile_organic_compounds", "water": "water", "volume_storage": "volume_storage",
        "dew_point": "temperature",
    ]
    /// A binary reading's device class, where Home Assistant has one of that name (`battery_low` is its `battery`).
    static let binaryClasses: [String: String] = [
        "battery_low": "battery", "power_on": "power", "gas_detected": "gas", "moisture_detected": "moisture",
        "battery_charging": "battery_charging", "carbon_monoxide": "carbon_monoxide", "cold": "cold", "connectivity": "connectivity",
        "door": "door", "garage_door": "garage_door", "heat": "heat", "light": "light", "lock": "lock", "motion": "motion",
        "moving": "moving", "occupancy": "occupancy", "opening": "opening", "plug": "plug", "presence": "presence", "problem": "problem",
        "running": "running", "safety": "safety", "smoke": "smoke", "sound": "sound", "tamper": "tamper", "vibration": "vibration",
        "window": "window",
    ]

    /// The entity of one quantity a registry beacon reports at a site (a sensor, or a binary sensor for a BTHome
    /// binary reading), reading the beacon's readings topic; nil for one its condition's sensors show.
    public func readingConfig(site: String, beaconID: String, label: String?, quantity: String, unit: String) -> Config? {
        guard !Self.conditionQuantities.contains(quantity), let readings = PresenceTopics.beaconReadings(site: site, beaconID: beaconID),
            quantity.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" })
        else { return nil }
        let key = Self.beaconKey(beaconID)
        let objectID = "\(key)_\(site)_r_\(quantity)"
        let name = quantity.replacingOccurrences(of: "_", with: " ").capitalized(with: nil) + " at \(site)"
        var fields = [
            JSONField("name", .string(name)), JSONField("unique_id", .string("beaconflow_\(objectID)")),
            JSONField("object_id", .string("beaconflow_\(objectID)")), JSONField("state_topic", .string(readings)),
            JSONField("device", beaconDevice(key: key, beaconID: beaconID, label: label)),
        ]
        if unit == "boolean" {
            fields.append(JSONField("value_template", .string("{{ 'ON' if value_json.\(quantity) == 1 else 'OFF' }}")))
            if let deviceClass = Self.binaryClasses[quantity] { fields.append(JSONField("device_class", .string(deviceClass))) }
            return Config(component: "binary_sensor", objectID: objectID, payload: encode(fields))
        }
        fields.append(JSONField("value_template", .string("{{ value_json.\(quantity) }}")))
        let mapped = Self.units[unit]
        if let haUnit = mapped?.unit ?? (mapped == nil ? unit : nil) { fields.append(JSONField("unit_of_measurement", .string(haUnit))) }
        if let deviceClass = Self.quantityClasses[quantity] ?? mapped?.deviceClass { fields.append(JSONField("device_class", .string(deviceClass))) }
        fields.append(JSONField("state_class", .string(unit == "kilowatt_hour" ? "total_increasing" : "measurement")))
        return Config(component: "sensor", objectID: objectID, payload: encode(fields))
    }

    /// Whether a config key is of a beacon's reading (`readingConfig`) of a registry beacon at a site: kept at start
    /// like the others it would publish, though it publishes these only as readings come.
    public static func isReading(_ key: String, beaconKeys: Set<String>, sites: Set<String>) -> Bool {
        guard let objectID = key.split(separator: "/", maxSplits: 1).last else { return false }
        let parts = objectID.split(separator: "_", maxSplits: 3)
        return parts.count == 4 && parts[2] == "r" && beaconKeys.contains(String(parts[0])) && sites.contains(String(parts[1]))
    }

    private func beaconDevice(key: String, beaconID: String, label: String?) -> JSONValue {
        .object([
            JSONField("identifiers", .array([.string("beaconflow_\(key)")])), JSONField("name", .string(label ?? beaconID)),
            JSONField("manufacturer", .string("beaconflow")), JSONField("model", .string(beaconID)),
        ])
    }

    /// A zone's occupancy sensor, and with `binarySensors` its occupied binary sensor, on its site's device.
    public func zoneConfigs(site: String, zone: String) -> [Config] {
        let objectID = "site_\(site)_\(zone)_occupancy"
        let device: JSONValue = .object([
            JSONField("identifiers", .array([.string("beaconflow_site_\(site)")])), JSONField("name", .string(site)),
            JSONField("manufacturer", .string("beaconflow")), JSONField("model", .string("site")),
        ])
        let state = JSONField("state_topic", .string(PresenceTopics.zone(site: site, zone: zone)))
        var configs = [
            Config(
                component: "sensor", objectID: objectID,
                payload: encode([
                    JSONField("name", .string("\(zone) occupancy")), JSONField("unique_id", .string("beaconflow_\(objectID)")),
                    JSONField("object_id", .string("beaconflow_\(objectID)")), state,
                    JSONField("value_template", .string("{{ value_json.occupants }}")), JSONField("unit_of_measurement", .string("beacons")),
                    JSONField("state_class", .string("measurement")), JSONField("icon", .string("mdi:account-group")),
                    JSONField("device", device),
                ]))
        ]
        if binarySensors {
            let occupied = "site_\(site)_\(zone)_occupied"
            configs.append(
                Config(
                    component: "binary_sensor", objectID: occupied,
                    payload: encode([
                        JSONField("name", .string("\(zone) occupied")), JSONField("unique_id", .string("beaconflow_\(occupied)")),
                        JSONField("object_id", .string("beaconflow_\(occupied)")), state,
                        JSONField("value_template", .string("{{ 'ON' if value_json.occupants > 0 else 'OFF' }}")),
                        JSONField("device_class", .string("occupancy")), JSONField("device", device),
                    ])))
        }
        return configs
    }

    private func encode(_ fields: [JSONField]) -> [UInt8] {
        let availability = [
            JSONField("availability_topic", .string(PresenceTopics.availability)),
            JSONField("payload_available", .string("online")), JSONField("payload_not_available", .string("offline")),
        ]
        return Array(JSONValue.object(fields + availability).text.utf8)
    }
}
