import ArgumentParser
import LibPQ

/// The PostgreSQL connection of the ingest, `migrate` and `report`.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "libpq connection URI or conninfo (default: from the PG* environment variables). Several hosts with target_session_attrs=read-write follow a primary that fails over to a standby: host=db1,db2 dbname=beaconflow target_session_attrs=read-write.")
    var database = ""

    func validate() throws {
        if let problem = PostgresConnection.syntaxError(in: database) { throw ValidationError("--database: \(problem)") }
    }
}
