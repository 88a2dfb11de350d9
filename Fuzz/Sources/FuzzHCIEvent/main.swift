import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzHCIEvent(data ?? UnsafePointer(bitPattern: 1)!, size)
})

/// HCI events, fed one after another into one decoder so extended-report fragments carry across events. The
/// first byte splits the input into events of that many bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHCIEvent(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let first = bytes.first else { return 0 }
    let size = max(3, Int(first))
    var decoder = AdvertisingReportDecoder()
    var index = 1
    while index < bytes.count {
        let end = min(bytes.count, index + size)
        if let reports = try? decoder.reports(fromEvent: bytes[index..<end], base: index) {
            for report in reports { _ = try? AdvertisingData(parsing: report.data) }
        }
        index = end
    }
    return 0
}
