import BeaconPositions
import Foundation
import Testing

/// The radio map: what a calibration walk measured above the model, place by place.
@Suite struct RadioMapTests {
    /// A walk along y = 2 from x = 0 to 10: receiver "a" hears 6 dB above the model from x = 5 on, "b" as the model
    /// says throughout.
    func walk() -> [RadioMap.Sample] {
        stride(from: 0.0, through: 10, by: 0.1).flatMap { x in
            [RadioMap.Sample(receiver: "a", x: x, y: 2, residualDb: x >= 5 ? 6 : 0), RadioMap.Sample(receiver: "b", x: x, y: 2, residualDb: 0)]
        }
    }

    @Test func aWalksResidualsAreKeptWhereItWentAndNowhereElse() {
        let map = RadioMap.fit(walk())
        #expect(map.receivers == ["a", "b"])
        // Most of the 6 dB well inside the louder stretch, nothing well before it, half-way at its edge.
        #expect(map.correction(receiver: "a", x: 8, y: 2) > 5, "\(map.correction(receiver: "a", x: 8, y: 2))")
        #expect(abs(map.correction(receiver: "a", x: 2, y: 2)) < 0.1)
        #expect(abs(map.correction(receiver: "a", x: 5, y: 2) - 3) < 1)
        #expect(abs(map.correction(receiver: "b", x: 8, y: 2)) < 0.01)
        // Far from the walk, and for a receiver it never heard, the model alone holds.
        #expect(map.correction(receiver: "a", x: 8, y: 7) == 0 && map.correction(receiver: "c", x: 8, y: 2) == 0)
        // A few readings move a point less than many: shrunk towards nothing.
        let sparse = RadioMap.fit([RadioMap.Sample(receiver: "a", x: 8, y: 2, residualDb: 6)])
        #expect(sparse.correction(receiver: "a", x: 8, y: 2) > 0 && sparse.correction(receiver: "a", x: 8, y: 2) < 2)
    }

    /// How much of a zone the walk came near enough to correct: the walk along y = 2 reaches 2 m either side of it
    /// (y 0-4: 9 of the 17 rows of points of a zone from y = 0 to 8).
    @Test func theMapsReachOverAZoneIsTheShareOfItsPointsTheWalkCameNear() {
        let map = RadioMap.fit(walk())
        #expect(map.reach(over: [0, 1, 10, 3]) == 1)
        #expect(abs(map.reach(over: [0, 0, 10, 8]) - 9.0 / 17) < 1e-9, "\(map.reach(over: [0, 0, 10, 8]))")
        #expect(map.reach(over: [0, 5, 10, 8]) == 0)
        // Not a rect, or one between the points.
        #expect(map.reach(over: [0, 0, 10]) == 0 && map.reach(over: [3.1, 3.1, 3.3, 3.3]) == 0)
    }

    @Test func theMapIsWrittenAndReadAsText() throws {
        let map = RadioMap.fit(walk())
        let text = map.csv
        #expect(text.hasPrefix("receiver,x_m,y_m,correction_db\na,") && !text.contains("-0.0"))
        let read = try RadioMap(csv: text)
        #expect(read.receivers == map.receivers)
        #expect(abs(read.correction(receiver: "a", x: 8, y: 2) - map.correction(receiver: "a", x: 8, y: 2)) <= 0.05)
        #expect(read.csv == text)
        // What cannot be read is named with its line.
        let header = #expect(throws: RadioMapError.self) { try RadioMap(csv: "receiver,x,y\n") }
        #expect(header?.line == 1)
        let line = #expect(throws: RadioMapError.self) { try RadioMap(csv: "receiver,x_m,y_m,correction_db\na,1,2,3\na,1,two,3\n") }
        #expect(line?.line == 3 && line?.description.contains("'a,1,two,3'") == true, "\(String(describing: line))")
        #expect(throws: RadioMapError.self) { try RadioMap(csv: "receiver,x_m,y_m,correction_db\na,1,2,300\n") }
    }

    /// A receiver that hears 8 dB above the model over half the floor: with the map the filter finds a transmitter
    /// there; with the model alone it is pulled towards that receiver.
    @Test func theFilterFindsATransmitterWhereTheMapCorrectsTheModel() {
        let model = RadioModel(powerAt1mDbm: -60, exponent: 2, sigmaDb: 3)
        let places = [(0.0, 0.0), (10.0, 0.0), (0.0, 8.0), (10.0, 8.0)]
        let receivers = places.enumerated().map { FloorModel.Receiver(x: $1.0, y: $1.1, id: "r\($0)") }
        func heard(_ receiver: Int, x: Double, y: Double) -> Double {
            let (rx, ry) = places[receiver]
            let distance = ((x - rx) * (x - rx) + (y - ry) * (y - ry)).squareRoot()
            return model.expected(distance: distance) + (receiver == 1 && x >= 5 ? 8 : 0)
        }
        var samples: [RadioMap.Sample] = []
        for x in stride(from: 0.5, through: 9.5, by: 0.5) {
            for y in stride(from: 0.5, through: 7.5, by: 0.5) {
                for receiver in 0..<4 {
                    samples.append(.init(receiver: "r\(receiver)", x: x, y: y, residualDb: heard(receiver, x: x, y: y) - model.expected(distance: ((x - places[receiver].0) * (x - places[receiver].0) + (y - places[receiver].1) * (y - places[receiver].1)).squareRoot())))
                }
            }
        }
        let map = RadioMap.fit(samples)
        var errors: [Double] = []
        for withMap in [false, true] {
            let floor = FloorModel(zones: [[0, 0, 10, 8]], receivers: receivers, model: model, map: withMap ? map : nil)
            var belief = PositionBelief(floor: floor)
            var scratch = PositionBelief.Scratch()
            for _ in 0..<10 {
                for receiver in 0..<4 {
                    belief.update(receiver: receiver, rssi: heard(receiver, x: 7, y: 5), timeMicros: 1_000_000, on: floor, scratch: &scratch)
                }
            }
            let found = belief.estimate(on: floor)
            errors.append(((found.x - 7) * (found.x - 7) + (found.y - 5) * (found.y - 5)).squareRoot())
        }
        #expect(errors[1] < 0.6 && errors[0] > 2 * errors[1], "\(errors)")
    }
}
