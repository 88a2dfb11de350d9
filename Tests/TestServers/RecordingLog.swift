import Logging
import Synchronization

/// A logger whose messages a test reads back (message and metadata), to check what an operator would see.
public final class RecordingLog: Sendable {
    public struct Entry: Sendable, CustomStringConvertible {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
        public var description: String { "\(level) \(message) \(metadata)" }
    }

    private let entries = Mutex<[Entry]>([])

    public init() {}

    public var all: [Entry] { entries.withLock { $0 } }

    public func logger(label: String) -> Logger {
        Logger(label: label) { _ in Handler(log: self) }
    }

    /// A logger whose messages go to `other` as well; those at `level` and above are recorded.
    public func logger(label: String, recording level: Logger.Level, alsoTo other: @escaping (String) -> any LogHandler) -> Logger {
        Logger(label: label) { MultiplexLogHandler([other($0), Handler(log: self, logLevel: level)]) }
    }

    fileprivate func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    private struct Handler: LogHandler {
        let log: RecordingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            log.append(Entry(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
