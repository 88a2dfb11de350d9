import BeaconWire
import Foundation

/// The MQTT output of receivers that run other projects' firmware, which `beaconflow bridge` turns into its agents'
/// sightings (docs/gateways.md, "Receivers of other firmware").
public enum PeerGatewayFormat: String, CaseIterable, Sendable {
    /// Theengs Gateway and OpenMQTTGateway: `<prefix>/<gateway>/BTtoMQTT/<address>`, JSON with `id` (the address)
    /// and `rssi`, and, where they publish the advertising data (Theengs Gateway `--publish_advdata 1`,
    /// OpenMQTTGateway's advertising data option), `manufacturerdata`, `servicedata` with `servicedatauuid`, and
    /// `name`, from which the advertisement is rebuilt for beaconflow's own decoders.
    case theengs
    /// ESPresense: `espresense/devices/<device id>/<room>`, JSON with `mac`, `id`, `rssi` (its own smoothed level)
    /// and `rssi@1m`, no advertising data: the beacons it names by their identity (iBeacon, AltBeacon, Eddystone
    /// UID) are rebuilt from that identity, any other device is heard by its address alone.
    case espresense

    /// The topics a bridge subscribes to by default.
    public var topicFilter: String {
        switch self {
        case .theengs: "home/+/BTtoMQTT/#"
        case .espresense: "espresense/devices/+/+"
        }
    }
}

/// Why a peer's message gave no advertising report.
public struct PeerGatewayError: Error, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The topic is not one of the format's device topics (a gateway's status or its own messages).
        case otherTopic = "other_topic"
        /// The payload is not the format's JSON, or a field has a value it cannot have.
        case invalid
    }

    public var code: Code
    public var message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// One peer message as the receiver that heard it and the advertising reports it stands for.
public struct PeerGatewayMessage: Sendable, Equatable {
    /// The gateway's name (Theengs, OpenMQTTGateway) or room (ESPresense) from the topic.
    public var receiver: String
    /// One report, or one for each of its frames where a message carries both manufacturer and service data:
    /// BlueZ (under Theengs Gateway) keeps what a device advertised last of each, so a beacon that sends an
    /// iBeacon and an Eddystone frame from one address arrives with both in every message, and each names a beacon.
    public var reports: [AdvertisingReport]

    public init(topic: String, payload: [UInt8], format: PeerGatewayFormat) throws(PeerGatewayError) {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch format {
        case .theengs:
            guard let index = levels.firstIndex(of: "BTtoMQTT"), index > 0, levels.count <= index + 2 else {
                throw PeerGatewayError(.otherTopic, "not a BTtoMQTT device topic: \(escapedForLog(topic.prefix(200)))")
            }
            receiver = levels[index - 1]
            reports = try Self.theengs(payload)
        case .espresense:
            guard levels.count == 4, levels[1] == "devices", !levels[3].isEmpty else {
                throw PeerGatewayError(.otherTopic, "not an ESPresense device topic: \(escapedForLog(topic.prefix(200)))")
            }
            receiver = levels[3]
            reports = [try Self.espresense(payload)]
        }
        guard !receiver.isEmpty else { throw PeerGatewayError(.otherTopic, "the topic names no receiver") }
    }

    /// The most a peer's message may be: a device's JSON is a few hundred bytes.
    static let maximumPayload = 4096

    private struct TheengsDevice: Decodable {
        var id: String
        var rssi: Double?
        var manufacturerdata: String?
        var servicedata: String?
        var servicedatauuid: String?
        var name: String?
    }

    private struct ESPresenseDevice: Decodable {
        var mac: String
        var id: String?
        var rssi: Double?
        var rssiAt1m: Double?

        enum CodingKeys: String, CodingKey {
            case mac, id, rssi
            case rssiAt1m = "rssi@1m"
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ payload: [UInt8]) throws(PeerGatewayError) -> T {
        guard payload.count <= maximumPayload else { throw PeerGatewayError(.invalid, "the payload is over \(maximumPayload) bytes") }
        do {
            return try JSONDecoder().decode(T.self, from: Data(payload))
        } catch {
            throw PeerGatewayError(.invalid, "the payload is not the expected JSON: \(Self.reason(error))")
        }
    }

    private static func reason(_ error: Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, _)?: "no field '\(key.stringValue)'"
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?:
            "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
        default: "not JSON"
        }
    }

    private static func theengs(_ payload: [UInt8]) throws(PeerGatewayError) -> [AdvertisingReport] {
        let device = try decode(TheengsDevice.self, payload)
        guard let address = DeviceAddress(device.id, kind: .public) else {
            throw PeerGatewayError(.invalid, "'id' is not a device address: \(escapedForLog(device.id.prefix(40)))")
        }
        var frames: [AdvertisingDataBuilder] = []
        if let text = device.manufacturerdata {
            guard let bytes = try? [UInt8](hex: text), bytes.count >= 2 else {
                throw PeerGatewayError(.invalid, "'manufacturerdata' is not hex with a company id")
            }
            var data = AdvertisingDataBuilder()
            try data.add(0xFF, bytes)
            frames.append(data)
        }
        if let text = device.servicedata {
            guard let bytes = try? [UInt8](hex: text) else { throw PeerGatewayError(.invalid, "'servicedata' is not hex") }
            guard let uuid = device.servicedatauuid.flatMap(serviceUUID) else {
                throw PeerGatewayError(.invalid, "'servicedata' without a 16-, 32- or 128-bit 'servicedatauuid'")
            }
            var data = AdvertisingDataBuilder()
            try data.add(uuid.type, uuid.bytes + bytes)
            frames.append(data)
        }
        if frames.isEmpty { frames.append(AdvertisingDataBuilder()) }
        let level = try rssi(device.rssi)
        var reports: [AdvertisingReport] = []
        for var data in frames {
            if let name = device.name, !name.isEmpty { try data.add(0x09, Array(name.utf8.prefix(29))) }
            reports.append(
                AdvertisingReport(eventType: 3, isExtended: false, address: addressWithKind(address), rssi: level, data: data.bytes))
        }
        return reports
    }

    private static func espresense(_ payload: [UInt8]) throws(PeerGatewayError) -> AdvertisingReport {
        let device = try decode(ESPresenseDevice.self, payload)
        guard device.mac.count == 12, let value = UInt64(device.mac, radix: 16) else {
            throw PeerGatewayError(.invalid, "'mac' is not 12 hex digits: \(escapedForLog(device.mac.prefix(40)))")
        }
        var data: [UInt8] = []
        if let id = device.id, let identity = try espresenseIdentity(id) {
            // ESPresense's level at 1 m; the usual one when it has none.
            let power = device.rssiAt1m.map { Int8(clamping: Int($0.rounded())) } ?? BeaconIdentity.usualPowerAt1m
            data = identity.advertisingData(powerAt1m: power) ?? []
        }
        return AdvertisingReport(
            eventType: 3, isExtended: false, address: addressWithKind(DeviceAddress(value: value, kind: .public)),
            rssi: try rssi(device.rssi), data: data)
    }

    /// The identity of a beacon ESPresense names by it: `iBeacon:<uuid>-<major>-<minor>`,
    /// `altBeacon:<uuid>-<major>-<minor>` or `eddy:<namespace>-<instance>`. Any other id names none.
    private static func espresenseIdentity(_ id: String) throws(PeerGatewayError) -> BeaconIdentity? {
        guard let colon = id.firstIndex(of: ":") else { return nil }
        let kind = id[..<colon]
        let rest = String(id[id.index(after: colon)...])
        switch kind {
        case "iBeacon", "altBeacon":
            // <uuid with its four dashes>-<major>-<minor>
            let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 7, let uuid = try? [UInt8](hex: parts[0..<5].joined()), uuid.count == 16,
                let major = UInt16(parts[5]), let minor = UInt16(parts[6])
            else {
                throw PeerGatewayError(.invalid, "'id' is not \(kind):<uuid>-<major>-<minor>: \(escapedForLog(id.prefix(80)))")
            }
            let bytes = uuid + [UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF)]
            return BeaconIdentity(kind: kind == "iBeacon" ? .iBeacon : .altBeacon, bytes: bytes)
        case "eddy":
            // ESPresense prints the namespace's fifth byte twice (eleven bytes for ten); an id of ten is taken as is.
            let parts = rest.split(separator: "-")
            guard parts.count == 2, var namespace = try? [UInt8](hex: parts[0]), let instance = try? [UInt8](hex: parts[1]), instance.count == 6,
                namespace.count == 10 || (namespace.count == 11 && namespace[4] == namespace[5])
            else {
                throw PeerGatewayError(.invalid, "'id' is not eddy:<namespace>-<instance>: \(escapedForLog(id.prefix(80)))")
            }
            if namespace.count == 11 { namespace.remove(at: 5) }
            return BeaconIdentity(kind: .eddystone, bytes: namespace + instance)
        default:
            return nil
        }
    }

    /// A whole dBm level a receiver can report (-127 to 20); 127, what a controller reports when it has none
    /// (Theengs Gateway passes it on), is none, as it is from a controller of ours.
    private static func rssi(_ value: Double?) throws(PeerGatewayError) -> Int8? {
        guard let value, value.isFinite, (-127...20).contains(value.rounded()) || value == 127 else {
            throw PeerGatewayError(.invalid, "'rssi' is missing or not a level in dBm")
        }
        return value == 127 ? nil : Int8(value.rounded())
    }

    /// Neither format says whether an address is public or random: one whose two top bits are set is taken as a
    /// random static address (most beacons'), any other as public.
    private static func addressWithKind(_ address: DeviceAddress) -> DeviceAddress {
        DeviceAddress(value: address.value, kind: address.value >> 46 == 0b11 ? .random : .public)
    }

    /// A service data UUID as its AD type and little-endian bytes: `feaa`, `0xfeaa`, 8 or 32 hex digits (dashes
    /// allowed).
    private static func serviceUUID(_ text: String) -> (type: UInt8, bytes: [UInt8])? {
        guard let bytes = try? [UInt8](hex: text) else { return nil }
        switch bytes.count {
        case 2: return (0x16, bytes.reversed())
        case 4: return (0x20, bytes.reversed())
        case 16: return (0x21, bytes.reversed())
        default: return nil
        }
    }
}

/// Advertising data built from AD structures: a length byte, the type, the bytes.
private struct AdvertisingDataBuilder {
    private(set) var bytes: [UInt8] = []

    /// Legacy advertising data holds 31 bytes; an extended advertisement up to 254 in one structure.
    mutating func add(_ type: UInt8, _ content: [UInt8]) throws(PeerGatewayError) {
        guard content.count <= 253 else { throw PeerGatewayError(.invalid, "an advertising data field is over 253 bytes") }
        bytes += [UInt8(content.count + 1), type] + content
    }
}
