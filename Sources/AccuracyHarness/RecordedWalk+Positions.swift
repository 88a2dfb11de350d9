import BeaconAgent
import BeaconIngest
import BeaconPositions
import Foundation

/// Positions on a recording: the weighted centroid of the loudest receivers, and the position filter alone
/// (`PositionBelief`), each second against where the transmitter was.
extension RecordedWalk {
    /// Errors of position estimates against the truth: the distance in metres, and whether the estimate lies in
    /// another zone than the transmitter (or in none).
    public struct PositionErrors: Sendable, Equatable {
        public var errors: [Double] = []
        public var roomMisses = 0
        /// The spreads the estimates were given with (`error_m`), where they were, and how many lie within theirs
        /// of the truth.
        public var spreads: [Double] = []
        public var withinSpread = 0

        public init() {}

        /// One estimate against the truth, each in the zone `zoneOf` gives it, with the spread it was given with.
        mutating func add(
            _ estimate: (x: Double, y: Double), truth: (x: Double, y: Double), spread: Double? = nil,
            zoneOf: ((x: Double, y: Double)) -> String?
        ) {
            let error = ((estimate.x - truth.x) * (estimate.x - truth.x) + (estimate.y - truth.y) * (estimate.y - truth.y)).squareRoot()
            errors.append(error)
            if zoneOf(estimate) != zoneOf(truth) { roomMisses += 1 }
            if let spread {
                spreads.append(spread)
                if error <= spread { withinSpread += 1 }
            }
        }

        /// The share of the estimates given with a spread whose truth lies within it.
        public var withinSpreadRate: Double? { spreads.isEmpty ? nil : Double(withinSpread) / Double(spreads.count) }
        public var medianSpread: Double? { AccuracyScore.median(spreads) }

        /// The share of estimates in the wrong zone.
        public var roomMissRate: Double? { errors.isEmpty ? nil : Double(roomMisses) / Double(errors.count) }
        public var median: Double? { AccuracyScore.median(errors) }
        /// The 95th percentile (nearest rank).
        public var p95: Double? {
            guard !errors.isEmpty else { return nil }
            let sorted = errors.sorted()
            return sorted[min(sorted.count - 1, Int((0.95 * Double(sorted.count)).rounded(.up)) - 1)]
        }
    }

    /// Where the transmitter truly was at `time` (its latest position then), if known.
    func truePosition(of beacon: String, at time: Double, from index: inout Int) -> (x: Double, y: Double)? {
        guard let track = positions[beacon], !track.isEmpty else { return nil }
        while index + 1 < track.count, track[index + 1].time <= time { index += 1 }
        guard track[index].time <= time, !track[index].x.isNaN else { return nil }
        return (track[index].x, track[index].y)
    }

    /// The receivers with a position (`at`), in the sites file's order, for a `FloorModel`.
    var placedReceivers: [(id: String, position: SitesConfiguration.Position)] {
        site.agents.compactMap { agent in agent.position.map { (agent.id, $0) } }
    }

    /// Every reading at its true distance from the receiver that heard it: a calibration walk's samples for
    /// `RadioModel.fit`.
    public func calibrationSamples() -> [(receiver: Int, distance: Double, rssi: Double, x: Double, y: Double)] {
        let placed = placedReceivers
        let number = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        var indices: [String: Int] = [:]
        var samples: [(receiver: Int, distance: Double, rssi: Double, x: Double, y: Double)] = []
        for row in rows {
            guard let receiver = number[row.receiver] else { continue }
            let beacon = beaconID(row.address)
            var index = indices[beacon] ?? 0
            defer { indices[beacon] = index }
            guard let truth = truePosition(of: beacon, at: Double(row.timeMicros) / 1e6, from: &index) else { continue }
            let at = placed[receiver].position
            let dz = at.z.map { FloorModel.transmitterHeight - $0 } ?? 0
            let distance = ((truth.x - at.x) * (truth.x - at.x) + (truth.y - at.y) * (truth.y - at.y) + dz * dz).squareRoot()
            samples.append((receiver, distance, Double(row.rssi), truth.x, truth.y))
        }
        return samples
    }

    /// The radio model of the walks' site fitted on all their readings at their true distances (a calibration
    /// walk), each placed receiver's offset by its id (what it hears above the model), the radio map of what each
    /// heard above both where it was heard, and how many readings.
    public static func calibration(
        _ walks: [RecordedWalk]
    ) throws -> (model: RadioModel, offsets: [(agent: String, offsetDb: Double)], map: RadioMap, readings: Int) {
        guard let first = walks.first else { throw HarnessError("no recording to calibrate on") }
        guard walks.allSatisfy({ $0.site == first.site }) else { throw HarnessError("calibration recordings must share their site") }
        let placed = first.placedReceivers
        guard placed.count >= SitesConfiguration.Site.receiversForPositions else {
            throw HarnessError("site '\(first.site.id)' places fewer than \(SitesConfiguration.Site.receiversForPositions) agents ('at')")
        }
        let readings = walks.flatMap { $0.calibrationSamples() }
        let samples = readings.map { RadioModel.Sample(receiver: $0.receiver, distance: $0.distance, rssi: $0.rssi) }
        guard samples.count >= 10 else { throw HarnessError("the recordings hold \(samples.count) readings with a true position; 10 at least") }
        let fitted = RadioModel.fit(samples, receivers: placed.count)
        let residuals = readings.map { sample in
            RadioMap.Sample(
                receiver: placed[sample.receiver].id, x: sample.x, y: sample.y,
                residualDb: sample.rssi - fitted.model.expected(distance: sample.distance) - fitted.offsets[sample.receiver])
        }
        return (fitted.model, zip(placed, fitted.offsets).map { ($0.id, $1) }, RadioMap.fit(residuals), samples.count)
    }

    /// Positions from a `PositionBelief` per transmitter on the site's floor with `model`, receivers' `offsets` and
    /// `map` (fitted on other walks): each second, the estimate against where the transmitter was, and the zone that
    /// holds most of the belief, scored as zones are (a transmitter unheard for 30 s has left).
    public func gridPositions(model: RadioModel, offsets: [Double], map: RadioMap? = nil) -> (errors: PositionErrors, zones: AccuracyScore) {
        let placed = placedReceivers
        let number = Dictionary(uniqueKeysWithValues: placed.enumerated().map { ($1.id, $0) })
        let receivers = placed.enumerated().map { index, receiver in
            FloorModel.Receiver(x: receiver.position.x, y: receiver.position.y, z: receiver.position.z, offsetDb: offsets[index], id: receiver.id)
        }
        let floor = FloorModel(zones: site.zones.map { $0.rect ?? [] }, receivers: receivers, model: model, doors: site.passages, map: map)
        var scratch = PositionBelief.Scratch()
        var shares: [Double] = []
        var beliefs: [String: PositionBelief] = [:]
        var indices: [String: Int] = [:]
        var errors = PositionErrors()
        let seconds = secondCount
        var zoneBySecond: [String: [String?]] = [:]
        var lastHeard: [String: Int64] = [:]
        forEachSecond { second, limit, readings in
            var heard: Set<String> = []
            for row in readings {
                guard let receiver = number[row.receiver] else { continue }
                let beacon = beaconID(row.address)
                var belief = beliefs[beacon] ?? PositionBelief(floor: floor)
                belief.update(receiver: receiver, rssi: Double(row.rssi), timeMicros: row.timeMicros, on: floor, scratch: &scratch)
                beliefs[beacon] = belief
                heard.insert(beacon)
                lastHeard[beacon] = row.timeMicros
            }
            for (beacon, belief) in beliefs {
                var series = zoneBySecond[beacon] ?? Array(repeating: nil, count: seconds)
                if limit - (lastHeard[beacon] ?? .min) <= 30_000_000 {
                    belief.zoneProbabilities(on: floor, into: &shares)
                    series[second] = shares.indices.max { shares[$0] < shares[$1] }.map { site.zones[$0].id }
                }
                zoneBySecond[beacon] = series
            }
            for beacon in heard {
                guard let belief = beliefs[beacon] else { continue }
                var truthIndex = indices[beacon] ?? 0
                defer { indices[beacon] = truthIndex }
                guard let truth = truePosition(of: beacon, at: Double(limit) / 1e6, from: &truthIndex) else { continue }
                let estimate = belief.estimate(on: floor)
                errors.add((estimate.x, estimate.y), truth: truth, zoneOf: zone(at:))
            }
        }
        return (errors, score(zoneBySecond: zoneBySecond))
    }

    /// The usual baseline of positions: each second, the centroid of the `count` receivers whose latest reading
    /// (at most `freshSeconds` old) is loudest, weighted by received power (mW); its error against where the
    /// transmitter was at that second.
    public func weightedCentroid(count: Int = 3, freshSeconds: Double = 2) -> PositionErrors {
        let at = Dictionary(uniqueKeysWithValues: site.agents.compactMap { agent in agent.position.map { (agent.id, $0) } })
        let offsets = Dictionary(uniqueKeysWithValues: site.agents.map { ($0.id, $0.rssiOffsetDb) })
        var latest: [String: [String: (time: Int64, rssi: Double)]] = [:]
        var truthIndex: [String: Int] = [:]
        var errors = PositionErrors()
        forEachSecond { _, limit, readings in
            for row in readings {
                latest[beaconID(row.address), default: [:]][row.receiver] = (row.timeMicros, Double(row.rssi) + (offsets[row.receiver] ?? 0))
            }
            for (beacon, heard) in latest {
                let loudest = heard.filter { limit - $0.value.time <= Int64(freshSeconds * 1_000_000) && at[$0.key] != nil }
                    .sorted { ($0.value.rssi, $1.key) > ($1.value.rssi, $0.key) }.prefix(count)
                guard !loudest.isEmpty else { continue }
                var index = truthIndex[beacon] ?? 0
                defer { truthIndex[beacon] = index }
                guard let truth = truePosition(of: beacon, at: Double(limit) / 1e6, from: &index) else { continue }
                let weights = loudest.map { pow(10, $0.value.rssi / 10) }
                let total = weights.reduce(0, +)
                let x = zip(loudest, weights).reduce(0) { $0 + at[$1.0.key]!.x * $1.1 } / total
                let y = zip(loudest, weights).reduce(0) { $0 + at[$1.0.key]!.y * $1.1 } / total
                errors.add((x, y), truth: truth, zoneOf: zone(at:))
            }
        }
        return errors
    }
}
