import Metrics

/// One metric family as Prometheus shows it: its name, type, label names and help text, written once. The
/// components make their swift-metrics instruments from these, the metrics endpoint reads the help text from them,
/// and docs/metrics.md is generated from them.
public struct MetricFamily: Sendable, Hashable {
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    public let name: String
    public let kind: Kind
    /// The names of its labels, each with a bounded set of values.
    public let labels: [String]
    public let help: String

    public init(_ name: String, _ kind: Kind, labels: [String] = [], help: String) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
    }

    /// The names a query or a document may use: the family's, and a histogram's `_bucket`, `_sum` and `_count`.
    public var seriesNames: [String] {
        kind == .histogram ? [name, name + "_bucket", name + "_sum", name + "_count"] : [name]
    }
}

/// The version every command reports (`--version`, `beaconflow_build_info`, the packages).
public enum BuildInfo {
    public static let version = "0.1.0"

    public static let family = MetricFamily(
        "beaconflow_build_info", .gauge, labels: ["version"], help: "Always 1; its label is the running version.")
}

extension Counter {
    public convenience init(_ family: MetricFamily, _ dimensions: [(String, String)] = []) {
        precondition(family.kind == .counter && dimensions.map(\.0) == family.labels, "\(family.name) is a \(family.kind)")
        self.init(label: family.name, dimensions: dimensions)
    }
}

extension Gauge {
    public convenience init(_ family: MetricFamily, _ dimensions: [(String, String)] = []) {
        precondition(family.kind == .gauge && dimensions.map(\.0) == family.labels, "\(family.name) is a \(family.kind)")
        self.init(label: family.name, dimensions: dimensions)
    }
}

extension Metrics.Timer {
    public convenience init(_ family: MetricFamily, _ dimensions: [(String, String)] = []) {
        precondition(family.kind == .histogram && dimensions.map(\.0) == family.labels, "\(family.name) is a \(family.kind)")
        self.init(label: family.name, dimensions: dimensions)
    }
}
