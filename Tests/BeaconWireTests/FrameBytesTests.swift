import BeaconWire
import Testing

@Suite struct FrameBytesTests {
    @Test(arguments: [0, 1, 29, 32, 33, 254])
    func bytesReadBackWhateverTheirLength(length: Int) {
        let source = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 5) }
        let bytes = FrameBytes(source)
        #expect(Array(bytes) == source)
        #expect(bytes.count == length)
        #expect(bytes.withUnsafeBytes { Array($0) } == source)
        #expect(bytes == FrameBytes(source[...]))
        #expect(Set([bytes, FrameBytes(source)]).count == 1)
        if length > 0 {
            #expect(bytes != FrameBytes(source.dropLast()))
            var changed = source
            changed[length - 1] ^= 0xFF
            #expect(bytes != FrameBytes(changed))
        }
    }

    @Test func framesBeyondTwoAndEditsKeepTheirOrder() {
        let frames: [DataFrameContent] = (0..<5).map { .serviceData(uuid16: 0xFCD2, [UInt8($0)]) }
        var list = DataFrames()
        for frame in frames { list.append(frame) }
        #expect(Array(list) == frames)
        #expect(list == DataFrames(frames))
        let odd = list.filter { if case .serviceData(_, let bytes) = $0 { bytes[0] % 2 == 1 } else { false } }
        #expect(Array(odd) == [frames[1], frames[3]])
        list[3] = .eddystone([0x20])
        #expect(list[3] == .eddystone([0x20]) && list.count == 5)
        list.removeFirst()
        #expect(Array(list) == Array(frames[1...3].prefix(2)) + [.eddystone([0x20]), frames[4]])
    }
}
