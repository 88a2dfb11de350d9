import Foundation
import LibPQ

/// What `beaconflow report` prints, read from the public views only (what a reader role may see): occupancy per
/// zone now and at peak, the longest dwells, the beacons and agents that need attention.
///
/// "Now" is each site's newest counted minute, and the peak is over the 24 hours before it, so a replay of old
/// captures reports its own day rather than an empty present.
public struct Report: Sendable, Equatable, Codable {
    public struct ZoneOccupancy: Sendable, Equatable, Codable {
        public var siteID: String
        public var zoneID: String
        /// Beacons in the zone during the site's newest counted minute.
        public var now: Int
        public var nowAt: String
        public var peak: Int
        /// The first minute with the peak.
        public var peakAt: String
        /// Visits that began in the 24 hours before the newest minute.
        public var visits: Int
        /// Average occupants over those 24 hours (as far as counted), from the seconds of presence.
        public var average: Double

        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", zoneID = "zone_id", now = "occupants_now", nowAt = "now_at"
            case peak = "peak_occupants", peakAt = "peak_at", visits = "visits_24h", average = "avg_occupants_24h"
        }
    }

    public struct Dwell: Sendable, Equatable, Codable {
        public var siteID: String
        public var zoneID: String
        public var beaconID: String
        /// The beacon's label in the sites file's registry.
        public var label: String?
        public var enteredAt: String
        /// Seconds; an open visit's runs to the site's newest sighting.
        public var dwellSeconds: Double
        public var open: Bool

        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", zoneID = "zone_id", beaconID = "beacon_id", label, enteredAt = "enter_ts"
            case dwellSeconds = "dwell_s", open
        }
    }

    public struct BeaconAttention: Sendable, Equatable, Codable {
        public var siteID: String
        public var beaconID: String
        public var label: String?
        public var status: String
        public var lastSeen: String
        public var batteryMillivolts: Int?
        public var trendMillivoltsPerDay: Double?
        /// For beacons that report their battery in percent only.
        public var batteryPercent: Double?
        public var trendPercentPerDay: Double?
        public var estimatedDaysLeft: Double?
        public var reboots7Days: Int

        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", beaconID = "beacon_id", label, status, lastSeen = "last_seen"
            case batteryMillivolts = "battery_mv", trendMillivoltsPerDay = "battery_trend_mv_per_day"
            case batteryPercent = "battery_pct", trendPercentPerDay = "battery_trend_pct_per_day"
            case estimatedDaysLeft = "est_days_left", reboots7Days = "reboots_7d"
        }
    }

    public struct AgentAttention: Sendable, Equatable, Codable {
        public var siteID: String
        public var agentID: String
        /// `offline` or `silent`.
        public var state: String
        public var lastBatchAt: String?
        public var lastError: String?

        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", agentID = "agent_id", state, lastBatchAt = "last_batch_at", lastError = "last_error"
        }
    }

    public var occupancy: [ZoneOccupancy] = []
    public var longestDwells: [Dwell] = []
    public var beacons: [BeaconAttention] = []
    public var agents: [AgentAttention] = []
    /// Rows of each bounded list that `limit` left out.
    public var leftOut = LeftOut()

    public struct LeftOut: Sendable, Equatable, Codable {
        public var longestDwells = 0
        public var beacons = 0
        public var agents = 0

        enum CodingKeys: String, CodingKey {
            case longestDwells = "longest_dwells", beacons, agents
        }
    }

    enum CodingKeys: String, CodingKey {
        case occupancy, longestDwells = "longest_dwells", beacons, agents, leftOut = "left_out"
    }

    /// Reads the report; `site` limits it to one site, `limit` bounds the dwell, beacon and agent lists (`leftOut`
    /// says how many rows each list had beyond it). Throws a
    /// `ReportError` when the schema is missing or the site unknown, a `PostgresError` when a query fails.
    public static func load(_ connection: PostgresConnection, site: String? = nil, limit: Int = 10) throws -> Report {
        guard try connection.query("SELECT to_regclass('beaconflow.zone_occupancy') IS NOT NULL").first?.decode(0, as: Bool.self) == true
        else {
            throw ReportError(
                "the database has no beaconflow schema this login can read: run `beaconflow migrate` (as the schema's owner) first, or check --database")
        }
        if let site {
            let known = try connection.query(
                """
                SELECT site_id FROM beaconflow.agent_health UNION SELECT site_id FROM beaconflow.zone_occupancy
                UNION SELECT site_id FROM beaconflow.beacons WHERE site_id IS NOT NULL ORDER BY 1
                """
            ).map { try $0.decode(0, as: String.self) }
            guard known.contains(site) else {
                throw ReportError(
                    "site '\(site)' has no data in the database; "
                        + (known.isEmpty ? "no site has any yet" : "sites with data: \(known.joined(separator: ", "))"))
            }
        }
        var report = Report()
        let filter: [any PostgresBindable] = [site, limit]
        report.occupancy = try connection.query(
            """
            WITH newest AS (
                SELECT site_id, max(bucket) AS bucket FROM beaconflow.zone_occupancy
                WHERE $1::text IS NULL OR site_id = $1 GROUP BY site_id
            ), recent AS (
                SELECT o.site_id, o.zone_id, o.bucket, o.occupants, o.occupant_seconds, n.bucket AS newest
                FROM beaconflow.zone_occupancy o JOIN newest n USING (site_id)
                WHERE o.bucket > n.bucket - interval '24 hours'
            )
            SELECT r.site_id, r.zone_id,
                   coalesce(max(r.occupants) FILTER (WHERE r.bucket = r.newest), 0),
                   \(timestamp("max(r.newest)")),
                   max(r.occupants),
                   \(timestamp("(array_agg(r.bucket ORDER BY r.occupants DESC, r.bucket))[1]")),
                   (SELECT count(*) FROM beaconflow.visits v WHERE v.site_id = r.site_id AND v.zone_id = r.zone_id
                      AND v.enter_ts > max(r.newest) - interval '24 hours'),
                   round((sum(coalesce(r.occupant_seconds, r.occupants * 60.0)) / (60.0 * count(*)))::numeric, 2)
            FROM recent r GROUP BY r.site_id, r.zone_id ORDER BY 1, 2
            """, filter
        ).map { row in
            ZoneOccupancy(
                siteID: try row.decode(0), zoneID: try row.decode(1), now: try row.decode(2), nowAt: try row.decode(3),
                peak: try row.decode(4), peakAt: try row.decode(5), visits: try row.decode(6), average: try row.decode(7))
        }
        report.longestDwells = try connection.query(
            """
            WITH newest AS (
                SELECT site_id, (SELECT max(last_seen) FROM beaconflow.beacon_health h WHERE h.site_id = z.site_id) AS at
                FROM (SELECT DISTINCT site_id FROM beaconflow.zone_occupancy) z
            )
            SELECT v.site_id, v.zone_id, v.beacon_id, \(timestamp("v.enter_ts")),
                   coalesce(v.dwell_s, greatest(0, extract(epoch FROM n.at - v.enter_ts)::double precision)),
                   v.exit_ts IS NULL, \(label("v.beacon_id")), count(*) OVER ()
            FROM beaconflow.visits v LEFT JOIN newest n USING (site_id)
            WHERE $1::text IS NULL OR v.site_id = $1
            ORDER BY 5 DESC NULLS LAST, v.beacon_id LIMIT $2
            """, filter
        ).map { row in
            report.leftOut.longestDwells = try row.decode(7, as: Int.self)
            return Dwell(
                siteID: try row.decode(0), zoneID: try row.decode(1), beaconID: try row.decode(2),
                label: try row.decode(6, as: String?.self), enteredAt: try row.decode(3), dwellSeconds: try row.decode(4),
                open: try row.decode(5))
        }
        report.beacons = try connection.query(
            """
            SELECT site_id, beacon_id, status, \(timestamp("last_seen")), battery_mv, battery_trend_mv_per_day,
                   est_days_left, reboots_7d, battery_pct, battery_trend_pct_per_day, \(label("h.beacon_id")),
                   count(*) OVER ()
            FROM beaconflow.beacon_health h
            WHERE status <> 'ok' AND ($1::text IS NULL OR site_id = $1)
            ORDER BY CASE status WHEN 'cloned' THEN 0 WHEN 'low_battery' THEN 1 WHEN 'rebooting' THEN 2 ELSE 3 END,
                     est_days_left NULLS LAST, beacon_id
            LIMIT $2
            """, filter
        ).map { row in
            report.leftOut.beacons = try row.decode(11, as: Int.self)
            return BeaconAttention(
                siteID: try row.decode(0), beaconID: try row.decode(1), label: try row.decode(10, as: String?.self),
                status: try row.decode(2), lastSeen: try row.decode(3), batteryMillivolts: try row.decode(4, as: Int?.self),
                trendMillivoltsPerDay: try row.decode(5, as: Double?.self), batteryPercent: try row.decode(8, as: Double?.self),
                trendPercentPerDay: try row.decode(9, as: Double?.self), estimatedDaysLeft: try row.decode(6, as: Double?.self),
                reboots7Days: try row.decode(7, as: Int?.self) ?? 0)
        }
        report.agents = try connection.query(
            """
            SELECT site_id, agent_id, CASE WHEN NOT online THEN 'offline' ELSE 'silent' END,
                   \(timestamp("last_batch_at")), last_error, count(*) OVER ()
            FROM beaconflow.agent_health
            WHERE (NOT online OR last_error LIKE 'silent:%') AND ($1::text IS NULL OR site_id = $1)
            ORDER BY 1, 2 LIMIT $2
            """, filter
        ).map { row in
            report.leftOut.agents = try row.decode(5, as: Int.self)
            return AgentAttention(
                siteID: try row.decode(0), agentID: try row.decode(1), state: try row.decode(2),
                lastBatchAt: try row.decode(3, as: String?.self), lastError: try row.decode(4, as: String?.self))
        }
        report.leftOut.longestDwells -= report.longestDwells.count
        report.leftOut.beacons -= report.beacons.count
        report.leftOut.agents -= report.agents.count
        return report
    }

    /// The registry label of the beacon an expression names (the `beacons` view).
    private static func label(_ beaconID: String) -> String {
        "(SELECT b.label FROM beaconflow.beacons b WHERE b.beacon_id = \(beaconID))"
    }

    /// An RFC 3339 UTC text of a timestamptz expression, to the second.
    private static func timestamp(_ expression: String) -> String {
        "to_char((\(expression)) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
    }
}

extension Report {
    /// The report as one JSON object (keys as in the views).
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    }

    /// The report as terminal tables.
    public var text: String {
        func number(_ value: Double?, _ digits: Int = 0) -> String { value.map { String(format: "%.\(digits)f", $0) } ?? "-" }
        func duration(_ seconds: Double) -> String { Self.duration(seconds) }
        var sections: [String] = []
        sections.append(
            Self.table(
                "Occupancy per zone (now: the newest counted minute; average, peak and visits: the 24 hours before it)",
                ["site", "zone", "now", "at", "average", "peak", "peak at", "visits"],
                occupancy.map {
                    [$0.siteID, $0.zoneID, String($0.now), $0.nowAt, String(format: "%.2f", $0.average), String($0.peak), $0.peakAt,
                     String($0.visits)]
                },
                rightAligned: [2, 4, 6]))
        sections.append(
            Self.table(
                "Longest dwells", ["site", "zone", "beacon", "label", "entered", "dwell", "visit"],
                longestDwells.map {
                    [$0.siteID, $0.zoneID, $0.beaconID, $0.label ?? "", $0.enteredAt, duration($0.dwellSeconds), $0.open ? "open" : "ended"]
                },
                rightAligned: [5], leftOut: leftOut.longestDwells))
        sections.append(
            Self.table(
                "Beacons needing attention",
                ["site", "beacon", "label", "status", "last seen", "battery", "per day", "days left", "reboots 7d"],
                beacons.map { beacon in
                    let battery: (level: String, trend: String) =
                        if let millivolts = beacon.batteryMillivolts {
                            ("\(millivolts) mV", beacon.trendMillivoltsPerDay.map { number($0, 1) + " mV" } ?? "-")
                        } else if let percent = beacon.batteryPercent {
                            (number(percent) + " %", beacon.trendPercentPerDay.map { number($0, 1) + " %" } ?? "-")
                        } else { ("-", "-") }
                    return [beacon.siteID, beacon.beaconID, beacon.label ?? "", beacon.status, beacon.lastSeen, battery.level,
                            battery.trend, number(beacon.estimatedDaysLeft), String(beacon.reboots7Days)]
                }, rightAligned: [5, 6, 7, 8], leftOut: leftOut.beacons))
        sections.append(
            Self.table(
                "Agents offline or silent", ["site", "agent", "state", "last batch", "last error"],
                agents.map { [$0.siteID, $0.agentID, $0.state, $0.lastBatchAt ?? "never", $0.lastError ?? ""] },
                leftOut: leftOut.agents))
        return sections.joined(separator: "\n")
    }

    /// A dwell as people read it: `4 min 10 s`, `2 h 5 min`, `3 d 4 h`.
    public static func duration(_ seconds: Double) -> String {
        let minutes = Int(seconds / 60)
        let hours = minutes / 60
        if hours >= 48 { return "\(hours / 24) d \(hours % 24) h" }
        return minutes >= 60 ? "\(hours) h \(minutes % 60) min" : "\(minutes) min \(Int(seconds) % 60) s"
    }

    /// A titled table; `leftOut` rows beyond the limit are said under it.
    static func table(
        _ title: String, _ header: [String], _ rows: [[String]], rightAligned: Set<Int> = [], leftOut: Int = 0
    ) -> String {
        guard !rows.isEmpty else { return "\(title): none\n" }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            let text = cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return rightAligned.contains(column) ? padding + cell : cell + padding
            }.joined(separator: "  ")
            return String(text.reversed().drop { $0 == " " }.reversed())
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        let more = leftOut > 0 ? ["(\(leftOut) more not shown: beaconflow report --limit)"] : []
        return ([title, line(header), rule] + rows.map(line) + more).joined(separator: "\n") + "\n"
    }
}

/// Why a report cannot be made, said so that the user can act on it.
public struct ReportError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
