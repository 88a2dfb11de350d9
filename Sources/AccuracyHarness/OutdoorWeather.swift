import Foundation

/// Outdoor temperatures as ten U.S. weather stations recorded them, a year of days from July 2014 to June 2015:
/// each day's lowest and highest reading (FiveThirtyEight's `us-weather-history`, from Weather Underground, CC BY
/// 4.0; docs/recordings.md), and a day's course between them. The year repeats after its last day.
struct OutdoorWeather: Sendable {
    /// A day's lowest and highest temperature, °C.
    struct Day: Sendable {
        var lowest: Double
        var highest: Double
    }

    /// The stations' ICAO codes, in the order of `days`.
    let stations: [String]
    let days: [[Day]]

    /// The recorded year, read from the records compiled into the harness.
    static let recorded = OutdoorWeather(csv: String(decoding: PackageResources.outdoor_weather_csv, as: UTF8.self))

    /// Reads `station,date,actual_min_temp,actual_max_temp` rows (°F), each station's days in order.
    init(csv: String) {
        var stations: [String] = []
        var days: [[Day]] = []
        for line in csv.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 4, let lowest = Double(fields[2]), let highest = Double(fields[3]) else { continue }
            let station = String(fields[0])
            if stations.last != station {
                stations.append(station)
                days.append([])
            }
            days[days.count - 1].append(Day(lowest: (lowest - 32) * 5 / 9, highest: (highest - 32) * 5 / 9))
        }
        self.stations = stations
        self.days = days
    }

    /// The temperature at `station` on `day` of its record (fractions are the time of day), °C: the day's lowest at
    /// 06:00 and highest at 15:00, a half cosine between each and the next.
    func celsius(station: Int, day: Double) -> Double {
        let record = days[station]
        let whole = Int(day.rounded(.down))
        let hour = (day - Double(whole)) * 24
        func on(_ index: Int) -> Day { record[((index % record.count) + record.count) % record.count] }
        let (from, to, progress): (Double, Double, Double)
        if hour < 6 {
            (from, to, progress) = (on(whole - 1).highest, on(whole).lowest, (hour + 9) / 15)
        } else if hour < 15 {
            (from, to, progress) = (on(whole).lowest, on(whole).highest, (hour - 6) / 9)
        } else {
            (from, to, progress) = (on(whole).highest, on(whole + 1).lowest, (hour - 15) / 15)
        }
        return from + (to - from) * (1 - cos(.pi * progress)) / 2
    }
}
