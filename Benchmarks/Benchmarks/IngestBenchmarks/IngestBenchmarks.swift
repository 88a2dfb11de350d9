import BeaconIngest
import BeaconPositions
import BeaconWire
import Benchmark
import Foundation
import LibPQ

/// The ingest between a real mosquitto and a real PostgreSQL (both throwaway, on loopback), fed by a publisher that
/// stands in for the agents of one site (or of several, agent i in site i mod the number of sites): `agentCount`
/// agents, batches of `sightingsPerBatch` sightings as the agents seal them, times in real time.
let agentCount = 10
let sightingsPerBatch = 1000
let siteID = "bench"

/// The site of an agent when there are `sites` sites.
func site(of agent: Int, sites: Int) -> String { sites == 1 ? siteID : "\(siteID)-\(agent % sites)" }

/// `floor`: the zones are rooms of 6 × 6 m in a row, each agent placed in its room (`at`), so that beacons get
/// positions and zones are scored by them.
func makeSitesText(sites: Int, siteKeys: String = "", floor: Bool = false) -> String {
    "sites:\n" + (0..<sites).map { index in
        let id = site(of: index, sites: sites)
        let agents = (0..<agentCount).filter { site(of: $0, sites: sites) == id }
        func rect(_ zone: Int) -> String { floor ? ", rect: [\(zone * 6), 0, \(zone * 6 + 6), 6]" : "" }
        func at(_ agent: Int) -> String { floor ? ", at: [\(Double(agent % 5 * 6) + (agent < 5 ? 1.5 : 4.5)), 3, 2.5]" : "" }
        return """
              - id: \(id)\(siteKeys)
                zones: [\((0..<5).map { "{id: zone-\($0)\(rect($0))}" }.joined(separator: ", "))]
                agents:
            \(agents.map { "      - {id: agent-\($0), zone: zone-\($0 % 5)\(at($0))}" }.joined(separator: "\n"))

            """
    }.joined()
}

let sitesText = makeSitesText(sites: 1)

let benchmarks: @Sendable () -> Void = {
    // Broker to committed rows: each iteration publishes 100 batches (100,000 sightings; 10 agents, 100 beacons
    // each, 10 s of event time) and waits until the ingest has committed them all. Then the same over four sites
    // (agent i in site i mod 4), with 1, 2 and 4 instances sharing them on one database.
    for (sites, instances) in [(1, 1), (4, 1), (4, 2), (4, 4)] {
        let name = sites == 1 ? "Ingest end to end, 100k sightings" : "Ingest end to end, 100k sightings, 4 sites, \(instances) instance\(instances == 1 ? "" : "s")"
        Benchmark(
            name,
            configuration: .init(
                metrics: [.wallClock, .cpuTotal, .throughput], timeUnits: .milliseconds, warmupIterations: 1,
                maxDuration: .seconds(120), maxIterations: 8),
            closure: { benchmark in
                let start = wallClockMicros() - 3_600_000_000
                var payloads: [(Int, [UInt8])] = []
                for round in 0..<(batchesPerIteration / agentCount) {
                    for agent in 0..<agentCount {
                        let beacons = (agent * beaconsPerAgent)..<((agent + 1) * beaconsPerAgent)
                        payloads.append(
                            (agent, try environment.batch(agent: agent, beacons: beacons, start: start + Int64(round) * 1_000_000, step: 1000)))
                    }
                }
                let target = environment.committedSightings + batchesPerIteration * sightingsPerBatch
                benchmark.startMeasurement()
                for (agent, payload) in payloads { try environment.publish(agent: agent, payload) }
                try await environment.waitForCommitted(target)
                benchmark.stopMeasurement()
            },
            setup: { environment = try await Environment(sites: sites, instances: instances) },
            teardown: { try await environment.stop() })
    }

    // The reference: the same 100,000 rows as one plain binary COPY of their packs into sighting_packs, in a
    // transaction (packing them is part of the reference's work, as it is the ingest's).
    Benchmark(
        "Plain binary COPY, 100k sightings",
        configuration: .init(
            metrics: [.wallClock, .cpuTotal, .throughput], timeUnits: .milliseconds, warmupIterations: 1,
            maxDuration: .seconds(60), maxIterations: 8),
        closure: { benchmark in
            let connection = try PostgresConnection(environment.database.conninfo)
            let start = wallClockMicros() - 3_600_000_000
            var rows: [SightingRow] = []
            rows.reserveCapacity(batchesPerIteration * sightingsPerBatch)
            for batch in 0..<batchesPerIteration {
                let agent = batch % agentCount
                for index in 0..<sightingsPerBatch {
                    let beacon = agent * beaconsPerAgent + index % beaconsPerAgent
                    let source = SightingSource(
                        siteID: siteID, agentID: "agent-\(agent)", zoneID: "zone-\(agent % 5)", rssiOffsetDb: 0,
                        pathLossExponent: 2.5)
                    rows.append(
                        SightingRow(
                            timeMicros: start + Int64(batch / agentCount) * 1_000_000 + Int64(index) * 1000, source: source,
                            beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:0:\(beacon)", rssi: -60,
                            powerAt1mDbm: -59, smoothedRSSI: -61))
                }
            }
            benchmark.startMeasurement()
            try connection.execute("BEGIN")
            let packs = SightingPack.pack(rows).enumerated().map { index, pack in
                StoredPack(pack: pack, sourceKey: Int32(index % agentCount), beaconKey: Int32(index % 1000))
            }
            try connection.copy(packs, into: StoredPack.copyTable)
            try connection.execute("COMMIT")
            benchmark.stopMeasurement()
        },
        setup: {
            environment = try await Environment()
            // The schema and today's partitions, as the ingest made them, and the partition of an hour ago (the
            // rows' day, yesterday's in the first hour of a day, which the ingest makes when its batches need it).
            try await environment.waitForCommitted(0)
            try PostgresConnection(environment.database.conninfo).execute(
                "SELECT beaconflow.ensure_partitions((now() - interval '1 hour')::date, 2)")
        },
        teardown: { try await environment.stop() })

    // Advert to queryable at 50,000 sightings/s: every 20 ms one agent's batch of the last 200 ms (each of the 10
    // agents seals 1,000 sightings every 200 ms), for 15 s; a sighting is queryable when its agent's
    // acknowledgement (published after the commit) arrives. Ten samples per batch.
    Benchmark(
        "Advert to queryable at 50k sightings per s",
        configuration: .init(
            metrics: [.custom("advert to queryable (ms)", polarity: .prefersSmaller, useScalingFactor: false), .cpuTotal],
            timeUnits: .milliseconds, warmupIterations: 0, maxDuration: .seconds(60), maxIterations: 2),
        closure: { benchmark in
            let step: Int64 = 200
            var sent: [(agent: Int, sequence: UInt64, start: Int64)] = []
            let clock = ContinuousClock()
            let begin = clock.now
            var tick = 0
            environment.acknowledgements.entries.withLock { $0.removeAll() }
            while clock.now - begin < .seconds(15) {
                let agent = tick % agentCount
                let start = wallClockMicros() - Int64(sightingsPerBatch) * step
                let sequence = environment.nextSequence[agent]
                let beacons = (agent * beaconsPerAgent)..<((agent + 1) * beaconsPerAgent)
                try environment.publish(agent: agent, try environment.batch(agent: agent, beacons: beacons, start: start, step: step))
                sent.append((agent, sequence, start))
                tick += 1
                try await Task.sleep(until: begin + .milliseconds(20 * tick), clock: clock)
            }
            // Each batch is queryable when the first acknowledgement that covers it arrives.
            let deadline = clock.now + .seconds(60)
            var queryable: [Int64?] = []
            while clock.now < deadline {
                let acknowledgements = environment.acknowledgements.entries.withLock { $0 }
                queryable = sent.map { batch in
                    acknowledgements.first { $0.agent == batch.agent && $0.through >= batch.sequence }?.atMicros
                }
                if queryable.allSatisfy({ $0 != nil }) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            for (batch, at) in zip(sent, queryable) {
                guard let at else { fatalError("batch \(batch.sequence) of agent \(batch.agent) was never acknowledged") }
                // Every hundredth sighting: the batch's adverts are evenly spread, so the samples are too.
                for index in stride(from: Int64(0), to: Int64(sightingsPerBatch), by: 100) {
                    let advert = batch.start + index * step
                    benchmark.measurement(.custom("advert to queryable (ms)", polarity: .prefersSmaller, useScalingFactor: false), Int((at - advert) / 1000))
                }
            }
        },
        setup: { environment = try await Environment() },
        teardown: { try await environment.stop() })

    // The ingest's own work per sighting, without broker or database: the same 100 batches as end to end
    // (10 agents, 100 beacons each, 1,000 sightings a batch) checked and decoded by the intake and applied by the
    // pipeline (identities, addresses, deduplication, smoothing, zones, fleet health). Each iteration's batches
    // follow the last one's in event time, as a live site's do. With the default history (`confirmed`: each beacon's
    // likeliest path beside the live rule), with the live decisions alone (`crossings`), and on a site with a floor
    // (each beacon's position followed, zones scored by it).
    // And with a TLM frame in every ten sightings (each beacon's TLM every second, ten times as often as beacons send
    // it), its rows going on to fleet health and the changed beacons' rows taken as the writer does after each
    // commit, forecast by charge counting, and by the voltage's trend alone.
    for (name, siteKeys, floor, telemetryEvery, chargeCounting) in [
        ("Ingest pipeline, 100k sightings", "", false, nil, true),
        ("Ingest pipeline, 100k sightings, history by crossings", crossingsHistoryKeys, false, nil, true),
        ("Ingest pipeline, 100k sightings, positions", "", true, nil, true),
        ("Ingest pipeline, 100k sightings, a TLM frame in ten", "", false, 10, true),
        ("Ingest pipeline, 100k sightings, a TLM frame in ten, battery trend only", "", false, 10, false),
    ] as [(String, String, Bool, Int?, Bool)] {
        Benchmark(
            name,
            configuration: .init(
                metrics: [.wallClock, .cpuTotal, .mallocCountTotal], timeUnits: .milliseconds, warmupIterations: 2,
                maxDuration: .seconds(60), maxIterations: PipelineRun.iterations - 2),
            closure: { benchmark in
                let run = pipelineRun!
                let batches = run.nextBatches()
                benchmark.startMeasurement()
                for (agent, payload) in batches { blackHole(run.apply(payload, agent: agent)) }
                benchmark.stopMeasurement()
            },
            setup: {
                pipelineRun = try PipelineRun(siteKeys: siteKeys, floor: floor, telemetryEvery: telemetryEvery, chargeCounting: chargeCounting)
            },
            teardown: { pipelineRun = nil })
    }

    // Memory with 100,000 beacons tracked, in a `beaconflow ingest` process of its own (the release binary of the
    // main package: `swift build -c release` first): each beacon heard by two agents, twice, 10 s apart (400
    // batches of 1,000 distinct beacons, 400,000 sightings, published at once); then the process's peak resident
    // set from /proc. The state that grows with beacons: smoothing filters, zone trackers, fleet health, address
    // associations, telemetry dedup.
    Benchmark(
        "Ingest process holding 100k beacons",
        configuration: .init(
            metrics: [.custom("ingest VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false)],
            warmupIterations: 0, maxDuration: .seconds(300), maxIterations: 1),
        closure: { benchmark in
            let start = wallClockMicros() - 3_600_000_000
            for round in 0..<2 {
                for block in 0..<100 {
                    let beacons = (block * 1000)..<((block + 1) * 1000)
                    for agent in [block % agentCount, (block + 1) % agentCount] {
                        let time = start + Int64(round) * 10_000_000 + Int64(block) * 10_000
                        try environment.publish(agent: agent, try environment.batch(agent: agent, beacons: beacons, start: time, step: 1))
                    }
                }
            }
            try await environment.waitForAcknowledgements()
            benchmark.measurement(
                .custom("ingest VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false),
                peakResidentMegabytes(process: environment.ingestProcess!.pid))
        },
        setup: { environment = try await Environment(ingestAsProcess: true) },
        teardown: { try await environment.stop() })

    // The same 400 batches applied straight to the ingest's pure pipeline (no broker, no database, no queue): the
    // state the ingest keeps for 100,000 beacons, apart from the buffers of messages in flight; and the same with
    // the default history (`confirmed`: each beacon's likeliest path and live stays besides), the path alone and
    // the live decisions alone (`crossings`). Run each alone.
    for (name, siteKeys) in [
        ("Pipeline state for 100k beacons", ""),
        ("Pipeline state for 100k beacons, history by path", "\n    zone_history: path"),
        ("Pipeline state for 100k beacons, history by crossings", crossingsHistoryKeys),
    ] {
        Benchmark(
            name,
            configuration: .init(
                metrics: [.custom("VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false)],
                warmupIterations: 0, maxDuration: .seconds(300), maxIterations: 1),
            closure: { benchmark in
                let sites = try SitesConfiguration.parse(makeSitesText(sites: 1, siteKeys: siteKeys))
                let intake = BatchIntake(sites: sites)
                var pipeline = IngestPipeline(sites: sites)
                var sequences = [UInt64](repeating: 1, count: agentCount)
                let start = wallClockMicros() - 3_600_000_000
                for round in 0..<2 {
                    for block in 0..<100 {
                        for agent in [block % agentCount, (block + 1) % agentCount] {
                            var builder = makeBuilder(site: siteID, agent: agent)
                            for index in 0..<sightingsPerBatch {
                                let key = benchmarkBeacon(block * 1000 + index)
                                let time = start + Int64(round) * 10_000_000 + Int64(block) * 10_000 + Int64(index)
                                _ = builder.add(Sighting(timeMicros: time, beacon: key, rssi: -60), nowNanoseconds: 0)
                            }
                            let payload: [UInt8] = try builder.seal(
                                sequence: sequences[agent], firstUnacknowledgedSequence: 1, agentClockMicros: start)!.wireBytes()
                            sequences[agent] += 1
                            let now = wallClockMicros()
                            guard case .success(let batch) = intake.check(
                                topic: "beaconflow/v1/\(siteID)/agent-\(agent)/batch", payload: payload, nowMicros: now)
                            else { fatalError("the intake refused a batch") }
                            _ = pipeline.apply(batch, nowMicros: now)
                        }
                    }
                }
                blackHole(pipeline)
                benchmark.measurement(.custom("VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false), peakResidentMegabytes())
            })
    }

    // The floor of `…, positions` for the position beliefs' benchmarks: five rooms of 6 × 6 m in a row, 720 cells of
    // 0.5 m, ten receivers.
    let beliefRooms = (0..<5).map { [Double($0 * 6), 0, Double($0 * 6 + 6), 6] }
    let beliefReceivers = (0..<10).map { FloorModel.Receiver(x: Double($0 % 5 * 6) + ($0 < 5 ? 1.5 : 4.5), y: 3, z: 2.5) }
    let beliefModel = RadioModel(powerAt1mDbm: -59, exponent: 2, sigmaDb: 5)

    // A beacon's position belief moved by a second's reading, 10,000 times (a thousand beacons for ten seconds), on
    // the floor of `…, positions` (five rooms of 6 × 6 m in a row, 720 cells of 0.5 m, no doors given, so open) and
    // on the same rooms walled with a door between each two: the spreading for the second and the weighing.
    for (name, walled) in [("Position belief, 10k beacon-seconds", false), ("Position belief, 10k beacon-seconds, walled", true)] {
        let doors = walled ? (0..<5).map { a in (0..<5).map { b in abs(a - b) <= 1 } } : nil
        let floor = FloorModel(zones: beliefRooms, receivers: beliefReceivers, model: beliefModel, doors: doors)
        Benchmark(
            name,
            configuration: .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal], timeUnits: .microseconds, warmupIterations: 2, maxIterations: 30),
            closure: { benchmark in
                var scratch = PositionBelief.Scratch()
                var beliefs = [PositionBelief](repeating: PositionBelief(floor: floor), count: 1000)
                benchmark.startMeasurement()
                for second in 0..<10 {
                    for beacon in beliefs.indices {
                        beliefs[beacon].update(
                            receiver: beacon % 10, rssi: Double(-60 - (beacon &* 7 &+ second) % 30), timeMicros: Int64(second) * 1_000_000,
                            on: floor, scratch: &scratch)
                    }
                }
                benchmark.stopMeasurement()
                blackHole(beliefs)
            })
    }

    // The same open floor, each beacon-second heard by four receivers, with and without its level learned as the
    // ingest learns it (a pass over the cells per reading more): what learning a beacon's level costs a second.
    for (name, learning) in [
        ("Position belief, 10k beacon-seconds, four receivers each", false), ("Position belief, 10k beacon-seconds, four receivers each, level learned", true),
    ] {
        let floor = FloorModel(zones: beliefRooms, receivers: beliefReceivers, model: beliefModel)
        Benchmark(
            name,
            configuration: .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal], timeUnits: .microseconds, warmupIterations: 2, maxIterations: 30),
            closure: { benchmark in
                var scratch = PositionBelief.Scratch()
                var beliefs = [PositionBelief](repeating: PositionBelief(floor: floor), count: 1000)
                var levels = [TransmitterLevel](repeating: TransmitterLevel(), count: 1000)
                benchmark.startMeasurement()
                for second in 0..<10 {
                    for beacon in beliefs.indices {
                        let readings = (0..<4).map { index in
                            (receiver: (beacon + index) % 10, rssi: Double(-60 - (beacon &* 7 &+ second &+ index &* 5) % 30) - levels[beacon].offsetDb)
                        }
                        beliefs[beacon].update(readings: readings, timeMicros: Int64(second) * 1_000_000, on: floor, scratch: &scratch)
                        if learning, let excess = beliefs[beacon].excessLevel(of: readings, on: floor) {
                            levels[beacon].learn(excessDb: excess, receivers: readings.count)
                        }
                    }
                }
                benchmark.stopMeasurement()
                blackHole(beliefs)
                blackHole(levels)
            })
    }

    // Fleet health alone for 10,000 TLM beacons, each heard an hour at a time for 30 days (its state at its fullest:
    // a week of battery buckets, and for charge counting a month of daily points, a day of hourly means and a
    // week of temperatures), forecast by charge counting and by the voltage's trend alone: the peak resident set
    // of each, run alone; their difference over 10,000 is what charge counting keeps per TLM beacon.
    for (name, chargeCounting) in [
        ("Fleet health of 10k TLM beacons over 30 days", true), ("Fleet health of 10k TLM beacons over 30 days, battery trend only", false),
    ] {
        Benchmark(
            name,
            configuration: .init(
                metrics: [.custom("VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false), .cpuTotal],
                timeUnits: .seconds, warmupIterations: 0, maxDuration: .seconds(600), maxIterations: 1),
            closure: { benchmark in
                var configuration = FleetHealth.Configuration()
                configuration.chargeCounting = chargeCounting
                var health = FleetHealth(configuration: configuration)
                let start = wallClockMicros() - 30 * 86_400_000_000
                let ids = (0..<10_000).map { "eddystone:0102030405060708090a:\(String(format: "%012x", $0))" }
                for hour in 0..<(30 * 24) {
                    for (index, id) in ids.enumerated() {
                        let seconds = Double(hour * 3600 + index)
                        health.telemetry(
                            TelemetryRow(
                                timeMicros: start + Int64(seconds * 1_000_000), siteID: siteID, agentID: "agent-0", beaconID: id,
                                batteryMillivolts: Int32(2980 - hour / 24), temperatureCelsius: 21 + Double(hour % 24) / 8,
                                advertisingCount: UInt32(seconds * 10), uptimeSeconds: seconds),
                            rebooted: false)
                    }
                    // The writer's commits: the changed beacons' rows.
                    blackHole(health.takeChanged())
                }
                blackHole(health)
                benchmark.measurement(.custom("VmHWM (MB)", polarity: .prefersSmaller, useScalingFactor: false), peakResidentMegabytes())
            })
    }
}

/// A process's peak resident set so far, from /proc.
func peakResidentMegabytes(process: pid_t? = nil) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(process.map(String.init) ?? "self")/status", encoding: .utf8)) ?? ""
    let kilobytes = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
        .split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return kilobytes / 1024
}
