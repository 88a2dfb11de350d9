import BeaconBatteries
import Foundation

/// A beacon's battery as the simulator plays it: a cell of a chemistry whose capacity, curve, sag in the cold and
/// charge per advert each differ from the chemistry's nominal figures as real cells and beacons do, discharged by
/// the beacon's adverts, its sleep current and self-discharge. What a TLM frame reports of it: the voltage during
/// a radio burst at the temperature of the moment. Pure; the simulator's truth for battery forecasts.
public struct SimulatedCell: Sendable {
    public let chemistry: BatteryChemistry
    /// This cell's capacity, mAh: the nominal ±10 %.
    public let capacityMilliampHours: Double
    /// Where its curve lies between the chemistry's published ones (0-1).
    let shape: Double
    /// Its sag against the chemistry's: at room temperature, and how fast it grows in the cold.
    let sagScale: Double
    let coldness: Double
    /// How its curve departs from the published ones besides: an offset, and a slow wave along its life, volts.
    let offsetVolts: Double
    let waveVolts: Double
    /// The charge one advert of this beacon really takes, µC: the nominal ±25 % (firmware, payload, hardware).
    public let chargePerAdvertMicrocoulombs: Double
    public let sleepMicroamps: Double
    /// Charge used so far, mAh.
    public private(set) var usedMilliampHours: Double

    /// A cell drawn for a beacon transmitting at `transmitPowerDbm`, with `chargeLeft` of its charge (a fleet's
    /// cells are of mixed ages).
    public init(chemistry: BatteryChemistry, transmitPowerDbm: Double, chargeLeft: Double, random: inout some RandomNumberGenerator) {
        self.chemistry = chemistry
        capacityMilliampHours = chemistry.nominalMilliampHours * Double.random(in: 0.9...1.1, using: &random)
        shape = Double.random(in: 0...1, using: &random)
        sagScale = Double.random(in: 0.7...1.3, using: &random)
        coldness = Double.random(in: 0.8...1.2, using: &random)
        offsetVolts = Double.random(in: -0.02...0.02, using: &random)
        waveVolts = Double.random(in: -0.015...0.015, using: &random)
        let nominal = BatteryDescription(chemistry: chemistry, transmitPowerDbm: transmitPowerDbm)
        chargePerAdvertMicrocoulombs = nominal.chargePerAdvertMicrocoulombs * Double.random(in: 0.75...1.25, using: &random)
        sleepMicroamps = BatteryDescription.sleepMicroamps * Double.random(in: 0.8...1.2, using: &random)
        usedMilliampHours = capacityMilliampHours * (1 - min(1, max(0, chargeLeft)))
    }

    /// The share of its charge left.
    public var chargeLeft: Double { max(0, 1 - usedMilliampHours / capacityMilliampHours) }

    /// `seconds` of use with `adverts` sent: their charge, the sleep current's and self-discharge.
    public mutating func use(seconds: Double, adverts: Double) {
        usedMilliampHours += adverts * chargePerAdvertMicrocoulombs / 3.6e6 + seconds * milliampHoursPerSecond(advertsPerSecond: 0)
    }

    /// The charge a second of use takes with `advertsPerSecond` sent, mAh: theirs, the sleep current's and
    /// self-discharge.
    public func milliampHoursPerSecond(advertsPerSecond: Double) -> Double {
        (advertsPerSecond * chargePerAdvertMicrocoulombs + sleepMicroamps) / 3.6e6
            + capacityMilliampHours * chemistry.selfDischargePerYear / (365 * 86_400)
    }

    /// The voltage during a radio burst at `celsius`, volts: what the beacon measures and reports.
    public func loadedVolts(celsius: Double) -> Double {
        let left = chargeLeft
        return chemistry.volts(chargeLeft: left, shape: shape) + offsetVolts + waveVolts * sin(3 * .pi * left) - chemistry.sag(celsius: celsius, chargeLeft: left, scale: sagScale, coldness: coldness)
    }

    /// Whether the beacon still runs at `celsius`: its loaded voltage above the cutoff.
    public func powers(celsius: Double) -> Bool { chargeLeft > 0 && loadedVolts(celsius: celsius) >= BatteryChemistry.cutoffVolts }
}
