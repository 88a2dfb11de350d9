/// The bytes of one data frame, held inline up to 32 bytes (an AD structure of a legacy advertisement has at most
/// 29 data bytes), on the heap beyond (an extended advertisement's, a batch from elsewhere): carrying a TLM or URL
/// frame from the radio to the batch allocates nothing.
public struct FrameBytes: Sendable {
    public static let inlineCapacity = 32

    fileprivate var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    fileprivate var length: Int32 = 0
    /// The bytes when they do not fit inline; nil otherwise.
    private var spilled: [UInt8]?

    public init() {}

    /// A copy of bytes the caller owns (an HCI read buffer).
    public init(_ buffer: UnsafeRawBufferPointer) {
        if let inline = Inline(buffer) {
            (words, length) = (inline.words, inline.length)
        } else {
            spilled = Array(buffer)
            length = Int32(buffer.count)
        }
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

/// The data frames of one advertisement, the first two inline and copied bit for bit: a thermometer's temperature
/// and battery, or a beacon's TLM, without allocating or counting references.
public struct DataFrames: Sendable {
    private var stored = 0
    /// The first two frames while every frame so far fits inline, meaningful up to `stored`.
    private var first = InlineFrame()
    private var second = InlineFrame()
    /// The frames past the second; every frame, once one does not fit inline (`spilledAll`).
    private var rest: [DataFrameContent] = []
    private var spilledAll = false

    public init() {}

    /// A data frame of at most `FrameBytes.inlineCapacity` bytes, without references.
    fileprivate struct InlineFrame {
        enum Kind: UInt8 { case eddystone, serviceData, manufacturerData }
        var kind = Kind.eddystone
        var number: UInt16 = 0
        var bytes = FrameBytes.Inline()

        init() {}

        init?(_ content: DataFrameContent) {
            switch content {
            case .eddystone(let frame):
                guard let inline = frame.inline else { return nil }
                bytes = inline
            case .serviceData(let uuid, let frame):
                guard let inline = frame.inline else { return nil }
                (kind, number, bytes) = (.serviceData, uuid, inline)
            case .manufacturerData(let company, let frame):
                guard let inline = frame.inline else { return nil }
                (kind, number, bytes) = (.manufacturerData, company, inline)
            }
        }

        var content: DataFrameContent {
            let frame = FrameBytes(bytes)
            return switch kind {
            case .eddystone: .eddystone(frame)
            case .serviceData: .serviceData(uuid16: number, frame)
            case .manufacturerData: .manufacturerData(companyID: number, frame)
            }
        }
    }
}

extension FrameBytes {
    /// Bytes that fit inline, as plain values.
    struct Inline {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var length: Int32 = 0

        init() {}

        init(words: (UInt64, UInt64, UInt64, UInt64), length: Int32) {
            self.words = words
            self.length = length
        }

        /// A copy of `buffer`; nil when it does not fit inline.
        init?(_ buffer: UnsafeRawBufferPointer) {
            guard buffer.count <= FrameBytes.inlineCapacity else { return nil }
            if let source = buffer.baseAddress, buffer.count > 0 {
                withUnsafeMutableBytes(of: &words) { $0.baseAddress!.copyMemory(from: source, byteCount: buffer.count) }
            }
            length = Int32(buffer.count)
        }
    }

    var inline: Inline? { length <= Self.inlineCapacity ? Inline(words: words, length: length) : nil }

    init(_ inline: Inline) {
        words = inline.words
        length = inline.length
    }
}

extension DataFrames: RandomAccessCollection, MutableCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { stored }

    public subscript(position: Int) -> DataFrameContent {
        get {
            precondition(position >= 0 && position < endIndex, "DataFrames index out of range")
            if spilledAll { return rest[position] }
            return switch position {
            case 0: first.content
            case 1: second.content
            default: rest[position - 2]
            }
        }
        set {
            precondition(position >= 0 && position < endIndex, "DataFrames index out of range")
            var frames = Array(self)
            frames[position] = newValue
            self = DataFrames()
            for frame in frames { append(frame) }
        }
    }
}

extension DataFrames: RangeReplaceableCollection {
    public mutating func append(_ frame: DataFrameContent) {
        defer { stored += 1 }
        if spilledAll || stored >= 2 {
            rest.append(frame)
            return
        }
        guard let inline = InlineFrame(frame) else {
            // Too long to keep inline: every frame goes to the array, in order (it holds none yet).
            rest = Array(self) + [frame]
            spilledAll = true
            return
        }
        if stored == 0 { first = inline } else { second = inline }
    }

    /// Appends service data as a data frame (Eddystone's UUID: an Eddystone frame), inline without building it
    /// first where it fits.
    mutating func append(serviceData uuid: UInt16, _ body: UnsafeRawBufferPointer) {
        guard !spilledAll, stored < 2, let bytes = FrameBytes.Inline(body) else {
            append(.serviceData(uuid, FrameBytes(body)))
            return
        }
        var frame = InlineFrame()
        frame.bytes = bytes
        if uuid != Eddystone.serviceUUID { (frame.kind, frame.number) = (.serviceData, uuid) }
        if stored == 0 { first = frame } else { second = frame }
        stored += 1
    }

    public mutating func removeAll(keepingCapacity: Bool = false) {
        if !rest.isEmpty || (!keepingCapacity && rest.capacity > 0) { rest.removeAll(keepingCapacity: keepingCapacity) }
        spilledAll = false
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
