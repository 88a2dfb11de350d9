import BeaconWire
import BlueZHCI
import Foundation
import WorkQueue
import Logging
import MetricFamilies
import Metrics

/// Scans with a Bluetooth adapter through a raw HCI socket (libbluetooth), on the source thread.
///
/// A watchdog restarts scanning when no advertising report arrived for `watchdogTimeout` (a controller that
/// stops reporting silently is the failure peers' users report most), and counts the restarts; a scan another
/// program changed or stopped is set again once that program is done (`settleAfterChangeElsewhere`); an adapter
/// powered off, removed or failing is waited for and scanned again (`run`). On exit scanning is turned off again. With `recordPath`, every packet exchanged is also written to a btsnoop 1002 file.
public struct HCIScanSource: AdvertSource {
    public let device: String
    public var parameters: ScanParameters
    public var watchdogTimeout: Duration = .seconds(60)
    public var commandTimeout: Duration = .seconds(2)
    public var recordPath: String?
    /// How long the scan must stay unchanged by another program before the agent sets its own again: a program
    /// changes parameters and then enables, and the agent's settings must come after both.
    public var settleAfterChangeElsewhere: Duration = .seconds(1)
    /// Scanning or not, for `/healthz`.
    public let status = ScanStatus()
    private let logger: Logger
    private let openSocket: @Sendable () throws(HCISocket.Failure) -> HCISocket
    /// A test's transport: nothing to reopen, and failures end the source as they did.
    private let usesGivenSocket: Bool

    public var name: String { "hci:\(device)" }

    public init(device: String, parameters: ScanParameters, logger: Logger) {
        self.device = device
        self.parameters = parameters
        self.logger = logger
        openSocket = { () throws(HCISocket.Failure) in try HCISocket.open(device: device) }
        usesGivenSocket = false
    }

    /// A source over an already connected HCI transport (a test's fake controller).
    public init(device: String, parameters: ScanParameters, logger: Logger, socket: HCISocket) {
        self.device = device
        self.parameters = parameters
        self.logger = logger
        openSocket = { () throws(HCISocket.Failure) in socket }
        usesGivenSocket = true
    }

    /// The kernel refused the agent's commands for want of capabilities: the source ends with what to do.
    private struct PermissionDenied: Error {
        var error: SourceError
    }

    /// Why a scan on one socket ended.
    private enum ScanEnd {
        case stopped
        case adapterGone(String)
    }

    /// Scans until asked to stop. An adapter that goes away while scanning (powered off, removed, a command that
    /// fails or goes unanswered) is logged with the cause and counted, and scanning resumes by itself once the
    /// adapter is back: at its "up" or "registered" event from the kernel, or at the latest every 5 s. Only an
    /// adapter that cannot be opened at the start (missing, no permission) ends the source.
    public func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws {
        var socket: HCISocket
        do {
            socket = try openSocket()
        } catch {
            throw SourceError(source: name, error.message)
        }
        let index = UInt16(device.dropFirst(3)) ?? 0
        // Without it (an old kernel, a test's fake transport) a lost adapter is still found by its errors.
        let adapterEvents = isRealDevice ? try? HCISocket.openAdapterEvents() : nil
        defer { adapterEvents?.close() }
        let recorder = try recordPath.map { try CaptureRecorder(path: $0) }
        let losses = Counter(AgentMetrics.adapterLosses)
        status.set(scanning: false)
        var outageReported = false
        while true {
            let end: ScanEnd
            do {
                end = try scan(on: socket, adapterEvents: adapterEvents, index: index, recorder: recorder, deliver: deliver, stop: stop)
            } catch let denied as PermissionDenied {
                socket.close()
                throw denied.error
            } catch {
                guard isRealDevice else {
                    socket.close()
                    throw error
                }
                end = .adapterGone("\(error)")
            }
            socket.close()
            let wasScanning = status.isScanning
            status.set(scanning: false)
            guard case .adapterGone(let cause) = end else { return }
            // One loss per outage: a reopened adapter that fails again before it scanned is the same outage.
            if wasScanning { outageReported = false }
            if !outageReported {
                outageReported = true
                losses.increment()
                logger.warning("Adapter lost; scanning resumes when it is back", metadata: ["device": "\(device)", "cause": "\(cause)"])
            } else {
                logger.debug("Adapter not back yet", metadata: ["device": "\(device)", "cause": "\(cause)"])
            }
            guard let reopened = waitForAdapter(adapterEvents: adapterEvents, index: index, stop: stop) else { return }
            socket = reopened
        }
    }

    /// Whether this source opens a kernel adapter (not a test's transport).
    private var isRealDevice: Bool { device.hasPrefix("hci") && UInt16(device.dropFirst(3)) != nil && !usesGivenSocket }

    /// Reopens the adapter once the kernel says it is up or registered again, trying at the latest every 5 s (from
    /// half a second, doubling); nil when asked to stop.
    private func waitForAdapter(adapterEvents: HCISocket?, index: UInt16, stop: StopSignal) -> HCISocket? {
        var delay: Duration = .milliseconds(500)
        var buffer = [UInt8](repeating: 0, count: 64)
        while !stop.isStopped {
            let deadline = ContinuousClock.now + delay
            var announced = false
            while !announced, !stop.isStopped, ContinuousClock.now < deadline {
                if let events = adapterEvents {
                    if let packet = try? events.read(timeoutMilliseconds: 100, into: &buffer),
                        let event = AdapterEvent.parse(packet, index: index), event == .up || event == .registered
                    {
                        announced = true
                    }
                } else {
                    stop.wait(until: deadline)
                }
            }
            if let socket = try? openSocket() { return socket }
            delay = min(delay * 2, .seconds(5))
        }
        return nil
    }

    /// Scans on one open socket: returns when asked to stop or when the kernel says the adapter went down or away;
    /// throws what the socket or the controller refused.
    private func scan(
        on socket: HCISocket, adapterEvents: HCISocket?, index: UInt16, recorder: CaptureRecorder?,
        deliver: ([TimedReport]) -> Void, stop: StopSignal
    ) throws -> ScanEnd {
        let restarts = Counter(AgentMetrics.scanRestarts)
        let interruptions = Counter(AgentMetrics.scanInterruptions)
        var changedElsewhere: (at: ContinuousClock.Instant, opcode: UInt16)?
        var session = HCIScanSession(parameters: parameters)
        var buffer = [UInt8](repeating: 0, count: 1024)
        var eventBuffer = [UInt8](repeating: 0, count: 64)
        var commandSentAt = ContinuousClock.now
        var lastReport = ContinuousClock.now

        func perform(_ actions: [HCIScanSession.Action]) throws {
            for action in actions {
                switch action {
                case .send(let packet):
                    recorder?.write(kind: .command, received: false, packet: packet)
                    do {
                        try socket.write(packet)
                    } catch where error.errno == EPERM || error.errno == EACCES {
                        // Not the adapter going away: waiting would not help.
                        throw PermissionDenied(error: SourceError(source: name, error.message))
                    } catch {
                        throw SourceError(source: name, error.message)
                    }
                    commandSentAt = ContinuousClock.now
                case .scanning(let extended):
                    lastReport = ContinuousClock.now
                    status.set(scanning: true)
                    logger.info(
                        "Scanning", metadata: ["device": "\(device)", "commands": "\(extended ? "extended" : "legacy")"])
                case .changedElsewhere(let opcode):
                    // Counted when the scan is set again: the kernel also stops the scan of an adapter going down,
                    // which is a loss, not an interruption.
                    changedElsewhere = (ContinuousClock.now, opcode)
                case .stopped:
                    break
                case .failed(let error):
                    throw SourceError(source: name, error.message)
                }
            }
        }

        try perform(session.start())
        var received: [TimedReport] = []
        while !stop.isStopped {
            if let events = adapterEvents, let packet = try? events.read(timeoutMilliseconds: 0, into: &eventBuffer),
                let event = AdapterEvent.parse(packet, index: index), event == .down || event == .removed
            {
                if !received.isEmpty { deliver(received) }
                return .adapterGone(event == .down ? "\(device) was powered off" : "\(device) was removed")
            }
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
            /// Starts the scan again with the agent's settings, counted and logged with why.
            func restart(_ counter: Counter, _ message: Logger.Message, _ metadata: Logger.Metadata) throws {
                counter.increment()
                logger.warning(message, metadata: metadata.merging(["device": "\(device)"]) { $1 })
                lastReport = now
                try perform(session.start())
            }
            if let changed = changedElsewhere, session.awaitedOpcode == nil, now - changed.at >= settleAfterChangeElsewhere {
                changedElsewhere = nil
                try restart(
                    interruptions, "Another program changed or stopped the scan; scanning again with the agent's settings",
                    ["command": "0x\(String(changed.opcode, radix: 16))"])
            }
            if session.isScanning, now - lastReport > watchdogTimeout {
                try restart(
                    restarts, "No advertising report for the watchdog timeout; restarting the scan", ["timeout": "\(watchdogTimeout)"])
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
        return .stopped
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
