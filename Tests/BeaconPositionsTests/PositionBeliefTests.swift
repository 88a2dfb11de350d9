@testable import BeaconPositions
import Foundation
import Testing

/// The position filter, on readings made from its own model: it finds the transmitter and follows it.
@Suite struct PositionBeliefTests {
    let model = RadioModel(powerAt1mDbm: -60, exponent: 2, sigmaDb: 4)
    let receivers = [
        FloorModel.Receiver(x: 0, y: 0, z: 2.2), FloorModel.Receiver(x: 10, y: 0, z: 2.2),
        FloorModel.Receiver(x: 0, y: 8, z: 2.2), FloorModel.Receiver(x: 10, y: 8, z: 2.2),
    ]
    /// The floor's four quarters as zones.
    let quarters: [[Double]] = [[0, 0, 5, 4], [0, 4, 5, 8], [5, 0, 10, 4], [5, 4, 10, 8]]

    func rssi(_ receiver: FloorModel.Receiver, x: Double, y: Double) -> Double {
        model.expected(distance: ((receiver.x - x) * (receiver.x - x) + (receiver.y - y) * (receiver.y - y) + 1).squareRoot())
    }

    /// The quarters' floor and the hindsight's floor made for it.
    func floors() -> (FloorModel, HindsightFloor) {
        let floor = FloorModel(zones: quarters, receivers: receivers, model: model)
        return (floor, HindsightFloor(
            FloorModel(zones: quarters, receivers: receivers, model: model, coarsening: HindsightFloor.coarsening), for: floor))
    }

    @Test func readingsOfAPlaceFindItAndAWalkIsFollowed() {
        let floor = FloorModel(zones: quarters, receivers: receivers, model: model)
        #expect(floor.cellSize == FloorModel.finestCell && floor.cellCount == 20 * 16)
        var belief = PositionBelief(floor: floor)
        var scratch = PositionBelief.Scratch()
        var time: Int64 = 0
        for _ in 0..<20 {
            for (index, receiver) in receivers.enumerated() {
                time += 50_000
                belief.update(receiver: index, rssi: rssi(receiver, x: 2.5, y: 6), timeMicros: time, on: floor, scratch: &scratch)
            }
        }
        let found = belief.estimate(on: floor)
        #expect(abs(found.x - 2.5) < 0.5 && abs(found.y - 6) < 0.5, "\(found)")
        #expect(found.spread < 2)
        // The belief sums to one over the floor, most of it in the quarter that holds the place.
        var shares: [Double] = []
        belief.zoneProbabilities(on: floor, into: &shares)
        #expect(abs(shares.reduce(0, +) - 1) < 1e-3)
        #expect(shares[1] > 0.9 && shares[2] < 0.01, "\(shares)")
        // A cell counts for the first zone that holds its centre: the same cells under zones listed otherwise.
        let overlapping = FloorModel(zones: [[0, 4, 5, 8], [0, 0, 10, 8]], receivers: receivers, model: model)
        var overlappingShares: [Double] = []
        belief.zoneProbabilities(on: overlapping, into: &overlappingShares)
        #expect(abs(overlappingShares[0] - shares[1]) < 1e-6 && abs(overlappingShares[1] - (1 - shares[1])) < 1e-3)
        // It walks to (8, 2) at 1 m/s; a few seconds after it arrives, the estimate is there too.
        for step in 0..<100 {
            let progress = min(1, Double(step) / 75)
            let (x, y) = (2.5 + 5.5 * progress, 6 - 4 * progress)
            for (index, receiver) in receivers.enumerated() {
                time += 25_000
                belief.update(receiver: index, rssi: rssi(receiver, x: x, y: y), timeMicros: time, on: floor, scratch: &scratch)
            }
        }
        let arrived = belief.estimate(on: floor)
        #expect(abs(arrived.x - 8) < 0.75 && abs(arrived.y - 2) < 0.75, "\(arrived)")
        belief.zoneProbabilities(on: floor, into: &shares)
        #expect(shares[2] > 0.9, "\(shares)")
    }

    /// Found in the lower left quarter, then nothing learnt for 10 s: on an open floor the belief spreads over the
    /// whole floor; with walls (the quarters on the left joined by a door, every other pair walled) it spreads
    /// through the door and no share crosses a wall.
    @Test func theBeliefSpreadsThroughDoorsAndNotThroughWalls() {
        var doors = [[Bool]](repeating: [Bool](repeating: false, count: 4), count: 4)
        for zone in 0..<4 { doors[zone][zone] = true }
        doors[0][1] = true
        doors[1][0] = true
        for walls in [nil, doors] as [[[Bool]]?] {
            let floor = FloorModel(zones: quarters, receivers: receivers, model: model, doors: walls)
            var belief = PositionBelief(floor: floor)
            var scratch = PositionBelief.Scratch()
            for _ in 0..<5 {
                for (index, receiver) in receivers.enumerated() {
                    belief.update(receiver: index, rssi: rssi(receiver, x: 1, y: 1), timeMicros: 1_000_000, on: floor, scratch: &scratch)
                }
            }
            var before: [Double] = []
            belief.zoneProbabilities(on: floor, into: &before)
            #expect(before[0] > 0.9 && before[1] < 0.1, "\(before)")
            // A reading as likely everywhere (far below every cell's level), 10 s later.
            belief.update(receiver: 0, rssi: -127, timeMicros: 11_000_000, on: floor, scratch: &scratch)
            var after: [Double] = []
            belief.zoneProbabilities(on: floor, into: &after)
            if walls == nil {
                #expect(abs(after[0] + after[1] - 0.5) < 0.1, "\(after)")
            } else {
                #expect(abs(after[0] + after[1] - before[0] - before[1]) < 1e-3 && after[1] > 0.3, "\(before) then \(after)")
            }
        }
    }

    /// A floor whose zones a door joins everywhere spreads the belief as an open floor does (its own passes, rows
    /// before columns, on lines side by side in memory), cell by cell to float rounding.
    @Test func anOpenFloorSpreadsAsAFloorOfDoorsEverywhere() {
        let open = FloorModel(zones: quarters, receivers: receivers, model: model)
        let doors = FloorModel(
            zones: quarters, receivers: receivers, model: model, doors: [[Bool]](repeating: [Bool](repeating: true, count: 4), count: 4))
        var beliefs = [PositionBelief(floor: open), PositionBelief(floor: doors)]
        var scratch = PositionBelief.Scratch()
        for (index, floor) in [open, doors].enumerated() {
            for second in 0..<6 {
                let x = 1 + Double(second)
                for (receiver, at) in receivers.enumerated() {
                    beliefs[index].update(
                        receiver: receiver, rssi: rssi(at, x: x, y: 2), timeMicros: Int64(second) * 1_000_000, on: floor, scratch: &scratch)
                }
            }
        }
        let difference = zip(beliefs[0].cells, beliefs[1].cells).map { abs($0 - $1) }.max() ?? 0
        #expect(difference < 1e-6, "cells differ by \(difference)")
        let (a, b) = (beliefs[0].estimate(on: open), beliefs[1].estimate(on: doors))
        #expect(abs(a.x - b.x) < 1e-4 && abs(a.y - b.y) < 1e-4 && abs(a.spread - b.spread) < 1e-4, "\(a) against \(b)")
        #expect(a.x > 4 && a.x < 7, "\(a)")
    }

    @Test func aReadingOlderThanTheLastWeighsWithoutSpreading() {
        let floor = FloorModel(zones: quarters, receivers: receivers, model: model)
        var belief = PositionBelief(floor: floor)
        var scratch = PositionBelief.Scratch()
        belief.update(receiver: 0, rssi: rssi(receivers[0], x: 1, y: 1), timeMicros: 10_000_000, on: floor, scratch: &scratch)
        var late = belief
        late.update(receiver: 3, rssi: rssi(receivers[3], x: 1, y: 1), timeMicros: 9_000_000, on: floor, scratch: &scratch)
        var now = belief
        now.update(receiver: 3, rssi: rssi(receivers[3], x: 1, y: 1), timeMicros: 10_000_000, on: floor, scratch: &scratch)
        #expect(late.estimate(on: floor).x == now.estimate(on: floor).x)
    }

    /// A transmitter heard at (1, 1) by one receiver only, then by all four for the next seconds: with hindsight
    /// its position at the first moment is found, and narrower, once the seconds after it are in; a second older
    /// than the last added is not taken.
    @Test func hindsightFindsWhereTheTransmitterWasFromTheSecondsAfter() throws {
        let (floor, hindsightFloor) = floors()
        #expect(hindsightFloor.floor.cellCount == floor.cellCount / 4)
        var belief = PositionBelief(floor: floor)
        var scratch = PositionBelief.Scratch()
        var hindsight = PositionHindsight()
        #expect(hindsight.isEmpty)
        belief.update(receiver: 0, rssi: rssi(receivers[0], x: 1, y: 1), timeMicros: 10_000_000, on: floor, scratch: &scratch)
        hindsight.add([(0, rssi(receivers[0], x: 1, y: 1))], at: 10_000_000, belief: belief, on: hindsightFloor)
        hindsight.keep(at: 10_000_000)
        let before = belief.estimate(on: floor)
        // Readings far from (1, 1) of an earlier second are left out.
        hindsight.add([(3, rssi(receivers[3], x: 10, y: 8))], at: 9_000_000, belief: belief, on: hindsightFloor)
        var kept: [PositionHindsight.Kept] = []
        var givenAt: Int64?
        for second in Int64(11)...45 {
            let time = second * 1_000_000
            let readings = receivers.indices.map { ($0, rssi(receivers[$0], x: 1, y: 1)) }
            belief.update(readings: readings, timeMicros: time, on: floor, scratch: &scratch)
            hindsight.add(readings, at: time, belief: belief, on: hindsightFloor)
            kept += hindsight.take(final: false, on: hindsightFloor, scratch: &scratch)
            if givenAt == nil, !kept.isEmpty { givenAt = time }
        }
        // Given once the lag and a pass's seconds are in after it, and the line's seconds decided.
        #expect(givenAt == 10_000_000 + PositionHindsight.lagMicros + PositionHindsight.passMicros)
        let after = try #require(kept.first)
        #expect(kept.count == 1 && after.timeMicros == 10_000_000 && !hindsight.isEmpty)
        #expect(hypot(after.x - 1, after.y - 1) < 1 && hypot(after.x - 1, after.y - 1) < hypot(before.x - 1, before.y - 1) / 2, "\(after) against \(before)")
        #expect(after.spread < before.spread * 0.7, "\(after) against \(before)")
        #expect(after.shares[0] > 0.9, "\(after.shares)")
        #expect(hindsight.take(final: true, on: hindsightFloor, scratch: &scratch).isEmpty && hindsight.isEmpty)
    }

    /// A transmitter walking a straight line at 0.2 m/s, heard each second by the four receivers: every position
    /// asked for (one each 10 s) is given, the last ones when the walk ends, each within a cell of the hindsight's floor (1 m) of where the transmitter was.
    @Test func hindsightDrawsAWalkerOntoTheirLine() {
        let (floor, hindsightFloor) = floors()
        var belief = PositionBelief(floor: floor)
        var scratch = PositionBelief.Scratch()
        var hindsight = PositionHindsight()
        var kept: [PositionHindsight.Kept] = []
        func x(at second: Int64) -> Double { 2 + 0.2 * Double(second) }
        for second in Int64(0)...32 {
            let time = second * 1_000_000
            let readings = receivers.indices.map { ($0, rssi(receivers[$0], x: x(at: second), y: 2)) }
            belief.update(readings: readings, timeMicros: time, on: floor, scratch: &scratch)
            hindsight.add(readings, at: time, belief: belief, on: hindsightFloor)
            if second % 10 == 0 { hindsight.keep(at: time) }
            kept += hindsight.take(final: false, on: hindsightFloor, scratch: &scratch)
        }
        #expect(kept.map(\.timeMicros) == [0, 10_000_000])
        kept += hindsight.take(final: true, on: hindsightFloor, scratch: &scratch)
        #expect(kept.map(\.timeMicros) == [0, 10_000_000, 20_000_000, 30_000_000] && hindsight.isEmpty)
        for position in kept {
            let second = position.timeMicros / 1_000_000
            #expect(hypot(position.x - x(at: second), position.y - 2) < 0.75, "\(position) at \(x(at: second))")
        }
    }

    /// A walker crossing from one quarter into the next at 1 m/s, heard each second: asked three seconds after
    /// the crossing, the seconds with the readings after them date it within a second, nearer than the moment the
    /// live belief's shares turned.
    @Test func hindsightDatesACrossingNearerThanTheLiveBelief() throws {
        let (floor, hindsightFloor) = floors()
        var belief = PositionBelief(floor: floor)
        var scratch = PositionBelief.Scratch()
        var hindsight = PositionHindsight()
        // From x = 1.5 across the border (x = 5) at 3.5 s, along y = 2; readings 3 dB off, one way and the other in turn.
        let crossedMicros: Int64 = 3_500_000
        var liveTurned: Int64?
        var shares: [Double] = []
        for second in Int64(0)...7 {
            let time = second * 1_000_000
            let readings = receivers.indices.map { receiver in
                (receiver, rssi(receivers[receiver], x: 1.5 + Double(second), y: 2) + ((receiver + Int(second)) % 2 == 0 ? 3 : -3))
            }
            belief.update(readings: readings, timeMicros: time, on: floor, scratch: &scratch)
            hindsight.add(readings, at: time, belief: belief, on: hindsightFloor)
            belief.zoneProbabilities(on: floor, into: &shares)
            if liveTurned == nil, shares[2] > shares[0] { liveTurned = time }
        }
        let live = try #require(liveTurned)
        let crossing = try #require(hindsight.crossing(from: 0, to: 2, after: -1, on: hindsightFloor, scratch: &scratch))
        #expect(abs(crossing - crossedMicros) <= 1_000_000, "crossed at \(crossing), live at \(live)")
        #expect(abs(crossing - crossedMicros) < abs(live - crossedMicros), "crossed at \(crossing), live at \(live)")
        // Nothing waits after the last second; no second favoured the zone the move is from.
        #expect(hindsight.crossing(from: 0, to: 2, after: 7_000_000, on: hindsightFloor, scratch: &scratch) == nil)
        #expect(hindsight.crossing(from: 3, to: 2, after: 0, on: hindsightFloor, scratch: &scratch) == nil)
    }

    /// The line through the seconds around a position, taken at its moment: off the points' mean where the
    /// position is not at their middle, and through their scatter.
    @Test func theLineOfTheSecondsAroundAPositionIsTakenAtItsMoment() {
        // Seconds 3-17 along x = t and y = 2 - t / 2, x off by half a metre one way and the other in turn.
        let points = (3...17).map { (t: Int) -> (timeMicros: Int64, x: Double, y: Double) in
            let off = t % 2 == 0 ? 0.5 : -0.5
            return (Int64(t) * 1_000_000, Double(t) + off, 2 - Double(t) / 2)
        }
        let line = PositionHindsight.line(through: points, at: 15_000_000)
        #expect(abs(line.x - 15) < 0.1 && abs(line.y + 5.5) < 1e-9, "\(line)")
        let single = PositionHindsight.line(through: [(1_000_000, 4, 5)], at: 3_000_000)
        #expect(single.x == 4 && single.y == 5)
    }

    @Test func aLargeFloorGetsLargerCells() {
        let floor = FloorModel(zones: [[0, 0, 100, 50]], receivers: receivers, model: model)
        #expect(floor.cellCount <= FloorModel.maximumCells && floor.cellSize > 1.1 && floor.cellSize < 1.2, "\(floor.cellSize)")
    }

    @Test func theRadioModelIsFittedFromReadingsAtKnownDistances() {
        var samples: [RadioModel.Sample] = []
        for step in 1...200 {
            let distance = Double(step) / 10
            // Receiver 1 hears 3 dB more than receiver 0; noise of ±2 dB, alternating.
            samples.append(.init(receiver: 0, distance: distance, rssi: model.expected(distance: distance) + (step % 2 == 0 ? 2 : -2)))
            samples.append(.init(receiver: 1, distance: distance, rssi: model.expected(distance: distance) + 3 + (step % 2 == 0 ? -2 : 2)))
        }
        let (fitted, offsets) = RadioModel.fit(samples, receivers: 2)
        #expect(abs(fitted.exponent - 2) < 0.1 && abs(fitted.powerAt1mDbm + 58.5) < 0.5, "\(fitted)")
        #expect(abs(offsets[1] - offsets[0] - 3) < 0.1)
        #expect(fitted.sigmaDb >= 2 && fitted.sigmaDb < 2.1)
    }
}
