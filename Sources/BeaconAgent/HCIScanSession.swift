import BeaconMessaging
import BeaconWire

/// Scan settings (Core Specification Vol 4, Part E, §7.8.10 and §7.8.64).
public struct ScanParameters: Sendable, Hashable {
    /// Active scanning sends scan requests (and gets scan responses); passive only listens.
    public var active = false
    /// In units of 0.625 ms, 0x0004–0x4000. The default 100 ms interval and window scan continuously.
    public var intervalUnits: UInt16 = 160
    public var windowUnits: UInt16 = 160

    public init() {}

    public init(active: Bool, intervalMilliseconds: Double, windowMilliseconds: Double) throws(ConfigurationError) {
        let interval = (intervalMilliseconds / 0.625).rounded()
        let window = (windowMilliseconds / 0.625).rounded()
        guard (4...0x4000).contains(interval), (4...0x4000).contains(window) else {
            throw ConfigurationError("scan interval and window must be 2.5-10240 ms")
        }
        guard window <= interval else { throw ConfigurationError("the scan window cannot be longer than the interval") }
        self.active = active
        self.intervalUnits = UInt16(interval)
        self.windowUnits = UInt16(window)
    }
}

/// Why the controller did not scan.
public struct HCIError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The controller answered a command with a non-zero status.
        case commandFailed = "command_failed"
        /// No Command Complete/Status for a command within the timeout.
        case commandTimeout = "command_timeout"
        /// The HCI socket could not be opened, read or written (see `errno`).
        case socket = "socket"
    }

    public var code: Code
    public var opcode: UInt16?
    public var status: UInt8?
    public var errno: Int32?
    public var message: String

    public init(_ code: Code, opcode: UInt16? = nil, status: UInt8? = nil, errno: Int32? = nil, _ message: String) {
        self.code = code
        self.opcode = opcode
        self.status = status
        self.errno = errno
        self.message = message
    }

    public var description: String { message }
}

/// The HCI conversation that starts and stops LE scanning: a pure state machine. It reads the controller's
/// supported commands, uses the BT 5 extended scanning commands when both are supported and the legacy ones
/// otherwise (mixing the two sets is refused by BT 5 controllers), disables scanning, sets the parameters,
/// enables scanning with duplicate filtering off, and turns LE Meta events into advertising reports.
///
/// Packets are H4 framed (first byte 0x01 command, 0x04 event), as on a Linux HCI socket.
public struct HCIScanSession: Sendable {
    public enum Action: Sendable, Equatable {
        /// Write this command packet to the controller.
        case send([UInt8])
        /// Scanning runs (the controller accepted every command).
        case scanning(extended: Bool)
        /// Scanning is off again after `stop()`.
        case stopped
        case failed(HCIError)
        /// Another program (bluetoothd's discovery, `hcitool`, another scanner) changed or stopped the scan while
        /// it ran: the controller completed this scan command that the session did not send.
        case changedElsewhere(opcode: UInt16)
    }

    /// The scan commands whose completion, unasked for, means another program changed the scan.
    static let scanCommands: Set<UInt16> = [setScanParameters, setScanEnable, setExtendedScanParameters, setExtendedScanEnable]

    public static let readLocalSupportedCommands: UInt16 = 0x1002
    public static let setScanParameters: UInt16 = 0x200B
    public static let setScanEnable: UInt16 = 0x200C
    /// Not in BlueZ 5.66's hci.h: LE Set Extended Scan Parameters / Enable (Core 5.0, Vol 4, Part E, §7.8.64-65).
    public static let setExtendedScanParameters: UInt16 = 0x2041
    public static let setExtendedScanEnable: UInt16 = 0x2042
    static let commandDisallowed: UInt8 = 0x0C

    private enum Step: Equatable {
        case readCommands
        case disable
        case parameters
        case enable
        case stopDisable
    }

    public let parameters: ScanParameters
    public private(set) var usesExtendedCommands: Bool?
    public private(set) var isScanning = false
    private var wantsScanning = false
    private var pending: [Step] = []
    private var awaiting: (step: Step, opcode: UInt16)?
    private var reports = AdvertisingReportDecoder()

    public init(parameters: ScanParameters = ScanParameters()) {
        self.parameters = parameters
    }

    /// Begins (or, from the watchdog, restarts) scanning.
    public mutating func start() -> [Action] {
        isScanning = false
        wantsScanning = true
        pending = usesExtendedCommands == nil ? [.readCommands] : [.disable, .parameters, .enable]
        awaiting = nil
        return next()
    }

    /// Turns scanning off, leaving the adapter as it was before the agent started.
    public mutating func stop() -> [Action] {
        wantsScanning = false
        guard usesExtendedCommands != nil else { return [.stopped] }
        isScanning = false
        pending = [.stopDisable]
        awaiting = nil
        return next()
    }

    /// The command awaiting its answer, if any (for the caller's command timeout).
    public var awaitedOpcode: UInt16? { awaiting?.opcode }

    /// Handles one H4 packet from the controller; returns what to do and the advertising reports it carried.
    /// Malformed events are ignored: a controller's garbage must not stop the scan.
    public mutating func receive(_ packet: [UInt8]) -> (actions: [Action], reports: [AdvertisingReport]) {
        guard packet.count >= 3, packet[0] == 0x04 else { return ([], []) }
        let event = Array(packet[1...])
        switch event[0] {
        case 0x0E where event.count >= 6:  // Command Complete: count, opcode, status
            return (answer(opcode: UInt16(event[3]) | UInt16(event[4]) << 8, status: event[5], parameters: Array(event[6...])), [])
        case 0x0F where event.count >= 6:  // Command Status: status, count, opcode
            return (answer(opcode: UInt16(event[4]) | UInt16(event[5]) << 8, status: event[2], parameters: []), [])
        case 0x3E:
            return ([], (try? reports.reports(fromEvent: event)) ?? [])
        default:
            return ([], [])
        }
    }

    private mutating func answer(opcode: UInt16, status: UInt8, parameters returned: [UInt8]) -> [Action] {
        guard let (step, expected) = awaiting, opcode == expected else {
            // Refused commands changed nothing (a legacy command beside an extended scan is Command Disallowed).
            if awaiting == nil, isScanning, status == 0, Self.scanCommands.contains(opcode) {
                return [.changedElsewhere(opcode: opcode)]
            }
            return []
        }
        awaiting = nil
        if status != 0 {
            // Disabling a scan that is not running is refused by some controllers; that is fine.
            if (step == .disable || step == .stopDisable), status == Self.commandDisallowed {
                return next()
            }
            return [.failed(Self.failure(opcode: opcode, status: status))]
        }
        if step == .readCommands {
            // Supported Commands octet 37: bit 5 LE Set Extended Scan Parameters, bit 6 LE Set Extended Scan Enable.
            let octet37 = returned.count > 37 ? returned[37] : 0
            usesExtendedCommands = octet37 & 0x60 == 0x60
            pending = [.disable, .parameters, .enable]
        }
        return next()
    }

    /// Sends the next step's command, or reports where the steps led. Called only when nothing is awaited.
    private mutating func next() -> [Action] {
        if !pending.isEmpty {
            let step = pending.removeFirst()
            let (opcode, parameters) = command(for: step)
            awaiting = (step, opcode)
            return [.send(Self.commandPacket(opcode: opcode, parameters: parameters))]
        }
        guard wantsScanning else { return [.stopped] }
        isScanning = true
        return [.scanning(extended: usesExtendedCommands == true)]
    }

    private func command(for step: Step) -> (UInt16, [UInt8]) {
        let extended = usesExtendedCommands == true
        let type: UInt8 = parameters.active ? 1 : 0
        let interval = [UInt8(truncatingIfNeeded: parameters.intervalUnits), UInt8(parameters.intervalUnits >> 8)]
        let window = [UInt8(truncatingIfNeeded: parameters.windowUnits), UInt8(parameters.windowUnits >> 8)]
        switch step {
        case .readCommands:
            return (Self.readLocalSupportedCommands, [])
        case .disable, .stopDisable:
            return extended ? (Self.setExtendedScanEnable, [0, 0, 0, 0, 0, 0]) : (Self.setScanEnable, [0, 0])
        case .parameters:
            if extended {
                // Own address public, accept all, the LE 1M PHY only: type, interval, window for it.
                return (Self.setExtendedScanParameters, [0, 0, 0x01, type] + interval + window)
            }
            return (Self.setScanParameters, [type] + interval + window + [0, 0])
        case .enable:
            // Duplicate filtering off: every advert counts (RSSI per packet is the point).
            return extended ? (Self.setExtendedScanEnable, [1, 0, 0, 0, 0, 0]) : (Self.setScanEnable, [1, 0])
        }
    }

    public static func commandPacket(opcode: UInt16, parameters: [UInt8]) -> [UInt8] {
        [0x01, UInt8(truncatingIfNeeded: opcode), UInt8(opcode >> 8), UInt8(parameters.count)] + parameters
    }

    static func failure(opcode: UInt16, status: UInt8) -> HCIError {
        let name: String
        switch opcode {
        case readLocalSupportedCommands: name = "Read Local Supported Commands"
        case setScanParameters: name = "LE Set Scan Parameters"
        case setScanEnable: name = "LE Set Scan Enable"
        case setExtendedScanParameters: name = "LE Set Extended Scan Parameters"
        case setExtendedScanEnable: name = "LE Set Extended Scan Enable"
        default: name = "command 0x" + String(opcode, radix: 16)
        }
        var message = "the controller refused \(name) with status 0x\(String(status, radix: 16))"
        if status == commandDisallowed {
            message += " (Command Disallowed: another program is scanning or advertising with this adapter, e.g."
                + " bluetoothd discovery; stop it, or give the agent its own adapter)"
        }
        return HCIError(.commandFailed, opcode: opcode, status: status, message)
    }
}
