import BeaconWire

/// A recording as this project writes it (docs/recordings.md): Unix seconds to the microsecond, then the receiver,
/// the transmitter and the RSSI, and the advertising data where it was kept; a reading a line, comma-separated.
/// What `RecordingReader` reads back as the same rows.
public enum RecordingWriter {
    /// The header line, with its line feed.
    public static func header(data: Bool) -> String {
        [RecordingTime.unixSeconds.rawValue, "receiver", "transmitter", "rssi"].joined(separator: ",") + (data ? ",data\n" : "\n")
    }

    /// A reading's line, with its line feed: `micros` Unix microseconds (not before 1970, as the reader takes them);
    /// `data` under a header with the data column, nil under one without it. A transmitter with a separator or a
    /// quote in it stands in quotes.
    public static func line(micros: Int64, receiver: String, transmitter: String, rssi: Int, data: [UInt8]? = nil) -> String {
        let fraction = String(micros % 1_000_000)
        var line = String(micros / 1_000_000) + "." + String(repeating: "0", count: 6 - fraction.count) + fraction
        line += "," + receiver + "," + quoted(transmitter) + "," + String(rssi)
        if let data { line += "," + data.hexString }
        return line + "\n"
    }

    /// An address as a recording names it, with its kind.
    public static func transmitter(_ address: DeviceAddress) -> String {
        address.description + (address.kind == .public ? "/public" : "/random")
    }

    private static func quoted(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == ";" || $0 == "\t" }) else { return field }
        return "\"" + field.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }
}
