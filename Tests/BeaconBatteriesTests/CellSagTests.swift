import Foundation
import Testing

@testable import BeaconBatteries

@Suite struct CellSagTests {
    /// A coin cell outdoors, read once an hour for a week through a day's swing of 12 °C at a steady charge, as a
    /// TLM reports it (whole millivolts).
    static func week(scale: Double, coldness: Double, chargeLeft: Double = 0.4) -> CellSag {
        let chemistry = BatteryChemistry.cr2032
        var sag = CellSag()
        func reading(_ hour: Int) -> (volts: Double, celsius: Double) {
            let celsius = -2 + 6 * sin(Double(hour) * 2 * .pi / 24)
            let loaded = chemistry.volts(chargeLeft: chargeLeft)
                - chemistry.sag(celsius: celsius, chargeLeft: chargeLeft, scale: scale, coldness: coldness)
            return ((loaded * 1000).rounded() / 1000, celsius)
        }
        for hour in 1..<(7 * 24) {
            sag.add(from: reading(hour - 1), to: reading(hour), chemistry: chemistry, chargeLeft: chargeLeft)
        }
        return sag
    }

    /// The sag over the week's temperatures within 5 % of the cell's, and its growth in the cold within 0.08 (a
    /// cell's scale and growth trade against each other over a narrow range of temperatures; the sag is what counts).
    @Test(arguments: [(1.3, 1.2), (0.7, 0.8), (1.0, 1.0), (1.2, 0.85)])
    func aWeekOfDaysAndNightsShowsTheCellsOwnSag(scale: Double, coldness: Double) {
        let chemistry = BatteryChemistry.cr2032
        let fitted = Self.week(scale: scale, coldness: coldness).fitted
        for celsius in [-8.0, -2, 4] {
            let truth = chemistry.sag(celsius: celsius, chargeLeft: 0.4, scale: scale, coldness: coldness)
            let learned = chemistry.sag(celsius: celsius, chargeLeft: 0.4, scale: fitted.scale, coldness: fitted.coldness)
            #expect(abs(learned - truth) / truth < 0.05, "at \(celsius) °C: \(learned) V against \(truth) V, \(fitted)")
        }
        #expect(abs(fitted.coldness - coldness) < 0.08, "\(fitted)")
    }

    /// What the cell's own sag is for: the coldest night it carries. A cell sagging a third more than its
    /// chemistry's figure and growing a fifth faster in the cold stops some degrees warmer than the chemistry says.
    @Test func theColdestNightCarriedFollowsTheCellsOwnSag() {
        let chemistry = BatteryChemistry.cr2032
        let fitted = Self.week(scale: 1.3, coldness: 1.2).fitted
        let truth = chemistry.coldestCarried(chargeLeft: 0.4, scale: 1.3, coldness: 1.2)
        let learned = chemistry.coldestCarried(chargeLeft: 0.4, scale: fitted.scale, coldness: fitted.coldness)
        let chemistrys = chemistry.coldestCarried(chargeLeft: 0.4)
        #expect(abs(learned - truth) < 1.5, "learned \(learned) °C, truth \(truth) °C")
        #expect(chemistrys < truth - 4, "the chemistry's figure \(chemistrys) °C, truth \(truth) °C")
    }

    @Test func withoutPairsTheChemistrysFigureStands() {
        let sag = CellSag()
        #expect(sag.fitted == (1, 1))
        var still = CellSag()
        // Readings at one temperature tell nothing of the sag.
        still.add(from: (2.9, 20), to: (2.9, 20), chemistry: .cr2032, chargeLeft: 0.5)
        #expect(still.fitted == (1, 1))
        #expect(CellSag(sums: [1, 2, 3]) == nil)
        #expect(CellSag(sums: [1, 2, 3, 4, .nan]) == nil)
    }
}
