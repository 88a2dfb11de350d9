/// The Theil–Sen slope of a series: the median of the slopes between every pair of its points, robust to the odd
/// outlying point (a reading sagging under radio load or in the cold).
enum TheilSenSlope {
    /// The slope of `points` (x ascending); nil unless they span at least 1 in x (a day, for a battery's trend).
    static func of(_ points: [(x: Double, y: Double)]) -> Double? {
        guard let first = points.first, let last = points.last, last.x - first.x >= 1 else { return nil }
        var slopes: [Double] = []
        slopes.reserveCapacity(points.count * (points.count - 1) / 2)
        for i in points.indices {
            for j in points.index(after: i)..<points.endIndex where points[j].x > points[i].x {
                slopes.append((points[j].y - points[i].y) / (points[j].x - points[i].x))
            }
        }
        guard !slopes.isEmpty else { return nil }
        return median(&slopes)
    }

    /// The median of `values` (not empty; the mean of the two middle ones for an even count), reordering them: found
    /// by selection, in time linear in the count on average instead of a sort's n log n.
    static func median(_ values: inout [Double]) -> Double {
        let middle = values.count / 2
        return values.withUnsafeMutableBufferPointer { buffer in
            select(middle, in: buffer)
            guard buffer.count % 2 == 0 else { return buffer[middle] }
            // Everything left of the middle is at most its value: the other middle one is their largest.
            var below = buffer[0]
            for index in 1..<middle { below = max(below, buffer[index]) }
            return (below + buffer[middle]) / 2
        }
    }

    /// Puts the `k`th smallest value at `k`, the smaller ones before it and the larger after (Hoare's partition
    /// around the middle of three, narrowed to the side holding `k`).
    private static func select(_ k: Int, in values: UnsafeMutableBufferPointer<Double>) {
        var low = 0
        var high = values.count - 1
        while low < high {
            let mid = low + (high - low) / 2
            if values[mid] < values[low] { values.swapAt(mid, low) }
            if values[high] < values[low] { values.swapAt(high, low) }
            if values[high] < values[mid] { values.swapAt(high, mid) }
            let pivot = values[mid]
            var i = low
            var j = high
            while i <= j {
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
                if i <= j {
                    values.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            // Now low...j are at most the pivot, i...high at least, and anything between them equals it.
            if k <= j {
                high = j
            } else if k >= i {
                low = i
            } else {
                return
            }
        }
    }
}
