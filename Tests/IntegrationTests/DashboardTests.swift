import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing
import Yams

/// Grafana's PostgreSQL macros, expanded as Grafana does (facts from its macro engine: `$__timeFilter(c)` →
/// `c BETWEEN '<from>' AND '<to>'`, `$__timeGroup(c, '5m')` → `floor(extract(epoch from c)/300)*300`, ...), and
/// the dashboards' template variables.
struct GrafanaMacros {
    var from: String
    var to: String
    var interval = "1m"
    var variables: [String: [String]] = [:]

    static func seconds(_ interval: String) -> Int {
        let text = interval.trimmingCharacters(in: CharacterSet(charactersIn: "' "))
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        guard let unit = text.last, let factor = units[unit], let count = Int(text.dropLast()) else { return Int(text) ?? 60 }
        return count * factor
    }

    func expand(_ sql: String) -> String {
        var text = sql.replacingOccurrences(of: "$__interval_ms", with: String(Self.seconds(interval) * 1000))
            .replacingOccurrences(of: "$__interval", with: interval)
        func replace(_ pattern: String, _ make: ([String]) -> String) {
            let regex = try! NSRegularExpression(pattern: pattern)
            while let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) {
                let groups = (1..<match.numberOfRanges).map { index in
                    Range(match.range(at: index), in: text).map { String(text[$0]).trimmingCharacters(in: .whitespaces) } ?? ""
                }
                text.replaceSubrange(Range(match.range, in: text)!, with: make(groups))
            }
        }
        replace(#"\$__timeGroupAlias\(([^,()]+),([^()]+)\)"#) { "floor(extract(epoch from \($0[0]))/\(Self.seconds($0[1])))*\(Self.seconds($0[1])) AS \"time\"" }
        replace(#"\$__timeGroup\(([^,()]+),([^()]+)\)"#) { "floor(extract(epoch from \($0[0]))/\(Self.seconds($0[1])))*\(Self.seconds($0[1]))" }
        replace(#"\$__timeFilter\(([^()]+)\)"#) { "\($0[0]) BETWEEN '\(from)' AND '\(to)'" }
        replace(#"\$__time\(([^()]+)\)"#) { "\($0[0]) AS \"time\"" }
        replace(#"\$__timeFrom\(\)"#) { _ in "'\(from)'" }
        replace(#"\$__timeTo\(\)"#) { _ in "'\(to)'" }
        for (name, values) in variables {
            text = text.replacingOccurrences(of: "$" + name, with: values.map { "'\($0)'" }.joined(separator: ","))
        }
        return text
    }
}

@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct DashboardTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../dashboards").standardized.path

    struct Query {
        var dashboard: String
        var panel: String
        var sql: String
        var timeSeries: Bool
    }

    /// Every PostgreSQL query of every dashboard: the panels' and the template variables'.
    static func queries() throws -> [Query] {
        var queries: [Query] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: directory).filter({ $0.hasSuffix(".json") }).sorted() {
            let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file))
            let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            for variable in (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? [] {
                if let sql = variable["query"] as? String { queries.append(Query(dashboard: file, panel: "$\(variable["name"] ?? "")", sql: sql, timeSeries: false)) }
            }
            for panel in dashboard["panels"] as? [[String: Any]] ?? [] {
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    guard let sql = target["rawSql"] as? String else { continue }
                    queries.append(
                        Query(dashboard: file, panel: panel["title"] as? String ?? "?", sql: sql, timeSeries: target["format"] as? String == "time_series"))
                }
            }
        }
        return queries
    }

    @Test func theMacrosExpandAsGrafanaDoes() {
        let macros = GrafanaMacros(from: "2026-01-01T09:00:00Z", to: "2026-01-01T11:00:00Z", interval: "5m", variables: ["site": ["hq", "lab"]])
        #expect(macros.expand("SELECT $__timeGroupAlias(bucket, $__interval), x FROM t WHERE $__timeFilter(bucket) AND s IN ($site)")
            == "SELECT floor(extract(epoch from bucket)/300)*300 AS \"time\", x FROM t WHERE bucket BETWEEN '2026-01-01T09:00:00Z' AND '2026-01-01T11:00:00Z' AND s IN ('hq','lab')")
        #expect(macros.expand("SELECT $__time(ts), $__timeGroup(ts, '1h') WHERE ts < $__timeTo() AND ts >= $__timeFrom() -- $__interval_ms")
            == "SELECT ts AS \"time\", floor(extract(epoch from ts)/3600)*3600 WHERE ts < '2026-01-01T11:00:00Z' AND ts >= '2026-01-01T09:00:00Z' -- 300000")
    }

    /// The example reporting queries of docs/schema.md and the README's, each run as the reader role.
    static func documentedQueries() throws -> [String] {
        let text = try String(contentsOfFile: directory + "/../docs/schema.md", encoding: .utf8)
        let examples = text.components(separatedBy: "## Example reporting queries").last ?? ""
        let readme = try String(contentsOfFile: directory + "/../README.md", encoding: .utf8)
        let blocks = ([examples] + [readme]).compactMap { $0.components(separatedBy: "```sql").dropFirst().first?.components(separatedBy: "```").first }
        return blocks.joined(separator: ";").components(separatedBy: ";").map { statement in
            statement.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }.filter { !$0.isEmpty }
    }

    /// The dashboards' queries, expanded, run as the reader role against the views of a simulated site: no SQL
    /// error, only the public views, a `time` column in every time series, and data in every time series. And the
    /// documented example queries.
    @Test func everyPanelQueryRunsOnThePublicViews() async throws {
        let queries = try Self.queries()
        #expect(Set(queries.map(\.dashboard)) == ["fleet-health.json", "occupancy.json", "pipeline-health.json"])
        #expect(queries.count >= 15)
        let (harness, _, _) = try await SimulatedSiteTests.playDemoScenario()
        let connection = try PostgresConnection(harness.database.conninfo)
        let sites = try connection.query("SELECT DISTINCT site_id FROM beaconflow.agent_health").compactMap { $0[0] }
        let macros = GrafanaMacros(from: "2026-01-01T09:00:00Z", to: "2026-01-01T11:00:00Z", variables: ["site": sites])
        try connection.execute("SET ROLE beaconflow_reader")
        let views = Set(try MigrationTests.documentedViews().keys)
        let relation = try NSRegularExpression(pattern: #"beaconflow\.([a-z_]+)"#)
        for (index, query) in queries.enumerated() {
            let sql = macros.expand(query.sql)
            let place = "\(query.dashboard) / \(query.panel)"
            #expect(!sql.contains("$"), "\(place): unexpanded \(sql)")
            let used = relation.matches(in: sql, range: NSRange(sql.startIndex..., in: sql)).compactMap {
                Range($0.range(at: 1), in: sql).map { String(sql[$0]) }
            }
            #expect(!used.isEmpty && Set(used).isSubset(of: views), "\(place) reads \(used)")
            do {
                try connection.execute("CREATE TEMP VIEW panel_\(index) AS \(sql)")
                let columns = try connection.query(
                    "SELECT attname FROM pg_attribute WHERE attrelid = 'panel_\(index)'::regclass AND attnum > 0 ORDER BY attnum"
                ).compactMap { $0[0] }
                let rows = Int(try connection.query("SELECT count(*) FROM panel_\(index)")[0][0] ?? "") ?? 0
                if query.timeSeries {
                    #expect(columns.contains("time"), "\(place): a time series without a time column: \(columns)")
                    #expect(rows > 0, "\(place): no data over the simulated hour")
                }
            } catch {
                Issue.record("\(place): \(error)\n\(sql)")
            }
        }
        let documented = try Self.documentedQueries()
        #expect(documented.count == 17, "the 15 of docs/schema.md and the README's 2")
        for sql in documented {
            do {
                _ = try connection.query(sql)
            } catch {
                Issue.record("documented query: \(error)\n\(sql)")
            }
        }
        try checkAlertRules(connection, site: try #require(sites.first))
    }

    struct AlertRule {
        var uid: String
        var sql: String
    }

    /// The Grafana alert rules: each a PostgreSQL query (refId A, the provisioned datasource) and a threshold on
    /// it that is the rule's condition.
    static func alertRules() throws -> [AlertRule] {
        let text = try String(contentsOfFile: directory + "/provisioning/alerting/beaconflow.yaml", encoding: .utf8)
        let file = try #require(try Yams.load(yaml: text) as? [String: Any])
        let groups = try #require(file["groups"] as? [[String: Any]])
        var rules: [AlertRule] = []
        for rule in groups.flatMap({ $0["rules"] as? [[String: Any]] ?? [] }) {
            let uid = rule["uid"] as? String ?? "?"
            let data = rule["data"] as? [[String: Any]] ?? []
            let query = try #require(data.first { $0["refId"] as? String == "A" }, "\(uid): no query A")
            let condition = try #require(data.first { $0["refId"] as? String == rule["condition"] as? String }, "\(uid): no condition")
            let threshold = condition["model"] as? [String: Any] ?? [:]
            #expect(query["datasourceUid"] as? String == "beaconflow-pg", "\(uid)")
            #expect(threshold["type"] as? String == "threshold" && threshold["expression"] as? String == "A", "\(uid): the condition is not a threshold on A")
            #expect(rule["noDataState"] as? String == "OK", "\(uid): a site with nothing to report must count as normal")
            let model = query["model"] as? [String: Any] ?? [:]
            rules.append(AlertRule(uid: uid, sql: try #require(model["rawSql"] as? String, "\(uid): no SQL")))
        }
        return rules
    }

    /// Each rule's query as the reader, as Grafana's alerting runs it: rows of one site label and one number.
    /// With everything well (beacons just heard with full batteries, agents online and sending, every site served)
    /// no rule returns a row; with one beacon low, one stale, one cloned, one agent offline and one silent, each of
    /// those five rules returns that site with 1 and the site-wide rules stay quiet; with the site unserved and every
    /// online agent silent, the site-wide rules return that site with 1.
    func checkAlertRules(_ connection: PostgresConnection, site: String) throws {
        let rules = try Self.alertRules()
        let agentRules: Set = [
            "beaconflow-low-battery", "beaconflow-stale-beacons", "beaconflow-cloned-beacons", "beaconflow-agents-offline",
            "beaconflow-agents-silent",
        ]
        let siteRules: Set = ["beaconflow-site-unserved", "beaconflow-site-not-committing"]
        #expect(Set(rules.map(\.uid)) == agentRules.union(siteRules))
        func evaluate() throws -> [String: [[String?]]] {
            try connection.execute("SET ROLE beaconflow_reader")
            defer { try? connection.execute("RESET ROLE") }
            var results: [String: [[String?]]] = [:]
            for rule in rules {
                try connection.execute("CREATE OR REPLACE TEMP VIEW alert_rule AS \(rule.sql)")
                let types = try connection.query(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'alert_rule'::regclass AND attnum > 0 ORDER BY attnum"
                ).compactMap { $0[0] }
                #expect(types == ["text", "bigint"], "\(rule.uid): columns \(types)")
                results[rule.uid] = try connection.query("SELECT * FROM alert_rule").map(\.values)
                try connection.execute("DROP VIEW alert_rule")
            }
            return results
        }
        try connection.execute("RESET ROLE")
        try connection.execute("BEGIN")
        defer { try? connection.execute("ROLLBACK") }
        // Every beacon reading low on a frosty night, with months of charge counted left, and a night forecast colder
        // than any of them carries, but none outdoors: nothing to replace.
        try connection.execute(
            """
            UPDATE beaconflow.beacon_state SET last_seen = now(), status = 'ok', est_days_left = 365, battery_mv = 2300,
                temperature_c = -15, forecast = 'charge_counting', days_left_low = 300, replace_by = now() + interval '300 days',
                coldest_carried_c = -20
            """)
        _ = try connection.query("INSERT INTO beaconflow.night_forecasts VALUES ($1, current_date + 3, -25)", [site])
        try connection.execute(
            "UPDATE beaconflow.agent_state SET online = true, online_since = now(), last_batch_at = now(), last_error = NULL")
        // Every site held by a live session (this one) until the transaction is rolled back.
        try connection.execute("DELETE FROM beaconflow.site_claims")
        try connection.execute(
            """
            INSERT INTO beaconflow.site_claims (site_id, instance, claimed_at, backend_pid, epoch, expires_at)
            SELECT site_id, 'test', now(), pg_backend_pid(), 1, now() + interval '1 hour'
            FROM (SELECT site_id FROM beaconflow.zones UNION SELECT site_id FROM beaconflow.agent_health) s
            """)
        for (uid, rows) in try evaluate() { #expect(rows.isEmpty, "\(uid) fires with everything well: \(rows)") }

        let beacons = try connection.query("SELECT beacon_id FROM beaconflow.beacon_state WHERE site_id = $1 ORDER BY beacon_id LIMIT 3", [site]).compactMap { $0[0] }
        let agents = try connection.query("SELECT agent_id FROM beaconflow.agent_state WHERE site_id = $1 ORDER BY agent_id LIMIT 2", [site]).compactMap { $0[0] }
        try #require(beacons.count == 3 && agents.count == 2)
        _ = try connection.query("UPDATE beaconflow.beacon_state SET status = 'low_battery', est_days_left = 12 WHERE beacon_id = $1", [beacons[0]])
        _ = try connection.query("UPDATE beaconflow.beacon_state SET last_seen = now() - interval '1 day' WHERE beacon_id = $1", [beacons[1]])
        _ = try connection.query("UPDATE beaconflow.beacon_state SET status = 'cloned', cloned_since = now() WHERE beacon_id = $1", [beacons[2]])
        _ = try connection.query("UPDATE beaconflow.agent_state SET online = false WHERE site_id = $1 AND agent_id = $2", [site, agents[0]])
        _ = try connection.query(
            "UPDATE beaconflow.agent_state SET online_since = now() - interval '1 hour', last_batch_at = now() - interval '1 hour' WHERE site_id = $1 AND agent_id = $2",
            [site, agents[1]])
        for (uid, rows) in try evaluate() {
            #expect(rows == (agentRules.contains(uid) ? [[site, "1"]] : []), "\(uid): \(rows)")
        }
        // The low cell's charge lasting months again, but it hangs outdoors: the forecast night would stop it.
        _ = try connection.query("UPDATE beaconflow.beacon_state SET status = 'ok', est_days_left = 365 WHERE beacon_id = $1", [beacons[0]])
        _ = try connection.query(
            "INSERT INTO beaconflow.beacon_registry (beacon_id, outdoors) VALUES ($1, true) ON CONFLICT (beacon_id) DO UPDATE SET outdoors = true", [beacons[0]])
        #expect(try evaluate()["beaconflow-low-battery"] == [[site, "1"]])

        _ = try connection.query("DELETE FROM beaconflow.site_claims WHERE site_id = $1", [site])
        _ = try connection.query("UPDATE beaconflow.agent_state SET online = false WHERE site_id = $1", [site])
        _ = try connection.query(
            "UPDATE beaconflow.agent_state SET online = true, last_batch_at = now() - interval '1 hour' WHERE site_id = $1 AND agent_id = $2",
            [site, agents[1]])
        let results = try evaluate()
        for uid in siteRules { #expect(results[uid] == [[site, "1"]], "\(uid): \(results[uid] ?? [])") }
    }
}
