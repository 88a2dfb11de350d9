import BeaconIngest
import BeaconWire
import Benchmark

/// Agent `agent`'s batch builder, with room for a batch of `sightingsPerBatch`.
func makeBuilder(site: String, agent: Int) -> BatchBuilder {
    var builder = BatchBuilder(siteID: site, agentID: "agent-\(agent)", bootID: 7)
    builder.configuration.maximumSightings = sightingsPerBatch * 2
    return builder
}

/// Benchmark beacon number `beacon`: an iBeacon with a random address of its own.
func benchmarkBeacon(_ beacon: Int) -> BeaconKey {
    BeaconKey(
        beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:\(beacon / 65536):\(beacon % 65536)",
        address: 0xC000_0000_0000 | UInt64(beacon), addressIsRandom: true, powerAt1mDbm: -59)
}

/// `sightingsPerBatch` sightings of `beacons` (round robin) from `start`, `step` apart, sealed as batch `sequence`;
/// with `telemetryEvery`, every so many of them carry an Eddystone TLM frame (its counters those of a beacon that
/// booted a day before `start` and advertises every 100 ms).
func sealedBatch(
    _ builder: inout BatchBuilder, beacons: Range<Int>, start: Int64, step: Int64, sequence: UInt64, telemetryEvery: Int? = nil
) throws -> [UInt8] {
    for index in 0..<sightingsPerBatch {
        let key = benchmarkBeacon(beacons.lowerBound + index % beacons.count)
        let time = start + Int64(index) * step
        var sighting = Sighting(timeMicros: time, beacon: key, rssi: Int8(-50 - (index * 7) % 40))
        if let telemetryEvery, index % telemetryEvery == 0 {
            let tenths = UInt32((time - telemetryBootMicros) / 100_000)
            let tlm = EddystoneTLM(
                batteryMillivolts: UInt16(2950 - index % 7), temperatureRaw: Int16(21 * 256 + index % 3 * 64), advertisingCount: tenths,
                uptimeTenths: tenths)
            sighting.data = .eddystone(FrameBytes([0x20, 0x00] + tlm.fieldBytes))
        }
        _ = builder.add(sighting, nowNanoseconds: 0)
    }
    return try builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: start)!.wireBytes()
}

/// The sites-file keys of a site whose history is the live decisions alone.
let crossingsHistoryKeys = "\n    zone_history: crossings\n    history_lag_s: 60"

/// When the beacons of the TLM benchmarks booted, µs.
let telemetryBootMicros = wallClockMicros() - 2 * 86_400_000_000

/// The pipeline of `Ingest pipeline, 100k sightings` and its batches, built before any is measured: one set of
/// 100 per iteration, each set following the one before in event time.
final class PipelineRun: @unchecked Sendable {
    static let iterations = 22
    let intake: BatchIntake
    var pipeline: IngestPipeline
    /// Whether each batch's telemetry goes on to fleet health and its changed rows are taken, as the writer does
    /// once the database took them.
    let healthAsStored: Bool
    private var payloads: [[(agent: Int, payload: [UInt8])]] = []
    private var next = 0

    /// `siteKeys`: further sites-file keys of the site; `floor`: a site whose beacons get positions;
    /// `telemetryEvery`: a TLM frame in so many sightings, forecast by `chargeCounting`.
    init(siteKeys: String = "", floor: Bool = false, telemetryEvery: Int? = nil, chargeCounting: Bool = true) throws {
        let sites = try SitesConfiguration.parse(makeSitesText(sites: 1, siteKeys: siteKeys, floor: floor))
        intake = BatchIntake(sites: sites)
        var health = FleetHealth.Configuration()
        health.chargeCounting = chargeCounting
        pipeline = IngestPipeline(sites: sites, health: health)
        healthAsStored = telemetryEvery != nil
        var builders = (0..<agentCount).map { makeBuilder(site: siteID, agent: $0) }
        let start = wallClockMicros() - 3_600_000_000
        for iteration in 0..<Self.iterations {
            var batches: [(agent: Int, payload: [UInt8])] = []
            for round in 0..<(batchesPerIteration / agentCount) {
                let sequence = UInt64(iteration * batchesPerIteration / agentCount + round + 1)
                for agent in 0..<agentCount {
                    let beacons = (agent * beaconsPerAgent)..<((agent + 1) * beaconsPerAgent)
                    batches.append(
                        (agent, try sealedBatch(
                            &builders[agent], beacons: beacons, start: start + Int64(sequence) * 1_000_000, step: 1000, sequence: sequence,
                            telemetryEvery: telemetryEvery)))
                }
            }
            payloads.append(batches)
        }
    }

    /// The next iteration's batches.
    func nextBatches() -> [(agent: Int, payload: [UInt8])] {
        precondition(next < payloads.count, "more iterations than batches built")
        defer { next += 1 }
        return payloads[next]
    }

    /// One batch through the intake's checks and the pipeline, as the ingest takes it from the broker.
    func apply(_ payload: [UInt8], agent: Int) -> PipelineOutput {
        let now = wallClockMicros()
        guard case .success(let batch) = intake.check(topic: "beaconflow/v1/\(siteID)/agent-\(agent)/batch", payload: payload, nowMicros: now)
        else { fatalError("the intake refused a batch") }
        let output = pipeline.apply(batch, nowMicros: now)
        if healthAsStored {
            pipeline.telemetryStored(output.telemetry)
            blackHole(pipeline.health.takeChanged())
        }
        return output
    }
}
nonisolated(unsafe) var pipelineRun: PipelineRun!

let batchesPerIteration = 100
let beaconsPerAgent = 100
