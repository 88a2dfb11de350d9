import BeaconWire
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
    .timeLimit(.minutes(12)))
struct RadioTests {
    /// One advertising set the test enables on hci1: its data as hex, its PDUs (legacy or extended, and which), its
    /// address, and what the scan response carries.
    struct Advert {
        var name: String
        /// LE Set Extended Advertising Parameters' properties: 0x0010 ADV_NONCONN_IND, 0x0012 ADV_SCAN_IND, 0x0000
        /// an extended non-connectable, non-scannable advertisement.
        var properties: UInt16
        var data: String
        /// A random static address (big-endian hex) instead of the controller's public one.
        var randomAddress: String?
        var scanResponse: String?

        var isLegacy: Bool { properties & 0x10 != 0 }
    }

    /// hci1's public address, as btvirt numbers its controllers.
    static let advertiserAddress: UInt64 = 0x00AA_0101_0001

    static let adverts = [
        // iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0, major 7, minor 9, power -59 dBm, in ADV_NONCONN_IND.
        Advert(name: "ibeacon", properties: 0x0010, data: "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000070009c5"),
        // Eddystone-UID 0102030405060708090a / 0000000000e1, power at 0 m -20 dBm, in an extended advertisement
        // (btvirt 5.66 fails, and its controllers vanish, when an extended set's data is longer than 31 bytes).
        Advert(name: "eddystone-uid", properties: 0x0000, data: "0201060303aafe1716aafe00ec0102030405060708090a0000000000e10000"),
        // Eddystone-TLM alone (3000 mV, 24.5 °C, count 256, uptime 51.2 s) from random static C0:FF:EE:00:00:42:
        // known by its address only.
        Advert(
            name: "eddystone-tlm", properties: 0x0000, data: "0201060303aafe1116aafe20000bb818800000010000000200",
            randomAddress: "c0ffee000042"),
        // Eddystone-URL https://example.com/ in ADV_SCAN_IND from random static C0:FF:EE:00:00:43, and a BTHome v2
        // sensor (battery 93 %, 22.51 °C) in its scan response: the agent scans actively.
        Advert(
            name: "eddystone-url", properties: 0x0012, data: "0201060303aafe0e16aafe10eb036578616d706c6500",
            randomAddress: "c0ffee000043", scanResponse: "0916d2fc40015d02cb08"),
    ]

    /// The guest's script: controllers up with LE on, the agent scanning hci0, each advert enabled once on hci1 (the
    /// emulated controller reports an advertiser once per enable), then the agent stopped, which waits for the
    /// ingest's acknowledgement of everything spooled.
    @Test func theAdvertsAreWholeBytesThatFitTheirPDUs() {
        for advert in Self.adverts + [Self.afterTheCycle] {
            for data in [advert.data, advert.scanResponse ?? ""] {
                #expect(data.count % 2 == 0 && data.count / 2 <= (advert.isLegacy ? 31 : 251), "\(advert.name)")
            }
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
        /// Alone, and both controllers are removed (btvirt stopped) and added again (btvirt started) after the
        /// adverts; one more advert follows.
        case controllerReplaced
        /// Alone, and another program takes the scan after the adverts (disables it, sets its own parameters,
        /// enables it with duplicate filtering, as bluetoothd's discovery does); one more advert follows.
        case scanTakenOver
        /// Alone, on LE-only controllers without the Bluetooth 5 extended commands (btvirt -L): the agent scans
        /// with the legacy commands, and the test advertises every advert in a legacy PDU with the legacy
        /// commands (the extended ones in ADV_NONCONN_IND).
        case legacyController

        /// One more advert follows the fault.
        var advertisesAgain: Bool { self == .adapterCycled || self == .controllerReplaced || self == .scanTakenOver }
    }

    /// What the test advertises once the adapter is back: iBeacon major 7, minor 10.
    static let afterTheCycle = Advert(
        name: "ibeacon-after", properties: 0x0010, data: "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e00007000ac5")

    /// A sighting as the batches carry it, without its time and RSSI.
    struct HeardAdvert: Hashable, CustomStringConvertible {
        var beacon: BeaconKey
        var frames: DataFrames

        var description: String {
            "\(beacon.beaconID) \(DeviceAddress(value: beacon.address, kind: beacon.addressIsRandom ? .random : .public)) "
                + "event \(beacon.advertisingEvent.map { String($0, radix: 16) } ?? "-") power \(beacon.powerAt1mDbm.map(String.init) ?? "-") \(frames)"
        }
    }

    static func heard(
        _ beaconID: String, random: String? = nil, event: UInt16, power: Int8? = nil, _ frames: DataFrames = []
    ) -> HeardAdvert {
        let address = random.map { UInt64($0, radix: 16)! } ?? advertiserAddress
        return HeardAdvert(
            beacon: BeaconKey(
                beaconID: beaconID, address: address, addressIsRandom: random != nil, powerAt1mDbm: power,
                advertisingEvent: event),
            frames: frames)
    }

    /// What the adverts give in the batches: identity frames as the beacon's id and power, the frames without
    /// identity as their bytes; legacy PDUs with their PDU's event bits (ADV_NONCONN_IND 0x10, ADV_SCAN_IND 0x12,
    /// SCAN_RSP 0x1A), the extended ones with 0x00.
    static let expectedSightings = [
        heard("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:9", event: 0x10, power: -59),
        heard("eddystone:0102030405060708090a:0000000000e1", event: 0x00, power: -61),
        heard(
            "mac:C0:FF:EE:00:00:42", random: "c0ffee000042", event: 0x00,
            [.eddystone(FrameBytes(try! [UInt8](hex: "20000bb818800000010000000200")))]),
        heard(
            "mac:C0:FF:EE:00:00:43", random: "c0ffee000043", event: 0x12,
            [.eddystone(FrameBytes(try! [UInt8](hex: "10eb036578616d706c6500")))]),
        heard(
            "mac:C0:FF:EE:00:00:43", random: "c0ffee000043", event: 0x1A,
            [.serviceData(uuid16: 0xFCD2, FrameBytes(try! [UInt8](hex: "40015d02cb08")))]),
    ]
    /// On a legacy controller, the adverts sent in extended PDUs elsewhere come as ADV_NONCONN_IND.
    static func expectedSightings(_ setup: Setup) -> [HeardAdvert] {
        guard setup == .legacyController else { return expectedSightings }
        return expectedSightings.map { advert in
            var advert = advert
            if advert.beacon.advertisingEvent == 0x00 { advert.beacon.advertisingEvent = 0x10 }
            return advert
        }
    }

    static let expectedAfterTheCycle = heard("ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:10", event: 0x10, power: -59)

    /// The guest's first steps: btvirt's two controllers with LE on, and with `bluetoothd` the system bus and BlueZ's
    /// daemon managing both (`bluetoothctl.log` lists them).
    static func controllersScript(bluetoothd: Bool, leOnly: Bool = false) -> String {
        var script = """
            set -u
            btvirt \(leOnly ? "-L " : "")-l2 > btvirt.log 2>&1 &
            btvirt=$!
            for attempt in $(seq 1 120); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.25; done
            for index in 0 1; do
                btmgmt --index $index power off && btmgmt --index $index le on && btmgmt --index $index power on
            done > btmgmt.log 2>&1

            """
        if bluetoothd {
            script += """
                mkdir -p /run/dbus && dbus-daemon --system --fork --nopidfile
                /usr/libexec/bluetooth/bluetoothd -n > bluetoothd.log 2>&1 &
                for attempt in $(seq 1 120); do [ "$(bluetoothctl list 2>/dev/null | grep -c Controller)" -ge 2 ] && break; sleep 0.25; done
                bluetoothctl list > bluetoothctl.log 2>&1
                # A controller that the daemon's start left (or a loaded host's btmgmt call) unpowered is powered
                # again, until btmgmt reports it powered.
                for index in 0 1; do
                    for attempt in $(seq 1 40); do
                        btmgmt --index $index info 2>/dev/null | grep 'current settings:' | grep -q powered && break
                        btmgmt --index $index le on; btmgmt --index $index power on; sleep 0.25
                    done
                    btmgmt --index $index info 2>/dev/null | grep 'current settings:'
                done >> btmgmt.log 2>&1

                """
        }
        return script
    }

    /// Whether query rows are the expected ones, where an expected value may list alternatives as `a|b`.
    static func rows(_ rows: [[String?]], match expected: [[String?]]) -> Bool {
        func matches(_ value: String?, _ pattern: String?) -> Bool {
            guard let value, let pattern else { return value == pattern }
            return pattern.split(separator: "|").contains { $0 == value }
        }
        return rows.count == expected.count
            && zip(rows, expected).allSatisfy { row, wanted in
                row.count == wanted.count && zip(row, wanted).allSatisfy { matches($0, $1) }
            }
    }

    static func guestScript(brokerPort: Int, executable: String, setup: Setup = .alone) -> String {
        var script = controllersScript(bluetoothd: setup == .besideBluetoothd, leOnly: setup == .legacyController)
        let agentCommand = """
            \(executable) agent --site hq --agent hq-a1 --source hci:hci0 --broker mqtt://10.0.2.2:\(brokerPort) \\
                --metrics-listen 127.0.0.1:9465 --active --spool /tmp/spool --batch-max-age-ms 200 --ack-timeout 2 --drain-timeout 60 --log-level debug
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
            # The emulated controller reports an advertiser once, as its advertising is enabled.
            # handle 0; properties; intervals 1.28 s; channels 37-39; public address; no peer; no filter; any power;
            # 1M primary and secondary PHYs; SID 0; no scan request notifications.
            # $1 properties, $2 own address type, $3 the random address (little-endian) or nothing, $4 the data,
            # $5 the scan response or nothing (each as its length and bytes).
            advertise() {
                hcitool -i hci1 cmd 0x08 0x0036 00 $1 00 08 00 00 08 00 07 $2 00 00 00 00 00 00 00 00 7f 01 00 01 00 00 > /dev/null
                [ -z "$3" ] || hcitool -i hci1 cmd 0x08 0x0035 00 $3 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0037 00 03 01 $4 > /dev/null
                [ -z "$5" ] || hcitool -i hci1 cmd 0x08 0x0038 00 03 01 $5 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0039 01 01 00 00 00 00 > /dev/null
                sleep 0.3
                hcitool -i hci1 cmd 0x08 0x0039 00 01 00 00 00 00 > /dev/null
            }
            # The same with the legacy commands; $1 the PDU type (0 ADV_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND), data
            # padded to 31 bytes.
            advertise_legacy() {
                [ -z "$3" ] || hcitool -i hci1 cmd 0x08 0x0005 $3 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0006 00 08 00 08 $1 $2 00 00 00 00 00 00 00 07 00 > /dev/null
                hcitool -i hci1 cmd 0x08 0x0008 $4 > /dev/null
                [ -z "$5" ] || hcitool -i hci1 cmd 0x08 0x0009 $5 > /dev/null
                hcitool -i hci1 cmd 0x08 0x000a 01 > /dev/null
                sleep 0.3
                hcitool -i hci1 cmd 0x08 0x000a 00 > /dev/null
            }

            """
        /// Hex text as its bytes' pairs of digits.
        func pairs(_ hex: String) -> [String] {
            stride(from: 0, to: hex.count, by: 2).map { String(hex[hex.index(hex.startIndex, offsetBy: $0)...].prefix(2)) }
        }
        /// HCI data: its length, then its bytes.
        func lengthAndBytes(_ hex: String?) -> String {
            guard let hex else { return "" }
            let bytes = pairs(hex)
            return String(format: "%02x ", bytes.count) + bytes.joined(separator: " ")
        }
        /// Legacy advertising and scan response data: the length, then 31 bytes.
        func paddedLengthAndBytes(_ hex: String?) -> String {
            guard let hex else { return "" }
            let bytes = pairs(hex)
            return String(format: "%02x ", bytes.count) + (bytes + Array(repeating: "00", count: 31 - bytes.count)).joined(separator: " ")
        }
        func advertise(_ advert: Advert) {
            script += "echo advertising \(advert.name)\n"
            // HCI takes numbers and addresses little-endian.
            let address = advert.randomAddress.map { pairs($0).reversed().joined(separator: " ") }
            if setup == .legacyController {
                let type = advert.properties == 0x12 ? "02" : advert.properties == 0x13 ? "00" : "03"
                script += "advertise_legacy \(type) \(address == nil ? "00" : "01") \"\(address ?? "")\" "
                script += "\"\(paddedLengthAndBytes(advert.data))\" \"\(paddedLengthAndBytes(advert.scanResponse))\"\n"
                return
            }
            let properties = String(format: "%02x %02x", advert.properties & 0xFF, advert.properties >> 8)
            script += "advertise \"\(properties)\" \(address == nil ? "00" : "01") \"\(address ?? "")\" "
            script += "\"\(lengthAndBytes(advert.data))\" \"\(lengthAndBytes(advert.scanResponse))\"\n"
        }
        for advert in adverts { advertise(advert) }
        // The agent must find the fault, say why, scan again by itself, and say so in /healthz meanwhile.
        let healthz = "curl -s -w ' %{http_code}\\n' http://127.0.0.1:9465/healthz"
        switch setup {
        case .adapterCycled:
            script += """
                btmgmt --index 0 power off > /dev/null 2>&1
                sleep 1
                \(healthz) > healthz-lost.log 2>&1
                btmgmt --index 0 power on > /dev/null 2>&1

                """
        case .controllerReplaced:
            script += """
                kill $btvirt; wait $btvirt
                for attempt in $(seq 1 40); do [ -e /sys/class/bluetooth/hci0 ] || break; sleep 0.25; done
                sleep 1
                \(healthz) > healthz-lost.log 2>&1
                btvirt -l2 > btvirt-again.log 2>&1 &
                for attempt in $(seq 1 120); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.25; done
                for index in 0 1; do
                    btmgmt --index $index power off && btmgmt --index $index le on && btmgmt --index $index power on
                done >> btmgmt.log 2>&1

                """
        case .scanTakenOver:
            // LE Set Extended Scan Enable off; Parameters: active, 30 ms; Enable with duplicate filtering.
            script += """
                hcitool -i hci0 cmd 0x08 0x0042 00 00 00 00 00 00 > /dev/null
                hcitool -i hci0 cmd 0x08 0x0041 00 00 01 01 30 00 30 00 > /dev/null
                hcitool -i hci0 cmd 0x08 0x0042 01 01 00 00 00 00 > /dev/null

                """
        case .alone, .besideBluetoothd, .unprivileged, .legacyController:
            break
        }
        if setup.advertisesAgain {
            script += """
                for attempt in $(seq 1 80); do [ "$(grep -c Scanning agent.log)" -ge 2 ] && break; sleep 0.25; done
                \(healthz) > healthz-back.log 2>&1

                """
            // Three times, a second apart: the kernel and the test's own btmgmt calls may still move the scan (which
            // the agent then sets again) just as the adapter comes back, and the emulated radio reports once.
            for _ in 0..<3 {
                advertise(afterTheCycle)
                script += "sleep 0.7\n"
            }
        }
        return script + stopAgentScript
    }

    /// The guest's last steps: the agent's metrics into `metrics.log`, then the agent stopped (it waits for the
    /// acknowledgement of what it spooled), its exit status the script's.
    static let stopAgentScript = """
        sleep 1
        curl -s http://127.0.0.1:9465/metrics > metrics.log 2>&1
        kill -TERM $agent
        wait $agent
        status=$?
        echo "agent exited $status"
        exit $status

        """

    /// One VM at a time: the test's servers come up and its VM runs while it holds the slot (two VMs, or a VM beside
    /// servers starting, leave the emulated controllers too little of the two cores to come up); what it checks
    /// afterwards (the ingest's waits, PostgreSQL's rows) overlaps the next test's VM.
    actor VMSlot {
        static let shared = VMSlot()
        private var held = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        private func acquire() async {
            guard held else {
                held = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        private func release() {
            if waiting.isEmpty { held = false } else { waiting.removeFirst().resume() }
        }

        /// `body` alone among the tests that call this, the others waiting their turn in order.
        static func alone<T>(_ body: () async throws -> T) async throws -> T {
            await shared.acquire()
            do {
                let value = try await body()
                await shared.release()
                return value
            } catch {
                await shared.release()
                throw error
            }
        }
    }

    /// A script run in the VM, in a directory of its own that `remove()` deletes.
    struct GuestRun {
        let directory: String
        let status: Int32?
        let errors: String
        let took: Duration

        /// Runs `script` in a new VM (at most 240 s).
        static func start(_ script: String) async throws -> GuestRun {
            let directory = try makeTemporaryDirectory(prefix: "radio")
            try script.write(toFile: directory + "/guest.sh", atomically: true, encoding: .utf8)
            let started = ContinuousClock.now
            let run = try await runProgram(repositoryRoot + "/scripts/radio-vm", ["run", directory, "guest.sh", "240"])
            return GuestRun(directory: directory, status: run.status, errors: run.errors, took: ContinuousClock.now - started)
        }

        /// A file the script left, or "".
        func file(_ name: String) -> String { (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "" }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Alone on the adapter, next to bluetoothd managing it (the agent's raw HCI channel scans beside the kernel's
    /// management interface), and as an unprivileged user with only the two capabilities it needs.
    @Test(arguments: Setup.allCases)
    func theAgentScansLegacyAndExtendedAdvertsThroughTheRealStackIntoPostgreSQL(setup: Setup) async throws {
        let executable = try #require(beaconflowExecutable)
        let (harness, listener, events, run) = try await VMSlot.alone {
            let harness = try await IngestHarness.start()
            // Every batch as the broker carries it, beside the ingest.
            let (listener, events) = try await harness.client(id: "radio-listener")
            try listener.subscribe(topic: "beaconflow/v1/hq/hq-a1/batch")
            let run = try await GuestRun.start(Self.guestScript(brokerPort: harness.broker.port, executable: executable, setup: setup))
            return (harness, listener, events, run)
        }
        defer { listener.stop() }
        defer { run.remove() }
        let file = run.file
        let guest = file("guest.log")
        let agent = file("agent.log")
        #expect(run.status == 0, "VM: \(run.errors)\nguest:\n\(guest)\nagent:\n\(agent.suffix(3000))")

        // In the batches: each advertisement with its address, address type, advertising event and content.
        var expected = Self.expectedSightings(setup)
        if setup.advertisesAgain { expected.append(Self.expectedAfterTheCycle) }
        let sent = events.all.compactMap { event -> DecodedBatch? in
            guard case .message(_, let payload, _) = event else { return nil }
            return try? BatchReader.decode(payload)
        }
        // A batch leaves out an address its agent sent for the id in an earlier batch of the last minute: read
        // in sequence order, each left-out address is the one last sent.
        var lastSent: [String: UInt64] = [:]
        var heard: Set<HeardAdvert> = []
        for batch in sent.sorted(by: { $0.sequence < $1.sequence }) {
            for sighting in batch.sightings {
                var beacon = sighting.beacon
                if beacon.addressAsBefore, let address = lastSent[beacon.beaconID] {
                    beacon.address = address
                    beacon.addressAsBefore = false
                } else if !beacon.addressAsBefore {
                    lastSent[beacon.beaconID] = beacon.address
                }
                heard.insert(HeardAdvert(beacon: beacon, frames: sighting.frames))
            }
        }
        #expect(heard == Set(expected), "missing \(Set(expected).subtracting(heard)), unexpected \(heard.subtracting(expected))\nguest:\n\(guest)\nagent:\n\(agent.suffix(3000))")

        // In PostgreSQL, through the ingest.
        var expectedBeacons: [[String?]] = [
            ["eddystone:0102030405060708090a:0000000000e1", "eddystone-uid", "00:aa:01:01:00:01", "public", "ext", nil],
            ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:9", "ibeacon", "00:aa:01:01:00:01", "public", "adv_nonconn_ind", nil],
            ["mac:C0:FF:EE:00:00:42", "eddystone-tlm", "c0:ff:ee:00:00:42", "random", "ext", nil],
            // The URL frame waited for an identity frame from its address until the agent stopped: its type came
            // last. Its advertisement and the scan response are the newest sightings; the radio may deliver them
            // together, at one time, and either is then how the beacon was last heard.
            ["mac:C0:FF:EE:00:00:43", "eddystone-url", "c0:ff:ee:00:00:43", "random", "adv_scan_ind|scan_rsp", "https://example.com/"],
        ]
        if setup == .legacyController {
            expectedBeacons = expectedBeacons.map { $0.map { $0 == "ext" ? "adv_nonconn_ind" : $0 } }
            #expect(agent.contains("commands=legacy"), "\(agent)")
        }
        if setup.advertisesAgain {
            expectedBeacons.insert(
                ["ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:10", "ibeacon", "00:aa:01:01:00:01", "public", "adv_nonconn_ind", nil], at: 1)
        }
        // The TLM and URL frames of addresses that send no identity wait up to 15 s at the ingest for one that
        // another agent might hear (docs/proximity-and-occupancy.md), then are stored under their addresses.
        let beaconsQuery = "SELECT beacon_id, kind, address::text, address_type, advertising_event, url FROM beaconflow.beacons ORDER BY 1"
        var beacons = try harness.query(beaconsQuery)
        let waitedEnough = ContinuousClock.now + .seconds(45)
        while !Self.rows(beacons, match: expectedBeacons), ContinuousClock.now < waitedEnough {
            try await Task.sleep(for: .milliseconds(500))
            beacons = try harness.query(beaconsQuery)
        }
        #expect(Self.rows(beacons, match: expectedBeacons), "\(beacons)\nagent:\n\(agent.suffix(3000))")
        // Eddystone's power is at 0 m: 41 dB more than at 1 m.
        let powers = try harness.query("SELECT DISTINCT beacon_id, tx_power FROM beaconflow.sightings WHERE tx_power IS NOT NULL ORDER BY 1")
        #expect(powers.first == ["eddystone:0102030405060708090a:0000000000e1", "-61"] && powers.dropFirst().allSatisfy { $0[1] == "-59" })
        let telemetry = try harness.query("SELECT beacon_id, battery_mv, temperature_c, adv_count, uptime_s FROM beaconflow.telemetry")
        #expect(telemetry == [["mac:C0:FF:EE:00:00:42", "3000", "24.5", "256", "51.2"]], "\(telemetry)\nguest:\n\(guest)\nagent:\n\(agent.suffix(4000))")
        let readings = try harness.query(
            "SELECT beacon_id, quantity, value, unit FROM beaconflow.sensor_readings WHERE beacon_id LIKE '%:43' ORDER BY 2")
        #expect(readings == [["mac:C0:FF:EE:00:00:43", "battery", "93", "percent"], ["mac:C0:FF:EE:00:00:43", "temperature", "22.51", "celsius"]])
        let metrics = file("metrics.log")
        if setup.advertisesAgain {
            #expect(file("healthz-back.log").contains(#""scanning":true}"#) && file("healthz-back.log").hasSuffix(" 200\n"), "\(file("healthz-back.log"))")
        }
        switch setup {
        case .alone, .legacyController:
            break
        case .adapterCycled, .controllerReplaced:
            #expect(agent.contains("Adapter lost; scanning resumes when it is back"), "\(agent)")
            if setup == .adapterCycled { #expect(agent.contains("was powered off"), "\(agent)") }
            #expect(file("healthz-lost.log").contains(#""scanning":false}"#) && file("healthz-lost.log").hasSuffix(" 503\n"), "\(file("healthz-lost.log"))")
            #expect(metrics.contains("beaconflow_agent_adapter_losses_total 1"), "\(metrics)")
        case .scanTakenOver:
            #expect(agent.contains("Another program changed or stopped the scan; scanning again with the agent's settings"), "\(agent)")
            #expect(metrics.contains("beaconflow_agent_scan_interruptions_total 1"), "\(metrics)")
        case .besideBluetoothd:
            let listed = file("bluetoothctl.log")
            #expect(listed.contains("Controller 00:AA:01:00:00:00"), "bluetoothd manages hci0: \(listed)")
        case .unprivileged:
            let refused = file("refused.log")
            let status = file("refused.status")
            #expect(status.trimmingCharacters(in: .whitespacesAndNewlines) == "66", "\(status): \(refused)")
            #expect(refused.contains("scanning needs CAP_NET_RAW and CAP_NET_ADMIN"), "\(refused)")
        }
        print("radio: legacy and extended adverts through the real stack (\(setup.rawValue)) in \(run.took)")
        try await harness.stop()
    }
}
