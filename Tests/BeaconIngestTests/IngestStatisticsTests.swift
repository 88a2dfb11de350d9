@testable import BeaconIngest
import Foundation
import Mosquitto
import TestServers
import Testing

@Suite struct IngestStatisticsTests {
    /// `/healthz` and the log line at the stop name the same counts, each once, as fields (no struct dump).
    @Test func healthAndTheStopLogNameEveryCountOnce() throws {
        var statistics = IngestStatistics()
        statistics.batchesCommitted = 3
        statistics.lagSeconds = 0.25
        let names = statistics.fields.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.allSatisfy { $0.allSatisfy { $0.isLowercase || $0 == "_" } })
        #expect(statistics.fields.first { $0.name == "batches_committed" }?.value == "3")

        let ingest = Ingest(
            configuration: IngestConfiguration(
                mqtt: MQTTClient.Configuration(host: "127.0.0.1", port: 1883, clientID: "statistics-test"),
                database: "host=127.0.0.1", sites: try SitesConfiguration.parse(testSites)),
            logger: .init(label: "statistics-test"))
        let health = ingest.health
        let document = try #require(try JSONSerialization.jsonObject(with: Data(health.json.utf8)) as? [String: Any])
        #expect(health.healthy == false && document["healthy"] as? Bool == false)
        #expect(Set(document.keys) == Set(["healthy"] + names), "\(health.json)")
        #expect(document["sites_unserved"] as? Int == 0)
    }
}
