import BeaconSimulation
import Testing

@testable import BeaconIngest

@Suite struct TheilSenSlopeTests {
    /// The median found by selection is the sorted middle, on counts odd and even, with ties, runs and reversed
    /// orders (each a partition's awkward case).
    @Test func theMedianIsTheSortedMiddle() {
        var generator = SeededGenerator(seed: 5)
        var cases: [[Double]] = [[3], [2, 1], [1, 1, 1, 1], [5, 4, 3, 2, 1], Array(repeating: 7, count: 100)]
        cases.append((0..<861).map { Double($0) })
        cases.append((0..<860).map { Double(860 - $0) })
        for count in 1...200 {
            cases.append((0..<count).map { _ in Double(generator.next() % 20) })
            cases.append((0..<count).map { _ in Double(generator.next() % 1_000_000) / 1000 - 500 })
        }
        for values in cases {
            let sorted = values.sorted()
            let middle = sorted.count / 2
            let expected = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
            var reordered = values
            #expect(TheilSenSlope.median(&reordered) == expected, "\(values)")
        }
    }

    /// A week's slope holds through a few readings sagged far below it, where a least-squares line would tilt.
    @Test func theSlopeIgnoresTheOddSaggedReading() throws {
        var points: [(x: Double, y: Double)] = (0..<42).map { index in
            let days = Double(index) / 6
            return (x: days, y: 2950 - 3 * days)
        }
        for index in [5, 17, 30] { points[index].y -= 150 }
        let slope = try #require(TheilSenSlope.of(points))
        #expect(abs(slope - -3) < 0.01, "\(slope)")
        #expect(TheilSenSlope.of(Array(points.prefix(6))) == nil)
        #expect(TheilSenSlope.of([]) == nil)
    }
}
