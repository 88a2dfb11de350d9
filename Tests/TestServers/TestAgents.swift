import BeaconAgent
import BeaconMessaging

/// An agent of site `hq` publishing to a broker on 127.0.0.1 `brokerPort`, for tests: small batches sealed
/// within 100 ms, acknowledgements awaited 5 s before a resend (sooner, a loaded debug ingest is sent everything
/// again while it is still committing it), and a drain timeout generous enough for a two-core machine running the
/// whole suite at once (what is tested is what arrives, not how fast).
public func testAgentConfiguration(brokerPort: Int, spool: String, agent: String = "hq-a1") throws -> AgentConfiguration {
    var configuration = try AgentConfiguration(
        siteID: "hq", agentID: agent, broker: BrokerAddress(host: "127.0.0.1", port: brokerPort), spoolDirectory: spool)
    configuration.batch.maximumAgeNanoseconds = 100_000_000
    configuration.batch.maximumSightings = 200
    configuration.acknowledgementTimeout = .seconds(5)
    configuration.drainTimeout = .seconds(150)
    return configuration
}
