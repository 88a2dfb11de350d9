import Foundation
import LocalServers
import TestServers
import Testing

/// The agent's GATT poll over a real L2CAP ATT link: `bluetoothd` serves a GATT application
/// (`Tests/RadioVM/gatt-peripheral.py`: Battery Level 87 %, Device Information) on hci1, which advertises an iBeacon
/// in connectable ADV_IND; the agent scans hci0 and polls hci1. The peripheral first refuses every read, then answers
/// too late (and is restarted), then answers: each failure is retried sooner than the poll interval, with the delay
/// doubling, and the agent keeps scanning throughout. (A link dropped mid-read is tested over a socket pair: on the
/// emulated controllers the peripheral's own disconnect left later connections failing at random.) In `RadioTests`, whose VMs
/// run one at a time: two at once on two cores make the emulated radio miss its cues.
extension RadioTests {
    /// hci1 as the peripheral: its address, and its iBeacon (major 7, minor 11) in connectable ADV_IND.
    static let peripheral = "00:AA:01:01:00:01"
    static let connectableAdvert = "1e 02 01 06 1a ff 4c 00 02 15 e2 c5 6d b5 df fb 48 d2 b0 60 d0 f5 a7 10 96 e0 00 07 00 0b c5"
    /// After the polls, iBeacon minor 12 in ADV_NONCONN_IND: the agent still scans.
    static let afterThePolls = "1e 02 01 06 1a ff 4c 00 02 15 e2 c5 6d b5 df fb 48 d2 b0 60 d0 f5 a7 10 96 e0 00 07 00 0c c5"

    static func gattScript(brokerPort: Int, executable: String) -> String {
        controllersScript(bluetoothd: true) + """
            echo refuse > mode
            # $1 its log.
            start_peripheral() {
                python3 \(repositoryRoot)/Tests/RadioVM/gatt-peripheral.py hci1 "$PWD/mode" "$PWD/reads.log" > $1 2>&1 &
                peripheral=$!
                for attempt in $(seq 1 40); do grep -q registered $1 && break; sleep 0.25; done
            }
            start_peripheral peripheral.log
            # $1 properties (0x13 ADV_IND, 0x10 ADV_NONCONN_IND), $2 the data as its length and bytes.
            advertise() {
                hcitool -i hci1 cmd 0x08 0x0039 00 01 00 00 00 00 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0036 00 $1 00 00 08 00 00 08 00 07 00 00 00 00 00 00 00 00 00 7f 01 00 01 00 00 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0037 00 03 01 $2 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
            }
            # Once a read was answered as $1 and its poll has ended, answers the next as $2. (A poll may also fail
            # before it reads, at connecting: the mode then waits for the next.)
            after_read() {
                for attempt in $(seq 1 300); do grep -q " $1$" reads.log && break; sleep 0.1; done
                polls=$(grep -c 'GATT poll' agent.log)
                for attempt in $(seq 1 300); do [ "$(grep -c 'GATT poll' agent.log)" -gt $polls ] && break; sleep 0.1; done
                echo $2 > mode
            }
            advertise 13 "\(connectableAdvert)"
            # A connection ends the advertising of a connectable set: it starts again whenever no link is up.
            ( while [ ! -e advertised ]; do
                hcitool -i hci1 con | grep -q handle || hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
                sleep 0.5
            done ) &
            keeper=$!
            \(executable) agent --site hq --agent hq-a1 --source hci:hci0 --broker mqtt://10.0.2.2:\(brokerPort) \\
                --gatt-poll \(peripheral) --gatt-timeout 3 --gatt-retry 2 --metrics-listen 127.0.0.1:9465 \\
                --spool /tmp/spool --batch-max-age-ms 200 --ack-timeout 2 --drain-timeout 60 --log-level debug > agent.log 2>&1 &
            agent=$!
            after_read refuse silent
            after_read silent ok
            # bluetoothd 5.66 may stop serving after an external characteristic answered past its own 5 s limit,
            # once the link is gone: the peripheral restarts, as a hung device would be power-cycled.
            kill $peripheral; kill $(pidof bluetoothd); sleep 0.5
            /usr/libexec/bluetooth/bluetoothd -n > bluetoothd-again.log 2>&1 &
            for attempt in $(seq 1 40); do [ "$(bluetoothctl list 2>/dev/null | grep -c Controller)" -ge 2 ] && break; sleep 0.25; done
            start_peripheral peripheral-again.log
            # A starting bluetoothd clears the controllers' advertising sets.
            advertise 13 "\(connectableAdvert)"
            for attempt in $(seq 1 300); do grep -q 'GATT poll done' agent.log && break; sleep 0.1; done
            touch advertised
            wait $keeper
            for attempt in $(seq 1 80); do hcitool -i hci1 con | grep -q handle || break; sleep 0.25; done
            # The kernel pauses the scan to connect; the agent sets it again a second later.
            sleep 2
            for attempt in 1 2 3; do advertise 10 "\(afterThePolls)"; sleep 0.7; done

            """ + stopAgentScript
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbus"), "python3-dbus is not installed"))
    func theAgentReadsBluetoothdsGATTServerAndRetriesAPeerThatFails() async throws {
        let executable = try #require(beaconflowExecutable)
        let (harness, run) = try await VMSlot.alone {
            let harness = try await IngestHarness.start()
            return (harness, try await GuestRun.start(Self.gattScript(brokerPort: harness.broker.port, executable: executable)))
        }
        defer { run.remove() }
        let file = run.file
        let agent = file("agent.log")
        let context = "guest:\n\(file("guest.log"))\ncontrollers:\n\(file("btmgmt.log"))\(file("bluetoothctl.log"))\nperipheral:\n\(file("peripheral.log"))\nreads:\n\(file("reads.log"))\nagent:\n\(agent.suffix(5000))"
        #expect(run.status == 0, "VM: \(run.errors)\n\(context)")

        // Refused, unanswered: each a failure, retried after 2, 4, 8 s...; then read. (An unanswered read
        // keeps its link busy until the peripheral gives up on it: ATT allows one request at a time, so only a
        // retry on a new link can succeed.) The link may also drop while connecting: one more failure, retried.
        let failures = agent.split(separator: "\n").filter { $0.contains("GATT poll failed") }
        #expect((2...4).contains(failures.count), "\(context)")
        for (index, failure) in failures.enumerated() {
            #expect(failure.contains("retry_in=\(2 << index).0 seconds"), "\(failure)")
        }
        #expect(failures.first?.contains("the device refused every read") == true, "\(context)")
        #expect(failures.contains { $0.contains("no ATT response within 3 s") }, "\(context)")
        #expect(agent.contains("GATT poll done"), "\(context)")
        #expect(file("metrics.log").contains("beaconflow_agent_gatt_poll_failures_total \(failures.count)"), "\(file("metrics.log"))")
        for mode in ["refuse", "silent", "ok"] {
            #expect(file("reads.log").contains("2a19 \(mode)"), "\(context)")
        }

        // The values, under the iBeacon heard from the peripheral's address.
        let beacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:11"
        #expect(
            try harness.query("SELECT beacon_id, quantity, value, unit FROM beaconflow.sensor_readings WHERE quantity = 'battery'")
                == [[beacon, "battery", "87", "percent"]], "\(context)")
        #expect(
            try harness.query("SELECT beacon_id, name, value FROM beaconflow.device_info ORDER BY name") == [
                [beacon, "firmware_revision", "1.2.3"], [beacon, "manufacturer_name", "beaconflow test"], [beacon, "model_number", "RT-1"],
            ])
        // Scanning went on through the polls.
        #expect(
            try harness.query("SELECT count(*) > 0 FROM beaconflow.sightings WHERE beacon_id = 'ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:12'")
                == [["t"]], "\(context)")
        print("radio: GATT poll against bluetoothd with failing attempts first in \(run.took)")
        try await harness.stop()
    }
}
