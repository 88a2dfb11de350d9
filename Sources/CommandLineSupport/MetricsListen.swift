import BeaconMessaging
import Logging
import MetricFamilies
import Metrics
import MetricsEndpoint
import Prometheus
import ServiceLifecycle

/// Where a command serves `/metrics` and `/healthz` (`--metrics-listen`): HOST:PORT, [IPv6]:PORT, or `none`.
public struct MetricsListenAddress: Sendable {
    public var host: String
    public var port: Int

    /// nil for `none`.
    public static func parse(_ text: String) throws(ConfigurationError) -> MetricsListenAddress? {
        guard text != "none" else { return nil }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port)
        else { throw ConfigurationError("--metrics-listen must be HOST:PORT, [IPv6]:PORT or none, not '\(text)'") }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return MetricsListenAddress(host: host, port: port)
    }

    /// Sends every swift-metrics metric made from now on to a new Prometheus registry, described by `families`:
    /// call it before making the component whose counters `serve` should report.
    public static func bootstrapRegistry(families: [MetricFamily]) -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(DescribedMetricsFactory(registry: registry, families: families))
        return registry
    }

    /// Binds the endpoint and starts serving; `MetricsService` stops it with its service group.
    public func serve(
        _ registry: PrometheusCollectorRegistry, logger: Logger, health: @escaping @Sendable () -> MetricsEndpoint.Health
    ) throws(MetricsEndpoint.Failure) -> MetricsEndpoint {
        let endpoint = try MetricsEndpoint(host: host, port: port, registry: registry, health: health)
        logger.info("Serving /metrics and /healthz", metadata: ["listen": "\(host):\(endpoint.port)"])
        return endpoint
    }
}

/// `/metrics` and `/healthz` as a service of the command's group: serves until the group shuts down.
struct MetricsService: Service, CustomStringConvertible {
    /// What swift-service-lifecycle logs of it: its name, never its fields (a connection string, a token).
    var description: String { "metrics endpoint" }

    let endpoint: MetricsEndpoint

    func run() async throws {
        try? await gracefulShutdown()
        endpoint.stop()
    }
}
