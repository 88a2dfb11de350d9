import BeaconWire
import Foundation
import LocalServers
import TestServers
import Testing
import WorkQueue

@testable import BeaconAgent

/// Recordings of RSSI (docs/recordings.md): read line by line with errors that name the line, replayed as one
/// receiver's reports.
@Suite struct RecordingTests {
    func rows(_ text: String) throws -> [RecordingRow] {
        var reader = RecordingReader()
        var rows: [RecordingRow] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if let row = try reader.read(line: line) { rows.append(row) }
        }
        return rows
    }

    func error(_ text: String) -> RecordingError? {
        do {
            _ = try rows(text)
            return nil
        } catch {
            return error as? RecordingError
        }
    }

    @Test func rowsAreReadWithTheirAddressesAndData() throws {
        let read = try rows(
            """
            # an office, two receivers
            time_s,receiver,transmitter,rssi,data

            1581249601.4086823,sensor10,e7:8f:13:56:24:ce,-87,
            1581249601.5,sensor11,E78F135624CE/public,-77,0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5\r
            """)
        #expect(read.count == 2)
        #expect(read[0] == RecordingRow(
            timeMicros: 1_581_249_601_408_682, receiver: "sensor10", address: DeviceAddress(value: 0xE78F_1356_24CE, kind: .random), rssi: -87))
        #expect(read[1].address == DeviceAddress(value: 0xE78F_1356_24CE, kind: .public))
        #expect(read[1].data.count == 30 && read[1].report.rssi == -77 && read[1].report.eventType == 3)
    }

    @Test func everyBadLineIsNamed() {
        #expect(error("time,receiver,transmitter,rssi\n") == RecordingError(
            line: 1, "the header must be time_s,receiver,transmitter,rssi (and ,data), not 'time,receiver,transmitter,rssi'"))
        let header = "time_s,receiver,transmitter,rssi\n"
        #expect(error(header + "1,a,e7:8f:13:56:24:ce\n")?.message == "3 fields where the header has 4")
        #expect(error(header + "x,a,e7:8f:13:56:24:ce,-50\n")?.message == "time_s 'x' is no time in Unix seconds")
        #expect(error(header + "2,a,e7:8f:13:56:24:ce,-50\n1,a,e7:8f:13:56:24:ce,-50\n")?.line == 3)
        #expect(error(header + "1,Sensor A,e7:8f:13:56:24:ce,-50\n")?.message.hasPrefix("receiver 'Sensor A'") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24,-50\n")?.message.hasPrefix("transmitter 'e7:8f:13:56:24' is no address") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24:ce/static,-50\n")?.message.hasPrefix("transmitter") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24:ce,-128\n")?.message == "rssi '-128' must be a whole number of dBm from -127 to 20")
        #expect(error("time_s,receiver,transmitter,rssi,data\n1,a,e7:8f:13:56:24:ce,-50,0g\n")?.message.hasPrefix("data must be hex") == true)
    }

    @Test func aReceiversRowsAreReplayedAndAReplayResumes() throws {
        let path = try makeTemporaryDirectory(prefix: "recording") + "/office.csv"
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        var text = "time_s,receiver,transmitter,rssi\n"
        for index in 0..<1000 {
            text += "\(1_581_249_600 + Double(index) / 10),\(index % 3 == 0 ? "sensor10" : "sensor11"),e7:8f:13:56:24:ce,\(-60 - index % 30)\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        func replay(_ source: RecordingReplaySource) throws -> [TimedReport] {
            var reports: [TimedReport] = []
            try source.run(deliver: { reports += $0 }, stop: StopSignal())
            return reports
        }
        let source = RecordingReplaySource(path: path, receiver: "sensor10", speed: .maximum)
        let all = try replay(source)
        #expect(all.count == 334)
        let ordinals: [Int64?] = (0..<334).map { Int64($0) }
        #expect(all.map(\.ordinal) == ordinals)
        #expect(all[1].timeMicros == 1_581_249_600_300_000 && all[1].report.rssi == -63)
        // Resumed after the first 300, with number 10 read again (it was held back when the spool last wrote).
        let resumed = try replay(source.starting(at: 300, again: [10]))
        let again: [Int64?] = [10] + (300..<334).map { Int64($0) }
        #expect(resumed.map(\.ordinal) == again)
        #expect(try source.inputIdentity().hasPrefix("recording:sensor10:capture:"))
    }

    @Test func aRowThatCannotBeReadIsSkippedAndSaidAndAFileWithoutHeaderIsRefused() throws {
        let directory = try makeTemporaryDirectory(prefix: "recording")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/glitch.csv"
        // A real recording's glitch: +42 dBm.
        try "time_s,receiver,transmitter,rssi\n1,a,e7:8f:13:56:24:ce,-50\n2,a,e7:8f:13:56:24:ce,42\n3,a,e7:8f:13:56:24:ce,-51\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let log = RecordingLog()
        var delivered: [Int8?] = []
        try RecordingReplaySource(path: path, receiver: "a", speed: .maximum, logger: log.logger(label: "recording"))
            .run(deliver: { delivered += $0.map(\.report.rssi) }, stop: StopSignal())
        #expect(delivered == [-50, -51])
        let said = log.all.filter { $0.message == "Recording line skipped" }
        #expect(said.count == 1 && said.first?.metadata["line"] == "3", "\(log.all)")
        #expect(said.first?.metadata["error"] == "rssi '42' must be a whole number of dBm from -127 to 20")
        #expect(log.all.contains { $0.message == "Recording lines skipped" && $0.metadata["lines"] == "1" })

        let noHeader = directory + "/no-header.csv"
        try "1,a,e7:8f:13:56:24:ce,-50\n".write(toFile: noHeader, atomically: true, encoding: .utf8)
        #expect(throws: SourceError(
            source: noHeader, "line 1: the header must be time_s,receiver,transmitter,rssi (and ,data), not '1,a,e7:8f:13:56:24:ce,-50'")) {
            try RecordingReplaySource(path: noHeader, receiver: "a", speed: .maximum).run(deliver: { _ in }, stop: StopSignal())
        }
    }
}
