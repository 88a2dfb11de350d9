import AccuracyHarness
import Foundation

extension RecordedWalk {
    /// Says on standard error which of the recording's receivers no agent of the site replays, and how many readings
    /// that leaves out: a receiver whose name reads as an id the sites file does not list is otherwise silent.
    func sayReceiversWithoutAgent(command: String) {
        let left = receiversWithoutAgent
        guard !left.isEmpty else { return }
        let named = left.prefix(10).map { "\($0.receiver) (\($0.readings))" }.joined(separator: ", ")
        let more = left.count > 10 ? " and \(left.count - 10) more" : ""
        FileHandle.standardError.write(
            Data("beaconflow \(command): \(path): receivers no agent of site '\(site.id)' replays, their readings left out: \(named)\(more)\n".utf8))
    }
}
