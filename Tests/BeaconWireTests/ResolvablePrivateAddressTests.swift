import BeaconWire
import Testing

@Suite struct ResolvablePrivateAddressTests {
    /// The Core Specification's sample data for ah (Vol 3 Part H, Appendix D.7): IRK ec0234a357c8ad05341010a60a397d9b,
    /// prand 708194, hash 0dfbaa.
    static let irk: [UInt8] = [0xEC, 0x02, 0x34, 0xA3, 0x57, 0xC8, 0xAD, 0x05, 0x34, 0x10, 0x10, 0xA6, 0x0A, 0x39, 0x7D, 0x9B]

    @Test func theSpecificationsSampleData() {
        #expect(ResolvablePrivateAddress.hash(irk: Self.irk, prand: 0x70_8194) == 0x0D_FBAA)
        let address = DeviceAddress(value: 0x70_8194_0DFB_AA, kind: .random)
        #expect(ResolvablePrivateAddress.address(irk: Self.irk, prand: 0x70_8194) == address)
        #expect(ResolvablePrivateAddress.resolves(address, irk: Self.irk))
    }

    /// Only a random address with the top bits 0b01 and the right hash resolves, and only with its IRK.
    @Test func otherAddressesAndKeysDoNotResolve() {
        var other = Self.irk
        other[0] ^= 1
        let address = ResolvablePrivateAddress.address(irk: Self.irk, prand: 0x12_3456)
        #expect(ResolvablePrivateAddress.resolves(address, irk: Self.irk))
        #expect(!ResolvablePrivateAddress.resolves(address, irk: other))
        #expect(!ResolvablePrivateAddress.resolves(DeviceAddress(value: address.value, kind: .public), irk: Self.irk))
        #expect(!ResolvablePrivateAddress.resolves(DeviceAddress(value: address.value ^ 1, kind: .random), irk: Self.irk))
        // A static random address (top bits 0b11) is not resolvable at all.
        #expect(!ResolvablePrivateAddress.isResolvable(DeviceAddress(value: 0xC0_0000_0000_01, kind: .random)))
    }
}
