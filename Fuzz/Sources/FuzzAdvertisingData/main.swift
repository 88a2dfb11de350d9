@testable import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzAdvertisingData(data ?? UnsafePointer(bitPattern: 1)!, size)
})

enum Reused {
    nonisolated(unsafe) static var classification = ClassifiedAdvertisement()
}

/// AD payloads through the generic parser, the frame classifier, and frame decoding with keys configured (so the
/// EID, eTLM and BTHome decryption paths run too).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdvertisingData(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    let classified = Result { () throws(DecodeError) in try FrameClassifier.classify(bytes[...]) }
    // Into one result kept from input to input, as the agent classifies: nothing of the input before may remain.
    let raw = bytes.withUnsafeBytes { raw in
        Result { () throws(DecodeError) in
            try FrameClassifier.classify(raw, into: &Reused.classification)
            return Reused.classification
        }
    }
    if raw != classified { fatalError("FrameClassifier's buffer entry point into a kept result and its slice one disagree") }
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
            // What the agent sends decodes to what `decode` shows.
            var plain = FrameDecoder()
            if case .success(let advert) = classified, let identity = advert.identity,
                let shown = try? plain.frames(in: data, address: address, unixSeconds: 0), !shown.contains(identity.frame)
            {
                fatalError("the classified identity is not among the decoded frames")
            }
        }
        _ = DecodedAdvertisement(address: address, rssi: -60, timestamp: 0, data: data, frames: []).json.text
    }
    return 0
}
