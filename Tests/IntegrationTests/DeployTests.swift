import BeaconAgent
import BeaconIngest
import Foundation
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing
import Yams

/// The files of deploy/, checked with the tools that read them.
struct DeployTests {
    static let deploy = deployDirectory

    /// `systemd-analyze verify` says nothing about either unit (it prints, and still exits 0, for a mistyped key
    /// or value), with ExecStart pointing at the built binary (it checks that the program exists).
    @Test(
        .enabled(if: findExecutable("systemd-analyze") != nil, "systemd-analyze is not installed"),
        .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func theSystemdUnitsVerify() async throws {
        let work = try makeTemporaryDirectory(prefix: "units")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let units = ["beaconflow-agent.service", "beaconflow-ingest.service", "beaconflow-migrate.service"]
        for unit in units {
            let text = try String(contentsOfFile: Self.deploy + "/systemd/" + unit, encoding: .utf8)
            try text.replacingOccurrences(of: "/usr/local/bin/beaconflow", with: beaconflowExecutable!)
                .write(toFile: work + "/" + unit, atomically: true, encoding: .utf8)
        }
        let verify = try await runProgram(findExecutable("systemd-analyze")!, ["verify", "--man=no"] + units.map { work + "/" + $0 })
        #expect(verify.status == 0 && verify.output.isEmpty && verify.errors.isEmpty, "\(verify.output)\(verify.errors)")
        // Only the agent gets capabilities.
        let agent = try String(contentsOfFile: work + "/" + units[0], encoding: .utf8)
        let ingest = try String(contentsOfFile: work + "/" + units[1], encoding: .utf8)
        #expect(agent.contains("AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN"))
        #expect(ingest.contains("CapabilityBoundingSet=\n") && !ingest.contains("CAP_NET"))
        // The check itself catches a mistake.
        try agent.replacingOccurrences(of: "Restart=always", with: "Restart=sometimes")
            .write(toFile: work + "/broken.service", atomically: true, encoding: .utf8)
        let broken = try await runProgram(findExecutable("systemd-analyze")!, ["verify", "--man=no", work + "/broken.service"])
        #expect(!(broken.output + broken.errors).isEmpty)
    }

    /// Docker is not available to the tests: check what can be checked without it. Every file the compose file
    /// mounts from the repository exists (certs/, secrets/ and sites.yaml are the operator's, made by the steps at
    /// its top), and every service of the issue is there.
    @Test func theComposeFileMountsFilesThatExist() throws {
        let compose = try String(contentsOfFile: Self.deploy + "/docker-compose.yml", encoding: .utf8)
        let mounts = compose.split(separator: "\n").compactMap { line -> String? in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("- ./") || text.hasPrefix("- ../") else { return nil }
            return String(text.dropFirst(2).split(separator: ":")[0])
        }
        #expect(mounts.count >= 8)
        let operatorMade = ["./certs", "./sites.yaml"]
        for mount in mounts where !operatorMade.contains(where: { mount.hasPrefix($0) }) {
            #expect(FileManager.default.fileExists(atPath: Self.deploy + "/" + mount), "\(mount) is missing")
        }
        for service in ["mosquitto:", "postgres:", "migrate:", "ingest:", "prometheus:", "grafana:"] {
            #expect(compose.contains("\n  \(service)\n"), "no \(service) service")
        }
        #expect(FileManager.default.fileExists(atPath: Self.deploy + "/Dockerfile"))
        let dockerfile = try String(contentsOfFile: Self.deploy + "/Dockerfile", encoding: .utf8)
        #expect(dockerfile.contains("USER 10001") && dockerfile.components(separatedBy: "\nFROM ").count == 3)
    }

    /// deploy/prometheus.yml and its alerting rules load in promtool, the rules' unit tests pass, every alert has
    /// a test in which it fires, and every metric a rule reads is one the ingest or the agent makes.
    @Test(.enabled(if: findExecutable("promtool") != nil, "promtool is not installed"))
    func thePrometheusAlertRulesLoadAndPassTheirTests() async throws {
        let promtool = findExecutable("promtool")!
        let work = try makeTemporaryDirectory(prefix: "prometheus")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try String(contentsOfFile: Self.deploy + "/prometheus.yml", encoding: .utf8)
            .replacingOccurrences(of: "/etc/prometheus/beaconflow-alerts.yml", with: Self.deploy + "/prometheus-alerts.yml")
            .write(toFile: work + "/prometheus.yml", atomically: true, encoding: .utf8)
        let config = try await runProgram(promtool, ["check", "config", work + "/prometheus.yml"])
        #expect(config.status == 0 && (config.output + config.errors).contains("SUCCESS: 1 rule files found"), "\(config.output)\(config.errors)")
        let tests = try await runProgram(promtool, ["test", "rules", Self.deploy + "/prometheus-alerts.test.yml"])
        #expect(tests.status == 0, "\(tests.output)\(tests.errors)")

        let rules = try String(contentsOfFile: Self.deploy + "/prometheus-alerts.yml", encoding: .utf8)
        let testText = try String(contentsOfFile: Self.deploy + "/prometheus-alerts.test.yml", encoding: .utf8)
        let alerts = rules.split(separator: "\n").compactMap { line -> String? in
            let text = line.trimmingCharacters(in: .whitespaces)
            return text.hasPrefix("- alert: ") ? String(text.dropFirst(9)) : nil
        }
        #expect(alerts.count >= 10)
        for alert in alerts {
            let firing = testText.components(separatedBy: "alertname: \(alert)\n").dropFirst()
                .contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("exp_alerts:\n") }
            #expect(firing, "no test in which \(alert) fires")
        }
        let declared = Set((AgentMetrics.all + IngestMetrics.all).flatMap(\.seriesNames))
        let used = try NSRegularExpression(pattern: #"expr: .*"#).matches(in: rules, range: NSRange(rules.startIndex..., in: rules))
            .flatMap { match -> [String] in
                let expression = String(rules[Range(match.range, in: rules)!])
                return expression.split(whereSeparator: { !($0.isLetter || $0 == "_") }).map(String.init).filter { $0.hasPrefix("beaconflow_") }
            }
        #expect(Set(used).count >= 9)
        for metric in Set(used) {
            #expect(declared.contains(metric), "\(metric) is not a metric beaconflow makes")
        }
    }

    /// Every variable docker-compose.yml reads is documented in .env.example (which prepare-compose copies to
    /// .env), and .env.example names none it does not read; Grafana's admin password is a secret, not admin/admin.
    @Test func theComposeVariablesAreDocumented() throws {
        let compose = try String(contentsOfFile: Self.deploy + "/docker-compose.yml", encoding: .utf8)
        let example = try String(contentsOfFile: Self.deploy + "/.env.example", encoding: .utf8)
        let read = Set(compose.matches(of: #/\$\{([A-Z_][A-Z0-9_]*)/#).map { String($0.output.1) })
        let documented = Set(example.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: "=").first.map(String.init) })
        #expect(read.count >= 5)
        #expect(read == documented, "read by the compose file: \(read.sorted()); in .env.example: \(documented.sorted())")
        #expect(compose.contains("GF_SECURITY_ADMIN_PASSWORD__FILE: /run/secrets/grafana-admin-password"))
        let notifications = try String(contentsOfFile: repositoryRoot + "/dashboards/provisioning/alerting/notifications.yaml", encoding: .utf8)
        let provisioned = try #require(try Yams.load(yaml: notifications) as? [String: Any])
        let contactPoints = (provisioned["contactPoints"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        let policies = provisioned["policies"] as? [[String: Any]] ?? []
        #expect(contactPoints == ["beaconflow-operators"] && policies.first?["receiver"] as? String == "beaconflow-operators")
        #expect(notifications.contains("${BEACONFLOW_ALERT_EMAIL}") && compose.contains("BEACONFLOW_ALERT_EMAIL: ${BEACONFLOW_ALERT_EMAIL"))
    }

    @Test func theExampleSitesFileLoads() throws {
        let sites = try SitesConfiguration.load(path: Self.deploy + "/config/sites.yaml")
        #expect(sites.sites.map(\.id) == ["hq"] && sites.sites[0].agents.count == 3)
        #expect(sites.identities.count == 1)
    }

    /// deploy/make-certificates and deploy/mosquitto (paths moved to a temporary directory): an agent connects
    /// over TLS with its password and may publish its own batches but not another agent's, nor its own under
    /// another site; the ingest may acknowledge, and an agent taking the ingest's client id does not push it off.
    @Test(.enabled(if: MosquittoServer.executable != nil && findExecutable("mosquitto_passwd", extraDirectories: ["/usr/bin"]) != nil, "mosquitto is not installed"))
    func theBrokerConfigurationKeepsEachAgentToItsOwnTopics() async throws {
        let work = try makeTemporaryDirectory(prefix: "deploy-broker")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let (broker, port) = try await startShippedBroker(in: work, users: ["hq/hq-a1", "hq/hq-a2", "ingest-2", "homeassistant"])
        for bad in ["hq/Bad_Name", "hq-a1", "hq/a/b", "ingest-1"] {
            #expect(try await runProgram(Self.deploy + "/make-certificates", [work + "/pki", "127.0.0.1", bad]).status == 64, "\(bad)")
        }

        func client(_ user: String, clientID: String? = nil) async throws -> (MQTTClient, Collector<MQTTEvent>) {
            var settings = MQTTClient.Configuration(host: "127.0.0.1", port: port, clientID: clientID ?? "deploy-\(user)")
            settings.username = user
            settings.password = try shippedPassword(in: work, user: user)
            settings.tls = MQTTClient.TLS(caFile: work + "/pki/ca.pem")
            let client = try MQTTClient(settings, logger: Logger(label: user))
            let events = Collector(client.events)
            client.start()
            try await events.first(within: .seconds(10)) { if case .connected = $0 { true } else { false } }
            return (client, events)
        }
        func reason(_ client: (MQTTClient, Collector<MQTTEvent>), _ topic: String) async throws -> Int32 {
            let id = try client.0.publish(topic: topic, payload: [1, 2, 3])
            let event = try await client.1.first(within: .seconds(10)) {
                if case .published(id, _) = $0 { true } else { false }
            }
            guard case .published(_, let code) = event else { return -1 }
            return code
        }
        let agent = try await client("hq/hq-a1")
        defer { agent.0.stop() }
        #expect(try await reason(agent, "beaconflow/v1/hq/hq-a1/batch") < 0x80)
        #expect(try await reason(agent, "beaconflow/v1/hq/hq-a1/status") < 0x80)
        #expect(try await reason(agent, "beaconflow/v1/hq/hq-a2/batch") == 135, "\(broker.log)")
        #expect(try await reason(agent, "beaconflow/v1/lab/hq-a1/batch") == 135, "another site")
        #expect(try await reason(agent, "beaconflow/v1/hq/hq-a1/ack") == 135)
        let ingest = try await client("ingest", clientID: "beaconflow-ingest-1")
        defer { ingest.0.stop() }
        #expect(try await reason(ingest, "beaconflow/v1/hq/hq-a1/ack") < 0x80)
        #expect(try await reason(ingest, "beaconflow/v1/hq/hq-a1/batch") == 135)
        let second = try await client("ingest-2")
        defer { second.0.stop() }
        #expect(try await reason(second, "beaconflow/v1/hq/hq-a2/ack") < 0x80)
        // The ingest's rejection notice reaches the agent it is about, and the agent cannot forge one.
        try agent.0.subscribe(topic: "beaconflow/v1/hq/hq-a1/rejection")
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await reason(agent, "beaconflow/v1/hq/hq-a1/rejection") == 135)
        #expect(try await reason(ingest, "beaconflow/v1/hq/hq-a1/rejection") < 0x80)
        try await agent.1.first(within: .seconds(10)) {
            if case .message("beaconflow/v1/hq/hq-a1/rejection", [1, 2, 3], _) = $0 { true } else { false }
        }
        // Live presence: the ingest publishes it and the discovery configs, a Home Assistant reader reads them and
        // may publish neither, nor may an agent.
        let reader = try await client("homeassistant")
        defer { reader.0.stop() }
        for filter in ["beaconflow/v1/+/presence/#", "homeassistant/#", "beaconflow/v1/+/+/batch"] { try reader.0.subscribe(topic: filter) }
        try await Task.sleep(for: .milliseconds(300))
        for topic in [
            "beaconflow/v1/hq/presence/zones/lobby", "beaconflow/v1/presence/availability", "homeassistant/sensor/beaconflow/x/config",
            "homeassistant/device_tracker/beaconflow/x/config", "homeassistant/binary_sensor/beaconflow/x/config",
        ] {
            #expect(try await reason(ingest, topic) < 0x80, "\(topic)")
            #expect(try await reason(reader, topic) == 135, "\(topic)")
            #expect(try await reason(agent, topic) == 135, "\(topic)")
        }
        #expect(try await reason(reader, "homeassistant/status") < 0x80)
        try await reader.1.first(within: .seconds(10)) {
            if case .message("beaconflow/v1/hq/presence/zones/lobby", [1, 2, 3], _) = $0 { true } else { false }
        }
        _ = try await reason(agent, "beaconflow/v1/hq/hq-a1/batch")
        try await Task.sleep(for: .milliseconds(300))
        #expect(!reader.1.all.contains { if case .message(let topic, _, _) = $0 { topic.hasSuffix("/batch") } else { false } }, "no batches")
        // An agent claiming the ingest's client id gets its own user name as id: the ingest stays connected.
        let impostor = try await client("hq/hq-a2", clientID: "beaconflow-ingest-1")
        defer { impostor.0.stop() }
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await reason(ingest, "beaconflow/v1/hq/hq-a2/ack") < 0x80)
        #expect(ingest.1.all.allSatisfy { if case .disconnected = $0 { false } else { true } }, "\(ingest.1.all)")
    }
}
