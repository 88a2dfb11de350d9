import CBlueZ
import Glibc

/// An LE L2CAP connection on the ATT channel (CID 4) to one device, for GATT reads. Blocking calls, for a thread
/// of their own.
public struct ATTSocket: Sendable {
    /// ATT's fixed L2CAP channel on LE links.
    static let attChannel: UInt16 = 4

    /// Packet I/O (the same SOCK_SEQPACKET semantics as an HCI socket).
    public let channel: HCISocket

    /// Wraps a connected descriptor (a test's socketpair).
    public init(descriptor: Int32) {
        channel = HCISocket(descriptor: descriptor)
    }

    /// Connects to `address` (big-endian in the low 48 bits), waiting at most `timeoutSeconds`.
    public static func connect(address: UInt64, random: Bool, timeoutSeconds: Int) throws(HCISocket.Failure) -> ATTSocket {
        let name = formatAddress(address)
        let descriptor = socket(AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_L2CAP)
        guard descriptor >= 0 else { throw HCISocket.failure("socket", errno, device: name) }
        var local = sockaddr_l2()
        local.l2_family = sa_family_t(AF_BLUETOOTH)
        local.l2_cid = attChannel.littleEndian
        local.l2_bdaddr_type = UInt8(BDADDR_LE_PUBLIC)
        var remote = local
        remote.l2_bdaddr_type = UInt8(random ? BDADDR_LE_RANDOM : BDADDR_LE_PUBLIC)
        // bdaddr_t is little-endian: the last byte of the written address first.
        withUnsafeMutableBytes(of: &remote.l2_bdaddr) { bytes in
            for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: address >> (8 * index)) }
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let size = socklen_t(MemoryLayout<sockaddr_l2>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, size) }
        }
        let connected = bound == 0 && withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, size) }
        } == 0
        guard connected else {
            let error = errno
            Glibc.close(descriptor)
            throw HCISocket.failure(bound == 0 ? "connect" : "bind", error, device: name)
        }
        return ATTSocket(descriptor: descriptor)
    }

    public func close() { channel.close() }

    static func formatAddress(_ address: UInt64) -> String {
        (0..<6).map { index in
            let byte = UInt8(truncatingIfNeeded: address >> (40 - 8 * index))
            return (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
        }.joined(separator: ":")
    }
}
