import MetricFamilies
import Metrics
import Synchronization

/// Whether a scanning source is scanning now, for `/healthz`: false from the start until the controller accepts
/// the scan, and while the adapter is lost; also `beaconflow_agent_scanning`.
public final class ScanStatus: Sendable {
    private let scanning = Mutex(false)

    public init() {}

    public var isScanning: Bool { scanning.withLock { $0 } }

    func set(scanning value: Bool) {
        scanning.withLock { $0 = value }
        Gauge(AgentMetrics.scanning).record(value ? 1 : 0)
    }
}
