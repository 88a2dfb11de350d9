import CBlueZ
import Glibc

/// A raw HCI socket on one adapter, filtered to the events scanning needs. The one Swift wrapper of libbluetooth's
/// socket interface: blocking calls, for a thread of their own.
public struct HCISocket: Sendable {
    /// What went wrong, with what to do about it.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var operation: String
        public var errno: Int32
        public var message: String

        public var description: String { message }
    }

    public let descriptor: Int32

    /// Wraps an existing descriptor that speaks H4-framed HCI (a test's socketpair).
    public init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Opens `hciN` (a name like "hci0") on the raw channel and sets the event filter.
    public static func open(device name: String) throws(Failure) -> HCISocket {
        guard name.hasPrefix("hci"), let index = UInt16(name.dropFirst(3)) else {
            throw Failure(operation: "open", errno: EINVAL, message: "'\(name)' is not an adapter name like hci0")
        }
        let descriptor = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard descriptor >= 0 else { throw failure("socket", errno, device: name) }
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(AF_BLUETOOTH)
        address.hci_dev = index
        address.hci_channel = UInt16(HCI_CHANNEL_RAW)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
            }
        }
        guard bound == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw failure("bind", error, device: name)
        }
        // HCI event packets only: Command Complete (0x0E), Command Status (0x0F), LE Meta (0x3E).
        var filter = hci_filter()
        filter.type_mask = 1 << UInt32(HCI_EVENT_PKT)
        filter.event_mask.0 = (1 << 0x0E) | (1 << 0x0F)
        filter.event_mask.1 = 1 << (0x3E - 32)
        let filtered = setsockopt(descriptor, SOL_HCI, HCI_FILTER, &filter, socklen_t(MemoryLayout<hci_filter>.size))
        guard filtered == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw failure("setsockopt", error, device: name)
        }
        return HCISocket(descriptor: descriptor)
    }

    /// Opens a raw HCI socket bound to no adapter, on which the kernel reports adapters registered, removed,
    /// brought up and taken down (the Stack Internal event, 0xFD): `AdapterEvent.parse` reads them.
    public static func openAdapterEvents() throws(Failure) -> HCISocket {
        let descriptor = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard descriptor >= 0 else { throw failure("socket", errno, device: "the adapters") }
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(AF_BLUETOOTH)
        address.hci_dev = UInt16(HCI_DEV_NONE)
        address.hci_channel = UInt16(HCI_CHANNEL_RAW)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
            }
        }
        var filter = hci_filter()
        filter.type_mask = 1 << UInt32(HCI_EVENT_PKT)
        filter.event_mask.1 = 1 << (UInt32(EVT_STACK_INTERNAL) & 63 - 32)
        guard bound == 0,
            setsockopt(descriptor, SOL_HCI, HCI_FILTER, &filter, socklen_t(MemoryLayout<hci_filter>.size)) == 0
        else {
            let error = errno
            Glibc.close(descriptor)
            throw failure("bind", error, device: "the adapters")
        }
        return HCISocket(descriptor: descriptor)
    }

    public func write(_ packet: [UInt8]) throws(Failure) {
        let written = packet.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == packet.count else { throw Self.failure("write", errno, device: "the adapter") }
    }

    /// Reads one packet, waiting at most `timeoutMilliseconds`; nil when none came.
    public func read(timeoutMilliseconds: Int32, into buffer: inout [UInt8]) throws(Failure) -> [UInt8]? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, timeoutMilliseconds)
        if ready < 0 {
            if errno == EINTR { return nil }
            throw Self.failure("poll", errno, device: "the adapter")
        }
        guard ready > 0 else { return nil }
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return nil }
            throw Self.failure("read", errno, device: "the adapter")
        }
        guard count > 0 else {
            throw Failure(operation: "read", errno: 0, message: "the adapter's socket was closed (adapter removed?)")
        }
        return Array(buffer[0..<count])
    }

    public func close() { Glibc.close(descriptor) }

    /// The errors users meet, turned into what to do about them.
    static func failure(_ operation: String, _ error: Int32, device: String) -> Failure {
        let advice: String
        switch error {
        case EAFNOSUPPORT:
            advice = "Bluetooth sockets are not available: this kernel has no Bluetooth support, or the agent is"
                + " not in the host's network namespace (a container needs host networking, e.g. network_mode: host)"
        case ENODEV:
            advice = "there is no adapter \(device) (list them with `btmgmt info` or `hciconfig -a`)"
        case EPERM, EACCES:
            advice = "scanning needs CAP_NET_RAW and CAP_NET_ADMIN: run `sudo setcap cap_net_raw,cap_net_admin+eip"
                + " $(command -v beaconflow)`, or in the systemd unit AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN"
        case EBUSY:
            advice = "\(device) is held by another program (another user of its HCI channel); stop it first"
        case ENETDOWN:
            advice = "\(device) is down: `sudo btmgmt --index \(device.dropFirst(3)) power on` or `bluetoothctl power on`"
        default:
            advice = String(cString: strerror(error))
        }
        return Failure(operation: operation, errno: error, message: "\(operation) on \(device) failed: \(advice)")
    }
}
