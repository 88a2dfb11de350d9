import BeaconWire
import Glibc
import CLibFuzzer

var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzBatch(data ?? UnsafePointer(bitPattern: 1)!, size)
})

/// Batch messages as the ingest receives them: anything must give a batch or a BatchError. A batch that passes
/// validation must survive a re-encode in microseconds (the finest unit, so no time is rounded) and a decode unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBatch(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let batch = try? BatchReader.decode(bytes) else { return 0 }
    var builder = BatchBuilder(siteID: batch.siteID, agentID: batch.agentID, bootID: batch.bootID)
    builder.configuration.maximumSightings = max(1, batch.sightings.count)
    builder.configuration.dataRefreshMicroseconds = 0
    builder.configuration.timeUnitMicros = 1
    for sighting in batch.sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
    guard
        let wire = builder.seal(
            sequence: batch.sequence, firstUnacknowledgedSequence: batch.firstUnacknowledgedSequence,
            agentClockMicros: batch.agentClockMicros),
        let again = try? BatchReader.decode(wire.wireBytes())
    else {
        if batch.sightings.isEmpty { return 0 }
        fatalError("a valid batch did not survive a re-encode")
    }
    if again.sightings.map(\.timeMicros) != batch.sightings.map(\.timeMicros) {
        fatalError("re-encoded batch has different sighting times")
    }
    return 0
}
