import BeaconWire
import BoundedYAML

/// One mapping of the sites file as read (bounded YAML), with the place it stands at, so that every value is
/// taken by its type and every error names where it is.
package struct SitesFileEntry {
    package let values: [String: Any]
    /// Where it stands, as errors say it: `sites.yaml: sites[0].zones[1]`.
    package let place: String

    package init(_ values: [String: Any], place: String) {
        self.values = values
        self.place = place
    }

    /// The mapping of `key: value` settings given one by one (a command line's), each value read as YAML reads a
    /// scalar.
    package init(settings: [(key: String, value: String)], place: String) throws(SitesError) {
        var values: [String: Any] = [:]
        for (key, text) in settings {
            do {
                values[key] = try BoundedYAML.load(text)
            } catch {
                throw SitesError("\(place): \(key): not a YAML value (\(error))")
            }
        }
        self.init(values, place: place)
    }

    package func has(_ key: String) -> Bool { values[key] != nil }

    /// Refuses a key not among `known`, suggesting the nearest.
    package func allowOnly(_ known: [String]) throws(SitesError) {
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) {
            let suggestion = BoundedYAML.nearestKey(to: unknown, among: known.sorted()).map { " (did you mean '\($0)'?)" } ?? ""
            throw SitesError("\(place): unknown key '\(unknown)'\(suggestion)")
        }
    }

    /// An id: 1-64 characters of a-z, 0-9 and '-'.
    package func identifier(_ key: String) throws(SitesError) -> String {
        guard let text = values[key] as? String, isValidIdentifier(text) else {
            throw SitesError("\(place).\(key) must be 1-64 characters of a-z, 0-9 and '-'")
        }
        return text
    }

    package func number(_ key: String) throws(SitesError) -> Double? {
        switch values[key] {
        case nil: return nil
        case let number as Double: return number
        case let number as Int: return Double(number)
        default: throw SitesError("\(place).\(key) must be a number")
        }
    }

    /// A number of seconds within 0-86400, in microseconds.
    package func seconds(_ key: String) throws(SitesError) -> Int64? {
        guard let seconds = try number(key) else { return nil }
        guard (0...86_400).contains(seconds) else { throw SitesError("\(place).\(key) must be 0-86400 seconds") }
        return Int64(seconds * 1_000_000)
    }

    /// A number within `range`.
    package func number(_ key: String, within range: ClosedRange<Double>) throws(SitesError) -> Double? {
        guard let value = try number(key) else { return nil }
        guard range.contains(value) else {
            throw SitesError("\(place).\(key) must be \(Self.spelled(range.lowerBound))-\(Self.spelled(range.upperBound))")
        }
        return value
    }

    package func text(_ key: String) -> String? { values[key] as? String }

    package func integer(_ key: String) -> Int? { values[key] as? Int }

    package func flag(_ key: String) -> Bool? { values[key] as? Bool }

    package func list(_ key: String) -> [Any]? { values[key] as? [Any] }

    /// The entries of a list of mappings (none when the key is absent or not such a list).
    package func entries(_ key: String) -> [SitesFileEntry] {
        (values[key] as? [[String: Any]] ?? []).enumerated().map { SitesFileEntry($1, place: "\(place).\(key)[\($0)]") }
    }

    private static func spelled(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(value)
    }
}
