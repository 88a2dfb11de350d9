import BeaconWire
import BlueZHCI
import Foundation
import WorkQueue
import Logging
import MetricFamilies
import Metrics

/// Reads Battery Level and Device Information from listed devices over GATT, every `interval`, on its own
/// thread: connect over LE L2CAP ATT, discover, read, disconnect. Results go to the agent's batches as
/// characteristic reads. A device that cannot be reached, drops the link, does not answer within `requestTimeout`
/// or refuses every read is tried again after `retryAfterFailure`, doubling with each failure in a row up to
/// `interval`; scanning goes on meanwhile.
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
    /// The first retry after a failed poll; each failure in a row doubles it, up to `interval`.
    public var retryAfterFailure: Duration = .seconds(30)
    private let logger: Logger

    public init(targets: [DeviceAddress], interval: Duration, logger: Logger) {
        self.targets = targets
        self.interval = interval
        self.logger = logger
    }

    /// When a device is polled next, after `failures` failed polls in a row (0 after a good one).
    func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return interval }
        return min(interval, retryAfterFailure * (1 << min(failures - 1, 20)))
    }

    /// Polls each target when it is due, until `stop` is signalled.
    func run(deliver: (Result) -> Void, stop: StopSignal) {
        let failures = Counter(AgentMetrics.gattPollFailures)
        var due = Dictionary(targets.map { ($0, ContinuousClock.now) }, uniquingKeysWith: { first, _ in first })
        var failuresInARow: [DeviceAddress: Int] = [:]
        while !stop.isStopped {
            for address in targets where !stop.isStopped && due[address, default: .now] <= .now {
                var wait = interval
                do {
                    let result = try poll(address)
                    deliver(result)
                    failuresInARow[address] = 0
                    logger.info(
                        "GATT poll done",
                        metadata: ["address": "\(address)", "readings": .stringConvertible(result.readings.count), "refused": .stringConvertible(result.refused.count)])
                } catch {
                    failures.increment()
                    failuresInARow[address, default: 0] += 1
                    wait = delay(afterFailures: failuresInARow[address, default: 1])
                    logger.warning("GATT poll failed", metadata: ["address": "\(address)", "error": "\(error)", "retry_in": "\(wait)"])
                }
                due[address] = .now + wait
            }
            stop.wait(until: due.values.min() ?? .now + interval)
        }
    }

    /// One poll of one device; a device that refused every read counts as failed.
    private func poll(_ address: DeviceAddress) throws -> Result {
        let socket = try ATTSocket.connect(
            address: address.value, random: address.kind == .random, timeoutSeconds: connectTimeoutSeconds)
        defer { socket.close() }
        let result = try Self.poll(socket, address: address, timeout: requestTimeout, extraCharacteristics: extraCharacteristics)
        if result.readings.isEmpty, !result.refused.isEmpty {
            let codes = result.refused.sorted { $0.key < $1.key }.map { "0x\(String($0.key, radix: 16)): ATT error 0x\(String($0.value, radix: 16))" }
            throw SourceError(source: "gatt:\(address)", "the device refused every read (\(codes.joined(separator: ", ")))")
        }
        return result
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

    /// The next response PDU; notifications are skipped, indications confirmed and the peer's own requests
    /// answered on the way.
    private static func response(
        from socket: ATTSocket, into buffer: inout [UInt8], milliseconds: Int32, address: DeviceAddress
    ) throws -> [UInt8] {
        while true {
            guard let pdu = try socket.channel.read(timeoutMilliseconds: milliseconds, into: &buffer) else {
                throw SourceError(source: "gatt:\(address)", "no ATT response within \(milliseconds / 1000) s")
            }
            if let answer = ATTClient.answer(toPeerRequest: pdu) {
                try socket.channel.write(answer)
                continue
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
