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

    /// A frame too long to keep inline (an extended advertisement's) anywhere in the list: every frame keeps its
    /// bytes and its place, whether it was appended as a frame or classified from service data.
    @Test(arguments: [0, 1, 2])
    func aLongFrameKeepsItsPlaceAmongInlineOnes(longAt: Int) throws {
        let long = [UInt8](repeating: 0xA5, count: 60)
        let frames: [DataFrameContent] = (0..<3).map { index in
            index == longAt ? .manufacturerData(companyID: 0x0499, FrameBytes(long)) : .eddystone([0x20, UInt8(index)])
        }
        var list = DataFrames()
        for frame in frames { list.append(frame) }
        #expect(Array(list) == frames)
        list[longAt] = .serviceData(uuid16: 0xFCD2, [1, 2])
        #expect(list[longAt] == .serviceData(uuid16: 0xFCD2, [1, 2]) && list.count == 3)
        list.removeAll(keepingCapacity: true)
        #expect(list.isEmpty)
        list.append(frames[0])
        #expect(Array(list) == [frames[0]])

        // The same frames as service data and manufacturer data AD structures of one advertisement.
        var payload: [UInt8] = []
        for frame in frames {
            switch frame {
            case .eddystone(let bytes): payload += [UInt8(3 + bytes.count), 0x16, 0xAA, 0xFE] + bytes
            case .manufacturerData(let company, let bytes):
                payload += [UInt8(3 + bytes.count), 0xFF, UInt8(company & 0xFF), UInt8(company >> 8)] + bytes
            case .serviceData: Issue.record("not in this list")
            }
        }
        var advert = ClassifiedAdvertisement()
        try payload.withUnsafeBytes { try FrameClassifier.classify($0, into: &advert) }
        #expect(Array(advert.data) == frames)
    }
}
