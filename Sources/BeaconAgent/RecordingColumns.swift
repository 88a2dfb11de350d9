/// Where a header puts its columns, for a recording and the ground truth beside it (docs/recordings.md): a time
/// column (`RecordingTime`) and the named ones, each once, in any order, and no other.
public struct RecordingColumns: Sendable {
    public var time: RecordingTime
    public var timeField: Int
    /// The field of each named column the header gives.
    public var fields: [String: Int]
    /// How many fields each line has.
    public var count: Int

    /// The columns `header` names: a time, each of `required`, and any of `optional`; nil when it does not name
    /// each once, or names another.
    public init?(header: [Substring], required: [String], optional: [String] = []) {
        let times = header.indices.filter { RecordingTime(rawValue: String(header[$0])) != nil }
        guard times.count == 1, let time = RecordingTime(rawValue: String(header[times[0]])) else { return nil }
        var fields: [String: Int] = [:]
        for name in required + optional {
            let found = header.indices.filter { header[$0] == name }
            guard found.count <= 1, found.count == 1 || !required.contains(name) else { return nil }
            fields[name] = found.first
        }
        guard header.count == fields.count + 1 else { return nil }
        self.time = time
        self.timeField = times[0]
        self.fields = fields
        self.count = header.count
    }

    /// The fields of a line, spaces around each trimmed; nil for a comment (`#`) or a blank line.
    public static func split(_ line: Substring) -> [Substring]? {
        let text = line.hasSuffix("\r") ? line.dropLast() : line
        if text.allSatisfy(\.isWhitespace) || text.hasPrefix("#") { return nil }
        return text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
    }

    /// How a header's error names the columns it must give: the time's, then `named`.
    public static func expected(_ named: [String]) -> String {
        let times = RecordingTime.allCases.map(\.rawValue)
        return "\(times[0]) (or \(times.dropFirst().joined(separator: " or ")))," + named.joined(separator: ",")
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var text = self
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return text
    }
}
