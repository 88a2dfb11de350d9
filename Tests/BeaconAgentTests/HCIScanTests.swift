import BeaconWire
import BlueZHCI
import Foundation
import WorkQueue
import Logging
import Synchronization
import TestServers
import Testing
@testable import BeaconAgent

/// A controller on the other end of a socketpair that speaks H4-framed HCI: it answers every command with
/// Command Complete (or the status it is told to refuse with), reports extended scanning support or not, and
/// once scanning is enabled sends the advertising events it was given. Scanned with the extended commands, it
/// reports legacy advertisements as a BT 5 controller does (the kernel's emulated ones included): in LE Extended
/// Advertising Reports with the legacy bit and the PDU's event bits, never in legacy reports.
final class FakeController: Sendable {
    struct State {
        var commands: [[UInt8]] = []
        var enables = 0
    }

    let hostSocket: HCISocket
    private let descriptor: Int32
    private let state = Mutex(State())
    private let stopped = Mutex(false)
    private let finished = DispatchSemaphore(value: 0)

    init(extended: Bool, refuse: [UInt16: UInt8] = [:], events: [[UInt8]], repeatEventsOnEveryEnable: Bool = true) {
        var pair: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        hostSocket = HCISocket(descriptor: pair[0])
        descriptor = pair[1]
        let descriptor = pair[1]
        let events = extended ? events.flatMap(Self.extendedReports(ofLegacy:)) : events
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 1024)
            var toSend: [[UInt8]] = []
            while !stopped.withLock({ $0 }) {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, toSend.isEmpty ? 20 : 0) > 0 {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count <= 0 { break }
                    let command = Array(buffer[0..<count])
                    guard command.count >= 4, command[0] == 0x01 else { continue }
                    let opcode = UInt16(command[1]) | UInt16(command[2]) << 8
                    let isEnable = (opcode == 0x200C && command[4] == 1) || (opcode == 0x2042 && command[4] == 1)
                    state.withLock {
                        $0.commands.append(command)
                        if isEnable { $0.enables += 1 }
                    }
                    var returned: [UInt8] = []
                    if opcode == HCIScanSession.readLocalSupportedCommands {
                        returned = [UInt8](repeating: 0xFF, count: 64)
                        returned[37] = extended ? 0xFF : 0x9F
                    }
                    let status = refuse[opcode] ?? 0
                    let parameters = [1, UInt8(opcode & 0xFF), UInt8(opcode >> 8), status] + returned
                    let reply = [0x04, 0x0E, UInt8(parameters.count)] + parameters
                    _ = reply.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                    if isEnable, status == 0, repeatEventsOnEveryEnable || state.withLock({ $0.enables == 1 }) {
                        toSend = events
                    }
                } else if !toSend.isEmpty {
                    let event = toSend.removeFirst()
                    _ = event.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                }
            }
            finished.signal()
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        finished.wait()
        close(descriptor)
    }

    /// Sends an event as if the controller produced it unasked (another program's command completing).
    func send(_ event: [UInt8]) {
        _ = event.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// An H4 LE Advertising Report event as the LE Extended Advertising Reports a BT 5 controller sends instead
    /// (Core Vol 4, Part E, §7.7.65.13: legacy PDUs keep their type in the event bits, with bit 4 set).
    static func extendedReports(ofLegacy event: [UInt8]) -> [[UInt8]] {
        var decoder = AdvertisingReportDecoder()
        guard event.count > 3, event[3] == AdvertisingReportDecoder.legacyReportSubevent,
            let reports = try? decoder.reports(fromEvent: Array(event.dropFirst()))
        else { return [event] }
        return reports.map { report in
            let type = report.advertisingEvent
            var parameters: [UInt8] = [AdvertisingReportDecoder.extendedReportSubevent, 1, UInt8(type), 0]
            parameters += [report.address.kind == .random ? 1 : 0] + report.address.hciBytes
            parameters += [0x01, 0x00, 0xFF, 0x7F, UInt8(bitPattern: report.rssi ?? 127), 0, 0, 0] + [UInt8](repeating: 0, count: 6)
            parameters += [UInt8(report.data.count)] + report.data
            return [0x04, AdvertisingReportDecoder.leMetaEvent, UInt8(parameters.count)] + parameters
        }
    }

    var enables: Int { state.withLock { $0.enables } }
    var opcodes: [UInt16] { state.withLock { $0.commands.map { UInt16($0[1]) | UInt16($0[2]) << 8 } } }
    var commands: [[UInt8]] { state.withLock { $0.commands } }
}

/// The LE advertising events of a capture fixture, H4 framed.
func advertisingEvents(_ name: String, limit: Int) throws -> [[UInt8]] {
    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: captureFixture(name))))
    var reader = CaptureReader()
    reader.append(bytes)
    var events: [[UInt8]] = []
    while events.count < limit, let record = try reader.next() {
        if record.kind == .event, record.packet.first == 0x3E { events.append([0x04] + record.packet) }
    }
    return events
}

@Suite(.timeLimit(.minutes(5))) struct HCIScanTests {
    let logger = Logger(label: "hci-test")

    /// Runs the source against `controller` until `until` holds (or 5 s), then stops it: on a thread of its own, as
    /// the agent runs it, not on one of the cooperative pool's few threads.
    func scan(
        _ controller: FakeController, configure: @escaping @Sendable (inout HCIScanSource) -> Void = { _ in },
        until: @escaping @Sendable ([TimedReport]) -> Bool
    ) async throws -> (reports: [TimedReport], error: Error?) {
        let logger = logger
        return try await onThread {
            var source = HCIScanSource(
                device: "hci0", parameters: ScanParameters(), logger: logger, socket: controller.hostSocket)
            configure(&source)
            let collected = Mutex<[TimedReport]>([])
            let stop = StopSignal()
            Thread.detachNewThread { stop.wait(until: .now + .seconds(5)); stop.stop() }
            var failure: Error?
            do {
                try source.run(
                    deliver: { reports in if until(collected.withLock { $0 += reports; return $0 }) { stop.stop() } },
                    stop: stop)
            } catch {
                failure = error
            }
            controller.stop()
            return (collected.withLock { $0 }, failure)
        }
    }

    @Test func extendedScanningOnABluetooth5Controller() async throws {
        let events = try advertisingEvents("mabip-btsnoop_hci.log", limit: 40)
        var decoder = AdvertisingReportDecoder()
        let legacy = try events.flatMap { try decoder.reports(fromEvent: Array($0.dropFirst())) }
        let controller = FakeController(extended: true, events: events)
        let result = try await scan(controller) { $0.count >= legacy.count }
        #expect(result.error == nil)
        // The same advertisements, now in extended reports: same addresses, data, RSSI and advertising event.
        let reports = result.reports.map(\.report)
        #expect(reports.allSatisfy(\.isExtended) && reports.count == legacy.count)
        #expect(reports.map(\.address) == legacy.map(\.address) && reports.map(\.data) == legacy.map(\.data))
        #expect(reports.map(\.rssi) == legacy.map(\.rssi))
        #expect(reports.map(\.advertisingEvent) == legacy.map(\.advertisingEvent))
        // Supported commands first, then only extended commands, and scanning off again at the end.
        #expect(controller.opcodes == [0x1002, 0x2042, 0x2041, 0x2042, 0x2042])
        let commands = controller.commands
        #expect(commands[2] == [0x01, 0x41, 0x20, 8, 0, 0, 0x01, 0, 160, 0, 160, 0])  // passive, 100 ms / 100 ms
        #expect(commands[3] == [0x01, 0x42, 0x20, 6, 1, 0, 0, 0, 0, 0])  // enabled, duplicates not filtered
        #expect(commands[4] == [0x01, 0x42, 0x20, 6, 0, 0, 0, 0, 0, 0])
    }

    @Test func legacyScanningAndTheRecordedCapture() async throws {
        let events = try advertisingEvents("wban-python-btsnoop_hci.log", limit: 30)
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let controller = FakeController(extended: false, events: events)
        let result = try await scan(controller, configure: {
            $0.parameters.active = true
            $0.recordPath = directory.path + "/record.btsnoop"
        }) { $0.count >= 30 }
        #expect(result.error == nil)
        #expect(controller.opcodes == [0x1002, 0x200C, 0x200B, 0x200C, 0x200C])
        #expect(controller.commands[2] == [0x01, 0x0B, 0x20, 7, 1, 160, 0, 160, 0, 0, 0])  // active
        // The recording holds every command and event, readable as a capture.
        var reader = CaptureReader()
        reader.append(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/record.btsnoop")))
        var recorded: [CaptureRecord] = []
        while let record = try reader.next() { recorded.append(record) }
        #expect(recorded.filter { $0.kind == .command }.count == 5)
        #expect(recorded.filter { $0.kind == .event && $0.packet.first == 0x3E }.map { [0x04] + $0.packet } == events)
    }

    @Test func aRefusedCommandIsAClearError() async throws {
        let controller = FakeController(extended: false, refuse: [0x200B: 0x0C], events: [])
        let result = try await scan(controller) { _ in false }
        let message = "\(try #require(result.error))"
        #expect(message.contains("LE Set Scan Parameters"))
        #expect(message.contains("Command Disallowed"))
        #expect(controller.opcodes == [0x1002, 0x200C, 0x200B])
    }

    /// The kernel hands every raw socket the Command Complete of every command, whoever sent it: a scan enable or
    /// parameters the agent did not send means another program (bluetoothd's discovery, hcitool) took the scan.
    /// Once it has been quiet for the settle time the agent sets its own scan again; a refused foreign command
    /// changed nothing and is ignored.
    @Test func aScanAnotherProgramChangedIsSetAgain() async throws {
        let events = try advertisingEvents("wban-python-btsnoop_hci.log", limit: 3)
        let controller = FakeController(extended: false, events: events)
        let sent = Mutex(false)
        let result = try await scan(controller, configure: { $0.settleAfterChangeElsewhere = .milliseconds(200) }) { reports in
            guard reports.count >= 3 else { return false }
            if !sent.withLock({ $0 }) {
                sent.withLock { $0 = true }
                // Refused (Command Disallowed), then one that went through: scanning disabled elsewhere.
                controller.send([0x04, 0x0E, 4, 1, 0x0B, 0x20, 0x0C])
                controller.send([0x04, 0x0E, 4, 1, 0x0C, 0x20, 0x00])
            }
            return controller.enables >= 2 && reports.count >= 6
        }
        #expect(result.error == nil)
        #expect(controller.opcodes == [0x1002, 0x200C, 0x200B, 0x200C, 0x200C, 0x200B, 0x200C, 0x200C])
        #expect(result.reports.count == 6)
    }

    @Test func theWatchdogRestartsAScanThatWentQuiet() async throws {
        let events = try advertisingEvents("wban-python-btsnoop_hci.log", limit: 5)
        // The controller sends reports after the first enable only, then nothing.
        let controller = FakeController(extended: false, events: events, repeatEventsOnEveryEnable: false)
        let result = try await scan(controller, configure: { $0.watchdogTimeout = .milliseconds(300) }) { _ in
            controller.enables >= 3
        }
        #expect(result.error == nil)
        let enables = controller.commands.filter { $0[1] == 0x0C && $0[2] == 0x20 && $0[4] == 1 }.count
        #expect(enables >= 3)  // the first start, then a restart every 300 ms of silence
        #expect(result.reports.count == 5)
    }

    @Test func openingAnAdapterExplainsWhatIsMissing() {
        do {
            let socket = try HCISocket.open(device: "hci0")
            socket.close()  // a machine with Bluetooth: nothing to explain
        } catch {
            switch error.errno {
            case EAFNOSUPPORT: #expect(error.message.contains("host's network namespace"))
            case ENODEV: #expect(error.message.contains("no adapter hci0"))
            case EPERM, EACCES: #expect(error.message.contains("CAP_NET_RAW"))
            default: #expect(!error.message.isEmpty)
            }
        }
        #expect(throws: HCISocket.Failure.self) { try HCISocket.open(device: "bluetooth0") }
    }
}
