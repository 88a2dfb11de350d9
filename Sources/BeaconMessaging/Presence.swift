import BeaconWire
import Foundation

/// Live presence, which the ingest publishes when asked (`--presence`), retained, under
/// `beaconflow/v1/<site>/presence/` (docs/presence.md): where each beacon is, how many are in each zone, and whether
/// an ingest is publishing at all.
public enum PresenceTopics {
    /// `online` or `offline` (retained): whether an ingest publishes presence. Every instance publishes `online` and
    /// leaves `offline` as its will; one that sees `offline` while it runs says `online` again.
    public static let availability = "\(AgentTopics.prefix)/presence/availability"
    public static let online = Array("online".utf8)
    public static let offline = Array("offline".utf8)

    /// A beacon's `BeaconPresence`; nil for an id that cannot be a topic level (it has `/`, `+`, `#`, a control
    /// character, or more than 200 bytes).
    public static func beacon(site: String, beaconID: String) -> String? {
        guard isTopicLevel(beaconID) else { return nil }
        return "\(AgentTopics.prefix)/\(site)/presence/beacons/\(beaconID)"
    }

    /// A beacon's `BeaconCondition`.
    public static func beaconCondition(site: String, beaconID: String) -> String? {
        beacon(site: site, beaconID: beaconID).map { $0 + "/condition" }
    }

    /// A beacon's latest sensor readings: each quantity's value (`sensor_readings`' names and units), as JSON.
    public static func beaconReadings(site: String, beaconID: String) -> String? {
        beacon(site: site, beaconID: beaconID).map { $0 + "/readings" }
    }

    /// A `beaconReadings` payload: each quantity and its latest value, to four significant decimals at most.
    public static func readingsPayload(_ values: [String: Double]) -> [UInt8] {
        Array(JSONValue.object(values.sorted { $0.key < $1.key }.map { JSONField($0.key, .double(($0.value * 10_000).rounded() / 10_000)) }).text.utf8)
    }

    /// A zone's `ZonePresence`.
    public static func zone(site: String, zone: String) -> String { "\(AgentTopics.prefix)/\(site)/presence/zones/\(zone)" }

    /// Every presence topic of a site (what a reader subscribes to).
    public static func siteFilter(site: String) -> String { "\(AgentTopics.prefix)/\(site)/presence/#" }

    static func isTopicLevel(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 200 && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x2F && $0 != 0x2B && $0 != 0x23 }
    }
}

/// A presence message: JSON with sorted keys, read back within 4 KiB.
public protocol PresenceMessage: Codable, Sendable {}

extension PresenceMessage {
    public var payload: [UInt8] { encodedPayload(self) }

    /// The message in a payload, or nil when it is not one.
    public init?(payload: [UInt8]) {
        guard payload.count <= 4096, let decoded = try? JSONDecoder().decode(Self.self, from: Data(payload)) else { return nil }
        self = decoded
    }
}

/// Where a beacon is: `zone` is the zone it is in, or was last in when away; `since` when it entered it, or when
/// it left (RFC 3339, event time). Where its site has a floor: its position in metres, the position's error and
/// each zone's probability (null elsewhere, and until the beacon has one).
public struct BeaconPresence: PresenceMessage, Equatable {
    public var site: String
    public var beaconID: String
    public var label: String?
    public var zone: String
    public var present: Bool
    public var since: String
    public var x: Double?
    public var y: Double?
    public var errorM: Double?
    public var zoneProbabilities: [String: Double]?

    public init(site: String, beaconID: String, label: String?, zone: String, present: Bool, sinceMicros: Int64) {
        self.site = site
        self.beaconID = beaconID
        self.label = label
        self.zone = zone
        self.present = present
        since = RFC3339.format(microseconds: sinceMicros)
    }

    enum CodingKeys: String, CodingKey {
        case site, label, zone, present, since, x, y
        case beaconID = "beacon_id"
        case errorM = "error_m"
        case zoneProbabilities = "zone_probabilities"
    }

    /// Every key, null included; metres to the centimetre.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(site, forKey: .site)
        try container.encode(beaconID, forKey: .beaconID)
        try container.encode(label, forKey: .label)
        try container.encode(zone, forKey: .zone)
        try container.encode(present, forKey: .present)
        try container.encode(since, forKey: .since)
        func centimetres(_ metres: Double?) -> Double? { metres.map { ($0 * 100).rounded() / 100 } }
        try container.encode(centimetres(x), forKey: .x)
        try container.encode(centimetres(y), forKey: .y)
        try container.encode(centimetres(errorM), forKey: .errorM)
        try container.encode(zoneProbabilities, forKey: .zoneProbabilities)
    }
}

/// How many beacons are in a zone now (each counts in one zone: the one it is placed in).
public struct ZonePresence: PresenceMessage, Equatable {
    public var site: String
    public var zone: String
    public var occupants: Int

    public init(site: String, zone: String, occupants: Int) {
        self.site = site
        self.zone = zone
        self.occupants = occupants
    }
}

/// A beacon's battery and temperature, as `beacon_health` has them (null where the beacon does not report one).
public struct BeaconCondition: PresenceMessage, Equatable {
    public var batteryMillivolts: Int?
    public var batteryPercent: Double?
    public var temperatureCelsius: Double?
    /// `ok`, `low_battery`, `rebooting` or `cloned` (`stale` is the view's, by the database's clock).
    public var status: String

    public init(batteryMillivolts: Int?, batteryPercent: Double?, temperatureCelsius: Double?, status: String) {
        self.batteryMillivolts = batteryMillivolts
        self.batteryPercent = batteryPercent
        self.temperatureCelsius = temperatureCelsius
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case status
        case batteryMillivolts = "battery_mv"
        case batteryPercent = "battery_pct"
        case temperatureCelsius = "temperature_c"
    }

    /// Every key, null included.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(batteryMillivolts, forKey: .batteryMillivolts)
        try container.encode(batteryPercent, forKey: .batteryPercent)
        try container.encode(temperatureCelsius, forKey: .temperatureCelsius)
        try container.encode(status, forKey: .status)
    }
}
