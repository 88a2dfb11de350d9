import BeaconIngest
import BeaconWire
import Mosquitto
import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

extension RadioTests {
    /// A phone with LE privacy, on the real kernel: the test's advertiser on hci1 moves through three resolvable
    /// private addresses made with a known IRK (as a phone rotates its address), sending Apple's manufacturer data
    /// and no beacon frame; the agent on hci0 reports them (`--private-addresses`), and the ingest, whose registry
    /// has the IRK, stores every sighting as the one phone and places it in the agent's zone.
    @Test func aPhoneRotatingItsAddressIsOneBeacon() async throws {
        let executable = try #require(beaconflowExecutable)
        // The Core Specification's sample IRK (Vol 3 Part H, Appendix D.7).
        let irk: [UInt8] = [0xEC, 0x02, 0x34, 0xA3, 0x57, 0xC8, 0xAD, 0x05, 0x34, 0x10, 0x10, 0xA6, 0x0A, 0x39, 0x7D, 0x9B]
        let addresses = [0x70_8194, 0x41_2345, 0x6A_BCDE].map { ResolvablePrivateAddress.address(irk: irk, prand: UInt32($0)) }
        let (harness, listener, events, run) = try await VMSlot.alone {
            let harness = try await IngestHarness.start { configuration in
                configuration.sites = try! SitesConfiguration.parse(
                    """
                    sites:
                      - id: hq
                        first_batch_wait_s: 0
                        zones: [{id: lobby}, {id: lab}]
                        agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}]
                    beacons:
                      - {id: phone-alice, label: Alice's phone, irk: \(irk.map { String(format: "%02x", $0) }.joined())}
                    """)
            }
            // Every batch as the broker carries it.
            let (listener, events) = try await harness.client(id: "radio-listener")
            try listener.subscribe(topic: "beaconflow/v1/hq/hq-a1/batch")
            // Flags, and Apple's Nearby Info (company 0x004C, type 0x10): what an iPhone sends, no beacon frame.
            let data = "0e 02 01 1a 0a ff 4c 00 10 05 01 18 44 00 00"
            var script = Self.controllersScript(bluetoothd: false) + """
                \(executable) agent --site hq --agent hq-a1 --source hci:hci0 --broker mqtt://10.0.2.2:\(harness.broker.port) \\
                    --private-addresses --spool /tmp/spool --batch-max-age-ms 200 --ack-timeout 2 --drain-timeout 60 > agent.log 2>&1 &
                agent=$!
                for attempt in $(seq 1 80); do grep -q "Scanning" agent.log && break; sleep 0.25; done
                # A legacy non-connectable advertisement from a random address ($1, little-endian), enabled for a second.
                advertise() {
                    hcitool -i hci1 cmd 0x08 0x0036 00 10 00 00 08 00 00 08 00 07 01 00 00 00 00 00 00 00 00 7f 01 00 01 00 00 > /dev/null
                    hcitool -i hci1 cmd 0x08 0x0035 00 $1 > /dev/null
                    hcitool -i hci1 cmd 0x08 0x0037 00 03 01 \(data) > /dev/null
                    hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
                    sleep 1
                    hcitool -i hci1 cmd 0x08 0x0039 00 01 00 00 00 00 > /dev/null
                }

                """
            for address in addresses {
                let littleEndian = address.hciBytes.map { String(format: "%02x", $0) }.joined(separator: " ")
                script += "for round in 1 2 3; do advertise \"\(littleEndian)\"; done\n"
            }
            script += """
                kill -TERM $agent
                wait $agent
                echo "agent exited $?"

                """
            return (harness, listener, events, try await GuestRun.start(script))
        }
        defer { listener.stop() }
        defer { run.remove() }
        let context = "guest:\n" + run.file("guest.log") + "\nagent:\n" + String(run.file("agent.log").suffix(3000))
        #expect(run.status == 0, "\(run.errors)\n\(context)")
        // On the wire: the three addresses as the agent heard them.
        let sent = Set(
            events.all.compactMap { event -> DecodedBatch? in
                guard case .message(_, let payload, _) = event else { return nil }
                return try? BatchReader.decode(payload)
            }.flatMap(\.sightings).filter { !$0.beacon.addressAsBefore }.map(\.beacon.address))
        #expect(sent == Set(addresses.map(\.value)), "\(sent.map { String($0, radix: 16) })\n\(context)")
        // In PostgreSQL: one beacon, the phone, last heard at one of them.
        try await harness.eventually("the phone's sightings are stored as one beacon", timeout: .seconds(30)) {
            try harness.count("beaconflow.sightings WHERE site_id = 'hq' AND beacon_id = 'phone-alice'") >= 3
        }
        let beacon = try harness.query("SELECT beacon_id, address::text, address_type FROM beaconflow.beacons")
        #expect(beacon.count == 1 && beacon[0][0] == "phone-alice" && beacon[0][2] == "random", "\(beacon)")
        #expect(try harness.count("beaconflow.sightings WHERE beacon_id LIKE 'mac:%'") == 0, "no address stored as a beacon of its own")
        try await harness.eventually("the phone is placed in the lobby", timeout: .seconds(60)) {
            try harness.count("beaconflow.beacon_locations WHERE beacon_id = 'phone-alice' AND zone_id = 'lobby'") == 1
        }
        print("radio: a phone with three private addresses in \(run.took)")
        try await harness.stop()
    }
}
