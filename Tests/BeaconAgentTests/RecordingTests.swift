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
        for line in RecordingColumns.lines(text) {
            let read = try reader.read(line: line)
            if let skipped = read.skipped.first { throw skipped }
            rows += read.rows
        }
        return rows
    }

    /// The rows read and the readings skipped, each said.
    func rowsAndSkipped(_ text: String) throws -> (rows: [RecordingRow], skipped: [RecordingError]) {
        var reader = RecordingReader()
        var read: (rows: [RecordingRow], skipped: [RecordingError]) = ([], [])
        for line in RecordingColumns.lines(text) {
            let line = try reader.read(line: line)
            read.rows += line.rows
            read.skipped += line.skipped
        }
        return read
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
        #expect(error("time_s,receiver,transmitter,rssi,rssi\n") == RecordingError(
            line: 1,
            "the header must name the columns time_s (or time_ms or time or time_utc),receiver,transmitter,rssi (and data), in any order, or time_s (or time_ms or time or time_utc),transmitter and a column per receiver, not 'time_s,receiver,transmitter,rssi,rssi'"))
        #expect(error("time,time_s,receiver,transmitter,rssi\n")?.line == 1)
        #expect(error("time_s,receiver,transmitter,rssi,room\n")?.line == 1)
        let header = "time_s,receiver,transmitter,rssi\n"
        #expect(error(header + "1,a,e7:8f:13:56:24:ce\n")?.message == "3 fields where the header has 4")
        #expect(error(header + "x,a,e7:8f:13:56:24:ce,-50\n")?.message == "time_s 'x' is no time in Unix seconds")
        #expect(error(header + "2,a,e7:8f:13:56:24:ce,-50\n1,a,e7:8f:13:56:24:ce,-50\n")?.line == 3)
        #expect(error(header + "1,__,e7:8f:13:56:24:ce,-50\n")?.message.hasPrefix("receiver '__' names no agent") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24,-50\n")?.message.hasPrefix("transmitter 'e7:8f:13:56:24' is no address") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24:ce/static,-50\n")?.message.hasPrefix("transmitter") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24:ce,-128\n")?.message == "rssi '-128' must be a number of dBm from -127 to 20")
        #expect(error(header + "1,a,e7:8f:13:56:24:ce,-127.5\n")?.message == "rssi '-127.5' must be a number of dBm from -127 to 20")
        #expect(error(header + "1,a,e7:8f:13:56:24:ce,nan\n")?.message == "rssi 'nan' must be a number of dBm from -127 to 20")
        #expect(error("time_ms,receiver,transmitter,rssi\n1e15,a,e7:8f:13:56:24:ce,-50\n")?.message == "time_ms '1e15' is no time in Unix milliseconds")
        #expect(error("time_s,receiver,transmitter,rssi,data\n1,a,e7:8f:13:56:24:ce,-50,0g\n")?.message.hasPrefix("data must be hex") == true)
    }

    /// What a phone or a gateway logs: Unix milliseconds, and RSSI averaged to decimals (rounded to whole dBm).
    @Test func timesInMillisecondsAndDecimalRSSI() throws {
        let read = try rows(
            """
            time_ms,receiver,transmitter,rssi
            1628009652227,hall,e7:8f:13:56:24:ce,-70.4
            1628009652500.5,hall,e7:8f:13:56:24:ce,-70.5
            1628009653000,hall,e7:8f:13:56:24:ce,-127.4
            """)
        #expect(read.map(\.timeMicros) == [1_628_009_652_227_000, 1_628_009_652_500_500, 1_628_009_653_000_000])
        #expect(read.map(\.rssi) == [-70, -71, -127])
    }

    @Test func columnsComeInAnyOrderWithTimesInISO8601() throws {
        let read = try rows(
            """
            rssi,transmitter,time,receiver
            -70,e7:8f:13:56:24:ce,2021-08-03T16:54:12.227Z,hall
            -71,e7:8f:13:56:24:ce,2021-08-03 18:54:12.5+02:00,hall
            -72,e7:8f:13:56:24:ce,2021-08-03T11:24:13-0530,hall
            """)
        #expect(read.map(\.timeMicros) == [1_628_009_652_227_000, 1_628_009_652_500_000, 1_628_009_653_000_000])
        #expect(read.map(\.rssi) == [-70, -71, -72] && read.allSatisfy { $0.receiver == "hall" })
        #expect(RecordingTime.iso8601Micros(Array("2000-02-29 12:00:00+02:00".utf8)) == 951_818_400_000_000)
        #expect(RecordingTime.iso8601Micros(Array("2024-12-31T23:59:59.999999-05:30".utf8)) == 1_735_709_399_999_999)
        #expect(RecordingTime.iso8601Micros(Array("1970-01-01T00:00:00Z".utf8)) == 0)

        let header = "time,receiver,transmitter,rssi\n"
        let refused = "is no ISO 8601 time with its offset, such as 2021-08-03T16:54:12.227Z or +02:00 (a column of times in UTC without one is named time_utc)"
        for time in ["2021-08-03T16:54:12", "2021-02-30T00:00:00Z", "2100-02-29T00:00:00Z", "2021-08-03T24:00:00Z", "1969-12-31T23:59:59Z",
            "2021-08-03T16:54:12.Z", "2021-08-03T16:54:12+2", "1628009652.227", "2021-08-03T16:54:12Z junk"]
        {
            #expect(error(header + "\(time),a,e7:8f:13:56:24:ce,-50\n")?.message == "time '\(time)' \(refused)", "\(time)")
        }
        // Times in UTC without an offset, under their own column's name.
        let utc = try rows("Time_UTC,receiver,transmitter,rssi\n2021-08-03 16:54:12.227,hall,e7:8f:13:56:24:ce,-70\n2021-08-03T18:54:12.5+02:00,hall,e7:8f:13:56:24:ce,-71\n")
        #expect(utc.map(\.timeMicros) == [1_628_009_652_227_000, 1_628_009_652_500_000])
        #expect(error("time_utc,receiver,transmitter,rssi\n2021-08-03 25:00:00,a,e7:8f:13:56:24:ce,-50\n")?.message
            == "time_utc '2021-08-03 25:00:00' is no ISO 8601 time in UTC, such as 2021-08-03 16:54:12.227")
        #expect(error(header + "2021-08-03T16:54:13Z,a,e7:8f:13:56:24:ce,-50\n2021-08-03T16:54:12Z,a,e7:8f:13:56:24:ce,-50\n")?.message
            == "time 2021-08-03T16:54:12Z is before a's line above: each receiver's lines are in time order")
    }

    /// What spreadsheets and data tools export: a byte order mark, another case, semicolons or tabs with decimal
    /// commas, fields in quotes, carriage returns.
    @Test func aRecordingAsSpreadsheetsAndDataToolsExportIt() throws {
        let plain = try rows(
            """
            time_s,receiver,transmitter,rssi
            1628009652.227,hall,tag-7,-70.5
            1628009653,kitchen,e7:8f:13:56:24:ce,-64
            """)
        #expect(plain.map(\.rssi) == [-71, -64] && plain.map(\.timeMicros) == [1_628_009_652_227_000, 1_628_009_653_000_000])
        let exports = [
            "\u{FEFF}Time_s;Receiver;Transmitter;RSSI\r\n1628009652,227;hall;tag-7;-70,5\r\n1628009653;kitchen;e7:8f:13:56:24:ce;-64\r\n",
            "TIME_S\tRECEIVER\tTRANSMITTER\tRSSI\n1628009652.227\thall\t tag-7 \t-70.5\n1628009653\tkitchen\te7:8f:13:56:24:ce\t-64\n",
            "\"time_s\",\"receiver\",\"transmitter\",\"rssi\"\n\"1628009652,227\",\"hall\", \"tag-7\",\"-70,5\"\n1628009653,kitchen,\"e7:8f:13:56:24:ce\",-64\n",
            "# a semicolon in a comment says nothing; the header does\ntime;receiver;transmitter;rssi\n2021-08-03T16:54:12,227Z;hall;tag-7;-70,5\n2021-08-03T16:54:13Z;kitchen;e7:8f:13:56:24:ce;-64\n",
        ]
        for text in exports { #expect(try rows(text) == plain, "\(text)") }
        // A name may hold the separator and quotes when it stands in quotes.
        let named = try rows("time_s,receiver,transmitter,rssi\n1,hall,\"Anna's \"\"tag\"\", 7\",-50\n")
        #expect(named.map(\.transmitterName) == ["Anna's \"tag\", 7"])
        // A decimal comma where a point is given too, or two commas, is no number.
        let header = "time_s;receiver;transmitter;rssi\n"
        #expect(error(header + "1;a;tag;-70,5.1\n")?.message == "rssi '-70,5.1' must be a number of dBm from -127 to 20")
        #expect(error(header + "1,2,3;a;tag;-70\n")?.message == "time_s '1,2,3' is no time in Unix seconds")
        #expect(error("\u{FEFF}Zeit;Empfänger;Sender;RSSI\r\n") == RecordingError(
            line: 1,
            "the header must name the columns time_s (or time_ms or time or time_utc),receiver,transmitter,rssi (and data), in any order, or time_s (or time_ms or time or time_utc),transmitter and a column per receiver, not 'Zeit;Empfänger;Sender;RSSI'"))
    }

    /// What `RecordingWriter` writes reads back as the rows it was written from: times to the microsecond,
    /// addresses with their kind, names with the separator or quotes in them, the data or none.
    @Test func aWrittenRecordingReadsBackAsItsRows() throws {
        let address = DeviceAddress(value: 0xE78F_1356_24CE, kind: .public)
        let named = "Anna's \"tag\", 7"
        let withData =
            RecordingWriter.header(data: true)
            + RecordingWriter.line(
                micros: 1_628_009_652_000_007, receiver: "hall", transmitter: RecordingWriter.transmitter(address), rssi: -70,
                data: [0x02, 0x01, 0x06])
            + RecordingWriter.line(micros: 1_500_000, receiver: "kitchen", transmitter: named, rssi: -127, data: [])
        #expect(withData.hasPrefix("time_s,receiver,transmitter,rssi,data\n1628009652.000007,hall,E7:8F:13:56:24:CE/public,-70,020106\n"))
        let read = try rows(withData)
        #expect(read.map(\.timeMicros) == [1_628_009_652_000_007, 1_500_000] && read.map(\.rssi) == [-70, -127])
        #expect(read[0].address == address && read[0].data == [0x02, 0x01, 0x06] && read[1].transmitterName == named && read[1].data.isEmpty)
        let plain = RecordingWriter.header(data: false) + RecordingWriter.line(micros: 5, receiver: "hall", transmitter: "mac:C0:01:00:00:00:01", rssi: 0)
        #expect(plain == "time_s,receiver,transmitter,rssi\n0.000005,hall,mac:C0:01:00:00:00:01,0\n")
        #expect(try rows(plain).map(\.address) == [DeviceAddress(value: 0xC001_0000_0001, kind: .random)])
    }

    /// A column per receiver, as datasets of fingerprints and some gateways write them: each line the readings of
    /// one moment, empty where a receiver heard nothing.
    @Test func aColumnPerReceiverGivesAReadingForEachThatHeard() throws {
        let wide = try rows(
            """
            time_ms,transmitter,Hall,kitchen,gate-2
            1628009652227,tag-7,-70,,-81.4
            1628009653000,e7:8f:13:56:24:ce,,-64,
            1628009653500,tag-7,,,
            """)
        let long = try rows(
            """
            time_ms,receiver,transmitter,rssi
            1628009652227,hall,tag-7,-70
            1628009652227,gate-2,tag-7,-81
            1628009653000,kitchen,e7:8f:13:56:24:ce,-64
            """)
        #expect(wide.count == 3 && wide == long)
        #expect(error("time_s,transmitter,Living_Room,living room\n") == RecordingError(
            line: 1, "columns 'living_room' and 'living room' both read as the agent 'living-room': name them apart"))
        #expect(error("time_s,transmitter,hall,__\n")?.message.hasPrefix("column '__' names no receiver: an agent id is") == true)
        #expect(error("time_s,transmitter,hall,hall\n")?.message.hasPrefix("the header must name the columns") == true)
        #expect(error("time_s,transmitter,rssi\n")?.message.hasPrefix("the header must name the columns") == true)
        #expect(error("time_s,transmitter,hall\n1,tag,-200\n")?.message == "rssi of hall '-200' must be a number of dBm from -127 to 20")
        // A placeholder for "not heard" left in (-200) skips that reading, not its line's others.
        var reader = RecordingReader()
        let lines = try RecordingColumns.lines("time_s,transmitter,hall,kitchen\n1,tag,-200,-60\n").map { try reader.read(line: $0) }
        #expect(lines[1].rows.map(\.receiver) == ["kitchen"])
        #expect(lines[1].skipped == [RecordingError(line: 2, "rssi of hall '-200' must be a number of dBm from -127 to 20")])
        // Each receiver's readings in time order; a line naming none of them earlier is no reading of theirs.
        let header = "time_s,transmitter,hall,kitchen\n"
        #expect(try rows(header + "2,tag,-50,\n1,tag,,-60\n").map(\.receiver) == ["hall", "kitchen"])
        #expect(error(header + "2,tag,-50,\n1,tag,,-60\n1,tag,-50,\n") == RecordingError(
            line: 4, "time_s 1 is before hall's line above: each receiver's lines are in time order"))

        // Each agent replays its own column.
        let path = try makeTemporaryDirectory(prefix: "recording") + "/wide.csv"
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        try "time_s,transmitter,hall,kitchen\n1,tag-7,-50,-61\n2,tag-7,,-62\n3,tag-7,-53,\n".write(toFile: path, atomically: true, encoding: .utf8)
        for (receiver, heard) in [("hall", [-50, -53] as [Int8?]), ("kitchen", [-61, -62])] {
            var reports: [TimedReport] = []
            try RecordingReplaySource(path: path, receiver: receiver, speed: .maximum).run(deliver: { reports += $0 }, stop: StopSignal())
            #expect(reports.map(\.report.rssi) == heard && reports.map(\.ordinal) == [0, 1], "\(receiver)")
        }
    }

    /// Receivers named as recorders name them (by room, by device, by address) are read as agent ids; two names
    /// read as one id are refused rather than merged.
    @Test func aReceiversNameIsReadAsTheAgentThatReplaysIt() throws {
        for (name, agent) in [
            ("hall", "hall"), ("Hall", "hall"), ("gate--2", "gate--2"), ("Living_Room", "living-room"), (" ESP32 Kitchen ", "esp32-kitchen"),
            ("AA:BB:CC:DD:EE:FF", "aa-bb-cc-dd-ee-ff"), ("_office.1_", "office-1"), ("Küche", "k-che"),
        ] {
            #expect(identifier(fromName: name) == agent, "\(name)")
        }
        #expect(identifier(fromName: "__") == nil && identifier(fromName: "") == nil)
        #expect(identifier(fromName: String(repeating: "a", count: 64)) != nil && identifier(fromName: String(repeating: "a_", count: 33)) == nil)

        let text = """
            time_s,receiver,transmitter,rssi
            1,Living_Room,tag-7,-70
            2,living_room,tag-7,-71
            3,Living Room,tag-7,-72
            4,ESP32 Kitchen,tag-7,-60
            """
        let (read, refused) = try rowsAndSkipped(text)
        #expect(read.map(\.receiver) == ["living-room", "living-room", "esp32-kitchen"] && read.map(\.rssi) == [-70, -71, -60])
        #expect(refused == [RecordingError(line: 4, "receiver 'Living Room' reads as the agent 'living-room', as 'living_room' above does: name them apart")])
        #expect(try rows("time_s,transmitter,Living_Room,ESP32 Kitchen\n1,tag-7,-70,-60\n").map(\.receiver) == ["living-room", "esp32-kitchen"])

        // The agent `living-room` replays the room's readings.
        let path = try makeTemporaryDirectory(prefix: "recording") + "/rooms.csv"
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        var reports: [TimedReport] = []
        try RecordingReplaySource(path: path, receiver: "living-room", speed: .maximum).run(deliver: { reports += $0 }, stop: StopSignal())
        #expect(reports.map(\.report.rssi) == [-70, -71])
    }

    /// Receivers' own logs one after the other, as a site's receivers write them: each in time order, the whole not.
    @Test func eachReceiversLinesAreInTimeOrderAndTheRecordingsNeedNotBe() throws {
        let text = """
            time_s,receiver,transmitter,rssi
            10,hall,e7:8f:13:56:24:ce,-70
            12,hall,e7:8f:13:56:24:ce,-71
            9,kitchen,e7:8f:13:56:24:ce,-60
            11,kitchen,e7:8f:13:56:24:ce,-61
            10.5,kitchen,e7:8f:13:56:24:ce,-62
            13,hall,e7:8f:13:56:24:ce,-72
            """
        let (read, refused) = try rowsAndSkipped(text)
        #expect(read.map(\.rssi) == [-70, -71, -60, -61, -72])
        #expect(refused == [RecordingError(line: 6, "time_s 10.5 is before kitchen's line above: each receiver's lines are in time order")])
    }

    @Test func aTransmitterIsAnAddressABeaconIdOrAName() throws {
        let read = try rows(
            """
            time_s,receiver,transmitter,rssi,data
            1,a,ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2,-60,
            2,a,eddystone:00112233445566778899:aabbccddeeff,-61,
            3,a,altbeacon:0102030405060708090a0b0c0d0e0f10:4370:4884,-62,
            4,a,mac:C0:11:22:33:44:55,-63,
            5,a,tag-7,-64,
            6,a,tag-7,-65,0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5
            7,a,Trolley 3 (blue),-66,
            8,a,room:tag-1,-67,
            """)
        #expect(read.count == 8 && read[7].transmitterName == "room:tag-1")
        let identities = read.map { row in
            (try? FrameClassifier.classify(row.data[...]))?.identity?.identity?.description ?? "mac:\(row.address)"
        }
        #expect(identities[0] == "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")
        #expect(identities[1] == "eddystone:00112233445566778899:aabbccddeeff")
        #expect(identities[2] == "altbeacon:0102030405060708090a0b0c0d0e0f10:4370:4884")
        #expect(read[0].address == DeviceAddress(value: 0xFC7D_20DB_035D, kind: .random) && read[0].transmitterName == nil)
        #expect(read[3].address == DeviceAddress(value: 0xC011_2233_4455, kind: .random) && read[3].data.isEmpty)
        // A name is a device at an address derived from it: static random, the same in every run.
        #expect(read[4].address == DeviceAddress(value: 0xDE29_A38E_F517, kind: .random) && read[4].transmitterName == "tag-7")
        #expect(read[4].data.isEmpty && identities[4] == "mac:DE:29:A3:8E:F5:17")
        // Data the recording kept is what was sent, whatever the transmitter is called.
        #expect(read[5].address == read[4].address && identities[5] == identities[0])
        #expect(read[6].transmitterName == "Trolley 3 (blue)" && read[6].address.value >> 46 == 0b11)

        let header = "time_s,receiver,transmitter,rssi\n"
        #expect(error(header + "1,a,ibeacon:e2c56db5:1:2,-50\n")?.message
            == "transmitter 'ibeacon:e2c56db5:1:2' is no ibeacon beacon id in its canonical form (docs/wire-format.md)")
        #expect(error(header + "1,a,mac:c0:11:22:33:44:55,-50\n")?.message
            == "transmitter 'mac:c0:11:22:33:44:55' is no mac beacon id in its canonical form (docs/wire-format.md)")
        #expect(error(header + "1,a,eid:0011223344556677,-50\n")?.message.hasPrefix("transmitter 'eid:0011223344556677' names no frame") == true)
        #expect(error(header + "1,a,e7:8f:13:56:24:cg,-50\n")?.message.hasPrefix("transmitter 'e7:8f:13:56:24:cg' is no address") == true)
        #expect(error(header + "1,a,\(String(repeating: "x", count: 65)),-50\n")?.message.hasSuffix("is no address, beacon id or name of 1-64 bytes") == true)
        #expect(error(header + "1,a,,-50\n")?.message == "transmitter '' is no address, beacon id or name of 1-64 bytes")
    }

    @Test func theDocumentedRecordingsRead() throws {
        let text = try String(contentsOfFile: repositoryRoot + "/docs/recordings.md", encoding: .utf8)
        let blocks = text.components(separatedBy: "```text\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
            .filter { $0.lowercased().contains("receiver") && !$0.contains("beaconflow-agent") }
        #expect(blocks.count == 4)
        let read = try blocks.map { try rows($0) }
        #expect(read.map(\.count) == [2, 3, 1, 3])
        #expect(read[3].map(\.receiver) == ["hall", "kitchen", "kitchen"] && read[3].map(\.rssi) == [-70, -81, -64])
        #expect(read[2].map(\.transmitterName) == ["Anna's tag; the blue one"] && read[2].map(\.rssi) == [-71])
        #expect(read[2].map(\.timeMicros) == [1_628_009_652_227_000])
        let identities = read[1].map { row in
            (try? FrameClassifier.classify(row.data[...]))?.identity?.identity?.description ?? "mac:\(row.address)"
        }
        #expect(identities == [
            "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", "mac:DE:29:A3:8E:F5:17", "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2",
        ])
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
        #expect(said.first?.metadata["error"] == "rssi '42' must be a number of dBm from -127 to 20")
        #expect(log.all.contains { $0.message == "Recording lines skipped" && $0.metadata["lines"] == "1" })

        // A transmitter the recording names is said once, with the address it is heard at.
        let named = directory + "/named.csv"
        try "time_s,receiver,transmitter,rssi\n1,a,tag-7,-50\n2,a,tag-7,-51\n3,a,tag-8,-52\n".write(toFile: named, atomically: true, encoding: .utf8)
        let namedLog = RecordingLog()
        var addresses: [DeviceAddress] = []
        try RecordingReplaySource(path: named, receiver: "a", speed: .maximum, logger: namedLog.logger(label: "recording"))
            .run(deliver: { addresses += $0.map(\.report.address) }, stop: StopSignal())
        let names = namedLog.all.filter { $0.message == "Recording transmitter named" }
        #expect(names.map { $0.metadata["name"] } == ["tag-7", "tag-8"])
        #expect(names.first?.metadata["address"] == "\(DeviceAddress(value: 0xDE29_A38E_F517, kind: .random))")
        #expect(addresses.first == DeviceAddress(value: 0xDE29_A38E_F517, kind: .random) && addresses.count == 3)

        let noHeader = directory + "/no-header.csv"
        try "1,a,e7:8f:13:56:24:ce,-50\n".write(toFile: noHeader, atomically: true, encoding: .utf8)
        #expect(throws: SourceError(
            source: noHeader,
            "line 1: the header must name the columns time_s (or time_ms or time or time_utc),receiver,transmitter,rssi (and data), in any order, "
                + "or time_s (or time_ms or time or time_utc),transmitter and a column per receiver, not '1,a,e7:8f:13:56:24:ce,-50'"
        )) {
            try RecordingReplaySource(path: noHeader, receiver: "a", speed: .maximum).run(deliver: { _ in }, stop: StopSignal())
        }
    }
}
