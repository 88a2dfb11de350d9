import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzCapture(data ?? UnsafePointer(bitPattern: 1)!, size)
})

/// Capture files, fed in chunks of varying size so that every split point of the incremental reader is exercised.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCapture(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let first = bytes.first else { return 0 }
    let chunk = max(1, Int(first))
    var reader = CaptureReader()
    var reports = AdvertisingReportDecoder()
    var index = 1
    reading: while index < bytes.count {
        let end = min(bytes.count, index + chunk)
        reader.append(bytes[index..<end])
        index = end
        while true {
            do {
                guard let record = try reader.next() else { break }
                if record.kind == .event { _ = try? reports.reports(fromEvent: record.packet) }
            } catch {
                break reading
            }
        }
    }
    _ = try? reader.finish()
    return 0
}
