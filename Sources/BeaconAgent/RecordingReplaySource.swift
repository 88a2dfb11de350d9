import BeaconWire
import Foundation
import Logging
import WorkQueue

/// Replays what one receiver heard in a recording (docs/recordings.md): the rows whose receiver is `receiver`, as
/// that receiver's controller would have reported them, with the recording's times. A row that cannot be read
/// (real recordings hold a few: an RSSI of +42 dBm) is skipped and said, with its line; a file whose header cannot
/// be read is refused. Any recording of RSSI (a
/// public dataset, a user's own site logged by other receivers) so runs through the agents, the broker, the ingest
/// and PostgreSQL as live radio does.
public struct RecordingReplaySource: ResumableSource {
    public let path: String
    public let receiver: String
    public let speed: ReplaySpeed
    /// Reports (this receiver's rows) before this number are skipped, unpaced, but those in `readAgain`.
    public var firstReport: Int64 = 0
    public var readAgain: Set<Int64> = []
    public var name: String { "recording:\(path)" }
    let logger: Logger
    /// Skipped rows said one by one, at most; the rest are counted at the end.
    static let rowsSaid = 10
    /// Transmitters the recording names (neither an address nor a beacon id) said with the id the pipeline gives
    /// them, at most.
    static let namesSaid = 100

    public init(path: String, receiver: String, speed: ReplaySpeed, logger: Logger = Logger(label: "beaconflow.recording")) {
        self.path = path
        self.receiver = receiver
        self.speed = speed
        self.logger = logger
    }

    public func inputIdentity() throws -> String { "recording:\(receiver):" + (try CaptureReplaySource.identity(of: path, "recording")) }

    public func starting(at report: Int64, again: [Int64]) -> RecordingReplaySource {
        var source = self
        source.firstReport = report
        source.readAgain = Set(again)
        return source
    }

    public func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws {
        let handle = try openReplayInput(path, "recording")
        defer { try? handle.close() }
        var reader = RecordingReader()
        var buffer: [UInt8] = []
        var pending: [TimedReport] = []
        var ordinal: Int64 = 0
        var firstTime: Int64?
        var skipped = 0
        var namesSaid: Set<String> = []
        let started = ContinuousClock.now
        func flush() {
            if !pending.isEmpty { deliver(pending) }
            pending.removeAll()
        }
        func take(_ line: ArraySlice<UInt8>) throws {
            func say(_ error: RecordingError) {
                skipped += 1
                if skipped <= Self.rowsSaid {
                    logger.warning("Recording line skipped", metadata: ["path": "\(path)", "line": .stringConvertible(error.line), "error": "\(error.message)"])
                }
            }
            let read: RecordingLine
            do {
                read = try reader.read(line: Substring(decoding: line, as: UTF8.self))
            } catch where reader.headerRead {
                say(error)
                return
            } catch {
                flush()
                throw SourceError(source: path, "\(error)")
            }
            read.skipped.forEach(say)
            // A line holds at most one reading of each receiver.
            guard let row = read.rows.first(where: { $0.receiver == receiver }) else { return }
            if let name = row.transmitterName, namesSaid.count < Self.namesSaid, namesSaid.insert(name).inserted {
                logger.info(
                    "Recording transmitter named", metadata: ["path": "\(path)", "name": "\(name)", "address": "\(row.address)"])
            }
            defer { ordinal += 1 }
            guard ordinal >= firstReport || readAgain.contains(ordinal) else { return }
            if case .factor(let factor) = speed {
                let first = firstTime ?? row.timeMicros
                firstTime = first
                let due = started + .microseconds(Int64(Double(row.timeMicros - first) / factor))
                // Paced in 25 ms steps, as a capture's replay is.
                if due > ContinuousClock.now + CaptureReplaySource.pacingStep {
                    flush()
                    stop.wait(until: due)
                }
            }
            pending.append(TimedReport(timeMicros: row.timeMicros, report: row.report, ordinal: ordinal))
            if pending.count >= 256 { flush() }
        }
        while !stop.isStopped {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 64 * 1024) ?? Data()
            } catch {
                flush()
                throw SourceError(source: path, "cannot read the recording (\(error.localizedDescription))")
            }
            if chunk.isEmpty { break }
            buffer += chunk
            var start = buffer.startIndex
            while let end = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try take(buffer[start..<end])
                start = end + 1
                if stop.isStopped { break }
            }
            buffer.removeSubrange(..<start)
        }
        if !stop.isStopped, !buffer.isEmpty { try take(buffer[...]) }
        flush()
        if skipped > 0 { logger.warning("Recording lines skipped", metadata: ["path": "\(path)", "lines": .stringConvertible(skipped)]) }
    }
}
