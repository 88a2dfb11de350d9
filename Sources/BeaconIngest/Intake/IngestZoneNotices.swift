import Foundation
import Logging

extension Ingest {
    /// What committed zone changes tell the operator: each change of whether a site's zone decisions wait for an
    /// agent is logged once; live presence follows them.
    func zonesChanged(_ changes: [ZoneChange], health: [BeaconHealth] = [], readings: [SensorReadingRow] = []) {
        presence.withLock { $0?.committed(changes, health: health, readings: readings) }
        for case .agentState(let site, let agent, let state, let since) in changes {
            let metadata: Logger.Metadata = [
                "site": "\(site)", "agent": "\(agent)", "zone_state": "\(state.rawValue)",
                "since": "\(Date(timeIntervalSince1970: Double(since) / 1_000_000).ISO8601Format())",
            ]
            switch state {
            case .awaited: logger.info("A site's zone decisions wait for an agent's first batch", metadata: metadata)
            case .letGo: logger.warning("A site's zone decisions go on without a silent agent", metadata: metadata)
            // Quiet agents go in and out of these every few seconds: not worth a line each time.
            case .holding: logger.debug("A site's zone decisions wait for a silent or lagging agent", metadata: metadata)
            case .live: logger.debug("An agent keeps its site's zone decisions moving", metadata: metadata)
            }
        }
    }
}
