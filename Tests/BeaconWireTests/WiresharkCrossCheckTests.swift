import Foundation
import LocalServers
import TestServers
import Testing
@testable import BeaconWire

/// Reads every capture fixture with Wireshark's dissectors as well as ours and compares, advertising event by
/// advertising event: frame number, timestamp (µs), address, RSSI, service data and manufacturer company IDs.
/// Runs when `tshark` is installed (CI installs it).
@Suite struct WiresharkCrossCheckTests {
    static let tshark = findExecutable("tshark")

    struct Event: Equatable, CustomStringConvertible {
        var frame: Int
        var microseconds: Int64
        var address: String
        var rssi: String
        var serviceData: [String]?
        var companies: [String]?

        var description: String {
            "#\(frame) \(microseconds) \(address) \(rssi) \(serviceData ?? ["-"]) \(companies ?? ["-"])"
        }
    }

    @Test(
        .enabled(if: tshark != nil, "tshark is not installed"),
        arguments: ["mixed-beacons.btsnoop", "mixed-beacons.pcapng", "wban-python-btsnoop_hci.log", "mabip-btsnoop_hci.log"])
    func eventsAgreeWithTshark(fixtureName: String) async throws {
        let theirs = try await tsharkEvents(fixtureName)
        let ours = try ourEvents(fixtureName)
        #expect(theirs.count > 60)
        #expect(ours.count == theirs.count)
        var mismatches = 0
        for (mine, wireshark) in zip(ours, theirs) {
            var compared = wireshark
            // Where our AD parser refuses the payload (a corrupt report) or the report is a fragment, only the
            // HCI fields are compared.
            if mine.serviceData == nil { compared.serviceData = nil }
            if mine.companies == nil { compared.companies = nil }
            // Wireshark stops dissecting an event at a malformed AD structure, before the RSSI byte that follows.
            if mine.serviceData == nil, wireshark.rssi.isEmpty { compared.rssi = mine.rssi }
            if mine != compared {
                mismatches += 1
                if mismatches <= 5 { Issue.record("ours \(mine) / tshark \(wireshark)") }
            }
        }
        #expect(mismatches == 0)
    }

    func tsharkEvents(_ name: String) async throws -> [Event] {
        let fields = [
            "frame.number", "frame.time_epoch", "bthci_evt.bd_addr", "bthci_evt.rssi",
            "btcommon.eir_ad.entry.service_data", "btcommon.eir_ad.entry.company_id",
        ]
        let arguments =
            [
                "-r", try fixturePath(name), "-Y", "bthci_evt.le_meta_subevent == 0x02 || bthci_evt.le_meta_subevent == 0x0d",
                "-T", "fields", "-E", "separator=|", "-E", "occurrence=a",
            ] + fields.flatMap { ["-e", $0] }
        let (status, output, errors) = try await runProgram(try #require(Self.tshark), arguments)
        #expect(status == 0, "tshark exited with \(String(describing: status)): \(errors.prefix(500))")
        return output.split(separator: "\n").map { line in
            let columns = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let seconds = columns[1].split(separator: ".")
            let microseconds = Int64(seconds[0])! * 1_000_000 + Int64(seconds[1].prefix(6))!
            func list(_ text: String) -> [String] { text.isEmpty ? [] : text.split(separator: ",").map(String.init) }
            return Event(
                frame: Int(columns[0])!, microseconds: microseconds, address: columns[2], rssi: columns[3],
                serviceData: list(columns[4]), companies: list(columns[5]))
        }
    }

    func ourEvents(_ name: String) throws -> [Event] {
        let records = try readCapture(try fixture(name))
        var decoder = AdvertisingReportDecoder()
        var events: [Event] = []
        for (index, record) in records.enumerated()
        where record.kind == .event && record.packet.count > 2 && record.packet[0] == 0x3E
            && (record.packet[2] == 0x02 || record.packet[2] == 0x0D)
        {
            let pendingBefore = decoder.pendingFragments
            let reports = try decoder.reports(fromEvent: record.packet)
            // Both fixtures with extended reports carry one report per event; a fragment yields none until complete.
            guard let report = reports.first else {
                events.append(
                    Event(
                        frame: index + 1, microseconds: record.timestamp, address: "?", rssi: "?", serviceData: nil,
                        companies: nil))
                continue
            }
            let data = pendingBefore == 0 ? try? AdvertisingData(parsing: report.data) : nil
            events.append(
                Event(
                    frame: index + 1, microseconds: record.timestamp, address: report.address.description.lowercased(),
                    rssi: report.rssi.map { String($0) } ?? "127",
                    serviceData: data.map { $0.serviceData.map { $0.data.hexString } },
                    companies: data.map { $0.manufacturerData.map { "0x" + hexString(UInt64($0.companyID), digits: 4) } }))
        }
        return events
    }
}

