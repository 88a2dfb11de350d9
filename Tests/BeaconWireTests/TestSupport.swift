import Testing
@testable import BeaconWire

func bytes(_ hex: String) -> [UInt8] {
    try! [UInt8](hex: hex)
}

/// Runs `body` and returns the `DecodeError` it throws; records an issue when it does not throw.
func decodeError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> DecodeError? {
    do {
        try body()
        Issue.record("expected a DecodeError", sourceLocation: sourceLocation)
        return nil
    } catch let error as DecodeError {
        return error
    } catch {
        Issue.record("expected a DecodeError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// AD structure: length, type, data.
func ad(_ type: UInt8, _ data: [UInt8]) -> [UInt8] {
    [UInt8(data.count + 1), type] + data
}

/// Service data AD structure for a 16-bit UUID.
func serviceData16(_ uuid: UInt16, _ data: [UInt8]) -> [UInt8] {
    ad(0x16, [UInt8(uuid & 0xFF), UInt8(uuid >> 8)] + data)
}

func decodeFrames(_ payload: [UInt8], address: DeviceAddress? = nil, decoder: FrameDecoder = FrameDecoder(), unixSeconds: Int64 = 0) throws -> [BeaconFrame] {
    var decoder = decoder
    return try decoder.frames(in: AdvertisingData(parsing: payload), address: address, unixSeconds: unixSeconds)
}
