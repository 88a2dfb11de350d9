import BeaconWire
import Foundation
import WorkQueue

/// An advertising report with the time it was received (Unix microseconds).
public struct TimedReport: Sendable {
    public var timeMicros: Int64
    public var report: AdvertisingReport
    /// Its number in a replayed input (0 for the first), so that a replay can resume after it; nil when live.
    public var ordinal: Int64?

    public init(timeMicros: Int64, report: AdvertisingReport, ordinal: Int64? = nil) {
        self.timeMicros = timeMicros
        self.report = report
        self.ordinal = ordinal
    }
}

/// Where adverts come from. `run` blocks (it runs on a thread of its own, never on Swift's cooperative pool),
/// hands reports to `deliver` as they come, and returns when the source ends or `stop` is signalled (a wait for
/// the next report of a paced replay ends at the signal).
public protocol AdvertSource: Sendable {
    var name: String { get }
    func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws
}

/// A finite input that can be started part-way: replaying it again resumes where the spool says it got to
/// (`ReplayPosition`).
public protocol ResumableSource: AdvertSource {
    /// What identifies the input, the same for the same content.
    func inputIdentity() throws -> String
    /// The same source, skipping the reports before number `report` but those listed in `again`.
    func starting(at report: Int64, again: [Int64]) -> Self
}

/// How fast a replay runs.
public enum ReplaySpeed: Hashable, Sendable, CustomStringConvertible {
    /// As fast as the pipeline takes it.
    case maximum
    /// `factor` × real time (1 = the capture's own pace).
    case factor(Double)

    public init?(_ text: String) {
        if text == "max" {
            self = .maximum
        } else if let factor = Double(text), factor > 0, factor.isFinite {
            self = .factor(factor)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .maximum: "max"
        case .factor(let factor): "\(factor)"
        }
    }
}

/// A source failure that names the file and what went wrong.
public struct SourceError: Error, Equatable, CustomStringConvertible, Sendable {
    public var source: String
    public var message: String

    public init(source: String, _ message: String) {
        self.source = source
        self.message = message
    }

    public var description: String { "\(source): \(message)" }
}

/// Replays the advertising reports of a btsnoop, pcap or pcapng capture, with the capture's timestamps.
public struct CaptureReplaySource: ResumableSource {
    public let path: String
    public let speed: ReplaySpeed
    /// Reports before this number are skipped (a resumed replay), unpaced, but those in `readAgain`.
    public var firstReport: Int64 = 0
    public var readAgain: Set<Int64> = []
    public var name: String { "replay:\(path)" }
    static let pacingStep: Duration = .milliseconds(25)

    public init(path: String, speed: ReplaySpeed) {
        self.path = path
        self.speed = speed
    }

    public func inputIdentity() throws -> String { try Self.identity(of: path) }

    public func starting(at report: Int64, again: [Int64]) -> CaptureReplaySource {
        var source = self
        source.firstReport = report
        source.readAgain = Set(again)
        return source
    }

    public func run(deliver: ([TimedReport]) -> Void, stop: StopSignal) throws {
        let handle = try openReplayInput(path, "capture file")
        defer { try? handle.close() }
        var reader = CaptureReader()
        var decoder = AdvertisingReportDecoder()
        let started = ContinuousClock.now
        var firstTimestamp: Int64?
        var pending: [TimedReport] = []
        var ordinal: Int64 = 0
        while !stop.isStopped {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 64 * 1024) ?? Data()
            } catch {
                if !pending.isEmpty { deliver(pending) }
                throw SourceError(source: path, "cannot read the capture file (\(error.localizedDescription))")
            }
            if chunk.isEmpty { break }
            reader.append(chunk)
            do {
                while let record = try reader.next() {
                    guard record.kind == .event, record.received else { continue }
                    guard let reports = try? decoder.reports(fromEvent: record.packet), !reports.isEmpty else { continue }
                    let first = ordinal
                    ordinal += Int64(reports.count)
                    guard ordinal > firstReport || (first..<ordinal).contains(where: readAgain.contains) else { continue }
                    if case .factor(let factor) = speed {
                        let first = firstTimestamp ?? record.timestamp
                        firstTimestamp = first
                        let offset = Double(record.timestamp.subtractingReportingOverflow(first).partialValue) / factor
                        let due = started + .microseconds(Int64(clamping: Int64(exactly: offset.rounded()) ?? 0))
                        // Paced in 25 ms steps: waking for every advert would cost more than decoding it.
                        if due > ContinuousClock.now + Self.pacingStep {
                            if !pending.isEmpty {
                                deliver(pending)
                                pending.removeAll()
                            }
                            stop.wait(until: due)
                        }
                    }
                    for (index, report) in reports.enumerated()
                    where first + Int64(index) >= firstReport || readAgain.contains(first + Int64(index)) {
                        pending.append(TimedReport(timeMicros: record.timestamp, report: report, ordinal: first + Int64(index)))
                    }
                    if pending.count >= 256 {
                        deliver(pending)
                        pending.removeAll()
                    }
                }
            } catch {
                if !pending.isEmpty { deliver(pending) }
                throw SourceError(source: path, "\(error)")
            }
        }
        if !pending.isEmpty { deliver(pending) }
        if !stop.isStopped {
            do { try reader.finish() } catch { throw SourceError(source: path, "\(error)") }
        }
    }
}
