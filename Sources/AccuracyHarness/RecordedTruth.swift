import BeaconAgent
import BeaconIngest
import BeaconWire
import Foundation

/// The ground truth beside a recording (docs/recordings.md), in one of two files or both: `<name>.positions.csv`,
/// where each transmitter was (`x_m`, `y_m`; both empty, kept as NaN: not known from then, as between the marked
/// spots of a survey), or `<name>.zones.csv`, the zone it was in (`zone`, empty where it was
/// in none of the site's zones). Each has a line each time the truth changes, under a header that names its
/// columns in any order: the time (`time_s`, `time_ms`, `time` or `time_utc`, as a recording gives it), the
/// transmitter (named as the recording names it) and the values. The lines may come in any order (a tracking
/// system's clock steps back now and then): each transmitter's are taken in time order, those of one time in the
/// file's. A line that cannot be read refuses the file: it is what the recording is scored against.
enum RecordedTruth {
    typealias Positions = [String: [(time: Double, x: Double, y: Double)]]
    typealias Zones = [String: [(time: Double, zone: String?)]]

    /// The positions file's tracks, by the id the ingest stores.
    static func positions(_ path: String, identities: [DeviceAddress: String]) throws -> Positions {
        var positions: Positions = [:]
        try read(path, values: ["x_m", "y_m"], identities: identities) { beacon, time, values in
            if values[0].isEmpty, values[1].isEmpty {
                positions[beacon, default: []].append((time, .nan, .nan))
                return nil
            }
            guard let x = RecordingColumns.decimal(values[0]), let y = RecordingColumns.decimal(values[1]), x.isFinite, y.isFinite else {
                return "x_m '\(values[0].prefix(40))' and y_m '\(values[1].prefix(40))' must be metres on the floor plan (both empty where it is not known)"
            }
            positions[beacon, default: []].append((time, x, y))
            return nil
        }
        return positions.mapValues { inTimeOrder($0, time: \.time) }
    }

    /// The zones file's tracks, by the id the ingest stores; each zone one of `zones` or none.
    static func zones(_ path: String, identities: [DeviceAddress: String], zones: [SitesConfiguration.Zone]) throws -> Zones {
        let known = Set(zones.map(\.id))
        var tracks: Zones = [:]
        try read(path, values: ["zone"], identities: identities) { beacon, time, values in
            let zone = values[0].isEmpty ? nil : String(values[0])
            if let zone, !known.contains(zone) {
                return "zone '\(zone.prefix(80))' is none of the site's: \(zones.map(\.id).joined(separator: ", ")) (empty for none)"
            }
            tracks[beacon, default: []].append((time, zone))
            return nil
        }
        return tracks.mapValues { inTimeOrder($0, time: \.time) }
    }

    /// `track` sorted by time, points of one time in the order given.
    private static func inTimeOrder<Point>(_ track: [Point], time: (Point) -> Double) -> [Point] {
        track.enumerated().sorted { (time($0.element), $0.offset) < (time($1.element), $1.offset) }.map(\.element)
    }

    /// Reads each line after the header: its transmitter's id, its time (Unix seconds) and the text of `values`'
    /// columns, in that order, to `take`, which says what is wrong with them, if anything.
    private static func read(
        _ path: String, values: [String], identities: [DeviceAddress: String],
        take: (_ beacon: String, _ time: Double, _ values: [Substring]) -> String?
    ) throws {
        let named = ["transmitter"] + values
        var layout: (columns: RecordingColumns, fields: [Int])?
        for (number, line) in RecordingColumns.lines(try String(contentsOfFile: path, encoding: .utf8)).enumerated() {
            guard !RecordingColumns.skips(line) else { continue }
            func refuse(_ problem: String) -> HarnessError { HarnessError("\(path): line \(number + 1): \(problem)") }
            guard let (columns, at) = layout else {
                guard let columns = RecordingColumns(header: line, required: named) else {
                    throw refuse(
                        "the header must name the columns \(RecordingColumns.expected(named)), in any order, not '\(RecordingColumns.quoted(line))'")
                }
                layout = (columns, named.map { columns.fields[$0]! })
                continue
            }
            let fields = columns.split(line)
            guard fields.count == columns.count else { throw refuse("\(fields.count) fields where the header has \(columns.count)") }
            let micros: Int64
            let transmitter: RecordedTransmitter
            do throws(RecordingError) {
                micros = try columns.time.micros(fields[columns.timeField])
                transmitter = try RecordedTransmitter.read(fields[at[0]])
            } catch {
                throw refuse(error.message)
            }
            let beacon = RecordedWalk.beaconID(transmitter.address, identities: identities)
            if let problem = take(beacon, Double(micros) / 1e6, at.dropFirst().map { fields[$0] }) { throw refuse(problem) }
        }
        guard layout != nil else { throw HarnessError("\(path): the header must name the columns \(RecordingColumns.expected(named))") }
    }
}
