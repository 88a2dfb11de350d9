import Foundation
import LocalServers
import TestServers
import Testing
import Yams

/// deploy/ started the first time, as an operator would, without docker or systemd: every service the compose
/// file runs from an image this machine has a program for (mosquitto, PostgreSQL, migrate, the ingest) runs as
/// that image's user, with the compose file's command, environment, mounts and secrets and nothing else, in a
/// network namespace where the service names resolve to loopback; an agent on a "gateway" then delivers a capture
/// through the published broker port. Prometheus and Grafana are not installed here: their configuration is
/// checked by the dashboard and alert tests.
@Suite(.serialized) struct DeployStartupTests {
    /// The images' users: eclipse-mosquitto's mosquitto, postgres's postgres, and deploy/Dockerfile's USER.
    static let imageUsers = ["mosquitto": 1883, "postgres": 999, "grafana/grafana-oss": 472]

    struct Service {
        var image: String
        var command: [String]
        var environment: [String: String]
        var binds: [ContainedProgram.Mount]
        var namedVolumes: [(name: String, target: String)]
        var secrets: [String]
    }

    /// The services of a compose file, with bind sources made absolute against `directory`.
    static func services(ofComposeFile path: String, directory: String) throws -> [String: Service] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let compose = try #require(try Yams.load(yaml: text) as? [String: Any])
        let services = try #require(compose["services"] as? [String: [String: Any]])
        var result: [String: Service] = [:]
        for (name, service) in services {
            var binds: [ContainedProgram.Mount] = [], volumes: [(String, String)] = []
            for volume in service["volumes"] as? [String] ?? [] {
                let parts = volume.split(separator: ":").map(String.init)
                if parts[0].hasPrefix(".") {
                    let source = URL(fileURLWithPath: directory + "/" + parts[0]).standardized.path
                    binds.append(.init(source, at: parts[1], readOnly: parts.count > 2 && parts[2] == "ro"))
                } else {
                    volumes.append((parts[0], parts[1]))
                }
            }
            result[name] = Service(
                image: service["image"] as? String ?? "",
                command: service["command"] as? [String] ?? [],
                environment: (service["environment"] as? [String: Any] ?? [:]).mapValues { "\($0)" },
                binds: binds, namedVolumes: volumes, secrets: service["secrets"] as? [String] ?? [])
        }
        // Secrets: a file each, mounted at /run/secrets/<name> as it is on the host.
        let secretFiles = (compose["secrets"] as? [String: [String: String]] ?? [:]).compactMapValues { $0["file"] }
        for (name, service) in result {
            for secret in service.secrets {
                let file = try #require(secretFiles[secret], "the secret \(secret) of \(name) has no file")
                result[name]!.binds.append(.init(URL(fileURLWithPath: directory + "/" + file).standardized.path, at: "/run/secrets/" + secret))
            }
        }
        return result
    }

    /// The compose deployment: prepare-compose as root, then the services in their order, each as its image's user.
    @Test(
        .enabled(if: canRunContainedPrograms, "needs root and namespaces"),
        .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil && beaconflowExecutable != nil,
                 "needs mosquitto, PostgreSQL and the built beaconflow"))
    func theComposeServicesStartAsTheirUsersAndTalkToEachOther() async throws {
        let work = try makeTemporaryDirectory(prefix: "compose-startup")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let deploy = work + "/deploy"
        try FileManager.default.copyItem(atPath: deployDirectory, toPath: deploy)
        try FileManager.default.copyItem(atPath: repositoryRoot + "/dashboards", toPath: work + "/dashboards")

        // The operator's step.
        let prepared = try await runProgram(deploy + "/prepare-compose", ["broker.example.net", "hq/hq-a1"])
        #expect(prepared.status == 0, "\(prepared.output)\(prepared.errors)")
        #expect(prepared.output.contains("Grafana's user admin has the password"), "\(prepared.output)")
        // The operator's settings in .env survive a second run; the generated password is written again.
        var environment = try String(contentsOfFile: deploy + "/.env", encoding: .utf8)
        environment = environment.replacingOccurrences(of: "BEACONFLOW_ALERT_EMAIL=\n", with: "BEACONFLOW_ALERT_EMAIL=ops@example.net\n")
        try environment.write(toFile: deploy + "/.env", atomically: true, encoding: .utf8)
        let again = try await runProgram(deploy + "/prepare-compose", ["broker.example.net", "hq/hq-a1", "hq/hq-a2"])
        #expect(again.status == 0, "a second run (adding an agent) fails: \(again.errors)")
        #expect(!again.output.contains("Grafana's user admin has the password"), "the admin password is made once")
        let settings = try String(contentsOfFile: deploy + "/.env", encoding: .utf8)
        let databasePassword = try String(contentsOfFile: deploy + "/secrets/grafana-db-password", encoding: .utf8)
        #expect(settings.contains("BEACONFLOW_ALERT_EMAIL=ops@example.net\n"), "\(settings)")
        #expect(settings.components(separatedBy: "GRAFANA_DB_PASSWORD=").count == 2 && settings.contains("GRAFANA_DB_PASSWORD=\(databasePassword)\n"))
        let adminPassword = try String(contentsOfFile: deploy + "/secrets/grafana-admin-password", encoding: .utf8)
        #expect(adminPassword.count >= 24 && adminPassword != "admin")

        let dockerfile = try String(contentsOfFile: deploy + "/Dockerfile", encoding: .utf8)
        let beaconflowUID = try #require(dockerfile.split(separator: "\n").last { $0.hasPrefix("USER ") }
            .flatMap { Int($0.dropFirst(5).split(separator: ":")[0]) })
        let services = try Self.services(ofComposeFile: deploy + "/docker-compose.yml", directory: deploy)

        // Secrets: readable by their service's user alone. The broker sees no client password and not the CA key.
        for (name, service) in services {
            let uid = service.image.hasPrefix("beaconflow") ? beaconflowUID : Self.imageUsers.first { service.image.hasPrefix("eclipse-" + $0.key) || service.image.hasPrefix($0.key + ":") }?.value
            for bind in service.binds where bind.target.hasPrefix("/run/secrets/") || bind.source.hasSuffix(".key") || bind.source.hasSuffix("/passwd") {
                let attributes = try FileManager.default.attributesOfItem(atPath: bind.source)
                #expect((attributes[.posixPermissions] as? Int ?? 0) & 0o077 == 0, "\(name): \(bind.source) is open to others")
                #expect(attributes[.ownerAccountID] as? Int == uid, "\(name): \(bind.source) is not its user's (\(uid.map(String.init) ?? "?"))")
            }
        }
        let brokerSources = try #require(services["mosquitto"]).binds.map(\.source)
        #expect(!brokerSources.contains { $0.hasSuffix("ca.key") || $0.contains("/secrets") || $0.hasSuffix("/certs") })

        // The containers.
        let (passwd, group) = try containedUserFiles(["mosquitto": 1883, "postgres": 999, "beaconflow": beaconflowUID], in: work)
        let hosts = work + "/hosts"
        try "127.0.0.1 localhost \(services.keys.sorted().joined(separator: " ")) broker.example.net\n"
            .write(toFile: hosts, atomically: true, encoding: .utf8)
        let system: [ContainedProgram.Mount] = [.init(passwd, at: "/etc/passwd"), .init(group, at: "/etc/group"), .init(hosts, at: "/etc/hosts")]
        func volume(_ name: String, owner: Int) throws -> String {
            let path = work + "/volumes/" + name
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            _ = chown(path, uid_t(owner), gid_t(owner))
            return path
        }
        var specifications: [String: ContainedProgram] = [:]
        for name in ["mosquitto", "postgres", "migrate", "ingest"] {
            let service = try #require(services[name], "no service \(name)")
            let uid = name == "mosquitto" ? 1883 : name == "postgres" ? 999 : beaconflowUID
            var mounts = system + service.binds
            for (volumeName, target) in service.namedVolumes {
                mounts.append(.init(try volume(volumeName, owner: uid), at: target, readOnly: false))
            }
            var arguments = service.command
            var owned: [String] = []
            if service.image.hasPrefix("beaconflow") {
                mounts.append(.init(beaconflowExecutable!, at: "/app/beaconflow"))
                arguments = ["/app/beaconflow"] + arguments
            } else if name == "postgres" {
                // What the postgres image's entrypoint does on a first start, as its user.
                let entrypoint = work + "/postgres-entrypoint"
                try Self.postgresEntrypoint.write(toFile: entrypoint, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: entrypoint)
                mounts.append(.init(entrypoint, at: "/docker-entrypoint.sh"))
                // Read by bash rather than executed: a child another test forks while the file is being written
                // may hold it open for writing, and executing it would fail (ETXTBSY).
                arguments = ["/bin/bash", "/docker-entrypoint.sh"]
                owned = ["/var/run/postgresql"]
            }
            specifications[name] = ContainedProgram(
                uid: uid, arguments: arguments,
                environment: service.environment.merging(["PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + PostgresServer.binaries!]) { $1 },
                mounts: mounts, ownedDirectories: owned)
        }
        // A gateway's agent, as the agent unit's dynamic user would run it, through the published port.
        let agentPassword = work + "/agent.pw"
        try FileManager.default.copyItem(atPath: deploy + "/certs/secrets/hq/hq-a1.pw", toPath: agentPassword)
        _ = chown(agentPassword, 61_234, 61_234)
        specifications["agent"] = ContainedProgram(
            uid: 61_234,
            arguments: ["/app/beaconflow", "agent", "--site", "hq", "--agent", "hq-a1", "--source", "btsnoop:/capture.btsnoop",
                        "--speed", "max", "--broker", "mqtts://broker.example.net:8883", "--ca-file", "/ca.pem",
                        "--password-file", "/agent.pw", "--spool", "/var/tmp/spool",
                        // A batch published before the ingest's first subscription is resent after this.
                        "--ack-timeout", "2"],
            mounts: system + [
                .init(beaconflowExecutable!, at: "/app/beaconflow"), .init(exampleFile("mixed-beacons.btsnoop"), at: "/capture.btsnoop"),
                .init(deploy + "/certs/ca.pem", at: "/ca.pem"), .init(agentPassword, at: "/agent.pw"),
            ])
        for (name, program) in specifications {
            try program.specification(root: work + "/roots/" + name).write(toFile: work + "/" + name + ".spec", atomically: true, encoding: .utf8)
        }
        let readerPassword = try String(contentsOfFile: deploy + "/secrets/grafana-db-password", encoding: .utf8)
        let run = try await Self.runDeployment(
            in: work, reader: (user: "grafana", password: readerPassword, sslMode: "prefer"), scrapeMetrics: true)
        run.expectStartedAndDelivered()
        if let metrics = run.results["metrics"] { #expect(metrics == 0 && run.log("metrics").contains("beaconflow_ingest"), "no /metrics") }
        let log = run.log
        #expect(!log("mosquitto").contains("Error"), "\(log("mosquitto"))")
        // The agent left with a DISCONNECT at the end of its capture, not by dropping the connection.
        #expect(log("mosquitto").contains("Client hq/hq-a1 disconnected."), "\(log("mosquitto"))")
        // The broker kept its session state in the image's data directory.
        #expect(FileManager.default.fileExists(atPath: work + "/volumes/mosquitto-data/mosquitto.db"), "mosquitto wrote no persistence file: \(log("mosquitto"))")
    }

    /// The postgres image's first start (docker-entrypoint.sh), as its user: initdb with the password file, the
    /// database, the init scripts against a server on the socket only, then the server. Connections come from
    /// other containers, which the image makes authenticate with passwords: here they come from loopback, so
    /// local TCP needs a password too.
    static let postgresEntrypoint = #"""
        #!/bin/bash
        set -euo pipefail
        export PGDATA=/var/lib/postgresql/data
        initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile=<(cat "$POSTGRES_PASSWORD_FILE"; echo) \
          --auth-local=trust --auth-host=scram-sha-256 > /dev/null
        pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -k /var/run/postgresql" start > /dev/null
        export PGHOST=/var/run/postgresql
        psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" > /dev/null
        for script in /docker-entrypoint-initdb.d/*.sh; do bash "$script"; done
        pg_ctl -D "$PGDATA" -w -m fast stop > /dev/null
        exec postgres -D "$PGDATA" -c listen_addresses='*' -k /var/run/postgresql "$@"
        """#

    /// What systemd makes of a unit's [Service] section, for the keys the shipped units use.
    struct Unit {
        var execStart: [String] = []
        var credentials: [(id: String, path: String)] = []
        var environment: [String: String] = [:]
        var environmentFiles: [String] = []
        var stateDirectory: String?

        init(path: String) throws {
            let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "\\\n", with: " ")
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                let key = String(line[..<equals]), value = String(line[line.index(after: equals)...])
                switch key {
                case "ExecStart": execStart = value.split(whereSeparator: \.isWhitespace).map(String.init)
                case "LoadCredential":
                    let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
                    credentials.append((parts[0], parts[1]))
                case "Environment":
                    let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
                    environment[parts[0]] = parts[1]
                case "EnvironmentFile": environmentFiles.append(value)
                case "StateDirectory": stateDirectory = value
                default: continue
                }
            }
        }
    }

    /// deploy/systemd as an operator installs it (the unit comments' files under /etc/beaconflow, root-only
    /// secrets, the example configs with the certificates of make-certificates), each unit run as systemd would:
    /// a dynamic user, its credentials in a directory only it reads, its state directory, `%d` and `${...}`
    /// expanded, the environment files read. The broker is mosquitto with beaconflow.conf as a drop-in of a
    /// Debian-like main file, PostgreSQL serves TLS as db.example.net; the example host names resolve to loopback.
    /// The agent replays a capture instead of scanning hci0 (its command line adds --source).
    @Test(
        .enabled(if: canRunContainedPrograms, "needs root and namespaces"),
        .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil && beaconflowExecutable != nil,
                 "needs mosquitto, PostgreSQL and the built beaconflow"))
    func theSystemdUnitsStartWithTheirCredentials() async throws {
        let work = try makeTemporaryDirectory(prefix: "systemd-startup")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let files = FileManager.default
        func write(_ text: String, _ path: String, mode: Int = 0o600, owner: Int = 0) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            try files.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
            _ = chown(path, uid_t(owner), gid_t(owner))
        }
        func read(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

        // The broker's and the database's certificates, the MQTT users.
        let made = try await runProgram(deployDirectory + "/make-certificates", [work + "/pki", "broker.example.net", "hq/hq-a1"])
        #expect(made.status == 0, "\(made.errors)")
        let dbMade = try await runProgram(deployDirectory + "/make-certificates", [work + "/db-pki", "db.example.net"])
        #expect(dbMade.status == 0, "\(dbMade.errors)")

        // /etc/beaconflow as the unit comments describe it.
        let etc = work + "/etc-beaconflow"
        try files.createDirectory(atPath: etc, withIntermediateDirectories: true)
        for name in ["ingest.yaml", "agent.yaml", "sites.yaml", "migrate.env"] {
            try write(try read(deployDirectory + "/config/" + name), etc + "/" + name, mode: 0o644)
        }
        try write(try read(work + "/pki/ca.pem"), etc + "/ca.pem", mode: 0o644)
        try write(try read(work + "/db-pki/ca.pem"), etc + "/db-ca.pem", mode: 0o644)
        try write(try read(work + "/pki/secrets/ingest.pw"), etc + "/ingest-mqtt.pw")
        try write(try read(work + "/pki/secrets/hq/hq-a1.pw"), etc + "/agent-mqtt.pw")
        let ownerPassword = "owner-" + UUID().uuidString, ingestPassword = "ingest-" + UUID().uuidString
        try write("db.example.net:5432:beaconflow:beaconflow:\(ownerPassword)\n", etc + "/owner.pgpass")
        try write("db.example.net:5432:beaconflow:ingest:\(ingestPassword)\n", etc + "/ingest.pgpass")

        let (passwd, group) = try containedUserFiles(["mosquitto": 1883, "postgres": 999], in: work)
        let hosts = work + "/hosts"
        try write("127.0.0.1 localhost broker.example.net db.example.net\n", hosts, mode: 0o644)
        let system: [ContainedProgram.Mount] = [.init(passwd, at: "/etc/passwd"), .init(group, at: "/etc/group"), .init(hosts, at: "/etc/hosts")]
        let path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + PostgresServer.binaries!
        var specifications: [String: ContainedProgram] = [:]

        // mosquitto as the Debian package runs it, with beaconflow.conf in conf.d and its files readable by mosquitto.
        let broker = work + "/broker"
        try files.createDirectory(atPath: broker + "/data", withIntermediateDirectories: true)
        _ = chown(broker + "/data", 1883, 1883)
        try write("persistence true\npersistence_location /var/lib/mosquitto/\nlog_dest stderr\ninclude_dir /etc/mosquitto/conf.d\n", broker + "/mosquitto.conf", mode: 0o644)
        for name in ["broker.key", "passwd"] { try write(try read(work + "/pki/" + name), broker + "/" + name, mode: 0o600, owner: 1883) }
        specifications["mosquitto"] = ContainedProgram(
            uid: 1883, arguments: ["mosquitto", "-c", "/etc/mosquitto/mosquitto.conf"], environment: ["PATH": path],
            mounts: system + [
                .init(broker + "/mosquitto.conf", at: "/etc/mosquitto/mosquitto.conf"),
                .init(deployDirectory + "/mosquitto/beaconflow.conf", at: "/etc/mosquitto/conf.d/beaconflow.conf"),
                .init(deployDirectory + "/mosquitto/acl", at: "/etc/mosquitto/beaconflow/acl"),
                .init(work + "/pki/ca.pem", at: "/etc/mosquitto/beaconflow/ca.pem"),
                .init(work + "/pki/broker.pem", at: "/etc/mosquitto/beaconflow/broker.pem"),
                .init(broker + "/broker.key", at: "/etc/mosquitto/beaconflow/broker.key"),
                .init(broker + "/passwd", at: "/etc/mosquitto/beaconflow/passwd"),
                .init(broker + "/data", at: "/var/lib/mosquitto", readOnly: false),
            ])

        // PostgreSQL with TLS, its roles made as the compose deployment's init script makes them.
        let database = work + "/database"
        try files.createDirectory(atPath: database + "/data", withIntermediateDirectories: true)
        _ = chown(database + "/data", 999, 999)
        try write(ownerPassword, database + "/postgres-password", owner: 999)
        try write(ingestPassword, database + "/ingest-db-password", owner: 999)
        try write("unused-" + UUID().uuidString, database + "/grafana-db-password", owner: 999)
        try write(try read(work + "/db-pki/broker.pem"), database + "/server.pem", mode: 0o644)
        try write(try read(work + "/db-pki/broker.key"), database + "/server.key", owner: 999)
        try write(Self.postgresEntrypoint, database + "/entrypoint", mode: 0o755)
        specifications["postgres"] = ContainedProgram(
            uid: 999,
            arguments: ["/bin/bash", "/docker-entrypoint.sh", "-c", "ssl=on", "-c", "ssl_cert_file=/tls/server.pem", "-c", "ssl_key_file=/tls/server.key"],
            environment: ["PATH": path, "POSTGRES_USER": "beaconflow", "POSTGRES_DB": "beaconflow", "POSTGRES_PASSWORD_FILE": "/run/secrets/postgres-password"],
            mounts: system + [
                .init(database + "/entrypoint", at: "/docker-entrypoint.sh"),
                .init(deployDirectory + "/postgres-init.sh", at: "/docker-entrypoint-initdb.d/10-beaconflow-roles.sh"),
                .init(database + "/data", at: "/var/lib/postgresql/data", readOnly: false),
                .init(database + "/server.pem", at: "/tls/server.pem"), .init(database + "/server.key", at: "/tls/server.key"),
            ] + ["postgres-password", "ingest-db-password", "grafana-db-password"].map { .init(database + "/" + $0, at: "/run/secrets/" + $0) },
            ownedDirectories: ["/var/run/postgresql"])

        // The units.
        for (index, name) in ["migrate", "ingest", "agent"].enumerated() {
            let unitName = "beaconflow-\(name).service"
            let unit = try Unit(path: deployDirectory + "/systemd/" + unitName)
            let uid = 61_001 + index
            let credentials = work + "/credentials/" + unitName
            try files.createDirectory(atPath: credentials, withIntermediateDirectories: true)
            for credential in unit.credentials {
                let source = credential.path.replacingOccurrences(of: "/etc/beaconflow", with: etc)
                try write(try read(source), credentials + "/" + credential.id, mode: 0o400, owner: uid)
            }
            let credentialsDirectory = "/run/credentials/" + unitName
            var environment = ["PATH": path, "CREDENTIALS_DIRECTORY": credentialsDirectory]
            for file in unit.environmentFiles {
                for line in try read(file.replacingOccurrences(of: "/etc/beaconflow", with: etc)).split(separator: "\n") where !line.hasPrefix("#") {
                    let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                    if parts.count == 2 { environment[parts[0]] = parts[1] }
                }
            }
            for (key, value) in unit.environment { environment[key] = value.replacingOccurrences(of: "%d", with: credentialsDirectory) }
            var arguments = unit.execStart.map { word in
                environment.reduce(word) { $0.replacingOccurrences(of: "${\($1.key)}", with: $1.value) }
            }
            // The agent's unit runs the agent's own executable, the others beaconflow.
            let program = name == "agent" ? "beaconflow-agent" : "beaconflow"
            #expect(arguments.first == "/usr/local/bin/" + program && !arguments.contains { $0.contains("${") || $0.contains("%") })
            arguments[0] = "/app/" + program
            let built = try #require(name == "agent" ? beaconflowAgentExecutable : beaconflowExecutable)
            var mounts = system + [
                .init(built, at: "/app/" + program), .init(etc, at: "/etc/beaconflow"),
                .init(credentials, at: credentialsDirectory),
            ]
            if let state = unit.stateDirectory {
                let directory = work + "/state/" + state
                try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
                _ = chown(directory, uid_t(uid), gid_t(uid))
                mounts.append(.init(directory, at: "/var/lib/" + state, readOnly: false))
            }
            if name == "agent" {
                mounts.append(.init(exampleFile("mixed-beacons.btsnoop"), at: "/capture.btsnoop"))
                arguments += ["--source", "btsnoop:/capture.btsnoop", "--speed", "max", "--ack-timeout", "2"]
            }
            specifications[name] = ContainedProgram(uid: uid, arguments: arguments, environment: environment, mounts: mounts)
        }
        for (name, program) in specifications {
            try write(try program.specification(root: work + "/roots/" + name), work + "/" + name + ".spec", mode: 0o600)
        }
        let run = try await Self.runDeployment(in: work, reader: (user: "beaconflow", password: ownerPassword, sslMode: "require"))
        run.expectStartedAndDelivered()
    }

    /// What a deployment run left: each step's exit status and each program's log.
    struct DeploymentRun {
        var results: [String: Int]
        var log: (String) -> String
        var errors: String

        var context: String {
            ([errors] + ["postgres", "migrate", "mosquitto", "ingest", "agent", "reader"].map { "--- \($0)\n\(log($0))" })
                .joined(separator: "\n")
        }

        /// migrate succeeded, the agent's replay was acknowledged whole, the reader finds sightings, and the
        /// ingest stopped cleanly on SIGTERM.
        func expectStartedAndDelivered() {
            #expect(results["migrate"] == 0, "migrate: \(context)")
            #expect(results["agent"] == 0, "the agent did not deliver: \(context)")
            #expect(results["reader"] == 0 && (Int(log("reader").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0,
                    "the reader finds no sightings: \(context)")
            #expect(results["ingest"] == 0, "the ingest did not stop cleanly: \(context)")
        }
    }

    /// Runs the programs of `work`'s specifications (postgres, migrate, mosquitto, ingest, agent) in their order
    /// in a network namespace of their own: PostgreSQL until it answers, migrate to its end, the broker and the
    /// ingest, the agent to its end; then counts the sightings as `reader` over TCP and stops the servers.
    static func runDeployment(
        in work: String, reader: (user: String, password: String, sslMode: String), scrapeMetrics: Bool = false
    ) async throws -> DeploymentRun {
        let binaries = PostgresServer.binaries!
        let scrape = scrapeMetrics ? findExecutable("curl").map { "\($0) -sf http://127.0.0.1:9464/metrics > logs/metrics; echo \"metrics $?\" >> results" } : nil
        let script = containedShellFunctions + "\n" + """
            set -u
            cd \(work)
            ip link set lo up
            mkdir -p logs
            contained postgres.spec > logs/postgres 2>&1 & postgres=$!
            for _ in $(seq 600); do \(binaries)/pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.1; done
            (contained migrate.spec) > logs/migrate 2>&1; echo "migrate $?" >> results
            contained mosquitto.spec > logs/mosquitto 2>&1 & mosquitto=$!
            contained ingest.spec > logs/ingest 2>&1 & ingest=$!
            timeout 120 bash -c "$(declare -f contained contained_main); contained agent.spec" > logs/agent 2>&1; echo "agent $?" >> results
            PGPASSWORD='\(reader.password)' PGSSLMODE=\(reader.sslMode) \(binaries)/psql -h 127.0.0.1 -U \(reader.user) -d beaconflow -Atc \\
              "SELECT count(*) FROM beaconflow.sightings" > logs/reader 2>&1; echo "reader $?" >> results
            \(scrape ?? "")
            kill -TERM $ingest; wait $ingest; echo "ingest $?" >> results
            kill -TERM $mosquitto; wait $mosquitto
            kill -INT $postgres; wait $postgres
            """
        try script.write(toFile: work + "/deployment.sh", atomically: true, encoding: .utf8)
        let run = try await runProgram(findExecutable("unshare")!, ["--net", "--mount", "--fork", "bash", work + "/deployment.sh"])
        let results = Dictionary(
            ((try? String(contentsOfFile: work + "/results", encoding: .utf8)) ?? "").split(separator: "\n")
                .map { line in (String(line.split(separator: " ")[0]), Int(line.split(separator: " ")[1]) ?? -1) }) { $1 }
        return DeploymentRun(
            results: results, log: { (try? String(contentsOfFile: work + "/logs/" + $0, encoding: .utf8)) ?? "" }, errors: run.errors)
    }
}
