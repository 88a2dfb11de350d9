import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzCharacteristic(data ?? UnsafePointer(bitPattern: 1)!, size)
})

/// GATT characteristic values: the first two bytes pick the characteristic (little-endian), the rest is its value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCharacteristic(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard bytes.count >= 2 else { return 0 }
    let known: [UInt16] = [0x2A07, 0x2A08, 0x2A19, 0x2A1C, 0x2A23, 0x2A24, 0x2A29, 0x2A6C, 0x2A6D, 0x2A6E, 0x2A6F]
    let uuid = known[Int(bytes[0]) % known.count]
    let value = Array(bytes[1...])
    if let decoded = try? GATTCharacteristic.decode(uuid, value) { _ = decoded.json.text }
    if value.count >= 2 { _ = MedicalFloat(sfloat: UInt16(value[0]) | UInt16(value[1]) << 8).json.text }
    if value.count >= 4 {
        _ = MedicalFloat(float: value[0..<4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }).json.text
    }
    return 0
}
