import BeaconWire
import BlueZHCI
import Foundation
import Logging
import Testing
@testable import BeaconAgent

/// An ATT server with a fixed attribute table, answering as a device with the default 23-byte MTU does:
/// at most 3 services or characteristics per response, Error Response 0x0A when nothing is left.
struct FakeGATTServer: Sendable {
    struct Characteristic: Sendable {
        var declaration: UInt16
        var uuid: UInt16
        /// The value, or the ATT error the device answers a read with.
        var value: Result<[UInt8], ATTFailure>
        var valueHandle: UInt16 { declaration + 1 }
    }

    struct ATTFailure: Error, Sendable { var code: UInt8 }

    var services: [(uuid: UInt16, start: UInt16, end: UInt16)]
    var characteristics: [Characteristic]

    /// A typical beacon: Generic Access, Battery, Device Information, and a vendor service.
    static let beacon = FakeGATTServer(
        services: [(0x1800, 0x0001, 0x0007), (0x180F, 0x0008, 0x000B), (0x180A, 0x000C, 0x001C), (0xFE59, 0x001D, 0xFFFF)],
        characteristics: [
            Characteristic(declaration: 0x0002, uuid: 0x2A00, value: .success(Array("Beacon".utf8))),
            Characteristic(declaration: 0x0009, uuid: 0x2A19, value: .success([87])),
            Characteristic(declaration: 0x000D, uuid: 0x2A29, value: .success(Array("Acme Beacons".utf8))),
            Characteristic(declaration: 0x000F, uuid: 0x2A24, value: .success(Array("AB-100".utf8))),
            Characteristic(declaration: 0x0011, uuid: 0x2A25, value: .failure(ATTFailure(code: 0x05))),  // authentication
            Characteristic(declaration: 0x0013, uuid: 0x2A26, value: .success(Array("2.4.1".utf8))),
            Characteristic(declaration: 0x0015, uuid: 0x2A27, value: .success(Array("C".utf8))),
            Characteristic(declaration: 0x0017, uuid: 0x2A28, value: .success(Array("2.4.1-rc3".utf8))),
            Characteristic(declaration: 0x0019, uuid: 0x2A23, value: .success([1, 2, 3, 4, 5, 6, 7, 8])),
            Characteristic(declaration: 0x001B, uuid: 0x2A50, value: .success([1, 0x0D, 0, 0, 0, 0x10, 0])),
            Characteristic(declaration: 0x001E, uuid: 0xFF01, value: .success([0])),
        ])

    func answer(_ request: [UInt8]) -> [UInt8] {
        func le(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
        func notFound(_ handle: UInt16) -> [UInt8] { [0x01, request[0]] + le(handle) + [0x0A] }
        func handle(_ offset: Int) -> UInt16 { UInt16(request[offset]) | UInt16(request[offset + 1]) << 8 }
        switch request.first {
        case 0x10:
            let from = handle(1)
            let found = services.filter { $0.start >= from }.prefix(3)
            guard !found.isEmpty else { return notFound(from) }
            var response: [UInt8] = [0x11, 6]
            for service in found { response += le(service.start) + le(service.end) + le(service.uuid) }
            return response
        case 0x08:
            let from = handle(1)
            let to = handle(3)
            let found = characteristics.filter { $0.declaration >= from && $0.declaration <= to }.prefix(3)
            guard !found.isEmpty else { return notFound(from) }
            var response: [UInt8] = [0x09, 7]
            for characteristic in found {
                response += le(characteristic.declaration) + [0x02] + le(characteristic.valueHandle) + le(characteristic.uuid)
            }
            return response
        case 0x0A:
            let wanted = handle(1)
            guard let characteristic = characteristics.first(where: { $0.valueHandle == wanted }) else {
                return [0x01, 0x0A] + le(wanted) + [0x01]  // invalid handle
            }
            switch characteristic.value {
            case .success(let value): return [0x0B] + value.prefix(22)
            case .failure(let failure): return [0x01, 0x0A] + le(wanted) + [failure.code]
            }
        default:
            return [0x01, request.first ?? 0, 0, 0, 0x06]  // request not supported
        }
    }
}

/// Runs a poll against `server`; returns the final step and how many requests it took.
func poll(_ server: FakeGATTServer, limit: Int = 100) -> (ATTClient.Step, Int) {
    var client = ATTClient()
    var step = client.start()
    var requests = 0
    while case .send(let request) = step, requests < limit {
        requests += 1
        step = client.receive(server.answer(request))
    }
    return (step, requests)
}

@Suite struct ATTClientTests {
    @Test func readsBatteryAndDeviceInformation() {
        let (step, requests) = poll(.beacon)
        guard case .finished(let readings, let refused) = step else {
            Issue.record("poll did not finish: \(step)")
            return
        }
        #expect(readings == [
            .init(characteristic: 0x2A19, value: [87]),
            .init(characteristic: 0x2A29, value: Array("Acme Beacons".utf8)),
            .init(characteristic: 0x2A24, value: Array("AB-100".utf8)),
            .init(characteristic: 0x2A26, value: Array("2.4.1".utf8)),
            .init(characteristic: 0x2A27, value: Array("C".utf8)),
            .init(characteristic: 0x2A28, value: Array("2.4.1-rc3".utf8)),
            .init(characteristic: 0x2A23, value: [1, 2, 3, 4, 5, 6, 7, 8]),
        ])
        #expect(refused == [0x2A25: 0x05])
        // 2 service pages (the second reaches 0xFFFF), 1 + 1 (not found) for Battery, 3 + 1 for Device
        // Information, 8 reads.
        #expect(requests == 2 + 2 + 4 + 8)
    }

    /// A listed characteristic is found in whichever service holds it (here the date time 0x2A50 of the Device
    /// Information service and the vendor service's 0xFF01), and read beside the usual ones.
    @Test func listedCharacteristicsAreReadToo() {
        var client = ATTClient(extraCharacteristics: [0x2A50, 0xFF01, 0x2A6E])
        var step = client.start()
        var requests = 0
        while case .send(let request) = step, requests < 100 {
            requests += 1
            step = client.receive(FakeGATTServer.beacon.answer(request))
        }
        guard case .finished(let readings, _) = step else {
            Issue.record("poll did not finish: \(step)")
            return
        }
        #expect(readings.map(\.characteristic) == [0x2A19, 0x2A29, 0x2A24, 0x2A26, 0x2A27, 0x2A28, 0x2A23, 0x2A50, 0xFF01])
        #expect(readings.last?.value == [0])
    }

    @Test func aDeviceWithoutTheServicesGivesNothing() {
        let server = FakeGATTServer(services: [(0x1800, 1, 0xFFFF)], characteristics: [])
        let (step, requests) = poll(server)
        #expect(step == .finished(readings: [], refused: [:]))
        #expect(requests == 1)
    }

    @Test func garbageAnswersEndThePollWithAReason() {
        var client = ATTClient()
        _ = client.start()
        guard case .failed(let reason) = client.receive([0x1B, 0x03, 0x00, 0x01]) else {
            Issue.record("a notification was taken for an answer")
            return
        }
        #expect(reason.contains("Read By Group Type"))
        for length in 0..<6 {
            var truncated = ATTClient()
            _ = truncated.start()
            _ = truncated.receive(Array([0x11, 0x06, 0x01, 0x00, 0xFF, 0xFF][..<length]))
        }
    }
}

/// The ATT server double on the far end of a socketpair, with a notification and an indication thrown in, and,
/// as BlueZ's daemon does on a real peripheral, its own Exchange MTU and service discovery requests to the agent
/// on the same bearer before its first answer.
final class FakeATTPeer: @unchecked Sendable {
    let socket: ATTSocket
    private let descriptor: Int32
    private(set) var confirmations = 0
    /// What the agent answered to the peer's requests.
    private(set) var answers: [[UInt8]] = []
    private let done = DispatchSemaphore(value: 0)

    /// `closingAfter`: the peer drops the link on that request instead of answering it.
    init(_ server: FakeGATTServer?, answering: Bool = true, closingAfter: Int? = nil) {
        var pair: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        socket = ATTSocket(descriptor: pair[0])
        descriptor = pair[1]
        let descriptor = pair[1]
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 512)
            var requests = 0
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count <= 0 { break }
                let pdu = Array(buffer[0..<count])
                if pdu == [0x1E] {
                    confirmations += 1
                    continue
                }
                if pdu.first == 0x03 || pdu.first == 0x01 {
                    answers.append(pdu)
                    continue
                }
                requests += 1
                if requests == closingAfter {
                    shutdown(descriptor, Int32(SHUT_RDWR))
                    break
                }
                guard answering, let server else { continue }
                if requests == 1 {
                    send([0x02, 0x00, 0x02])  // Exchange MTU Request, 512
                    send([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])  // Read By Group Type Request, primary services
                }
                if requests == 2 { send([0x1B, 0x20, 0x00, 0x01]) }  // a notification
                if requests == 3 { send([0x1D, 0x21, 0x00, 0x02]) }  // an indication, to confirm
                send(server.answer(pdu))
            }
            done.signal()
        }
    }

    private func send(_ pdu: [UInt8]) {
        _ = pdu.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// Closes the agent's end and waits (10 s at most) for the peer to see it closed.
    func finish() {
        socket.close()
        #expect(done.wait(timeout: .now() + 10) == .success, "the peer never saw the agent's socket close")
        close(descriptor)
    }
}

@Suite struct GATTPollerTests {
    let address = DeviceAddress(value: 0xC0FF_EE00_0042, kind: .random)

    @Test func aPollOverASocketReadsTheDeviceAndConfirmsIndications() throws {
        let peer = FakeATTPeer(.beacon)
        let result = try GATTPoller.poll(peer.socket, address: address, timeout: .seconds(5))
        peer.finish()
        #expect(result.address == address)
        #expect(result.readings.first == .init(characteristic: 0x2A19, value: [87]))
        #expect(result.readings.count == 7)
        #expect(result.refused == [0x2A25: 0x05])
        #expect(peer.confirmations == 1)
        // Its MTU (ATT's default), and no services to find.
        #expect(peer.answers == [[0x03, 23, 0], [0x01, 0x10, 0x01, 0x00, 0x0A]])
    }

    /// Requests from the peer get the agent's answer; its responses, notifications, indications and commands do not.
    @Test func thePeersOwnRequestsAreAnswered() {
        #expect(ATTClient.answer(toPeerRequest: [0x02, 0x00, 0x02]) == [0x03, 23, 0])
        #expect(ATTClient.answer(toPeerRequest: [0x08, 0x05, 0x00, 0xFF, 0xFF, 0x03, 0x28]) == [0x01, 0x08, 0x05, 0x00, 0x0A])
        #expect(ATTClient.answer(toPeerRequest: [0x12, 0x03, 0x00, 0x01]) == [0x01, 0x12, 0x00, 0x00, 0x06])
        for pdu: [UInt8] in [[0x0B, 0x57], [0x01, 0x10, 0x01, 0x00, 0x0A], [0x1B, 0x20, 0x00], [0x1D, 0x21, 0x00], [0x52, 0x03, 0x00, 0x01], [0x1E], []] {
            #expect(ATTClient.answer(toPeerRequest: pdu) == nil, "\(pdu)")
        }
    }

    /// A failed poll is tried again after the retry delay, doubling with each failure in a row, never later than
    /// the poll interval; a good poll waits the interval.
    @Test func failedPollsAreRetriedWithBackoff() {
        var poller = GATTPoller(targets: [address], interval: .seconds(3600), logger: Logger(label: "gatt-test"))
        poller.retryAfterFailure = .seconds(30)
        #expect([0, 1, 2, 3, 7, 100].map { poller.delay(afterFailures: $0) } == [3600, 30, 60, 120, 1920, 3600].map { .seconds($0) })
    }

    /// A device that drops the link in the middle of the poll (at its fifth request, reading) ends the poll with the
    /// socket's error, at once.
    @Test func aLinkDroppedMidReadEndsThePoll() throws {
        let peer = FakeATTPeer(.beacon, closingAfter: 5)
        let started = ContinuousClock.now
        #expect(throws: (any Error).self) { try GATTPoller.poll(peer.socket, address: address, timeout: .seconds(5)) }
        #expect(ContinuousClock.now - started < .seconds(3))
        peer.finish()
    }

    @Test func aSilentDeviceTimesOut() throws {
        let peer = FakeATTPeer(nil, answering: false)
        let started = ContinuousClock.now
        #expect(throws: SourceError.self) { try GATTPoller.poll(peer.socket, address: address, timeout: .seconds(1)) }
        #expect(ContinuousClock.now - started < .seconds(3))
        peer.finish()
    }
}
