import BoundedYAML
import Foundation
import Testing

@Suite struct BoundedYAMLTests {
    func failure(_ text: String) -> BoundedYAMLError? {
        do {
            _ = try BoundedYAML.load(text)
            return nil
        } catch { return error }
    }

    /// Nine lines of anchors, each naming the previous one ten times: 10^9 nodes once expanded. Refused in
    /// moments, without building them.
    @Test func anAliasBombIsRefusedBeforeItExpands() throws {
        var lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for level in 1..<9 {
            lines.append("a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]")
        }
        lines.append("sites: *a8")
        let started = ContinuousClock.now
        let error = try #require(failure(lines.joined(separator: "\n")))
        #expect(error.code == .aliasesExpandTooFar, "\(error)")
        #expect(ContinuousClock.now - started < .seconds(5))
        // A few aliases are fine.
        #expect(failure("zone: &z {id: lobby}\nzones: [*z, *z]") == nil)
    }

    /// 100,000 levels of flow brackets, of compact sequence entries, or of aliases each nesting the previous one:
    /// an error naming the line, never a crash of the stack.
    @Test func nestingBeyondTheBoundIsRefused() throws {
        let flow = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let compact = String(repeating: "- ", count: 100_000) + "x"
        let block = (0..<300).map { String(repeating: " ", count: $0) + "k\($0):" }.joined(separator: "\n") + " x"
        for text in [flow, compact, "sites:\n" + block] {
            let error = try #require(failure(text))
            #expect(error.code == .tooDeep && error.line != nil, "\(error)")
            #expect(error.description.contains("nested more than 256 levels deep"))
        }
        var anchors = ["a0: &a0 x"]
        for level in 1..<300 { anchors.append("a\(level): &a\(level) [*a\(level - 1)]") }
        let error = try #require(failure(anchors.joined(separator: "\n")))
        #expect(error.code == .tooDeep, "\(error)")
        // Nesting within the bound reads.
        #expect(failure(String(repeating: "[", count: 200) + String(repeating: "]", count: 200)) == nil)
    }

    @Test func sizeAndSyntaxAreNamed() throws {
        #expect(failure(String(repeating: "# comment\n", count: 2 << 20))?.code == .tooLarge)
        #expect(failure("a: [unclosed")?.code == .invalid)
        // Brackets and indicators inside quotes and comments do not count.
        #expect(failure("text: \"" + String(repeating: "[- ", count: 1000) + "\" # " + String(repeating: "{", count: 1000)) == nil)
    }

    /// A typo names the key it most likely meant; a word far from every key names none.
    @Test func nearestKeySuggestsWhatATypoMeant() {
        let keys = ["zones", "agents", "timezone", "path_loss_exponent", "metrics_listen", "broker"]
        #expect(BoundedYAML.nearestKey(to: "zonse", among: keys) == "zones")
        #expect(BoundedYAML.nearestKey(to: "agent", among: keys) == "agents")
        #expect(BoundedYAML.nearestKey(to: "metrics_lisen", among: keys) == "metrics_listen")
        #expect(BoundedYAML.nearestKey(to: "path_los_exponant", among: keys) == "path_loss_exponent")
        #expect(BoundedYAML.nearestKey(to: "Broker", among: keys) == "broker")
        #expect(BoundedYAML.nearestKey(to: "broker_url", among: keys) == "broker")
        #expect(BoundedYAML.nearestKey(to: "metrics", among: keys) == "metrics_listen")
        #expect(BoundedYAML.nearestKey(to: "colour", among: keys) == nil)
        #expect(BoundedYAML.nearestKey(to: "x", among: [String]()) == nil)
    }
}
