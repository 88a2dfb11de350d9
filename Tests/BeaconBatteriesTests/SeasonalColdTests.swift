@testable import BeaconBatteries
import Foundation
import Testing

/// The season's course of the cold, learned from 4-hour minima, and what it does to an outdoor coin cell's days left.
@Suite struct SeasonalColdTests {
    /// The coldest reading of 4-hour bucket `bucket` at a place whose nights' lows run `mean ± amplitude` through the
    /// year, coldest on day `coldestDay`, with a daily cycle of ±`daily` on top.
    static func celsius(bucket: Int32, mean: Double = 2, amplitude: Double = 10, coldestDay: Double = 20, daily: Double = 6) -> Double {
        let day = Double(bucket) / 6
        return mean - amplitude * cos(2 * .pi * (day - coldestDay) / SeasonalCold.year) + daily * sin(2 * .pi * day)
    }

    @Test func aYearsCycleIsFoundFromTheReadingsOfAFewMonths() throws {
        var season = SeasonalCold()
        // From mid-summer (day 200 of a cycle coldest on day 20) to autumn: 120 days.
        let start = Int32(200 * 6)
        for bucket in start..<(start + 120 * 6) { season.add(bucket: bucket, celsius: Self.celsius(bucket: bucket)) }
        let course = try #require(season.course())
        #expect(abs(course.amplitude - 10) < 3, "\(course.amplitude)")
        // Sixty days on from day 320 the nights are colder by 10·(cos(60°·…)): the truth, within 2 °C.
        let now = 320.0
        let truth = Self.celsius(bucket: Int32(380 * 6), daily: 0) - Self.celsius(bucket: Int32(320 * 6), daily: 0)
        #expect(abs(course.shift(fromDay: now, days: 60) - truth) < 2, "\(course.shift(fromDay: now, days: 60)) against \(truth)")
        #expect(course.shiftRange(fromDay: now).contains(course.shift(fromDay: now, days: 60)))
    }

    @Test func aPlaceWithoutSeasonsHasNoCycleAndAFewDaysShowNone() throws {
        var indoors = SeasonalCold()
        for bucket in Int32(0)..<Int32(200 * 6) { indoors.add(bucket: bucket, celsius: Self.celsius(bucket: bucket, mean: 20, amplitude: 0, daily: 1.5)) }
        #expect(try #require(indoors.course()).amplitude < BatteryLife.seasonAmplitude)
        // Three days of a cooling week: the prior keeps the cycle small, not a year's swing read into three days.
        var brief = SeasonalCold()
        for bucket in Int32(300 * 6)..<Int32(303 * 6) { brief.add(bucket: bucket, celsius: 10 - Double(bucket - 300 * 6) / 6) }
        #expect(try #require(brief.course()).amplitude < 10)
        #expect(SeasonalCold().course() == nil)
        // Buckets come in order: an older one changes nothing.
        var ordered = indoors
        ordered.add(bucket: 5, celsius: -40)
        #expect(ordered == indoors)
    }

    /// An outdoor coin cell in autumn runs out sooner than the week's cold says: each week's nights are colder; in
    /// spring later. Indoors the season changes nothing.
    @Test func autumnBringsAnOutdoorCellsEndForwardAndSpringPutsItOff() throws {
        func daysLeft(fromDay startDay: Int, amplitude: Double) throws -> (forecast: Double, withoutSeason: Double) {
            var life = BatteryLife(description: BatteryDescription(chemistry: .cr2032))
            var used = 0.55 * 225
            var count = 0.0
            var uptime = 0.0
            // 150 days of hourly TLM, an advert a second at 10 µC.
            for hour in 0..<(150 * 24) {
                let bucketDay = Double(startDay) + Double(hour) / 24
                let celsius = Self.celsius(bucket: Int32(bucketDay * 6), amplitude: amplitude)
                used += (3600 * 10 + 3600 * BatteryDescription.sleepMicroamps) / 3.6e6
                count += 3600
                uptime += 3600
                let left = 1 - used / 225
                let chemistry = BatteryChemistry.cr2032
                let millivolts = ((chemistry.volts(chargeLeft: left) - chemistry.sag(celsius: celsius, chargeLeft: left)) * 1000).rounded()
                life.observe(
                    micros: Int64(bucketDay * 86_400) * 1_000_000, millivolts: millivolts, celsius: celsius,
                    advertisingCount: UInt32(count), uptimeSeconds: uptime)
            }
            let forecast = try #require(life.forecast())
            return (forecast.daysLeft, forecast.daysLeft - Double(life.seasonDays.k))
        }
        // 150 days from day 120 (summer) end on day 270: autumn, the coldest nights 115 days on.
        let autumn = try daysLeft(fromDay: 120, amplitude: 10)
        #expect(autumn.forecast < autumn.withoutSeason - 5, "\(autumn)")
        // From day 290 to day 440 (75 days past the coldest): spring, the nights warming.
        let spring = try daysLeft(fromDay: 290, amplitude: 10)
        #expect(spring.forecast > spring.withoutSeason + 5, "\(spring)")
        let indoors = try daysLeft(fromDay: 120, amplitude: 0)
        #expect(indoors.forecast == indoors.withoutSeason)
    }
}
