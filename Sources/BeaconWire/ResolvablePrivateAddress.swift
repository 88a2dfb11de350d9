/// Resolvable private addresses (Bluetooth Core Specification, Vol 6 Part B §1.3.2.2 and Vol 3 Part H §2.2.2): a
/// phone or watch with LE privacy advertises from a random address that changes every few minutes, whose top 24
/// bits (`prand`, the two highest 0b01) are random and whose low 24 bits are `ah(IRK, prand)`. Whoever has the
/// device's identity resolving key (IRK) can tell that each such address is the device's.
public enum ResolvablePrivateAddress {
    /// Whether an address is a resolvable private one: random, its two top bits 0b01.
    public static func isResolvable(_ address: DeviceAddress) -> Bool {
        address.kind == .random && address.value >> 46 == 0b01
    }

    /// The random part an address carries (its top 24 bits).
    static func prand(of address: DeviceAddress) -> UInt32 { UInt32(truncatingIfNeeded: address.value >> 24) }

    /// `ah(k, r)`: the low 24 bits of AES-128 under the IRK of 13 zero octets followed by `prand` (the
    /// specification's octet order: most significant first, for the key as for the blocks).
    public static func hash(irk: [UInt8], prand: UInt32) -> UInt32 {
        let block = [UInt8](repeating: 0, count: 13) + [UInt8(truncatingIfNeeded: prand >> 16), UInt8(truncatingIfNeeded: prand >> 8), UInt8(truncatingIfNeeded: prand)]
        let out = AES128(key: irk).encrypt(block)
        return UInt32(out[13]) << 16 | UInt32(out[14]) << 8 | UInt32(out[15])
    }

    /// Whether the IRK (16 octets, most significant first) resolves the address.
    public static func resolves(_ address: DeviceAddress, irk: [UInt8]) -> Bool {
        guard irk.count == 16, isResolvable(address) else { return false }
        return hash(irk: irk, prand: prand(of: address)) == UInt32(truncatingIfNeeded: address.value & 0xFF_FFFF)
    }

    /// The resolvable private address a device with this IRK makes from `prand` (its two top bits forced to 0b01).
    public static func address(irk: [UInt8], prand: UInt32) -> DeviceAddress {
        let random = prand & 0x3F_FFFF | 0x40_0000
        return DeviceAddress(value: UInt64(random) << 24 | UInt64(hash(irk: irk, prand: random)), kind: .random)
    }
}
