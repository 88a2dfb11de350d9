import BeaconWire

/// One line of a recording (docs/recordings.md): a transmitter heard by a receiver at a time, with its RSSI and,
/// when the recording kept them, its advertising data.
public struct RecordingRow: Sendable, Equatable {
    /// Unix microseconds.
    public var timeMicros: Int64
    /// The receiver that heard it: an agent of the site.
    public var receiver: String
    public var address: DeviceAddress
    public var rssi: Int8
    /// The advertising data as sent; empty when the recording has none (the transmitter is then a device known
    /// only by its address).
    public var data: [UInt8]

    public init(timeMicros: Int64, receiver: String, address: DeviceAddress, rssi: Int8, data: [UInt8] = []) {
        self.timeMicros = timeMicros
        self.receiver = receiver
        self.address = address
        self.rssi = rssi
        self.data = data
    }

    /// As a receiver's controller would report it: a legacy non-connectable advertisement.
    public var report: AdvertisingReport {
        AdvertisingReport(eventType: 3, isExtended: false, address: address, rssi: rssi, data: data)
    }
}

/// A line of a recording that cannot be read, with its number (from 1) and what is wrong with it.
public struct RecordingError: Error, Equatable, Sendable, CustomStringConvertible {
    public var line: Int
    public var message: String

    public init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}

/// Reads a recording's text one line at a time: comments (`#`) and blank lines skipped, the header first, then
/// rows in time order. A pure state machine: the replay source feeds it the file as it reads it. A row that cannot
/// be read throws and leaves the reader as it was, so the next line reads on; a header that cannot be read leaves
/// nothing to read.
public struct RecordingReader: Sendable {
    /// The header of a recording: these columns, in this order, and optionally `data`.
    public static let columns = ["time_s", "receiver", "transmitter", "rssi"]
    /// The longest advertising data a report carries (an extended advertisement, Core Vol 4, Part E, §7.7.65.13).
    public static let maximumDataBytes = 1650

    private var lineNumber = 0
    private var hasData: Bool?
    /// Whether the header has been read: until then an error means the file is no recording.
    public var headerRead: Bool { hasData != nil }
    private var lastTimeMicros: Int64 = .min

    public init() {}

    /// The row of the next line; nil for the header, a comment or a blank line.
    public mutating func read(line: Substring) throws(RecordingError) -> RecordingRow? {
        lineNumber += 1
        let text = line.hasSuffix("\r") ? line.dropLast() : line
        if text.allSatisfy(\.isWhitespace) || text.hasPrefix("#") { return nil }
        let fields = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
        guard let hasData else {
            guard fields.prefix(4).map(String.init) == Self.columns, fields.count == 4 || (fields.count == 5 && fields[4] == "data") else {
                throw RecordingError(
                    line: lineNumber, "the header must be \(Self.columns.joined(separator: ",")) (and ,data), not '\(text)'")
            }
            self.hasData = fields.count == 5
            return nil
        }
        let expected = hasData ? 5 : 4
        guard fields.count == expected else {
            throw RecordingError(line: lineNumber, "\(fields.count) fields where the header has \(expected)")
        }
        guard let seconds = Double(fields[0]), seconds.isFinite, seconds >= 0, seconds < 1e11 else {
            throw RecordingError(line: lineNumber, "time_s '\(fields[0])' is no time in Unix seconds")
        }
        let timeMicros = Int64((seconds * 1_000_000).rounded())
        guard timeMicros >= lastTimeMicros else {
            throw RecordingError(line: lineNumber, "time_s \(fields[0]) is before the line above: a recording is in time order")
        }
        guard isValidIdentifier(String(fields[1])) else {
            throw RecordingError(line: lineNumber, "receiver '\(fields[1])' must be 1-64 characters of a-z, 0-9 and '-'")
        }
        guard let address = Self.address(fields[2]) else {
            throw RecordingError(
                line: lineNumber, "transmitter '\(fields[2])' is no address: AA:BB:CC:DD:EE:FF, or 12 hex digits, optionally /public or /random")
        }
        guard let rssi = Int8(fields[3]), (-127...20).contains(rssi) else {
            throw RecordingError(line: lineNumber, "rssi '\(fields[3])' must be a whole number of dBm from -127 to 20")
        }
        var data: [UInt8] = []
        if hasData, !fields[4].isEmpty {
            guard let bytes = try? [UInt8](hex: String(fields[4])), bytes.count <= Self.maximumDataBytes else {
                throw RecordingError(line: lineNumber, "data must be hex digits of at most \(Self.maximumDataBytes) bytes")
            }
            data = bytes
        }
        lastTimeMicros = timeMicros
        return RecordingRow(timeMicros: timeMicros, receiver: String(fields[1]), address: address, rssi: rssi, data: data)
    }

    /// `AA:BB:CC:DD:EE:FF` or `aabbccddeeff`, then `/public` or `/random` (random when not said: what beacons send).
    public static func address(_ text: Substring) -> DeviceAddress? {
        var kind = DeviceAddress.Kind.random
        var value = text
        if let slash = text.firstIndex(of: "/") {
            guard let given = DeviceAddress.Kind(rawValue: String(text[text.index(after: slash)...])) else { return nil }
            kind = given
            value = text[..<slash]
        }
        let digits = value.filter { $0 != ":" }
        guard digits.count == 12, value.count == 12 || value.count == 17, let number = UInt64(digits, radix: 16) else {
            return nil
        }
        if value.count == 17, DeviceAddress(String(value)) == nil { return nil }
        return DeviceAddress(value: number, kind: kind)
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var text = self
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return text
    }
}
