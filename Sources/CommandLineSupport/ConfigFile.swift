import ArgumentParser
import BeaconMessaging
import BoundedYAML
import Foundation
import Yams

/// A `--config` YAML file read as the command line it stands for: `key: value` becomes `--key value` (snake_case
/// keys, kebab-case options), `key: true` the flag `--key`, `key: false` nothing, and a list the option once per
/// item. The command then parses the file's arguments and its own with the same option definitions, the file's
/// first; an option given on the command line replaces the file's (lists included).
public struct ConfigFile: Sendable {
    public var path: String
    var settings: [(option: String, arguments: [String])]

    /// The subcommands of `beaconflow` that take `--config`.
    static let subcommands: Set<String> = ["agent", "ingest"]

    /// A `beaconflow` command line (subcommand first) with its `--config` file's settings put in front of the
    /// subcommand's own options, and the file, when there is one.
    public static func expanding(_ arguments: [String]) throws(ConfigurationError) -> (arguments: [String], file: ConfigFile?) {
        guard let subcommand = arguments.first, subcommands.contains(subcommand) else { return (arguments, nil) }
        let expanded = try expanding(options: Array(arguments.dropFirst()))
        return ([subcommand] + expanded.arguments, expanded.file)
    }

    /// A command's options with its `--config` file's settings put in front of them, and the file, when there is one.
    public static func expanding(options arguments: [String]) throws(ConfigurationError) -> (arguments: [String], file: ConfigFile?) {
        var rest = arguments
        var path: String?
        if let index = rest.firstIndex(of: "--config") {
            guard index + 1 < rest.count else { throw ConfigurationError("--config needs a file") }
            path = rest[index + 1]
            rest.removeSubrange(index...(index + 1))
        } else if let index = rest.firstIndex(where: { $0.hasPrefix("--config=") }) {
            path = String(rest[index].dropFirst("--config=".count))
            rest.remove(at: index)
        }
        guard let path else { return (arguments, nil) }
        let file = ConfigFile(path: path, settings: try settings(path: path))
        let given = Set(rest.filter { $0.hasPrefix("--") }.map { String($0.split(separator: "=", maxSplits: 1)[0]) })
        return (file.settings.filter { !given.contains($0.option) }.flatMap(\.arguments) + rest, file)
    }

    /// A parse error about one of the file's settings, said in the file's terms; an unknown setting is matched
    /// against the subcommand's options (`known`, as `--kebab-case`) for the one it most likely meant.
    public func explain(_ message: String, known: [String]) -> String? {
        for (option, _) in settings where message.contains("'\(option)") {
            let key = Self.key(option)
            if message.hasPrefix("Unknown option") {
                let suggestion = BoundedYAML.nearestKey(to: key, among: known.map(Self.key)).map { " (did you mean '\($0)'?)" } ?? ""
                return "\(path): unknown setting '\(key)'\(suggestion)"
            }
            return "\(path): setting '\(key)': \(message)"
        }
        return nil
    }

    /// The `--options` a command's help lists.
    public static func optionNames(of command: ParsableCommand.Type) -> [String] {
        command.helpMessage(columns: 10_000).matches(of: #/(?:^|[ ,])(--[a-z0-9][a-z0-9-]*)/#.anchorsMatchLineEndings()).map { String($0.output.1) }
    }

    /// `--metrics-listen` as the file writes it: `metrics_listen`.
    static func key(_ option: String) -> String { option.drop { $0 == "-" }.replacingOccurrences(of: "-", with: "_") }

    /// The file's settings in the order written, each as an option and its arguments.
    static func settings(path: String) throws(ConfigurationError) -> [(option: String, arguments: [String])] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            let code = errno
            throw ConfigurationError("cannot read --config \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        let node: Node?
        do { node = try BoundedYAML.compose(text) } catch { throw ConfigurationError("\(path): not valid YAML (\(error))") }
        guard let mapping = node?.mapping else { throw ConfigurationError("\(path): expected a mapping of settings (key: value)") }
        var result: [(option: String, arguments: [String])] = []
        for (keyNode, value) in mapping {
            guard let key = keyNode.string, key.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "_" }), !key.isEmpty else {
                throw ConfigurationError("\(path): setting names are snake_case, not '\(keyNode.string ?? "?")'")
            }
            let option = "--" + key.replacingOccurrences(of: "_", with: "-")
            switch value {
            case .scalar(let scalar):
                switch scalar.style == .plain ? Bool(scalar.string) : nil {
                case true?: result.append((option, [option]))
                case false?: continue
                case nil: result.append((option, [option, scalar.string]))
                }
            case .sequence(let items):
                let values = try items.map { item throws(ConfigurationError) -> String in
                    guard let scalar = item.scalar else { throw ConfigurationError("\(path): '\(key)' lists something that is not a value") }
                    return scalar.string
                }
                result.append((option, values.flatMap { [option, $0] }))
            default:
                throw ConfigurationError("\(path): '\(key)' is not a value or a list of values")
            }
        }
        return result
    }
}
