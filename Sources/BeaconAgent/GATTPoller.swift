import BeaconWire
import BlueZHCI
import Foundation
import Logging
import Metrics

/// Reads Battery Level and Device Information from listed devices over GATT, every `interval`, on its own
/// thread: connect over LE L2CAP ATT, discover, read, disconnect. Results go to the agent's batches as
/// characteristic reads.
public struct GATTPoller: Sendable {
    /// The outcome of one poll.
    public struct Result: Sendable {
        public var address: DeviceAddress
        public var timeMicros: Int64
        public var readings: [ATTClient.Reading]
        public var refused: [UInt16: UInt8]
    }

    public var targets: [DeviceAddress]
    public var interval: Duration
    /// Characteristics read beyond Battery Level and Device Information (`--gatt-read`).
    public var extraCharacteristics: Set<UInt16> = []
    /// ATT's transaction timeout is 30 s (Core Vol 3, Part F, §3.3.3).
    public var requestTimeout: Duration = .seconds(30)
    public var connectTimeoutSeconds = 10
    private let logger: Logger

    public init(targets: [DeviceAddress], interval: Duration, logger: Logger) {
        self.targets = targets
        self.interval = interval
        self.logger = logger
    }

    /// Polls every target, then waits `interval`, until `shouldStop()`.
    func run(deliver: (Result) -> Void, shouldStop: () -> Bool) {
        let failures = Counter(label: "beaconflow_agent_gatt_poll_failures_total")
        while !shouldStop() {
            for address in targets where !shouldStop() {
                do {
                    let socket = try ATTSocket.connect(
                        address: address.value, random: address.kind == .random,
                        timeoutSeconds: connectTimeoutSeconds)
                    defer { socket.close() }
                    let result = try Self.poll(
                        socket, address: address, timeout: requestTimeout, extraCharacteristics: extraCharacteristics)
                    deliver(result)
                    logger.info(
                        "GATT poll done",
                        metadata: ["address": "\(address)", "readings": "\(result.readings.count)"])
                } catch {
                    failures.increment()
                    logger.warning("GATT poll failed", metadata: ["address": "\(address)", "error": "\(error)"])
                }
            }
            sleepUntil(ContinuousClock.now + interval, shouldStop: shouldStop)
        }
    }

    /// Runs the ATT conversation over a connected socket.
    public static func poll(
        _ socket: ATTSocket, address: DeviceAddress, timeout: Duration, extraCharacteristics: Set<UInt16> = []
    ) throws -> Result {
        var client = ATTClient(extraCharacteristics: extraCharacteristics)
        var step = client.start()
        var buffer = [UInt8](repeating: 0, count: 512)
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000)
        var requests = 0
        while true {
            switch step {
            case .finished(let readings, let refused):
                return Result(
                    address: address, timeMicros: AgentEngine.wallClockMicros(), readings: readings, refused: refused)
            case .failed(let reason):
                throw SourceError(source: "gatt:\(address)", reason)
            case .send(let request):
                requests += 1
                guard requests <= 1000 else { throw SourceError(source: "gatt:\(address)", "the device keeps answering") }
                try socket.channel.write(request)
                step = client.receive(try response(from: socket, into: &buffer, milliseconds: milliseconds, address: address))
            }
        }
    }

    /// The next response PDU; notifications are skipped and indications confirmed on the way.
    private static func response(
        from socket: ATTSocket, into buffer: inout [UInt8], milliseconds: Int32, address: DeviceAddress
    ) throws -> [UInt8] {
        while true {
            guard let pdu = try socket.channel.read(timeoutMilliseconds: milliseconds, into: &buffer) else {
                throw SourceError(source: "gatt:\(address)", "no ATT response within \(milliseconds / 1000) s")
            }
            switch pdu.first {
            case 0x1B: continue  // Handle Value Notification
            case 0x1D:
                try socket.channel.write([0x1E])  // Handle Value Confirmation
                continue
            default:
                return pdu
            }
        }
    }
}
