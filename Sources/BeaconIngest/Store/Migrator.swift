import LibPQ
import Logging

/// One versioned schema change: a file of `Store/Migrations/` (`vNNN.sql`, whose first line is `-- ` and its
/// name). Migrations only ever move forward; each runs in its own transaction.
public struct Migration: Sendable {
    public var version: Int
    public var name: String
    public var sql: String

    init(version: Int, file: [UInt8]) {
        self.version = version
        sql = String(decoding: file, as: UTF8.self)
        let firstLine = sql.prefix { $0 != "\n" }
        precondition(firstLine.hasPrefix("-- "), "migration \(version) does not begin with its name")
        name = String(firstLine.dropFirst(3))
    }
}

/// The `beaconflow` schema (docs/schema.md), as the versioned migrations that build it; `schema/beaconflow.sql`
/// shows what they make. The public views are the contract users and dashboards query: their names and columns
/// only ever grow.
enum Schema {
    /// The files of `Store/Migrations/`, in version order from 1.
    static let migrations: [Migration] = [
        PackageResources.v001_sql, PackageResources.v002_sql, PackageResources.v003_sql, PackageResources.v004_sql,
        PackageResources.v005_sql, PackageResources.v006_sql, PackageResources.v007_sql, PackageResources.v008_sql,
        PackageResources.v009_sql, PackageResources.v010_sql, PackageResources.v011_sql, PackageResources.v012_sql,
        PackageResources.v013_sql,
        PackageResources.v014_sql,
        PackageResources.v015_sql,
        PackageResources.v016_sql,
        PackageResources.v017_sql,
        PackageResources.v018_sql,
        PackageResources.v019_sql,
        PackageResources.v020_sql,
        PackageResources.v021_sql,
        PackageResources.v022_sql,
        PackageResources.v023_sql,
        PackageResources.v024_sql,
        PackageResources.v025_sql,
        PackageResources.v026_sql,
        PackageResources.v027_sql,
        PackageResources.v028_sql,
        PackageResources.v029_sql,
        PackageResources.v030_sql,
        PackageResources.v031_sql,
        PackageResources.v032_sql,
        PackageResources.v033_sql,
        PackageResources.v034_sql,
        PackageResources.v035_sql,
        PackageResources.v036_sql,

    ].enumerated().map { Migration(version: $0.offset + 1, file: $0.element) }
}

/// Brings the `beaconflow` schema to the newest version. Several ingest instances may start at once: an advisory
/// lock lets one migrate while the others wait, then find nothing left to do.
public enum Migrator {
    /// `pg_advisory_lock` key: 'bflw' 'migr' as two int32.
    static let lockKey = "1651991415, 1835624306"

    /// Applies what is missing, up to `version` (the newest by default; an older one builds a previous schema, for
    /// upgrade tests); returns the versions applied.
    @discardableResult
    public static func migrate(
        _ connection: PostgresConnection, through version: Int = .max, logger: Logger
    ) throws(PostgresError) -> [Int] {
        // Nothing to do needs no privilege: a login that may only write rows (beaconflow_writer) starts on a
        // schema its owner has migrated.
        if let current = try currentVersion(connection), current >= min(version, latestVersion) { return [] }
        try connection.execute("SELECT pg_advisory_lock(\(lockKey))")
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock(\(lockKey))") }
        try connection.execute(
            """
            CREATE SCHEMA IF NOT EXISTS beaconflow;
            CREATE TABLE IF NOT EXISTS beaconflow.schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            """)
        let applied = Set(
            try connection.query("SELECT version FROM beaconflow.schema_migrations").map { (row) throws(PostgresError) in
                try row.decode(0, as: Int.self)
            })
        var done: [Int] = []
        for migration in Schema.migrations where !applied.contains(migration.version) && migration.version <= version {
            do {
                try connection.execute("BEGIN")
                try connection.execute(migration.sql)
                try connection.query(
                    "INSERT INTO beaconflow.schema_migrations (version, name) VALUES ($1, $2)",
                    [Int32(migration.version), migration.name])
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                let advice =
                    error.sqlState == "42501"
                    ? " (this login may not change the schema: run `beaconflow migrate` as the schema's owner)" : ""
                throw PostgresError(
                    "migration \(migration.version) (\(migration.name))", sqlState: error.sqlState, error.message + advice)
            }
            logger.info("Schema migration applied", metadata: ["version": .stringConvertible(migration.version), "name": "\(migration.name)"])
            done.append(migration.version)
        }
        return done
    }

    /// The newest version applied to the database, or nil when it has no beaconflow schema yet.
    public static func currentVersion(_ connection: PostgresConnection) throws(PostgresError) -> Int? {
        guard try connection.query("SELECT to_regclass('beaconflow.schema_migrations') IS NOT NULL").first?.decode(0, as: Bool.self) == true
        else { return nil }
        return try connection.query("SELECT max(version) FROM beaconflow.schema_migrations").first?.decode(0, as: Int?.self)
    }

    /// The newest version this build knows.
    public static var latestVersion: Int { Schema.migrations.map(\.version).max() ?? 0 }
}
