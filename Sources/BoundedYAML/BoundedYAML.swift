import Yams

/// Why a YAML text was not read.
public struct BoundedYAMLError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable {
        case tooLarge
        case tooDeep
        case aliasesExpandTooFar
        case invalid
    }

    public var code: Code
    /// The 1-based line where the text went too deep, when known.
    public var line: Int?
    public var message: String

    public var description: String { (line.map { "line \($0): " } ?? "") + message }
}

/// YAML read within bounds: configuration files come from operators, but a mistake or a hostile edit must end in an
/// error that names the problem, never in a process that exhausts its stack or its memory. Before Yams builds
/// anything, the text is checked for size and nesting (`maximumDepth`, counted from indentation, compact `- `
/// entries and flow brackets), and the composed document's nodes are counted with every alias expanded, as
/// constructing it would (`maximumNodes`): a few lines of anchors and aliases can stand for billions of nodes.
public enum BoundedYAML {
    public static let maximumBytes = 16 << 20
    public static let maximumDepth = 256
    public static let maximumNodes = 2_000_000

    /// The document's node tree, checked.
    public static func compose(_ text: String) throws(BoundedYAMLError) -> Node? {
        try checkText(text)
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            throw BoundedYAMLError(code: .invalid, message: "\(error)")
        }
        if let node { try checkExpansion(node) }
        return node
    }

    /// The document as Swift values (dictionaries, arrays, scalars), checked.
    public static func load(_ text: String) throws(BoundedYAMLError) -> Any? {
        try compose(text)?.any
    }

    /// Size and an upper bound of the nesting, from the text alone.
    static func checkText(_ text: String) throws(BoundedYAMLError) {
        let bytes = text.utf8
        guard bytes.count <= maximumBytes else {
            throw BoundedYAMLError(code: .tooLarge, message: "\(bytes.count) bytes, more than the \(maximumBytes) allowed")
        }
        var flowDepth = 0
        var line = 1
        var quote: UInt8?
        var atLineStart = true
        var indentation = 0
        var compactEntries = 0
        var previous: UInt8 = 0x0A
        var inComment = false
        for byte in bytes {
            defer { previous = byte }
            if byte == 0x0A {
                line += 1
                atLineStart = true
                indentation = 0
                compactEntries = 0
                inComment = false
                continue
            }
            if inComment { continue }
            if let open = quote {
                if byte == open && !(open == UInt8(ascii: "\"") && previous == UInt8(ascii: "\\")) { quote = nil }
                continue
            }
            if atLineStart {
                if byte == UInt8(ascii: " ") {
                    indentation += 1
                    continue
                }
                atLineStart = false
            }
            switch byte {
            case UInt8(ascii: "#") where previous == UInt8(ascii: " ") || previous == 0x0A || previous == UInt8(ascii: "\t"):
                inComment = true
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                quote = byte
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                flowDepth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                flowDepth = max(0, flowDepth - 1)
            case UInt8(ascii: " ") where previous == UInt8(ascii: "-") || previous == UInt8(ascii: "?") || previous == UInt8(ascii: ":"):
                // An indicator and a space ("- ", "? ", ": ") nest what follows on the same line.
                compactEntries += 1
            default:
                break
            }
            if indentation + compactEntries + flowDepth > maximumDepth {
                throw BoundedYAMLError(
                    code: .tooDeep, line: line, message: "nested more than \(maximumDepth) levels deep")
            }
        }
    }

    /// Counts the nodes a construction would make, aliases expanded, without recursion; stops at the bounds.
    static func checkExpansion(_ root: Node) throws(BoundedYAMLError) {
        var stack: [(node: Node, depth: Int)] = [(root, 1)]
        var nodes = 0
        while let (node, depth) = stack.popLast() {
            nodes += 1
            guard nodes <= maximumNodes else {
                throw BoundedYAMLError(
                    code: .aliasesExpandTooFar,
                    message: "the document expands to more than \(maximumNodes) nodes (aliases repeat what they name)")
            }
            guard depth <= maximumDepth else {
                throw BoundedYAMLError(code: .tooDeep, message: "nested more than \(maximumDepth) levels deep through aliases")
            }
            switch node {
            case .mapping(let mapping):
                for (key, value) in mapping {
                    stack.append((key, depth + 1))
                    stack.append((value, depth + 1))
                }
            case .sequence(let sequence):
                for item in sequence { stack.append((item, depth + 1)) }
            case .scalar:
                break
            }
        }
    }
}
