import Logging
import MetricsEndpoint
import ServiceLifecycle

/// Runs a command's service until it ends or SIGTERM/SIGINT asks it to stop gracefully, with its `/metrics`
/// endpoint when there is one: listed first, the endpoint stops last and answers while the service shuts down.
public func runUntilSignalled(_ service: some Service, metrics: MetricsEndpoint?, logger: Logger) async throws {
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
    if let metrics {
        services.append(.init(service: MetricsService(endpoint: metrics), successTerminationBehavior: .gracefullyShutdownGroup))
    }
    services.append(.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup))
    let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
}
