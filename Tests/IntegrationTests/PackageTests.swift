import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// Where `scripts/package-root` leaves a clean Debian 12 root with the package installed.
let packageRoot = repositoryRoot + "/.build-package-root"

/// The Debian package as an operator meets it: installed by apt into a clean Debian 12 root (scripts/package-root,
/// from scripts/build-packages), booted in a VM with its own systemd, the packaged units started with settings
/// in /etc/beaconflow against this test's broker and PostgreSQL on the host (10.0.2.2 from the guest), the
/// agent with a password file and the ingest and migration without any.
@Suite(
    .enabled(
        if: FileManager.default.fileExists(atPath: packageRoot + "/.beaconflow-installed"),
        "no package root: run scripts/build-packages and scripts/package-root"),
    .enabled(if: radioVMReady, "the VM is not prepared: run scripts/radio-vm prepare"),
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(6)))
struct PackageTests {
    /// The guest's script: the settings in place, the ingest (and with it the migration) and an agent started by
    /// systemd from the packaged units, the ingest healthy, reloaded by `systemctl reload` and the agent's batches
    /// acknowledged, then both stopped as `systemctl stop` does; what systemd and the journal say is left in the
    /// work directory.
    static let guestScript = #"""
        [ -n "${BASH_VERSION:-}" ] || exec bash "$0"  # for /dev/tcp
        set -u
        http() { exec 3<>"/dev/tcp/127.0.0.1/$1" || return; printf 'GET %s HTTP/1.0\r\n\r\n' "$2" >&3; cat <&3; exec 3<&-; }
        cp etc/* /etc/beaconflow/ && chmod 0600 /etc/beaconflow/*.pw
        systemctl start beaconflow-ingest.service beaconflow-agent.service
        for attempt in $(seq 90); do
            health=$(http 9464 /healthz 2>/dev/null)
            case "$health" in *'"healthy": true'*) break ;; esac
            sleep 1
        done
        echo "$health" > ingest-health
        systemctl reload beaconflow-ingest.service
        echo $? > reload-status
        for attempt in $(seq 30); do
            journalctl --no-pager -o cat -u beaconflow-ingest | grep -q 'Sites file read again' && break
            sleep 1
        done
        for attempt in $(seq 90); do
            acknowledged=$(http 9465 /metrics 2>/dev/null | sed -n 's/^beaconflow_agent_batches_acknowledged_total //p')
            [ "${acknowledged:-0}" -ge 3 ] && break
            sleep 1
        done
        echo "${acknowledged:-0}" > agent-acknowledged
        systemctl show -p Id -p ActiveState -p Result -p NRestarts beaconflow-migrate beaconflow-ingest beaconflow-agent > units
        systemctl stop beaconflow-agent.service beaconflow-ingest.service
        systemctl show -p Id -p ActiveState -p Result -p ExecMainStatus beaconflow-ingest beaconflow-agent > stopped
        journalctl --no-pager -o cat -u beaconflow-migrate -u beaconflow-ingest -u beaconflow-agent > journal
        dpkg-query -W -f='${Version}' beaconflow > version
        """#

    @Test func thePackagedUnitsRunTheIngestAndAnAgent() async throws {
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "package")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try FileManager.default.createDirectory(atPath: work + "/etc", withIntermediateDirectories: true)
        let brokerURL = "mqtt://10.0.2.2:\(broker.port)"
        let databaseURL = "postgresql://postgres@10.0.2.2:\(database.port)/postgres?connect_timeout=5"
        let files = [
            "sites.yaml": testSites,
            "ingest.yaml": """
                sites: /etc/beaconflow/sites.yaml
                broker: \(brokerURL)
                database: \(databaseURL)
                metrics_listen: 127.0.0.1:9464
                """,
            // The agent's unit runs beaconflow-agent, which has no simulator: a capture replayed at a twentieth of
            // its pace keeps it sending for three minutes.
            "agent.yaml": """
                site: hq
                agent: hq-a1
                source: btsnoop:/etc/beaconflow/capture.btsnoop
                speed: 0.05
                broker: \(brokerURL)
                metrics_listen: 127.0.0.1:9465
                ack_timeout: 2
                """,
            "migrate.env": "BEACONFLOW_OWNER_DATABASE=\(databaseURL)\n",
            // The agent's password goes through its credential; the ingest and the migration have none (an
            // anonymous broker, a database that trusts the address): their units start all the same.
            "agent-mqtt.pw": "unused\n",
        ]
        for (name, text) in files { try text.write(toFile: work + "/etc/" + name, atomically: true, encoding: .utf8) }
        try FileManager.default.copyItem(atPath: exampleFile("mixed-beacons.btsnoop"), toPath: work + "/etc/capture.btsnoop")
        try Self.guestScript.write(toFile: work + "/guest.sh", atomically: true, encoding: .utf8)

        let run = try await runProgram(repositoryRoot + "/scripts/radio-vm", ["boot", packageRoot, work, "guest.sh", "300"])
        func read(_ name: String) -> String { (try? String(contentsOfFile: work + "/" + name, encoding: .utf8)) ?? "" }
        let context = "\(run.errors)\n--- guest\n\(read("guest.log"))\n--- journal\n\(read("journal"))"
        #expect(run.status == 0, "\(context)")
        #expect(!read("version").isEmpty, "the package is not installed: \(context)")

        // Every unit up, none restarted; the migration done.
        let units = read("units").components(separatedBy: "\n\n")
        #expect(units.count == 3, "\(read("units"))")
        for unit in units {
            #expect(unit.contains("ActiveState=active") && unit.contains("Result=success"), "\(unit)\n\(context)")
            if !unit.contains("beaconflow-migrate") { #expect(unit.contains("NRestarts=0"), "\(unit)") }
        }
        #expect(read("ingest-health").contains(#""database_connected": true"#), "\(read("ingest-health"))\n\(context)")
        #expect((Int(read("agent-acknowledged").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 3, "\(context)")
        // Stopped as systemd stops them: SIGTERM, then a clean exit.
        for unit in read("stopped").components(separatedBy: "\n\n") {
            #expect(unit.contains("ActiveState=inactive") && unit.contains("Result=success") && unit.contains("ExecMainStatus=0"), "\(unit)\n\(context)")
        }
        #expect(read("journal").contains("Connected to PostgreSQL") && read("journal").contains("Ingest stopped"), "\(context)")
        // `systemctl reload` in a root with no procps: the sites file read again, nothing changed.
        #expect(read("reload-status").trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(context)")
        #expect(read("journal").contains("Sites file read again; nothing changed"), "\(context)")

        // What the agent heard is in the host's database, written by the packaged ingest.
        let connection = try PostgresConnection(database.conninfo)
        let sightings = try connection.query("SELECT count(*) FROM beaconflow.sightings WHERE site_id = 'hq' AND agent_id = 'hq-a1'")
        #expect((Int(sightings[0][0] ?? "") ?? 0) > 0)
    }
}
