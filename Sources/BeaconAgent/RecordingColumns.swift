/// Where a header puts its columns, for a recording and the ground truth beside it (docs/recordings.md): a time
/// column (`RecordingTime`) and the named ones, each once, in any order and any case, and no other unless others
/// are asked for; and how the lines under it split into fields (`RecordingDialect`).
public struct RecordingColumns: Sendable {
    public var dialect: RecordingDialect
    public var time: RecordingTime
    public var timeField: Int
    /// The field of each named column the header gives.
    public var fields: [String: Int]
    /// The fields of the columns it names otherwise, with their names (in lower case), in the header's order.
    public var others: [(field: Int, name: String)]
    /// How many fields each line has.
    public var count: Int

    /// The columns a header line names: a time, each of `required`, and any of `optional`; nil when it does not
    /// name each once, or names another where `othersAllowed` is false (with it, at least one other).
    public init?(header line: Substring, required: [String], optional: [String] = [], othersAllowed: Bool = false) {
        let dialect = RecordingDialect(header: line)
        let header = dialect.split(line).map { $0.lowercased() }
        let times = header.indices.filter { RecordingTime(rawValue: header[$0]) != nil }
        guard times.count == 1, let time = RecordingTime(rawValue: header[times[0]]) else { return nil }
        var fields: [String: Int] = [:]
        for name in required + optional {
            let found = header.indices.filter { header[$0] == name }
            guard found.count <= 1, found.count == 1 || !required.contains(name) else { return nil }
            fields[name] = found.first
        }
        let named = Set(fields.values).union([times[0]])
        let others = header.indices.filter { !named.contains($0) }.map { (field: $0, name: header[$0]) }
        guard othersAllowed ? !others.isEmpty && Set(others.map(\.name)).count == others.count : others.isEmpty else { return nil }
        self.dialect = dialect
        self.time = time
        self.timeField = times[0]
        self.fields = fields
        self.others = others
        self.count = header.count
    }

    /// The fields of a line under this header.
    public func split(_ line: Substring) -> [Substring] { dialect.split(line) }

    /// Whether a line is a comment (`#`) or blank, which every reader skips.
    public static func skips(_ line: Substring) -> Bool {
        let text = RecordingDialect.content(line)
        return text.allSatisfy(\.isWhitespace) || text.hasPrefix("#")
    }

    /// A file's lines, each ended by a line feed, with or without a carriage return before it, as the agents'
    /// replay reads them.
    public static func lines(_ text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    }

    /// A header line as an error quotes it.
    public static func quoted(_ line: Substring) -> Substring { RecordingDialect.content(line).prefix(200) }

    /// How a header's error names the columns it must give: the time's, then `named`.
    public static func expected(_ named: [String]) -> String {
        let times = RecordingTime.allCases.map(\.rawValue)
        return "\(times[0]) (or \(times.dropFirst().joined(separator: " or ")))," + named.joined(separator: ",")
    }

    /// A number as a recording writes it: a decimal point, or a decimal comma as spreadsheets write it in many
    /// locales (`-70,5`, in a semicolon- or tab-separated file or in quotes).
    public static func decimal(_ text: Substring) -> Double? {
        if let value = Double(text) { return value }
        guard text.filter({ $0 == "," }).count == 1, !text.contains(".") else { return nil }
        return Double(String(text.map { $0 == "," ? "." : $0 }))
    }
}

/// How a recording's lines split into fields, as spreadsheets and data tools export them: separated by commas, or
/// by semicolons or tabs where the header has no comma (the export of a locale whose decimal sign is a comma); a
/// field may stand in double quotes (a quote inside written twice); spaces around a field, a carriage return at the
/// end of a line and a byte order mark at the start of the file are not part of it.
public struct RecordingDialect: Sendable, Equatable {
    public var separator: Character

    /// The dialect a header line shows: the first of a comma, a semicolon and a tab that it has outside quotes.
    public init(header line: Substring) {
        var unquoted = ""
        var quoted = false
        for character in Self.content(line) {
            if character == "\"" { quoted.toggle() } else if !quoted { unquoted.append(character) }
        }
        separator = [",", ";", "\t"].first { unquoted.contains($0) } ?? ","
    }

    /// The fields of a line.
    public func split(_ line: Substring) -> [Substring] {
        let text = Self.content(line)
        guard text.contains("\"") else {
            return text.split(separator: separator, omittingEmptySubsequences: false).map(\.trimmed)
        }
        var fields: [Substring] = []
        var field = ""
        var quoted = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            index = text.index(after: index)
            if quoted {
                if character != "\"" {
                    field.append(character)
                } else if index < text.endIndex, text[index] == "\"" {
                    field.append("\"")
                    index = text.index(after: index)
                } else {
                    quoted = false
                }
            } else if character == separator {
                fields.append(Substring(field).trimmed)
                field = ""
            } else if character == "\"", field.allSatisfy({ $0 == " " }) {
                field = ""
                quoted = true
            } else {
                field.append(character)
            }
        }
        fields.append(Substring(field).trimmed)
        return fields
    }

    /// A line without a byte order mark before it or a carriage return after it.
    static func content(_ line: Substring) -> Substring {
        var text = line
        if text.first == "\u{FEFF}" { text.removeFirst() }
        if text.last == "\r" { text.removeLast() }
        return text
    }
}

extension Substring {
    fileprivate var trimmed: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
