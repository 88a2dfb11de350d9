import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// Where `scripts/radio-vm prepare` installs Theengs Gateway (PyPI), in a virtual environment the guest sees too.
let theengsGateway = repositoryRoot + "/.build-radio/theengs/bin/python"

extension RadioTests {
    /// The peers' real receiver software in the loop: Theengs Gateway scans a virtual controller through bleak and
    /// bluetoothd in the VM and publishes what it hears, advertising data included, to the host's broker as
    /// `home/kitchen/BTtoMQTT/<address>`; `beaconflow bridge` on the host runs the receiver as agent hq-a1, and the
    /// beacons advertised on the other controller reach PostgreSQL under their own ids.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: theengsGateway), "Theengs Gateway is not installed: scripts/radio-vm prepare"))
    func theRealTheengsGatewayFeedsTheBridge() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "radio-theengs")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let (broker, database, ingest, bridge, run) = try await VMSlot.alone {
            let broker = try MosquittoServer()
            let database = try await PostgresServer.start()
            let ingest = try await startIngestProcess(broker: broker, database: database, work: work)
            let bridge = try ChildProcess(
                executable,
                ["bridge", "--format", "theengs", "--from", broker.url, "--broker", broker.url, "--site", "hq",
                 "--receiver", "kitchen=hq-a1", "--spool", work + "/spool"],
                standardOutputPath: work + "/bridge.log", standardErrorPath: work + "/bridge.log")
            // iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 7/9 and Eddystone-UID 0102030405060708090a/0000000000e1, each
            // in ADV_NONCONN_IND, enabled for a second at a time (the emulated controller reports an advertiser once per
            // enable).
            let adverts = [
                "1e 02 01 06 1a ff 4c 00 02 15 e2 c5 6d b5 df fb 48 d2 b0 60 d0 f5 a7 10 96 e0 00 07 00 09 c5",
                "1f 02 01 06 03 03 aa fe 17 16 aa fe 00 ec 01 02 03 04 05 06 07 08 09 0a 00 00 00 00 00 e1 00 00",
            ]
            let script = Self.controllersScript(bluetoothd: true) + """
                HOME="$PWD" \(theengsGateway) -m TheengsGateway -H 10.0.2.2 -P \(broker.port) -a hci0 \\
                    -pt home/kitchen/BTtoMQTT -Lt home/kitchen/LWT -padv 1 -D 0 -pa 1 -s active -sd 5 -tb 1 -ll DEBUG > theengs.log 2>&1 &
                theengs=$!
                for attempt in $(seq 1 240); do grep -q "Starting BLE scan" theengs.log && break; sleep 0.5; done
                advertise() {
                    hcitool -i hci1 cmd 0x08 0x0036 00 10 00 00 08 00 00 08 00 07 00 00 00 00 00 00 00 00 00 7f 01 00 01 00 00 > /dev/null
                    hcitool -i hci1 cmd 0x08 0x0037 00 03 01 $1 > /dev/null
                    hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
                    sleep 1
                    hcitool -i hci1 cmd 0x08 0x0039 00 01 00 00 00 00 > /dev/null
                }
                for round in 1 2 3 4 5 6; do
                    \(adverts.map { "advertise \"\($0)\"" }.joined(separator: "\n        "))
                done
                sleep 3
                kill $theengs

                """
            return (broker, database, ingest, bridge, try await GuestRun.start(script))
        }
        defer { ingest.process.terminate() }
        defer { run.remove() }
        let bridgeLog = { (try? String(contentsOfFile: work + "/bridge.log", encoding: .utf8)) ?? "" }
        let file = run.file
        let context = "guest:\n\(file("guest.log"))\ntheengs:\n\(file("theengs.log").suffix(4000))\nbridge:\n\(bridgeLog().suffix(3000))"
        #expect(run.status == 0, "\(run.errors)\n\(context)")
        #expect(file("theengs.log").contains("home/kitchen/BTtoMQTT/00AA01010001"), "Theengs Gateway published nothing: \(context)")

        let connection = try PostgresConnection(database.conninfo)
        let expected: Set = ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:9", "eddystone:0102030405060708090a:0000000000e1"]
        var stored: Set<String> = []
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            stored = Set(
                try connection.query("SELECT DISTINCT beacon_id FROM beaconflow.sightings WHERE site_id = 'hq' AND agent_id = 'hq-a1'")
                    .compactMap { $0[0] })
            if stored.isSuperset(of: expected) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(stored.isSuperset(of: expected), "stored \(stored)\n\(context)")
        bridge.terminate(SIGTERM)
        _ = await bridge.exit()
        #expect(bridge.exitCode == 0, "\(context)")
        print("radio: Theengs Gateway through the bridge in \(run.took)")
        withExtendedLifetime(broker) {}
    }
}
