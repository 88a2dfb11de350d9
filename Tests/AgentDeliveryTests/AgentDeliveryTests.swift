import BeaconAgent
import BeaconMessaging
import BeaconSimulation
import BeaconWire
import Foundation
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

@Suite(.enabled(if: MosquittoServer.executable != nil, "mosquitto is not installed"), .timeLimit(.minutes(4)))
struct AgentDeliveryTests {
    let logger = Logger(label: "agent-test")

    func configuration(_ broker: MosquittoServer, spool: String, agent: String = "hq-a1") throws -> AgentConfiguration {
        var configuration = try testAgentConfiguration(brokerPort: broker.port, spool: spool, agent: agent)
        configuration.extractor.includeUnknownDevices = true
        return configuration
    }

    @Test func aReplayIsDeliveredWholeAndTheAgentSaysItIsOffline() async throws {
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let capture = exampleFile("mixed-beacons.btsnoop")
        var configuration = try configuration(broker, spool: spool)
        configuration.extractor.includeUnknownDevices = false
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .maximum), logger: logger)
        let outcome = try await agent.run()
        #expect(outcome == .finished)
        let expected = try expectedSightings(capture: capture, configuration: configuration.extractor)
        #expect(expected.count > 50)
        #expect(multiset(ingest.sightings) == multiset(expected))
        #expect(ingest.sequences == Array(1...UInt64(ingest.batchCount)))
        // The URL frame travels once per beacon; TLM frames (their counters move) every time.
        let urls = ingest.sightings.compactMap { sighting -> [UInt8]? in
            if case .eddystone(let bytes)? = sighting.data, bytes.first == 0x10 { return Array(bytes) }
            return nil
        }
        #expect(urls.count == 1)
        try await ingest.wait(for: "the offline status") { $0.status(site: "hq", agent: "hq-a1")?["online"] as? Bool == false }
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).filter { $0.hasSuffix(".seg") }.isEmpty)
    }

    /// A broker without any ingest for the agent's site (a mistyped `--site`): the batches are taken but never
    /// acknowledged, and after three timeouts in a row the agent says so once, with its site, agent and broker.
    @Test func anAgentThatNoIngestAcknowledgesSaysSoOnce() async throws {
        let broker = try MosquittoServer()
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        var configuration = try configuration(broker, spool: spool)
        configuration.acknowledgementTimeout = .milliseconds(500)
        configuration.drainTimeout = .seconds(90)
        let log = RecordingLog()
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: exampleFile("mixed-beacons.btsnoop"), speed: .maximum),
            logger: log.logger(label: "agent"))
        let run = Task { try await agent.run() }
        let isWarning = { (entry: RecordingLog.Entry) in entry.message.hasPrefix("No ingest acknowledges this agent's batches") }
        // Three timeouts of 500 ms after the first publish; a loaded machine may take a while to connect.
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, !log.all.contains(where: isWarning) {
            try await Task.sleep(for: .milliseconds(100))
        }
        // A few more timeouts pass before the stop: the warning is still said once.
        try await Task.sleep(for: .seconds(2))
        agent.requestStop()
        guard case .stopped(let pending) = try await run.value else {
            Issue.record("the agent did not stop as asked")
            return
        }
        #expect(pending > 0)
        let warnings = log.all.filter(isWarning)
        #expect(warnings.count == 1, "\(log.all.map(\.message))")
        #expect(warnings.first?.level == .warning)
        #expect(warnings.first?.metadata["site"] == "hq" && warnings.first?.metadata["agent"] == "hq-a1")
        #expect(warnings.first?.metadata["broker"]?.contains("\(broker.port)") == true, "\(warnings)")
    }

    @Test func aReinstalledAgentDoesNotTakeItsEarlierLifesAcknowledgementForItsOwn() async throws {
        let broker = try MosquittoServer()
        // The ingest committed this agent's batches up to 5000 in an earlier life, and the broker retains that.
        let ingest = try await TestIngest.start(broker: broker, committedThrough: 5000)
        defer { ingest.stop() }
        try ingest.publishAcknowledgement(site: "hq", agent: "hq-a1", 5000)
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let capture = exampleFile("mixed-beacons.btsnoop")
        let configuration = try configuration(broker, spool: spool)
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .maximum), logger: logger)
        #expect(try await agent.run() == .finished)
        let expected = try expectedSightings(capture: capture, configuration: configuration.extractor)
        let sequences = ingest.sequences
        #expect(sequences.first == 5001)
        #expect(sequences == Array(5001...(5000 + UInt64(sequences.count))))
        #expect(multiset(ingest.sightings) == multiset(expected))
    }

    /// Acknowledgements beyond what the agent sealed, as anyone allowed on the ack topic could send them: refused,
    /// nothing deleted or renumbered, and every batch still arrives once the real acknowledgements come.
    @Test func forgedAcknowledgementsDeleteNothing() async throws {
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        ingest.setAcknowledging(false)
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let capture = captureFixture("wban-python-btsnoop_hci.log")
        let configuration = try configuration(broker, spool: spool)
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .factor(70)), logger: logger)
        async let outcome = agent.run()
        try await ingest.wait(for: "a few batches") { $0.batchCount >= 2 }
        try ingest.publishAcknowledgement(site: "hq", agent: "hq-a1", 100_000)
        try ingest.publishAcknowledgement(site: "hq", agent: "hq-a1", UInt64(Int64.max))
        try await Task.sleep(for: .milliseconds(500))
        ingest.setAcknowledging(true)
        #expect(try await outcome == .finished)
        let expected = try expectedSightings(capture: capture, configuration: configuration.extractor)
        #expect(multiset(ingest.sightings) == multiset(expected))
        #expect(ingest.sequences == Array(1...UInt64(ingest.batchCount)))
    }

    @Test func batchesSurviveABrokerRestart() async throws {
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let capture = captureFixture("wban-python-btsnoop_hci.log")
        let configuration = try configuration(broker, spool: spool)
        // 214 s of capture at 70× real time: about 3 s.
        let agent = Agent(
            configuration: configuration, source: CaptureReplaySource(path: capture, speed: .factor(70)), logger: logger)
        async let outcome = agent.run()
        try await ingest.wait(for: "a few batches") { $0.batchCount >= 3 }
        broker.stop()
        try await Task.sleep(for: .milliseconds(800))
        try broker.start()
        #expect(try await outcome == .finished)
        let expected = try expectedSightings(capture: capture, configuration: configuration.extractor)
        #expect(expected.count == 2563)  // 2,565 reports, two of them corrupt
        #expect(multiset(ingest.sightings) == multiset(expected))
        #expect(ingest.sequences == Array(1...UInt64(ingest.batchCount)))
    }

    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func everyBatchArrivesAfterTheAgentIsKilledMidStream() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let work = try makeTemporaryDirectory(prefix: "agent-kill")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let capture = captureFixture("wban-python-btsnoop_hci.log")
        func arguments(speed: String) -> [String] {
            [
                "agent", "--site", "hq", "--agent", "hq-k1", "--source", "btsnoop:\(capture)", "--speed", speed,
                "--broker", broker.url, "--spool", work + "/spool", "--batch-max-age-ms", "100",
                "--include-unknown-devices", "--ack-timeout", "2", "--drain-timeout", "60",
            ]
        }
        // The 213 s capture in 43 s: time enough to stop acknowledging and kill it mid-stream on a loaded machine
        // (it is killed a few seconds in; at 15 times, a loaded machine once let it finish first).
        let first = try ChildProcess(executable, arguments(speed: "5"), standardErrorPath: work + "/first.log")
        try await ingest.wait(for: "the first acknowledged batches") { $0.batchCount >= 4 }
        // From now on nothing is acknowledged: what the agent publishes stays in its spool.
        ingest.setAcknowledging(false)
        let acknowledgedAtKill = ingest.state.withLock { $0.committedThrough }
        let countWhenAcknowledgingStopped = ingest.batchCount
        try await ingest.wait(for: "unacknowledged batches") { $0.batchCount >= countWhenAcknowledgingStopped + 3 }
        first.terminate(SIGKILL)
        // The broker publishes the will: the agent is offline.
        try await ingest.wait(for: "the will") { $0.status(site: "hq", agent: "hq-k1")?["online"] as? Bool == false }
        let beforeRestart = ingest.batchCount

        ingest.setAcknowledging(true)
        let second = try ChildProcess(executable, arguments(speed: "max"), standardErrorPath: work + "/second.log")
        let status = await second.exit()
        let log = (try? String(contentsOfFile: work + "/second.log", encoding: .utf8)) ?? ""
        #expect(status == 0, "second run exit status \(status); log:\n\(log)")

        // Every sequence arrived, those unacknowledged at the kill included, and none twice in the tables.
        let sequences = ingest.sequences
        #expect(sequences == Array(1...UInt64(sequences.count)))
        #expect(sequences.count > beforeRestart)
        #expect(acknowledgedAtKill < UInt64(beforeRestart))
        let boots = Set(ingest.state.withLock { $0.batches.values.map(\.bootID) })
        #expect(boots.count == 2)
        // The second run resumed after what the spool held: across both runs, every report of the capture once.
        let expected = try expectedSightings(capture: capture, configuration: {
            var configuration = SightingExtractor.Configuration()
            configuration.includeUnknownDevices = true
            return configuration
        }())
        #expect(multiset(ingest.sightings) == multiset(expected))
        #expect(log.contains("Replay resumes after what the spool holds"), "\(log)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work + "/spool").filter { $0.hasSuffix(".seg") }.isEmpty)

        // The same command once more adds nothing; --replay-from-start sends the capture again, on purpose.
        let third = try ChildProcess(executable, arguments(speed: "max"), standardErrorPath: work + "/third.log")
        #expect(await third.exit() == 0)
        #expect(ingest.batchCount == sequences.count)
        let again = try ChildProcess(executable, arguments(speed: "max") + ["--replay-from-start"], standardErrorPath: work + "/again.log")
        #expect(await again.exit() == 0)
        let resent = ingest.state.withLock { state in
            state.batches.filter { $0.key > UInt64(sequences.count) }.values.flatMap(\.sightings)
        }
        #expect(multiset(resent) == multiset(expected))
    }

    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func aSimulatedAgentDeliversWhatTheSimulatorPlays() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let work = try makeTemporaryDirectory(prefix: "agent-sim")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let process = try ChildProcess(
            executable,
            // At full speed the whole scenario is sealed within seconds; the acknowledgements of its backlog may take
            // longer than the default drain on a loaded machine running the other suites.
            ["agent", "--site", "hq", "--agent", "hq-a2", "--source", "sim:\(demoScenarioPath)", "--speed", "max",
             "--broker", broker.url, "--spool", work + "/spool", "--drain-timeout", "240"],
            standardErrorPath: work + "/agent.log")
        let status = await process.exit()
        #expect(status == 0, "\((try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? "")")
        var extractor = SightingExtractor()
        var expected: [Sighting] = []
        try Simulator(try Scenario.load(path: demoScenarioPath)).run(site: "hq", agent: "hq-a2") { reports in
            for timed in reports {
                if case .success(let sighting) = extractor.sighting(of: timed.report, timeMicros: timed.timeMicros) {
                    expected.append(sighting)
                }
            }
        }
        #expect(expected.count > 10_000)
        #expect(multiset(ingest.sightings) == multiset(expected))
        #expect(ingest.sequences == Array(1...UInt64(ingest.batchCount)))
    }

    /// A beacon back after longer than the association window, first heard again on a URL or TLM frame: the
    /// frame waits for the UID frame that follows and goes under its identity, never as a `mac:` device.
    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func framesBeforeTheIdentityGoUnderIt() async throws {
        let executable = try #require(beaconflowExecutable)
        func scenario(returningAt seconds: Double) -> String {
            """
            seed: 5
            duration_s: \(seconds + 20)
            sites:
              - id: hq
                shadowing_db: 0
                zones: [{id: z, rect: [0, 0, 4, 4]}]
                agents: [{id: hq-a1, zone: z, position: [2, 2], loss: 0}]
            beacons:
              - {name: cart, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000a1,
                 url: https://example.com/cart, path: [{at_s: 0, zone: z}, {at_s: 5}, {at_s: \(seconds), zone: z}]}
            """
        }
        // Search for a return whose first frame heard is not the UID (URL or TLM ones are 2 in 10).
        var chosen: Double?
        for step in 0..<40 {
            let seconds = 90 + Double(step) * 0.037
            let simulator = try Simulator(try Scenario.parse(scenario(returningAt: seconds)))
            var first: [UInt8]?
            try simulator.run(site: "hq", agent: "hq-a1") { reports in
                for timed in reports where first == nil && timed.timeMicros >= simulator.scenario.startUnixSeconds * 1_000_000 + 60_000_000 {
                    first = timed.report.data
                }
            }
            // The service data's frame type follows flags, the service list and the service data header.
            if let frame = first, frame.count > 11, frame[11] != 0x00 {
                chosen = seconds
                break
            }
        }
        let seconds = try #require(chosen, "no return time puts a URL or TLM frame first")
        let work = try makeTemporaryDirectory(prefix: "agent-identity")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try scenario(returningAt: seconds).write(toFile: work + "/scenario.yaml", atomically: true, encoding: .utf8)
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let process = try ChildProcess(
            executable,
            ["agent", "--site", "hq", "--agent", "hq-a1", "--source", "sim:\(work)/scenario.yaml", "--speed", "max",
             "--broker", broker.url, "--spool", work + "/spool"],
            standardErrorPath: work + "/agent.log")
        #expect(await process.exit() == 0, "\((try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? "")")
        let identities = Set(ingest.sightings.map(\.beacon.beaconID))
        #expect(identities == ["eddystone:0102030405060708090a:0000000000a1"])
        // The frame that came first after the return is there, under the identity.
        #expect(ingest.sightings.contains { $0.timeMicros >= 1_767_261_600_000_000 + Int64(seconds * 1_000_000) && $0.data != nil })
    }

    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func aConfigFileHoldsTheSettingsAndTheCommandLineOverridesIt() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let ingest = try await TestIngest.start(broker: broker)
        defer { ingest.stop() }
        let work = try makeTemporaryDirectory(prefix: "agent-config")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try """
            site: hq
            agent: from-file
            source: btsnoop:\(exampleFile("mixed-beacons.btsnoop"))
            broker: \(broker.url)
            spool: \(work)/spool
            speed: max
            include_unknown_devices: true
            batch_max_sightings: 10
            deny: ["ibeacon:"]
            """.write(toFile: work + "/agent.yaml", atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            executable, ["agent", "--config", work + "/agent.yaml", "--agent", "from-cli"],
            standardErrorPath: work + "/agent.log")
        let status = await process.exit()
        #expect(status == 0, "\((try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? "")")
        let batches = ingest.state.withLock { Array($0.batches.values) }
        #expect(!batches.isEmpty)
        #expect(batches.allSatisfy { $0.agentID == "from-cli" && $0.sightings.count <= 10 })
        #expect(!ingest.sightings.contains { $0.beacon.beaconID.hasPrefix("ibeacon:") })
        #expect(ingest.sightings.contains { $0.beacon.beaconID.hasPrefix("mac:") })
    }

    @Test(.enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"))
    func badConfigurationAndUnreachablePartsGiveClearErrorsAndExitCodes() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "agent-errors")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let capture = exampleFile("mixed-beacons.btsnoop")
        let port = try freeLoopbackPort()
        #expect(FileManager.default.createFile(atPath: work + "/file", contents: Data([1])))
        func run(_ name: String, _ extra: [String]) async -> (status: Int32, log: String) {
            let arguments =
                ["agent", "--site", "hq", "--agent", "a1", "--broker", "mqtt://127.0.0.1:\(port)",
                 "--spool", work + "/spool-\(name)", "--source", "btsnoop:\(capture)", "--speed", "max",
                 "--drain-timeout", "1"] + extra
            guard let process = try? ChildProcess(executable, arguments, standardErrorPath: work + "/\(name).log")
            else { return (-1, "") }
            let status = await process.exit()
            return ((status >> 8) & 0xFF, (try? String(contentsOfFile: work + "/\(name).log", encoding: .utf8)) ?? "")
        }
        try "site: hq\nbroker_url: mqtt://x\n".write(toFile: work + "/typo.yaml", atomically: true, encoding: .utf8)
        let typo = await run("typo", ["--config", work + "/typo.yaml"])
        #expect(typo.status == 64)
        #expect(typo.log.contains("unknown setting 'broker_url' (did you mean 'broker'?)"), "\(typo.log)")
        #expect(typo.log.contains("Usage: beaconflow agent "), "the agent's usage, not the root's: \(typo.log)")
        try "max_in_flight: many\n".write(toFile: work + "/type.yaml", atomically: true, encoding: .utf8)
        let wrongType = await run("type", ["--config", work + "/type.yaml"])
        #expect(wrongType.status == 64)
        #expect(wrongType.log.contains("max_in_flight"))
        try "fsync: sometimes\n".write(toFile: work + "/choice.yaml", atomically: true, encoding: .utf8)
        let wrongChoice = await run("choice", ["--config", work + "/choice.yaml"])
        #expect(wrongChoice.status == 64)
        #expect(wrongChoice.log.contains("setting 'fsync'") && wrongChoice.log.contains("'always', 'periodic' or 'never'"), "\(wrongChoice.log)")
        let outOfRange = await run("range", ["--batch-max-sightings", "0"])
        #expect(outOfRange.status == 64)
        #expect(outOfRange.log.contains("batch_max_sightings must be 1-100000, not 0"))
        let badSpeed = await run("speed", ["--speed", "fast"])
        #expect(badSpeed.status == 64)
        #expect(badSpeed.log.contains("'fast' is invalid for '--speed"), "\(badSpeed.log)")
        let badSite = await run("site", ["--site", "HQ!"])
        #expect(badSite.status == 64)
        #expect(badSite.log.contains("site id 'HQ!' must be"))
        let badBroker = await run("broker", ["--broker", "http://x"])
        #expect(badBroker.status == 64)
        #expect(badBroker.log.contains("not mqtt or mqtts"))
        let badSpool = await run("spool", ["--spool", work + "/file/spool"])
        #expect(badSpool.status == 73)
        #expect(badSpool.log.contains("Not a directory"))
        let missing = await run("missing", ["--source", "btsnoop:" + work + "/nothing.log"])
        #expect(missing.status == 66)
        #expect(missing.log.contains("cannot open the capture file"))
        // No usable adapter here (no Bluetooth in this kernel): the message says what to do.
        let adapter = await run("hci", ["--source", "hci:hci0"])
        if adapter.status != 0 {
            #expect(adapter.status == 66)
            #expect(adapter.log.contains("hci0 failed"))
        }
        // Nobody listens on the port: the replay is spooled, the agent says so and exits 75.
        let unreachable = await run("unreachable", [])
        #expect(unreachable.status == 75)
        #expect(unreachable.log.contains("Connection refused"))
        #expect(unreachable.log.contains("they stay in the spool"))
        let spooled = try FileManager.default.contentsOfDirectory(atPath: work + "/spool-unreachable")
        #expect(spooled.contains { $0.hasSuffix(".seg") })
    }
}

/// The security model through the binary: TLS with a CA the test makes, per-agent credentials from a password file, and
/// an ACL under which an agent may write only its own topics.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && findExecutable("openssl") != nil, "mosquitto or openssl missing"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(4)))
struct AgentSecurityTests {
    @Test func tlsCredentialsAndTheACL() async throws {
        let executable = try #require(beaconflowExecutable)
        let secrets = try makeTemporaryDirectory(prefix: "secrets")
        defer { try? FileManager.default.removeItem(atPath: secrets) }
        try await makeTestPKI(openssl: try #require(findExecutable("openssl")), in: secrets)
        let passwd = try #require(findExecutable("mosquitto_passwd", extraDirectories: ["/usr/sbin"]))
        for (user, password, create) in [("hq/hq-a1", "agent-secret", true), ("ingest", "ingest-secret", false)] {
            let process = try ChildProcess(passwd, (create ? ["-c"] : []) + ["-b", secrets + "/passwd", user, password])
            #expect(await process.exit() == 0)
        }
        try """
            user ingest
            topic readwrite beaconflow/v1/#

            pattern readwrite beaconflow/v1/%u/#
            """.write(toFile: secrets + "/acl", atomically: true, encoding: .utf8)
        try "agent-secret\n".write(toFile: secrets + "/agent.pw", atomically: true, encoding: .utf8)
        try "wrong-secret\n".write(toFile: secrets + "/wrong.pw", atomically: true, encoding: .utf8)
        for file in ["passwd", "acl"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secrets + "/" + file)
        }
        let port = try freeLoopbackPort()
        let broker = try MosquittoServer(
            configuration: """
                listener \(port) 127.0.0.1
                cafile \(secrets)/ca.pem
                certfile \(secrets)/server.pem
                keyfile \(secrets)/server.key
                allow_anonymous false
                password_file \(secrets)/passwd
                acl_file \(secrets)/acl
                """, port: port)
        let ingest = try await TestIngest.start(broker: broker) {
            $0.tls = MQTTClient.TLS(caFile: secrets + "/ca.pem")
            $0.username = "ingest"
            $0.password = "ingest-secret"
        }
        defer { ingest.stop() }

        /// Without a user in the URL the agent logs in as <site>/<agent>.
        /// Those meant to fail give up after 5 s.
        func agent(_ name: String, agentID: String, passwordFile: String, user: String = "", drain: Int = 5) async -> (status: Int32, log: String) {
            let log = secrets + "/\(name).log"
            guard
                let process = try? ChildProcess(
                    executable,
                    ["agent", "--site", "hq", "--agent", agentID, "--source",
                     "btsnoop:" + exampleFile("mixed-beacons.btsnoop"), "--speed", "max",
                     "--broker", "mqtts://\(user)127.0.0.1:\(port)", "--ca-file", secrets + "/ca.pem",
                     "--password-file", passwordFile, "--spool", secrets + "/spool-\(name)", "--drain-timeout", "\(drain)"],
                    standardErrorPath: log)
            else { return (-1, "") }
            let status = await process.exit()
            return ((status >> 8) & 0xFF, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }

        let good = await agent("good", agentID: "hq-a1", passwordFile: secrets + "/agent.pw", drain: 30)
        #expect(good.status == 0, "\(good.log)")
        #expect(ingest.batchCount > 0)
        #expect(!good.log.contains("agent-secret"))

        let wrong = await agent("wrong", agentID: "hq-a1", passwordFile: secrets + "/wrong.pw")
        #expect(wrong.status == 75)
        #expect(wrong.log.lowercased().contains("not authori"))
        #expect(!wrong.log.contains("wrong-secret"))

        // User hq/hq-a1 (given in the URL, percent-encoded) publishing as agent hq-a2: the ACL refuses, and the
        // agent says so. As hq/hq-a2, its default user, it is not authorised at all.
        let before = ingest.batchCount
        let unknown = await agent("unknown", agentID: "hq-a2", passwordFile: secrets + "/agent.pw")
        #expect(unknown.status == 75 && unknown.log.lowercased().contains("not authori"), "\(unknown.log)")
        let impostor = await agent("impostor", agentID: "hq-a2", passwordFile: secrets + "/agent.pw", user: "hq%2Fhq-a1@")
        #expect(impostor.status == 75)
        #expect(impostor.log.contains("Broker refused a publish"))
        #expect(ingest.batchCount == before)
    }
}
