import BeaconWire

/// One line of a recording (docs/recordings.md): a transmitter heard by a receiver at a time, with its RSSI and,
/// when the recording kept them, its advertising data.
public struct RecordingRow: Sendable, Equatable {
    /// Unix microseconds.
    public var timeMicros: Int64
    /// The receiver that heard it: the id of the agent that replays it (its name read by `identifier(fromName:)`).
    public var receiver: String
    public var address: DeviceAddress
    public var rssi: Int8
    /// The advertising data as sent, or the frame of the beacon id the recording names it by; empty when the
    /// recording has neither (the transmitter is then a device known only by its address).
    public var data: [UInt8]
    /// The recording's own name for the transmitter, when it is neither an address nor a beacon id.
    public var transmitterName: String?

    public init(timeMicros: Int64, receiver: String, address: DeviceAddress, rssi: Int8, data: [UInt8] = [], transmitterName: String? = nil) {
        self.timeMicros = timeMicros
        self.receiver = receiver
        self.address = address
        self.rssi = rssi
        self.data = data
        self.transmitterName = transmitterName
    }

    /// As a receiver's controller would report it: a legacy non-connectable advertisement.
    public var report: AdvertisingReport {
        AdvertisingReport(eventType: 3, isExtended: false, address: address, rssi: rssi, data: data)
    }
}

/// What a line of a recording gives: its readings, and those of its readings that cannot be read (a receiver's
/// field in the wide form), each with what is wrong with it; the others are read all the same.
public struct RecordingLine: Sendable, Equatable {
    public var rows: [RecordingRow] = []
    public var skipped: [RecordingError] = []
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
/// rows, each receiver's in time order (the receivers' logs may follow each other or interleave). A line holds one
/// reading (a `receiver` and an `rssi` column) or, in the wide form, a column per receiver, with the RSSI it heard
/// (empty where it heard nothing). A pure state machine: the replay source feeds it the file as it reads it. A
/// line that cannot be read throws and leaves the reader as it was, so the next line reads on; a reading that
/// cannot be read is skipped, its line's others read; a header that cannot be read leaves nothing to read.
public struct RecordingReader: Sendable {
    /// The longest advertising data a report carries (an extended advertisement, Core Vol 4, Part E, §7.7.65.13).
    public static let maximumDataBytes = 1650

    /// Where each column is in a line.
    private struct Layout: Sendable {
        var columns: RecordingColumns
        var transmitter: Int
        var data: Int?
        /// Where each reading of a line is: its receiver's field, or the receiver a wide header's column names,
        /// and its RSSI's field.
        var readings: [(receiver: Receiver, rssi: Int)]
    }

    private enum Receiver: Sendable {
        case field(Int)
        /// A wide header's column: its name, and the agent that replays it.
        case column(name: String, agent: String)

        /// How an error names the RSSI of this receiver's reading.
        var rssiName: String {
            switch self {
            case .field: "rssi"
            case .column(let name, _): "rssi of \(name)"
            }
        }
    }

    private static let oneReading = ["receiver", "transmitter", "rssi"]
    /// What a receiver's name must give to be read as an agent id.
    private static let agentIDRule = "an agent id is 1-64 characters of a-z, 0-9 and '-', and a name is read as one lowercased, each run of other characters a '-'"

    private var lineNumber = 0
    private var layout: Layout?
    /// Whether the header has been read: until then an error means the file is no recording.
    public var headerRead: Bool { layout != nil }
    /// Each receiver's latest time: its rows are in time order.
    private var latestMicros: [String: Int64] = [:]
    /// The name (lowercased) each agent id was first read from: two names read as one id are two receivers.
    private var receiverNames: [String: String] = [:]

    public init() {}

    /// The readings of the next line, in the header's order of its receivers; none for the header, a comment or a
    /// blank line. A line whose time, transmitter or data cannot be read throws; a reading that cannot be read
    /// (its receiver, its RSSI, or its time before its receiver's line above) is skipped and said in the result.
    public mutating func read(line: Substring) throws(RecordingError) -> RecordingLine {
        lineNumber += 1
        guard !RecordingColumns.skips(line) else { return RecordingLine() }
        guard let layout else {
            self.layout = try Self.layout(header: line, lineNumber: lineNumber)
            return RecordingLine()
        }
        let fields = layout.columns.split(line)
        guard fields.count == layout.columns.count else {
            throw RecordingError(line: lineNumber, "\(fields.count) fields where the header has \(layout.columns.count)")
        }
        do throws(RecordingError) {
            let time = layout.columns.time
            let timeMicros = try time.micros(fields[layout.columns.timeField])
            let transmitter = try RecordedTransmitter.read(fields[layout.transmitter])
            var data = transmitter.data
            if let column = layout.data, !fields[column].isEmpty {
                guard let bytes = try? [UInt8](hex: String(fields[column])), bytes.count <= Self.maximumDataBytes else {
                    throw RecordingError(line: 0, "data must be hex digits of at most \(Self.maximumDataBytes) bytes")
                }
                data = bytes
            }
            var read = RecordingLine()
            func skip(_ problem: String) { read.skipped.append(RecordingError(line: lineNumber, problem)) }
            for reading in layout.readings {
                let receiver: String
                switch reading.receiver {
                case .field(let field):
                    let name = fields[field]
                    let lowered = name.lowercased()
                    guard let agent = identifier(fromName: lowered) else {
                        skip("receiver '\(name.prefix(80))' names no agent: \(Self.agentIDRule)")
                        continue
                    }
                    if let first = receiverNames[agent], first != lowered {
                        skip("receiver '\(name.prefix(80))' reads as the agent '\(agent)', as '\(first.prefix(80))' above does: name them apart")
                        continue
                    }
                    receiverNames[agent] = lowered
                    receiver = agent
                case .column(_, let agent): receiver = agent
                }
                let text = fields[reading.rssi]
                // A wide line's receiver that heard nothing.
                if case .column = reading.receiver, text.isEmpty { continue }
                guard timeMicros >= latestMicros[receiver] ?? .min else {
                    skip("\(time.rawValue) \(fields[layout.columns.timeField]) is before \(receiver)'s line above: each receiver's lines are in time order")
                    continue
                }
                // Whole dBm as controllers report it; a recording that averaged its readings gives decimals, rounded.
                guard let decimal = RecordingColumns.decimal(text), decimal.isFinite, case let whole = decimal.rounded(), (-127...20).contains(whole) else {
                    skip("\(reading.receiver.rssiName) '\(text.prefix(80))' must be a number of dBm from -127 to 20")
                    continue
                }
                read.rows.append(
                    RecordingRow(
                        timeMicros: timeMicros, receiver: receiver, address: transmitter.address, rssi: Int8(whole), data: data,
                        transmitterName: transmitter.name))
            }
            for row in read.rows { latestMicros[row.receiver] = timeMicros }
            return read
        } catch {
            throw RecordingError(line: lineNumber, error.message)
        }
    }

    /// The layout of a header: a reading a line, or a receiver a column.
    private static func layout(header line: Substring, lineNumber: Int) throws(RecordingError) -> Layout {
        if let columns = RecordingColumns(header: line, required: oneReading, optional: ["data"]),
            let receiver = columns.fields["receiver"], let transmitter = columns.fields["transmitter"], let rssi = columns.fields["rssi"]
        {
            return Layout(columns: columns, transmitter: transmitter, data: columns.fields["data"], readings: [(.field(receiver), rssi)])
        }
        if let columns = RecordingColumns(header: line, required: ["transmitter"], optional: ["data"], othersAllowed: true),
            let transmitter = columns.fields["transmitter"], columns.others.allSatisfy({ !oneReading.contains($0.name) })
        {
            var readings: [(receiver: Receiver, rssi: Int)] = []
            var names: [String: String] = [:]
            for column in columns.others {
                guard let agent = identifier(fromName: column.name) else {
                    throw RecordingError(line: lineNumber, "column '\(column.name.prefix(80))' names no receiver: \(agentIDRule)")
                }
                if let first = names.updateValue(column.name, forKey: agent) {
                    throw RecordingError(
                        line: lineNumber, "columns '\(first.prefix(80))' and '\(column.name.prefix(80))' both read as the agent '\(agent)': name them apart")
                }
                readings.append((.column(name: column.name, agent: agent), column.field))
            }
            return Layout(columns: columns, transmitter: transmitter, data: columns.fields["data"], readings: readings)
        }
        throw RecordingError(
            line: lineNumber,
            "the header must name the columns \(RecordingColumns.expected(oneReading)) (and data), in any order, or \(RecordingColumns.expected(["transmitter"])) and a column per receiver, not '\(RecordingColumns.quoted(line))'")
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
