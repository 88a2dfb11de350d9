/// What the kernel says of an adapter on a raw HCI socket bound to no adapter: the Stack Internal event (0xFD) of
/// type Device (1) carries the change and the adapter's index (BlueZ's hci.h: HCI_DEV_REG 1 ... HCI_DEV_DOWN 4).
public enum AdapterEvent: Equatable, Sendable {
    case registered
    case removed
    case up
    case down

    /// The event in an H4 packet about adapter `index`, or nil (another adapter, another event, malformed).
    public static func parse(_ packet: [UInt8], index: UInt16) -> AdapterEvent? {
        // 0x04 (event), 0xFD, length, type (2, little-endian), event (2), device index (2).
        guard packet.count >= 9, packet[0] == 0x04, packet[1] == 0xFD, packet[3] == 0x01, packet[4] == 0x00,
            UInt16(packet[7]) | UInt16(packet[8]) << 8 == index
        else { return nil }
        switch UInt16(packet[5]) | UInt16(packet[6]) << 8 {
        case 1: return .registered
        case 2: return .removed
        case 3: return .up
        case 4: return .down
        default: return nil
        }
    }
}
