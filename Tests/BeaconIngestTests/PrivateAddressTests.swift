@testable import BeaconIngest
import BeaconWire
import Foundation
import Testing

/// Phones and watches by their identity resolving keys, in the registry.
@Suite struct PrivateAddressTests {
    /// The Core Specification's sample IRK (Vol 3 Part H, Appendix D.7), most significant octet first.
    static let irk: [UInt8] = [0xEC, 0x02, 0x34, 0xA3, 0x57, 0xC8, 0xAD, 0x05, 0x34, 0x10, 0x10, 0xA6, 0x0A, 0x39, 0x7D, 0x9B]

    /// In hex as given, or in base64 as iOS keeps it (least significant first); the id must be a name of its own.
    @Test func theRegistryTakesAnIRKInHexOrBase64() throws {
        let base64 = Data(Self.irk.reversed()).base64EncodedString()
        let sites = try SitesConfiguration.parse(
            """
            sites: [{id: hq, zones: [{id: a}], agents: [{id: hq-a1, zone: a}]}]
            beacons:
              - {id: phone-alice, label: Alice, irk: ec0234a357c8ad05341010a60a397d9b}
              - {id: watch-bob, irk: "irk:\(base64)"}
            """)
        #expect(sites.irks.map(\.beaconID) == ["phone-alice", "watch-bob"])
        #expect(sites.irks.allSatisfy { $0.irk == Self.irk })
        for (line, reason) in [
            ("{id: phone-alice, irk: ec0234}", "irk must be 32 hex digits"),
            ("{id: \"mac:70:81:94:0D:FB:AA\", irk: ec0234a357c8ad05341010a60a397d9b}", "give it an id of its own"),
        ] {
            #expect(throws: SitesError.self) {
                try SitesConfiguration.parse("sites: [{id: hq, zones: [{id: a}], agents: [{id: hq-a1, zone: a}]}]\nbeacons:\n  - \(line)")
            }
            do {
                _ = try SitesConfiguration.parse("sites: [{id: hq, zones: [{id: a}], agents: [{id: hq-a1, zone: a}]}]\nbeacons:\n  - \(line)")
            } catch {
                #expect("\(error)".contains(reason), "\(error)")
            }
        }
    }

    /// Every rotated address of the device is the registry beacon; other addresses are nobody's; each address is
    /// worked out once and remembered, within the bound.
    @Test func rotatingAddressesAreOneBeacon() {
        var resolver = PrivateAddressResolver(keys: [("watch-bob", [UInt8](repeating: 7, count: 16)), ("phone-alice", Self.irk)])
        resolver.maximumRemembered = 4
        for prand in [UInt32(0x70_8194), 0x41_0000, 0x7F_FFFF, 0x55_5555, 0x60_0001] {
            #expect(resolver.beaconID(of: ResolvablePrivateAddress.address(irk: Self.irk, prand: prand)) == "phone-alice")
        }
        #expect(resolver.beaconID(of: DeviceAddress(value: 0x70_8194_0DFB_AB, kind: .random)) == nil)
        #expect(resolver.beaconID(of: DeviceAddress(value: 0x70_8194_0DFB_AA, kind: .public)) == nil)
        #expect(resolver.beaconID(of: DeviceAddress(value: 0x70_8194_0DFB_AA, kind: .random)) == "phone-alice")
    }
}
