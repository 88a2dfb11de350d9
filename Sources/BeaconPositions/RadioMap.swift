import Foundation

/// What each receiver hears above the site's `RadioModel`, place by place: a calibration walk's readings at their
/// true positions, each reading's residual (heard minus the model, the receiver's offset included) spread over the
/// points of a 0.5 m grid within a couple of metres of where it was heard (a Gaussian kernel of 1 m), and shrunk
/// towards nothing where few readings were heard. Walls, furniture and a receiver's antenna bend the radio in ways a
/// log-distance model cannot; the map keeps what the walk measured. Points the walk did not come near are left
/// out (the model alone holds there).
public struct RadioMap: Sendable, Equatable {
    /// A reading of the walk: its receiver, where the transmitter truly was, and how far above the model it was heard.
    public struct Sample: Sendable {
        public var receiver: String
        public var x: Double
        public var y: Double
        public var residualDb: Double

        public init(receiver: String, x: Double, y: Double, residualDb: Double) {
            self.receiver = receiver
            self.x = x
            self.y = y
            self.residualDb = residualDb
        }
    }

    /// The grid's spacing, metres.
    public static let spacing = 0.5
    /// The kernel's standard deviation, metres: chosen on the office's straight walks (0.5-1.5 m tried).
    public static let kernelMetres = 1.0
    /// Readings' worth of nothing each point starts from: a point heard by few readings keeps little of them.
    public static let shrinkReadings = 3.0
    /// The least kernel weight a point needs to be kept.
    public static let leastWeight = 0.5
    /// The most points a map may hold (a 100 × 100 m floor of 0.5 m points, for 12 receivers).
    public static let maximumPoints = 500_000

    /// By receiver id, each point's correction by its grid index.
    public private(set) var corrections: [String: [GridIndex: Double]]

    public struct GridIndex: Hashable, Sendable {
        var column: Int
        var row: Int

        init(x: Double, y: Double) {
            column = Int((x / RadioMap.spacing).rounded())
            row = Int((y / RadioMap.spacing).rounded())
        }
    }

    private init(corrections: [String: [GridIndex: Double]]) { self.corrections = corrections }

    /// The map of a walk's samples.
    public static func fit(_ samples: [Sample]) -> RadioMap {
        var sums: [String: [GridIndex: (sum: Double, weight: Double)]] = [:]
        let reach = Int((2 * kernelMetres / spacing).rounded(.up))
        func add(_ weight: Double, residual: Double, to point: inout (sum: Double, weight: Double)) {
            point.sum += weight * residual
            point.weight += weight
        }
        for sample in samples {
            let centre = GridIndex(x: sample.x, y: sample.y)
            for row in (centre.row - reach)...(centre.row + reach) {
                for column in (centre.column - reach)...(centre.column + reach) {
                    let dx = Double(column) * spacing - sample.x
                    let dy = Double(row) * spacing - sample.y
                    let weight = exp(-(dx * dx + dy * dy) / (2 * kernelMetres * kernelMetres))
                    // In place: the receiver's points are not copied for each sample.
                    add(weight, residual: sample.residualDb, to: &sums[sample.receiver, default: [:]][GridIndex(column: column, row: row), default: (0, 0)])
                }
            }
        }
        return RadioMap(corrections: sums.mapValues { points in
            points.filter { $0.value.weight >= leastWeight }.mapValues { $0.sum / ($0.weight + shrinkReadings) }
        })
    }

    /// What `receiver` hears above the model at (x, y): the nearest grid point's correction, 0 where the map has none.
    public func correction(receiver: String, x: Double, y: Double) -> Double {
        corrections[receiver]?[GridIndex(x: x, y: y)] ?? 0
    }

    /// The receivers it has points for.
    public var receivers: Set<String> { Set(corrections.keys) }

    /// The share of the grid's points within `rect` (x0, y0, x1, y1, metres) that the map holds for some receiver:
    /// how much of a zone its calibration walk came near enough to correct.
    public func reach(over rect: [Double]) -> Double {
        guard rect.count == 4, rect.allSatisfy({ $0.isFinite }) else { return 0 }
        let first = GridIndex(column: Int((rect[0] / Self.spacing).rounded(.up)), row: Int((rect[1] / Self.spacing).rounded(.up)))
        let last = GridIndex(column: Int((rect[2] / Self.spacing).rounded(.down)), row: Int((rect[3] / Self.spacing).rounded(.down)))
        guard first.column <= last.column, first.row <= last.row else { return 0 }
        let columns = first.column...last.column
        let rows = first.row...last.row
        let held = Set(corrections.values.flatMap(\.keys))
        let inside = held.filter { columns.contains($0.column) && rows.contains($0.row) }.count
        return Double(inside) / Double(columns.count * rows.count)
    }

    /// The map as text: `receiver,x_m,y_m,correction_db`, a line per point, in order.
    public var csv: String {
        var text = "receiver,x_m,y_m,correction_db\n"
        for receiver in corrections.keys.sorted() {
            for (index, correction) in corrections[receiver]!.sorted(by: { ($0.key.row, $0.key.column) < ($1.key.row, $1.key.column) }) {
                // To a tenth of a dB, never "-0.0".
                let tenths = (correction * 10).rounded() / 10 + 0
                text += String(format: "%@,%.1f,%.1f,%.1f\n", receiver, Double(index.column) * Self.spacing, Double(index.row) * Self.spacing, tenths)
            }
        }
        return text
    }

    /// Reads the text `csv` writes; an error names the line and what is wrong with it.
    public init(csv text: String) throws(RadioMapError) {
        var corrections: [String: [GridIndex: Double]] = [:]
        var count = 0
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.hasSuffix("\r") ? line.dropLast() : line
            if number == 0 {
                guard trimmed == "receiver,x_m,y_m,correction_db" else {
                    throw RadioMapError(line: 1, "the header must be receiver,x_m,y_m,correction_db")
                }
                continue
            }
            if trimmed.isEmpty { continue }
            let fields = trimmed.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 4, !fields[0].isEmpty, let x = Double(fields[1]), let y = Double(fields[2]), let correction = Double(fields[3]),
                abs(x) <= 100_000, abs(y) <= 100_000, abs(correction) <= 60
            else {
                throw RadioMapError(line: number + 1, "expected receiver,x_m,y_m,correction_db (metres, dB within ±60), not '\(trimmed)'")
            }
            count += 1
            guard count <= Self.maximumPoints else { throw RadioMapError(line: number + 1, "more than \(Self.maximumPoints) points") }
            corrections[String(fields[0]), default: [:]][GridIndex(x: x, y: y)] = correction
        }
        self.corrections = corrections
    }
}

extension RadioMap.GridIndex {
    init(column: Int, row: Int) {
        self.column = column
        self.row = row
    }
}

/// A radio map's text that cannot be read: the line and what is wrong.
public struct RadioMapError: Error, CustomStringConvertible, Sendable {
    public var line: Int
    public var message: String

    init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}
