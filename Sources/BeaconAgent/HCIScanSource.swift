import BeaconWire
import BlueZHCI
import Foundation
import Logging
import Metrics

/// Scans with a Bluetooth adapter through a raw HCI socket (libbluetooth), on the source thread.
///
/// A watchdog restarts scanning when no advertising report arrived for `watchdogTimeout` (a controller that
/// stops reporting silently is the failure peers' users report most), and counts the restarts. On exit scanning
/// is turned off again. With `recordPath`, every packet exchanged is also written to a btsnoop 1002 file.
public struct HCIScanSource: AdvertSource {
    public let device: String
    public var parameters: ScanParameters
    public var watchdogTimeout: Duration = .seconds(60)
    public var commandTimeout: Duration = .seconds(2)
    public var recordPath: String?
    private let logger: Logger
    private let openSocket: @Sendable () throws(HCISocket.Failure) -> HCISocket

    public var name: String { "hci:\(device)" }

    public init(device: String, parameters: ScanParameters, logger: Logger) {
        self.device = device
        self.parameters = parameters
        self.logger = logger
        openSocket = { () throws(HCISocket.Failure) in try HCISocket.open(device: device) }
    }

    /// A source over an already connected HCI transport (a test's fake controller).
    public init(device: String, parameters: ScanParameters, logger: Logger, socket: HCISocket) {
        self.device = device
        self.parameters = parameters
        self.logger = logger
        openSocket = { () throws(HCISocket.Failure) in socket }
    }

    public func run(deliver: ([TimedReport]) -> Void, shouldStop: () -> Bool) throws {
        let socket: HCISocket
        do {
            socket = try openSocket()
        } catch {
            throw SourceError(source: name, error.message)
        }
        defer { socket.close() }
        let recorder = try recordPath.map { try CaptureRecorder(path: $0) }
        let restarts = Counter(label: "beaconflow_agent_scan_restarts_total")
        var session = HCIScanSession(parameters: parameters)
        var buffer = [UInt8](repeating: 0, count: 1024)
        var commandSentAt = ContinuousClock.now
        var lastReport = ContinuousClock.now

        func perform(_ actions: [HCIScanSession.Action]) throws {
            for action in actions {
                switch action {
                case .send(let packet):
                    recorder?.write(kind: .command, received: false, packet: packet)
                    do { try socket.write(packet) } catch { throw SourceError(source: name, error.message) }
                    commandSentAt = ContinuousClock.now
                case .scanning(let extended):
                    lastReport = ContinuousClock.now
                    logger.info(
                        "Scanning", metadata: ["device": "\(device)", "commands": "\(extended ? "extended" : "legacy")"])
                case .stopped:
                    break
                case .failed(let error):
                    throw SourceError(source: name, error.message)
                }
            }
        }

        try perform(session.start())
        var received: [TimedReport] = []
        while !shouldStop() {
            let packet: [UInt8]?
            do {
                // Wait for the first packet; then take what is already there, so reports go on in chunks.
                packet = try socket.read(timeoutMilliseconds: received.isEmpty ? 100 : 0, into: &buffer)
            } catch {
                throw SourceError(source: name, error.message)
            }
            if let packet {
                recorder?.write(kind: .event, received: true, packet: packet)
                let (actions, reports) = session.receive(packet)
                try perform(actions)
                if !reports.isEmpty {
                    lastReport = ContinuousClock.now
                    let now = AgentEngine.wallClockMicros()
                    received += reports.map { TimedReport(timeMicros: now, report: $0) }
                }
            }
            if !received.isEmpty, packet == nil || received.count >= 64 {
                deliver(received)
                received.removeAll(keepingCapacity: true)
            }
            let now = ContinuousClock.now
            if let opcode = session.awaitedOpcode, now - commandSentAt > commandTimeout {
                throw SourceError(
                    source: name,
                    "the controller did not answer command 0x\(String(opcode, radix: 16)) within \(commandTimeout)")
            }
            if session.isScanning, now - lastReport > watchdogTimeout {
                restarts.increment()
                logger.warning(
                    "No advertising report for the watchdog timeout; restarting the scan",
                    metadata: ["device": "\(device)", "timeout": "\(watchdogTimeout)"])
                lastReport = now
                try perform(session.start())
            }
        }
        if !received.isEmpty { deliver(received) }
        // Leave the adapter as it was: scanning off, waiting briefly for the controller's answer.
        try? perform(session.stop())
        let deadline = ContinuousClock.now + commandTimeout
        while session.awaitedOpcode != nil, ContinuousClock.now < deadline {
            guard let packet = try? socket.read(timeoutMilliseconds: 100, into: &buffer) else { continue }
            recorder?.write(kind: .event, received: true, packet: packet)
            try? perform(session.receive(packet).actions)
        }
    }
}

/// Appends HCI packets (H4 framed) to a btsnoop 1002 file: `--record`.
final class CaptureRecorder {
    private let handle: FileHandle

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(BtsnoopWriter.fileHeader)),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw SourceError(source: path, "cannot create the --record file")
        }
        self.handle = handle
        handle.seekToEndOfFile()
    }

    deinit { try? handle.close() }

    func write(kind: CaptureRecord.Kind, received: Bool, packet: [UInt8]) {
        guard packet.count > 1 else { return }
        let record = BtsnoopWriter.record(
            kind: kind, received: received, packet: Array(packet.dropFirst()), timestamp: AgentEngine.wallClockMicros())
        handle.write(Data(record))
    }
}
