import BeaconMessaging
import BeaconWire
import Testing

/// Messages of the peers' receiver firmware, in the forms their sources publish (Theengs Gateway's
/// `ble_gateway.py`: `manufacturerdata` is the company id, little-endian, then the data, in hex; `servicedatauuid`
/// the UUID's four hex digits; ESPresense's `BleFingerprint::fill`: `mac` as 12 hex digits, `id`, `rssi` with two
/// decimals, `rssi@1m`), turned into advertisements that beaconflow's own classifier names as it names the beacons'
/// own frames.
@Suite struct PeerGatewayMessageTests {
    func identity(_ message: PeerGatewayMessage) throws -> String? {
        try FrameClassifier.classify(message.reports[0].data[...]).identity?.identity?.description
    }

    @Test func theengsManufacturerDataIsAnIBeacon() throws {
        let message = try PeerGatewayMessage(
            topic: "home/kitchen/BTtoMQTT/C12ADE547355",
            payload: Array(#"{"id":"C1:2A:DE:54:73:55","rssi":-71,"brand":"GENERIC","model":"iBeacon","model_id":"IBEACON","type":"BCON","mfid":"4c00","uuid":"e2c56db5dffb48d2b060d0f5a71096e0","major":1,"minor":2,"txpower":-59,"manufacturerdata":"4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5"}"#.utf8),
            format: .theengs)
        #expect(message.receiver == "kitchen")
        #expect(message.reports[0].rssi == -71)
        #expect(message.reports[0].address == DeviceAddress("C1:2A:DE:54:73:55", kind: .random))
        #expect(try identity(message) == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")
    }

    /// Service data by its four hex digits (Theengs Gateway) or with `0x` (OpenMQTTGateway); a name is kept.
    @Test(arguments: ["feaa", "0xfeaa"])
    func theengsServiceDataIsAnEddystoneUID(uuid: String) throws {
        let message = try PeerGatewayMessage(
            topic: "home/OMG_ESP32_BLE/BTtoMQTT/0C6155001122",
            payload: Array(#"{"id":"0C:61:55:00:11:22","rssi":-80,"name":"tag","servicedatauuid":"\#(uuid)","servicedata":"00e200112233445566778899aabbccddeeff0000"}"#.utf8),
            format: .theengs)
        #expect(message.receiver == "OMG_ESP32_BLE")
        #expect(message.reports[0].address.kind == .public)
        #expect(try identity(message) == "eddystone:00112233445566778899:aabbccddeeff")
        #expect(message.reports[0].data.suffix(5) == [4, 0x09] + Array("tag".utf8))
    }

    /// BlueZ keeps the last manufacturer and service data of an address: a beacon that sends an iBeacon and an
    /// Eddystone UID from one address arrives with both (as Theengs Gateway published them in the real-radio test),
    /// and each is a report of its own, both with the name.
    @Test func bothFramesOfOneAddressAreBothHeard() throws {
        let message = try PeerGatewayMessage(
            topic: "home/kitchen/BTtoMQTT/00AA01010001",
            payload: Array(#"{"manufacturerdata": "4c000215e2c56db5dffb48d2b060d0f5a71096e000070009c5", "id": "00:AA:01:01:00:01", "rssi": -66, "name": "tag", "servicedatauuid": "feaa", "servicedata": "00ec0102030405060708090a0000000000e10000", "brand": "GENERIC", "model": "iBeacon", "model_id": "IBEACON", "type": "BCON", "mfid": "4c00", "uuid": "e2c56db5dffb48d2b060d0f5a71096e0", "major": 7, "minor": 9, "txpower": -59}"#.utf8),
            format: .theengs)
        let identities = try message.reports.map { try FrameClassifier.classify($0.data[...]).identity?.identity?.description }
        #expect(identities == ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:9", "eddystone:0102030405060708090a:0000000000e1"])
        #expect(message.reports.allSatisfy { $0.rssi == -66 && $0.data.suffix(5) == [4, 0x09] + Array("tag".utf8) })
    }

    /// Without advertising data (Theengs Gateway's default), a device is heard by its address alone.
    @Test func theengsWithoutAdvertisingDataIsAnAddress() throws {
        let message = try PeerGatewayMessage(
            topic: "home/TheengsGateway/BTtoMQTT/C12ADE547355",
            payload: Array(#"{"id":"C1:2A:DE:54:73:55","rssi":-71,"model":"iBeacon","major":1,"minor":2}"#.utf8), format: .theengs)
        #expect(message.reports[0].data.isEmpty && message.reports[0].rssi == -71)
        // A controller without a level says 127 (HCI's "not available"), and Theengs Gateway passes it on.
        let unknown = try PeerGatewayMessage(
            topic: "home/TheengsGateway/BTtoMQTT/C12ADE547355", payload: Array(#"{"id":"C1:2A:DE:54:73:55","rssi":127}"#.utf8),
            format: .theengs)
        #expect(unknown.reports[0].rssi == nil)
    }

    /// ESPresense names beacons by their identity; rebuilt, they are the same beacons (its Eddystone namespace
    /// printed with its fifth byte twice, as ESPresense does).
    @Test func espresenseIdentitiesAreTheBeaconsOwn() throws {
        let beacon = try PeerGatewayMessage(
            topic: "espresense/devices/iBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-1-2/living-room",
            payload: Array(#"{"mac":"c12ade547355","id":"iBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-1-2","rssi@1m":-59,"rssi":-70.50,"rxAdj":0,"rssiVar":1.20,"distance":1.53,"var":0.10,"int":1020}"#.utf8),
            format: .espresense)
        #expect(beacon.receiver == "living-room")
        #expect(beacon.reports[0].rssi == -70 || beacon.reports[0].rssi == -71)
        #expect(beacon.reports[0].address == DeviceAddress("C1:2A:DE:54:73:55", kind: .random))
        #expect(try identity(beacon) == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")

        let eddystone = try PeerGatewayMessage(
            topic: "espresense/devices/eddy:0011223344445566778899-aabbccddeeff/office",
            payload: Array(#"{"mac":"0c6155001122","id":"eddy:0011223344445566778899-aabbccddeeff","rssi@1m":-61,"rssi":-80}"#.utf8),
            format: .espresense)
        #expect(try identity(eddystone) == "eddystone:00112233445566778899:aabbccddeeff")

        let alt = try PeerGatewayMessage(
            topic: "espresense/devices/altBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-7-8/office",
            payload: Array(#"{"mac":"0c6155001122","id":"altBeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0-7-8","rssi":-80}"#.utf8),
            format: .espresense)
        #expect(try identity(alt)?.hasPrefix("altbeacon:") == true)

        // A phone by its IRK, a Tile: heard by address.
        let phone = try PeerGatewayMessage(
            topic: "espresense/devices/irk:00112233445566778899aabbccddeeff/office",
            payload: Array(#"{"mac":"4f1122334455","id":"irk:00112233445566778899aabbccddeeff","rssi":-66}"#.utf8), format: .espresense)
        #expect(phone.reports[0].data.isEmpty && phone.reports[0].address.value == 0x4F11_2233_4455)
    }

    /// Another topic of the gateway is passed over; a device topic with a bad payload names what is wrong.
    @Test func otherTopicsAndBadPayloadsAreNamed() {
        for (topic, format) in [("home/kitchen/LWT", PeerGatewayFormat.theengs), ("espresense/rooms/office/status", .espresense)] {
            #expect(throws: PeerGatewayError.self) { try PeerGatewayMessage(topic: topic, payload: Array("online".utf8), format: format) }
            do {
                _ = try PeerGatewayMessage(topic: topic, payload: [], format: format)
            } catch {
                #expect(error.code == .otherTopic)
            }
        }
        let bad: [(String, String)] = [
            ("not json", "not the expected JSON: not JSON"),
            (#"{"rssi":-70}"#, "no field 'id'"),
            (#"{"id":"C1:2A:DE:54:73:55"}"#, "'rssi' is missing"),
            (#"{"id":"C1:2A:DE:54:73:55","rssi":-70,"manufacturerdata":"4c0"}"#, "'manufacturerdata' is not hex"),
            (#"{"id":"C1:2A:DE:54:73:55","rssi":-70,"servicedata":"00"}"#, "without a 16-, 32- or 128-bit"),
            (#"{"id":"nowhere","rssi":-70}"#, "'id' is not a device address"),
        ]
        for (payload, reason) in bad {
            do {
                _ = try PeerGatewayMessage(topic: "home/kitchen/BTtoMQTT/C12ADE547355", payload: Array(payload.utf8), format: .theengs)
                Issue.record("\(payload) was taken")
            } catch {
                #expect(error.code == .invalid && error.message.contains(reason), "\(payload): \(error)")
            }
        }
    }
}
