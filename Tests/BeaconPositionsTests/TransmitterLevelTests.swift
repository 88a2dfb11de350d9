@testable import BeaconPositions
import Testing

/// A transmitter heard louder or quieter than the site's model at every receiver: its level learned from its own
/// readings, as the ingest moves a beacon's belief (on the floor of `PositionBeliefTests`, a fifth receiver in its
/// middle).
extension PositionBeliefTests {
    /// Seconds of a transmitter `louderDb` above the model walking from (2, 6) to (8, 2), each heard by `heardBy`
    /// receivers; with `learning`, its level learned as the ingest learns it. The estimate's mean error over the
    /// walk's second half, and the level at the end.
    func walk(louderDb: Double, heardBy: Int, learning: Bool) -> (error: Double, level: Double) {
        let receivers = self.receivers + [FloorModel.Receiver(x: 5, y: 4, z: 2.2)]
        let floor = FloorModel(zones: [[0, 0, 10, 8]], receivers: receivers, model: model)
        var belief = PositionBelief(floor: floor)
        var level = TransmitterLevel()
        var scratch = PositionBelief.Scratch()
        var errors: [Double] = []
        for second in 0..<90 {
            let progress = Double(second) / 89
            let (x, y) = (2 + 6 * progress, 6 - 4 * progress)
            // Fades that the model's noise allows, the same each run.
            let readings = receivers.prefix(heardBy).enumerated().map { index, receiver in
                (receiver: index, rssi: rssi(receiver, x: x, y: y) + louderDb + Double((second * 7 + index * 3) % 9 - 4) - level.offsetDb)
            }
            belief.update(readings: readings, timeMicros: Int64(second) * 1_000_000, on: floor, scratch: &scratch)
            if learning, let excess = belief.excessLevel(of: readings, on: floor) {
                level.learn(excessDb: excess, receivers: readings.count)
            }
            let estimate = belief.estimate(on: floor)
            if second >= 45 { errors.append(((estimate.x - x) * (estimate.x - x) + (estimate.y - y) * (estimate.y - y)).squareRoot()) }
        }
        return (errors.reduce(0, +) / Double(errors.count), level.offsetDb)
    }

    @Test func aLouderOrQuieterTransmitterIsPlacedOnceItsLevelIsLearned() {
        for louder in [12.0, -15.0] {
            let fixed = walk(louderDb: louder, heardBy: 5, learning: false)
            let learned = walk(louderDb: louder, heardBy: 5, learning: true)
            // The site's model alone reads a louder transmitter as near every receiver, a quieter one as far from
            // all: the estimate is pulled off; with its level learned it follows the walk.
            #expect(fixed.error > 0.9, "\(louder): \(fixed)")
            #expect(learned.error < 0.6 && learned.error < fixed.error / 2, "\(louder): \(learned) against \(fixed)")
            #expect(abs(learned.level - louder) < 2, "\(louder): \(learned.level)")
        }
        // A transmitter as loud as the model keeps a level near none.
        #expect(abs(walk(louderDb: 0, heardBy: 5, learning: true).level) < 1)
    }

    @Test func secondsHeardByThreeReceiversAndNonsenseDoNotMoveTheLevel() {
        // Three readings fit a nearer place as well as a louder level: such seconds teach nothing.
        #expect(walk(louderDb: 12, heardBy: 3, learning: true).level == 0)
        var level = TransmitterLevel()
        level.learn(excessDb: .nan, receivers: 6)
        level.learn(excessDb: .infinity, receivers: 6)
        #expect(level.offsetDb == 0)
        // The first seconds move it by a sixth, then less; never past the bound.
        level.learn(excessDb: 6, receivers: 4)
        #expect(abs(level.offsetDb - 1) < 1e-9)
        for _ in 0..<1_000 { level.learn(excessDb: 100, receivers: 6) }
        #expect(level.offsetDb == TransmitterLevel.boundDb)
    }
}
