#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BeaconWire
import Logging

/// `--log-format`: how a command writes its log lines to standard error.
public enum LogFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// swift-log's own lines: time, level, logger, message, then the fields as `key=value`.
    case text
    /// One JSON object per line: `ts`, `level`, `logger`, `msg`, then each field (numbers and booleans as such).
    case json
    /// logfmt: `ts=... level=... logger=... msg="..."`, then each field as `key=value`.
    case logfmt
}

/// Writes each event as one line in `json` or `logfmt`: the message constant, its data in fields, newlines and
/// quotes escaped so that a line is always one record for Loki, Elasticsearch or Vector.
struct StructuredLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let given = event.metadata { fields.merge(given) { $1 } }
        let head: [(String, Logger.MetadataValue)] = [
            ("ts", .string(Self.timestamp())), ("level", .string(event.level.rawValue)), ("logger", .string(label)),
            ("msg", .string(event.message.description)),
        ]
        let all = head + fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let line = Self.line(all, format: format) + "\n"
        var bytes = Array(line.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            written += count
        }
    }

    /// One record in the format (not `text`).
    static func line(_ fields: [(String, Logger.MetadataValue)], format: LogFormat) -> String {
        switch format {
        case .json:
            return JSONValue.object(fields.map { JSONField($0.0, json($0.1)) }).text
        case .logfmt, .text:
            return fields.map { "\($0.0)=\(logfmtValue($0.1.description))" }.joined(separator: " ")
        }
    }

    /// A field as JSON: a number or boolean given as a value (`.stringConvertible`) stays one, lists and
    /// dictionaries nest, anything else is its text.
    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text):
            return .string(text)
        case .stringConvertible(let value):
            switch value {
            case let flag as Bool: return .bool(flag)
            case let number as any BinaryInteger: return .int(Int64(clamping: number))
            case let number as Double where number.isFinite: return .double(number)
            case let number as Float where number.isFinite: return .double(Double(number))
            default: return .string(value.description)
            }
        case .array(let values):
            return .array(values.map(json))
        case .dictionary(let fields):
            return .object(fields.sorted { $0.key < $1.key }.map { JSONField($0.key, json($0.value)) })
        }
    }

    /// Bare when it can be; else quoted as a JSON string (`"`, `\` and control characters escaped).
    static func logfmtValue(_ text: String) -> String {
        let bare = !text.isEmpty && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "\"" && $0 != "=" && $0 != "\\" && $0.value != 0x7F }
        return bare ? text : JSONValue.string(text).text
    }

    /// Now in UTC, RFC 3339 with milliseconds.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        let fraction = String(repeating: "0", count: 3 - String(milliseconds).count) + String(milliseconds)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}

/// Every logger of the process writes at `level` in `format` to standard error.
public func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) {
    LoggingSystem.bootstrap { label in
        switch format {
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        case .json, .logfmt:
            return StructuredLogHandler(label: label, format: format, logLevel: level)
        }
    }
}
