@testable import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzAdvertisingData(data ?? UnsafePointer(bitPattern: 1)!, size)
})

/// AD payloads through the generic parser, the allocation-free scanner, and frame decoding with keys configured
/// (so the EID, eTLM and BTHome decryption paths run too).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdvertisingData(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    // The scanner's fast path must agree with the general decoders on every input, errors included.
    let fast = Result { () throws(DecodeError) in try BeaconScanner.firstFrame(in: bytes[...]) }
    let general = Result { () throws(DecodeError) in try BeaconScanner.generalFirstFrame(in: bytes[...]) }
    if fast != general { fatalError("BeaconScanner fast path disagrees with the general decoders") }
    let raw = bytes.withUnsafeBytes { raw in Result { () throws(DecodeError) in try BeaconScanner.firstFrame(in: raw) } }
    if raw != fast { fatalError("BeaconScanner's buffer and slice entry points disagree") }
    let address = DeviceAddress(value: 0x5448_E68F_80A5, kind: .public)
    let key: [UInt8] = Array(repeating: 0x42, count: 16)
    var decoder = FrameDecoder(
        keyring: EddystoneKeyring(
            identities: [EddystoneIdentity(beaconID: "fuzz", identityKey: key, rotationExponent: 10)],
            clockSkewSeconds: 16),
        bindkeys: [address.value: key])
    if let data = try? AdvertisingData(parsing: bytes) {
        if let frames = try? decoder.frames(in: data, address: address, unixSeconds: 1_700_000_000) {
            for frame in frames { _ = frame.json.text }
        }
        _ = DecodedAdvertisement(address: address, rssi: -60, timestamp: 0, data: data, frames: []).json.text
    }
    return 0
}
