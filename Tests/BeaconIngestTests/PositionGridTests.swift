import AccuracyHarness
import Foundation
import Testing

/// The grid filter of positions, on readings made from its own model: it finds the transmitter and follows it.
@Suite struct PositionGridTests {
    let model = PositionGrid.RadioModel(powerAt1mDbm: -60, exponent: 2, sigmaDb: 4)
    let receivers = [
        PositionGrid.Receiver(x: 0, y: 0, z: 2), PositionGrid.Receiver(x: 10, y: 0, z: 2),
        PositionGrid.Receiver(x: 0, y: 8, z: 2), PositionGrid.Receiver(x: 10, y: 8, z: 2),
    ]

    func rssi(_ receiver: PositionGrid.Receiver, x: Double, y: Double) -> Double {
        model.expected(distance: ((receiver.x - x) * (receiver.x - x) + (receiver.y - y) * (receiver.y - y) + 1).squareRoot())
    }

    @Test func readingsOfAPlaceFindItAndAWalkIsFollowed() {
        var grid = PositionGrid(bounds: [0, 0, 10, 8], receivers: receivers, model: model)
        var time: Int64 = 0
        for _ in 0..<20 {
            for (index, receiver) in receivers.enumerated() {
                time += 50_000
                grid.update(receiver: index, rssi: rssi(receiver, x: 2.5, y: 6), timeMicros: time)
            }
        }
        #expect(abs(grid.estimate.x - 2.5) < 0.5 && abs(grid.estimate.y - 6) < 0.5, "\(grid.estimate)")
        #expect(grid.estimate.spread < 1.5)
        // The belief sums to one over the floor, most of it in the quarter that holds the place.
        #expect(abs(grid.probability(in: [0, 0, 10, 8]) - 1) < 1e-3)
        #expect(grid.probability(in: [0, 4, 5, 8]) > 0.9 && grid.probability(in: [5, 0, 10, 4]) < 0.01)
        // It walks to (8, 2) at 1 m/s; a few seconds after it arrives, the estimate is there too.
        for step in 0..<100 {
            let progress = min(1, Double(step) / 75)
            let (x, y) = (2.5 + 5.5 * progress, 6 - 4 * progress)
            for (index, receiver) in receivers.enumerated() {
                time += 25_000
                grid.update(receiver: index, rssi: rssi(receiver, x: x, y: y), timeMicros: time)
            }
        }
        #expect(abs(grid.estimate.x - 8) < 0.75 && abs(grid.estimate.y - 2) < 0.75, "\(grid.estimate)")
    }

    @Test func theRadioModelIsFittedFromReadingsAtKnownDistances() {
        var samples: [(receiver: Int, distance: Double, rssi: Double)] = []
        for step in 1...200 {
            let distance = Double(step) / 10
            // Receiver 1 hears 3 dB more than receiver 0; noise of ±2 dB, alternating.
            samples.append((0, distance, model.expected(distance: distance) + (step % 2 == 0 ? 2 : -2)))
            samples.append((1, distance, model.expected(distance: distance) + 3 + (step % 2 == 0 ? -2 : 2)))
        }
        let (fitted, offsets) = PositionGrid.RadioModel.fit(samples, receivers: 2)
        #expect(abs(fitted.exponent - 2) < 0.1 && abs(fitted.powerAt1mDbm + 58.5) < 0.5, "\(fitted)")
        #expect(abs(offsets[1] - offsets[0] - 3) < 0.1)
        #expect(fitted.sigmaDb >= 2 && fitted.sigmaDb < 2.1)
    }
}
