import CZlib

/// Why data could not be compressed or inflated.
public struct DeflateError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not valid DEFLATE data (zlib's reason is in the message).
        public static let corrupt = Code(rawValue: "corrupt")
        /// The data ends before its last block.
        public static let truncated = Code(rawValue: "truncated")
        /// Bytes follow the last block.
        public static let trailingBytes = Code(rawValue: "trailing_bytes")
        /// Inflating would produce more than the limit given.
        public static let tooLarge = Code(rawValue: "too_large")
        /// zlib could not start (out of memory) or failed otherwise.
        public static let failed = Code(rawValue: "failed")
    }

    public var code: Code
    public var message: String
    /// How far into the input zlib had read when it stopped.
    public var offset: Int

    init(_ code: Code, _ message: String, offset: Int) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(code) at byte \(offset): \(message)" }
}

/// Raw DEFLATE (RFC 1951: no zlib or gzip header or checksum) in memory.
public enum Deflate {
    /// `bytes` compressed at `level` (0 stores, 1 is fastest, 9 smallest).
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) throws(DeflateError) -> [UInt8] {
        var stream = z_stream()
        let started = deflateInit2_(
            &stream, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
            Int32(MemoryLayout<z_stream>.size))
        guard started == Z_OK else { throw DeflateError(.failed, "deflateInit2 returned \(started)", offset: 0) }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))))
        let result = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        // deflateBound leaves room for everything in one call.
        guard result == Z_STREAM_END else {
            throw DeflateError(.failed, "deflate returned \(result)", offset: bytes.count - Int(stream.avail_in))
        }
        output.removeLast(Int(stream.avail_out))
        return output
    }

    /// Inflates `bytes`, which must be exactly one complete DEFLATE stream, into at most `limit` bytes.
    public static func inflate(_ bytes: [UInt8], limit: Int) throws(DeflateError) -> [UInt8] {
        var stream = z_stream()
        let started = inflateInit2_(&stream, -MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard started == Z_OK else { throw DeflateError(.failed, "inflateInit2 returned \(started)", offset: 0) }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(max(4 * bytes.count, 4096), limit + 1))
        return try bytes.withUnsafeBufferPointer { input throws(DeflateError) -> [UInt8] in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let (result, produced) = chunk.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let result = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return (result, out.count - Int(stream.avail_out))
                }
                let offset = input.count - Int(stream.avail_in)
                output.append(contentsOf: chunk[..<produced])
                guard output.count <= limit else {
                    throw DeflateError(.tooLarge, "inflates to more than \(limit) bytes", offset: offset)
                }
                switch result {
                case Z_STREAM_END:
                    guard stream.avail_in == 0 else {
                        throw DeflateError(.trailingBytes, "\(stream.avail_in) bytes follow the compressed data", offset: offset)
                    }
                    return output
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    throw DeflateError(.truncated, "the data ends before its last block", offset: offset)
                case Z_DATA_ERROR:
                    let reason = stream.msg.map { String(cString: $0) } ?? "invalid data"
                    throw DeflateError(.corrupt, reason, offset: offset)
                default:
                    throw DeflateError(.failed, "inflate returned \(result)", offset: offset)
                }
            }
        }
    }
}
