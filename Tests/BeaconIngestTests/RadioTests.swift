import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// Where `scripts/radio-vm prepare` leaves the kernel and initramfs of the real-radio VM.
let radioVMReady = FileManager.default.fileExists(atPath: repositoryRoot + "/.build-radio/initramfs.cpio.gz")

/// The real `beaconflow agent` in a VM on Debian's kernel, scanning a controller of BlueZ's `btvirt` while the test
/// advertises on another with raw HCI commands; its batches cross the real broker and ingest on the host
/// (reached at 10.0.2.2) into PostgreSQL.
@Suite(
    .enabled(if: radioVMReady, "the real-radio VM is not prepared: run scripts/radio-vm prepare (needs Debian's apt sources)"),
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(5)), .serialized)
struct RadioTests {
    /// Advertising data, as hex, and whether it goes out in a legacy PDU (ADV_NONCONN_IND) or an extended one.
    struct Advert {
        var name: String
        var legacy: Bool
        var data: String
        /// A random static address (big-endian hex) instead of the controller's public one.
        var randomAddress: String?
    }

    static let adverts = [
        // iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0, major 7, minor 9, power -59 dBm.
        Advert(name: "ibeacon", legacy: true, data: "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000070009c5"),
        // Eddystone-UID 0102030405060708090a / 0000000000e1, power at 0 m -20 dBm.
        Advert(name: "eddystone-uid", legacy: false, data: "0201060303aafe1716aafe00ec0102030405060708090a0000000000e10000"),
        // Eddystone-TLM alone (3000 mV, 24.5 °C, count 256, uptime 51.2 s) from random static C0:FF:EE:00:00:42:
        // known by its address only.
        Advert(
            name: "eddystone-tlm", legacy: false, data: "0201060303aafe1116aafe20000bb818800000010000000200",
            randomAddress: "c0ffee000042"),
    ]

    /// The guest's script: controllers up with LE on, the agent scanning hci0, each advert enabled once on hci1 (the
    /// emulated controller reports an advertiser once per enable), then the agent stopped, which waits for the
    /// ingest's acknowledgement of everything spooled.
    @Test func theAdvertsAreWholeBytesThatFitTheirPDUs() {
        for advert in Self.adverts {
            #expect(advert.data.count % 2 == 0 && advert.data.count / 2 <= (advert.legacy ? 31 : 251), "\(advert.name)")
        }
    }

    /// How the agent meets the adapter.
    enum Setup: String, CaseIterable, Sendable {
        /// Root, alone on the adapter.
        case alone
        /// The system bus and BlueZ's daemon run and manage both adapters (as on a desktop or Raspberry Pi OS)
        /// before the agent starts.
        case besideBluetoothd
        /// An unprivileged user: first without capabilities (it must refuse, saying which it needs), then with only
        /// CAP_NET_RAW and CAP_NET_ADMIN, as the systemd unit gives them.
        case unprivileged
        /// Alone, and the scanning adapter is powered off and on after the adverts; one more advert follows.
        case adapterCycled
    }

    /// What the test advertises once the adapter is back: iBeacon major 7, minor 10.
    static let afterTheCycle = Advert(
        name: "ibeacon-after", legacy: true, data: "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e00007000ac5")

    static func guestScript(brokerPort: Int, executable: String, setup: Setup = .alone) -> String {
        let bluetoothd = setup == .besideBluetoothd
        var script = """
            set -u
            btvirt -l2 > btvirt.log 2>&1 &
            for attempt in $(seq 1 40); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.25; done
            for index in 0 1; do
                btmgmt --index $index power off && btmgmt --index $index le on && btmgmt --index $index power on
            done > btmgmt.log 2>&1

            """
        if bluetoothd {
            script += """
                mkdir -p /run/dbus && dbus-daemon --system --fork --nopidfile
                /usr/libexec/bluetooth/bluetoothd -n > bluetoothd.log 2>&1 &
                for attempt in $(seq 1 40); do [ "$(bluetoothctl list 2>/dev/null | grep -c Controller)" -ge 2 ] && break; sleep 0.25; done
                bluetoothctl list > bluetoothctl.log 2>&1

                """
        }
        let agentCommand = """
            \(executable) agent --site hq --agent hq-a1 --source hci:hci0 --broker mqtt://10.0.2.2:\(brokerPort) \\
                --spool /tmp/spool --batch-max-age-ms 200 --ack-timeout 2 --drain-timeout 60 --log-level debug
            """
        var runAs = ""
        if setup == .unprivileged {
            script += """
                mkdir -p /tmp/spool && chown 65534:65534 /tmp/spool
                timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups \(agentCommand) > refused.log 2>&1
                echo $? > refused.status

                """
            runAs = "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+net_raw,+net_admin --ambient-caps=+net_raw,+net_admin "
        }
        script += """
            \(runAs)\(agentCommand) > agent.log 2>&1 &
            agent=$!
            for attempt in $(seq 1 80); do grep -q "Scanning" agent.log && break; sleep 0.25; done
            # handle 0; properties; intervals 1.28 s; channels 37-39; public address; no peer; no filter; any power;
            # 1M primary and secondary PHYs; SID 0; no scan request notifications.
            # $1 properties, $2 own address type, $3 the random address (little-endian) or nothing, $4 the data.
            advertise() {
                hcitool -i hci1 cmd 0x08 0x0036 00 $1 00 08 00 00 08 00 07 $2 00 00 00 00 00 00 00 00 7f 01 00 01 00 00 > /dev/null
                [ -z "$3" ] || hcitool -i hci1 cmd 0x08 0x0035 00 $3 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0037 00 03 01 $4 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
                sleep 1
                hcitool -i hci1 cmd 0x08 0x0039 00 01 00 00 00 00 > /dev/null
            }

            """
        /// Hex text as its bytes' pairs of digits.
        func pairs(_ hex: String) -> [String] {
            stride(from: 0, to: hex.count, by: 2).map { String(hex[hex.index(hex.startIndex, offsetBy: $0)...].prefix(2)) }
        }
        func advertise(_ advert: Advert) {
            let bytes = pairs(advert.data)
            script += "echo advertising \(advert.name)\n"
            // HCI takes an address little-endian.
            let address = advert.randomAddress.map { pairs($0).reversed().joined(separator: " ") }
            script += "advertise \"\(advert.legacy ? "10 00" : "00 00")\" \(address == nil ? "00" : "01") \"\(address ?? "")\" "
            script += "\"\(String(format: "%02x", bytes.count)) \(bytes.joined(separator: " "))\"\n"
        }
        for advert in adverts { advertise(advert) }
        if setup == .adapterCycled {
            // The scanning adapter powered off and on: the agent must find it gone and scan again by itself.
            script += """
                btmgmt --index 0 power off > /dev/null 2>&1
                sleep 1
                btmgmt --index 0 power on > /dev/null 2>&1
                for attempt in $(seq 1 80); do [ "$(grep -c Scanning agent.log)" -ge 2 ] && break; sleep 0.25; done

                """
            advertise(afterTheCycle)
        }
        script += """
            sleep 1
            kill -TERM $agent
            wait $agent
            status=$?
            echo "agent exited $status"
            exit $status

            """
        return script
    }

    /// Alone on the adapter, next to bluetoothd managing it (the agent's raw HCI channel scans beside the kernel's
    /// management interface), and as an unprivileged user with only the two capabilities it needs.
    @Test(arguments: Setup.allCases)
    func theAgentScansLegacyAndExtendedAdvertsThroughTheRealStackIntoPostgreSQL(setup: Setup) async throws {
        let executable = try #require(beaconflowExecutable)
        let harness = try await IngestHarness.start()
        let work = try makeTemporaryDirectory(prefix: "radio")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try Self.guestScript(brokerPort: harness.broker.port, executable: executable, setup: setup)
            .write(toFile: work + "/scan.sh", atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        let run = try await runProgram(repositoryRoot + "/scripts/radio-vm", ["run", work, "scan.sh", "240"])
        let took = ContinuousClock.now - started
        let guest = (try? String(contentsOfFile: work + "/guest.log", encoding: .utf8)) ?? ""
        let agent = (try? String(contentsOfFile: work + "/agent.log", encoding: .utf8)) ?? ""
        #expect(run.status == 0, "VM: \(run.errors)\nguest:\n\(guest)\nagent:\n\(agent.suffix(3000))")
        let beacons = try harness.query("SELECT DISTINCT beacon_id, tx_power FROM beaconflow.sightings WHERE agent_id = 'hq-a1' ORDER BY 1")
        // Eddystone's power is at 0 m: 41 dB more than at 1 m.
        var expected: [[String?]] = [
            ["eddystone:0102030405060708090a:0000000000e1", "-61"],
            ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:9", "-59"],
            ["mac:C0:FF:EE:00:00:42", nil],
        ]
        if setup == .adapterCycled { expected.insert(["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:10", "-59"], at: 1) }
        #expect(beacons == expected, "agent:\n\(agent.suffix(3000))")
        let telemetry = try harness.query("SELECT beacon_id, battery_mv, temperature_c, adv_count, uptime_s FROM beaconflow.telemetry")
        #expect(telemetry == [["mac:C0:FF:EE:00:00:42", "3000", "24.5", "256", "51.2"]], "\(telemetry)\nguest:\n\(guest)\nagent:\n\(agent.suffix(4000))")
        switch setup {
        case .alone:
            break
        case .adapterCycled:
            #expect(agent.contains("Adapter lost; scanning resumes when it is back") && agent.contains("was powered off"), "\(agent)")
        case .besideBluetoothd:
            let listed = (try? String(contentsOfFile: work + "/bluetoothctl.log", encoding: .utf8)) ?? ""
            #expect(listed.contains("Controller 00:AA:01:00:00:00"), "bluetoothd manages hci0: \(listed)")
        case .unprivileged:
            let refused = (try? String(contentsOfFile: work + "/refused.log", encoding: .utf8)) ?? ""
            let status = (try? String(contentsOfFile: work + "/refused.status", encoding: .utf8)) ?? ""
            #expect(status.trimmingCharacters(in: .whitespacesAndNewlines) == "66", "\(status): \(refused)")
            #expect(refused.contains("scanning needs CAP_NET_RAW and CAP_NET_ADMIN"), "\(refused)")
        }
        print("radio: legacy and extended adverts through the real stack (\(setup.rawValue)) in \(took)")
        try await harness.stop()
    }
}
