import ArgumentParser
import BeaconIngest
import LibPQ
import Logging

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or update the beaconflow schema, its roles and its public views.",
        discussion: """
            Applies the schema migrations this version knows and has not applied yet, each in its own \
            transaction, under an advisory lock (several ingest instances starting at once are safe). The ingest \
            also runs it at start. PG* environment variables work as in psql.

            Examples:
              beaconflow migrate --database postgresql://beaconflow@127.0.0.1/beaconflow
              PGHOST=/run/postgresql PGDATABASE=beaconflow beaconflow migrate
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions

    func run() throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let logger = Logger(label: "beaconflow.migrate")
        do {
            let connection = try PostgresConnection(databaseOptions.database)
            let applied = try Migrator.migrate(connection, logger: logger)
            print(
                applied.isEmpty
                    ? "schema is at version \(Migrator.latestVersion); nothing to do"
                    : "applied migrations \(applied.map(String.init).joined(separator: ", ")); schema is at version \(Migrator.latestVersion)")
        } catch {
            logger.error("Migration failed", metadata: ["error": "\(error)"])
            throw ExitCode(error.isConnectionFailure ? 69 : 1)
        }
    }
}
