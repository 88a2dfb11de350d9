/// The bytes of one data frame, held inline up to 32 bytes (an AD structure of a legacy advertisement has at most
/// 29 data bytes), on the heap beyond (an extended advertisement's, a batch from elsewhere): carrying a TLM or URL
/// frame from the radio to the batch allocates nothing.
public struct FrameBytes: Sendable {
    public static let inlineCapacity = 32

    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var length: Int32 = 0
    /// The bytes when they do not fit inline; nil otherwise.
    private var spilled: [UInt8]?

    public init() {}

    /// A copy of bytes the caller owns (an HCI read buffer).
    public init(_ buffer: UnsafeRawBufferPointer) {
        if buffer.count <= Self.inlineCapacity {
            if let source = buffer.baseAddress, buffer.count > 0 {
                withUnsafeMutableBytes(of: &words) { $0.baseAddress!.copyMemory(from: source, byteCount: buffer.count) }
            }
        } else {
            spilled = Array(buffer)
        }
        length = Int32(buffer.count)
    }

    public init<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if let made = bytes.withContiguousStorageIfAvailable({ FrameBytes(UnsafeRawBufferPointer($0)) }) {
            self = made
        } else {
            self = Array(bytes).withUnsafeBytes { FrameBytes($0) }
        }
    }

    /// The bytes, contiguous, for the duration of `body`.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        if length > Self.inlineCapacity, let spilled { return try spilled.withUnsafeBytes(body) }
        let count = Int(length)
        return try Swift.withUnsafeBytes(of: words) { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }
}

extension FrameBytes: RandomAccessCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { Int(length) }

    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < Int(length), "FrameBytes index out of range")
        if length > Self.inlineCapacity, let spilled { return spilled[position] }
        return Swift.withUnsafeBytes(of: words) { $0[position] }
    }
}

extension FrameBytes: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: UInt8...) { self.init(elements) }
}

extension FrameBytes: Hashable {
    public static func == (lhs: FrameBytes, rhs: FrameBytes) -> Bool {
        lhs.count == rhs.count && lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in left.elementsEqual(right) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

extension FrameBytes: CustomStringConvertible {
    public var description: String { "\(Array(self))" }
}

/// The data frames of one advertisement, the first two inline: a thermometer's temperature and battery, or a
/// beacon's TLM, without allocating.
public struct DataFrames: Sendable {
    private var stored = 0
    /// The first two frames, meaningful up to `stored` (not optionals: asking one whether it is nil costs a copy).
    private var first = DataFrames.unused
    private var second = DataFrames.unused
    /// The third and later frames.
    private var rest: [DataFrameContent] = []

    private static let unused = DataFrameContent.eddystone(FrameBytes())

    public init() {}
}

extension DataFrames: RandomAccessCollection, MutableCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { stored }

    public subscript(position: Int) -> DataFrameContent {
        get {
            precondition(position >= 0 && position < endIndex, "DataFrames index out of range")
            return switch position {
            case 0: first
            case 1: second
            default: rest[position - 2]
            }
        }
        set {
            precondition(position >= 0 && position < endIndex, "DataFrames index out of range")
            switch position {
            case 0: first = newValue
            case 1: second = newValue
            default: rest[position - 2] = newValue
            }
        }
    }
}

extension DataFrames: RangeReplaceableCollection {
    public mutating func append(_ frame: DataFrameContent) {
        switch stored {
        case 0: first = frame
        case 1: second = frame
        default: rest.append(frame)
        }
        stored += 1
    }

    public mutating func removeAll(keepingCapacity: Bool = false) {
        if stored > 0 { first = Self.unused }
        if stored > 1 { second = Self.unused }
        if stored > 2 || (!keepingCapacity && rest.capacity > 0) { rest.removeAll(keepingCapacity: keepingCapacity) }
        stored = 0
    }

    public mutating func replaceSubrange<Frames: Collection>(_ subrange: Range<Int>, with frames: Frames)
    where Frames.Element == DataFrameContent {
        var all = Array(self)
        all.replaceSubrange(subrange, with: frames)
        self = DataFrames()
        for frame in all { append(frame) }
    }
}

extension DataFrames: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: DataFrameContent...) {
        self.init()
        for element in elements { append(element) }
    }
}

extension DataFrames: Hashable {
    public static func == (lhs: DataFrames, rhs: DataFrames) -> Bool { lhs.elementsEqual(rhs) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for frame in self { hasher.combine(frame) }
    }
}

extension DataFrames: CustomStringConvertible {
    public var description: String { "\(Array(self))" }
}
