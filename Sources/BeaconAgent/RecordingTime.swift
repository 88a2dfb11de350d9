/// A recording's time column (docs/recordings.md): `time_s`, Unix seconds with a fraction to the microsecond,
/// `time_ms`, Unix milliseconds (as phones and many gateways log them), `time`, an ISO 8601 date and time with
/// its offset from UTC (`2021-08-03T16:54:12.227Z`, `2021-08-03 18:54:12.227+02:00`), or `time_utc`, one without
/// an offset, in UTC (`2021-08-03 16:54:12.227`, as many loggers write it). Under `time`, a time without an
/// offset is refused: it could be any of a day's zones. The ground truth beside a recording gives its times the
/// same ways.
/// Each case's raw value is its column's name.
public enum RecordingTime: String, Sendable, CaseIterable {
    case unixSeconds = "time_s"
    case unixMilliseconds = "time_ms"
    case iso8601 = "time"
    case iso8601UTC = "time_utc"

    /// Unix microseconds, or what is wrong with `text`.
    public func micros(_ text: Substring) throws(RecordingError) -> Int64 {
        switch self {
        case .unixSeconds:
            guard let seconds = RecordingColumns.decimal(text), seconds.isFinite, seconds >= 0, seconds < 1e11 else {
                throw RecordingError(line: 0, "time_s '\(text.prefix(80))' is no time in Unix seconds")
            }
            return Int64((seconds * 1_000_000).rounded())
        case .unixMilliseconds:
            guard let milliseconds = RecordingColumns.decimal(text), milliseconds.isFinite, milliseconds >= 0, milliseconds < 1e14 else {
                throw RecordingError(line: 0, "time_ms '\(text.prefix(80))' is no time in Unix milliseconds")
            }
            return Int64((milliseconds * 1_000).rounded())
        case .iso8601:
            guard let micros = Self.iso8601Micros(Array(text.utf8)) else {
                throw RecordingError(
                    line: 0,
                    "time '\(text.prefix(80))' is no ISO 8601 time with its offset, such as 2021-08-03T16:54:12.227Z or +02:00 "
                        + "(a column of times in UTC without one is named time_utc)")
            }
            return micros
        case .iso8601UTC:
            guard let micros = Self.iso8601Micros(Array(text.utf8), offsetRequired: false) else {
                throw RecordingError(line: 0, "time_utc '\(text.prefix(80))' is no ISO 8601 time in UTC, such as 2021-08-03 16:54:12.227")
            }
            return micros
        }
    }

    /// `YYYY-MM-DDThh:mm:ss[.f…](Z|±hh:mm|±hhmm)`, `T` or a space between the date and the time, a point or a comma
    /// before the fraction (ISO 8601 allows both), from 1970 on; without an offset (UTC) where it is not required.
    static func iso8601Micros(_ text: [UInt8], offsetRequired: Bool = true) -> Int64? {
        var index = 0
        func digits(_ count: Int) -> Int? {
            guard index + count <= text.count else { return nil }
            var value = 0
            for byte in text[index..<(index + count)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < text.count, characters.utf8.contains(text[index]) else { return false }
            index += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2), expect("T "),
            let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2),
            (1970...9999).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var micros = 0
        if index < text.count, text[index] == UInt8(ascii: ".") || text[index] == UInt8(ascii: ",") {
            index += 1
            var scale = 100_000
            let start = index
            while index < text.count, text[index] >= 0x30, text[index] <= 0x39 {
                micros += Int(text[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetMinutes = 0
        if expect("Zz") {
        } else if index < text.count, text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") {
            let sign = text[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = digits(2), hours < 24 else { return nil }
            _ = expect(":")
            guard let minutes = digits(2), minutes < 60 else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        } else if offsetRequired {
            return nil
        }
        guard index == text.count else { return nil }
        let seconds = daysSinceEpoch(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offsetMinutes * 60
        guard seconds >= 0 else { return nil }
        return Int64(seconds) * 1_000_000 + Int64(micros)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar: the years since counted in whole
    /// four-century cycles of 146,097 days, with March taken as the year's first month so that a leap day ends it.
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let marchYear = month <= 2 ? year - 1 : year
        let era = marchYear / 400
        let yearOfEra = marchYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
