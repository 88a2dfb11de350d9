import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import CLibFuzzer
import Glibc

let sites = try! SitesConfiguration.parse(
    """
    sites:
      - id: hq
        zones: [{id: lobby}, {id: lab}]
        agents:
          - {id: hq-a1, zone: lobby}
          - {id: hq-a2, zone: lab}
    """)
nonisolated(unsafe) var pipeline = IngestPipeline(sites: sites)
nonisolated(unsafe) var tracker = AcknowledgementTracker()
let now: Int64 = 1_767_225_600_000_000

/// What reaches the ingest and the agent from the network, through the same pure code they run: the first byte
/// picks the input (0: a batch through the intake checks, the pipeline and the acknowledgement bookkeeping; 1: an
/// agent status and its clock sample; 2: an acknowledgement as the agent judges it). Nothing may trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIngestInput(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let kind = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())
    switch kind % 3 {
    case 0:
        let intake = BatchIntake(sites: sites)
        guard case .success(let batch) = intake.check(topic: "beaconflow/v1/hq/hq-a1/batch", payload: body, nowMicros: now)
        else { return 0 }
        pipeline.beginTransaction()
        _ = pipeline.apply(batch, nowMicros: now)
        _ = pipeline.advanceZones(site: "hq", nowMicros: now)
        pipeline.rollbackTransaction()
        _ = tracker.committed(
            AcknowledgementTracker.AgentKey(site: "hq", agent: "hq-a1"), sequence: batch.sequence,
            firstUnacknowledged: batch.firstUnacknowledgedSequence)
    case 1:
        guard let status = try? AgentStatus(json: body) else { return 0 }
        if let clock = status.clockMicros {
            let agent = AcknowledgementTracker.AgentKey(site: "hq", agent: "hq-a1")
            _ = pipeline.clocks.observe(agent, agentClockMicros: clock, receivedAtMicros: now, retained: false)
            _ = pipeline.clocks.offset(agent)
        }
    default:
        let acknowledged = UInt64(body.first ?? 0)
        _ = Acknowledgement.action(payload: body, retained: bytes.count % 2 == 0, acknowledged: acknowledged, nextSequence: acknowledged + 9)
    }
    return 0
}

// After the globals above: top-level code runs in order.
var argumentCount = CommandLine.argc
var argumentValues: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argumentCount, &argumentValues) { data, size in
    fuzzIngestInput(data ?? UnsafePointer(bitPattern: 1)!, size)
})
