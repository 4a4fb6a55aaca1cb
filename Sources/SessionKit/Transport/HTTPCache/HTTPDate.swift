import Foundation

/// HTTP dates (RFC 9110 5.6.7), read as the RFC's grammar writes them and nothing else: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`), without a `DateFormatter` (one costs more to create than a whole cached response does
/// to serve).
///
/// Names are matched without regard to case (`THU`, `AUG`, `gmt`), as RFC 9111 4.2 asks of a cache, and a day name
/// need not be the date's (a wrong one is the sender's slip; browsers read such dates too). Anything else is not a
/// date: another time zone, a missing comma, doubled spaces, dashes in IMF-fixdate, a one-digit hour, a two-digit year
/// outside the RFC 850 form, a word that is not a day name, or a day the month does not have. A cache reads an
/// `Expires` that is not a date as already expired (RFC 9111 5.3). Every date accepted prints back as the IMF-fixdate
/// it names (``format(_:)``).
enum HTTPDate {
    private static let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ].map { Array($0.utf8) }
    /// Day names from Monday, as RFC 9110 spells them, short and long.
    private static let shortDays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].map { Array($0.utf8) }
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"].map {
        Array($0.utf8)
    }

    /// The date `text` names, or nil when it is not an HTTP date (or names a year outside 1970…9999).
    ///
    /// - Parameters:
    ///   - text: A field value, without surrounding whitespace beyond what the field's own parsing removed.
    ///   - now: The present, which places an RFC 850 two-digit year (RFC 9110 5.6.7).
    static func parse(_ text: String, now: Date = Date()) -> Date? {
        var reader = Reader(bytes: Array(text.utf8))
        if reader.name(in: shortDays) != nil {
            if reader.take(",") {
                // IMF-fixdate: day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
                guard reader.take(" "), let day = reader.digits(2), reader.take(" "), let month = reader.month(),
                    reader.take(" "), let year = reader.digits(4), reader.take(" "), let time = reader.time(),
                    reader.take(" GMT"), reader.atEnd
                else { return nil }
                return date(year: year, month: month, day: day, time: time)
            }
            // asctime-date: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT
            guard reader.take(" "), let month = reader.month(), reader.take(" ") else { return nil }
            // date3 = month SP ( 2DIGIT / ( SP DIGIT ) )
            let day = reader.take(" ") ? reader.digits(1) : reader.digits(2)
            guard let day, reader.take(" "), let time = reader.time(), reader.take(" "), let year = reader.digits(4),
                reader.atEnd
            else { return nil }
            return date(year: year, month: month, day: day, time: time)
        }
        // rfc850-date: day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
        guard reader.name(in: longDays) != nil, reader.take(", "), let day = reader.digits(2), reader.take("-"),
            let month = reader.month(), reader.take("-"), let twoDigits = reader.digits(2), reader.take(" "),
            let time = reader.time(), reader.take(" GMT"), reader.atEnd
        else { return nil }
        return date(year: fullYear(twoDigits: twoDigits, now: now), month: month, day: day, time: time)
    }

    /// `date` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP sends.
    static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let (year, month, day) = civil(fromDays: days)
        let second = seconds - days * 86_400
        let weekday = ((days % 7) + 10) % 7  // 1970-01-01 was a Thursday (3, from Monday)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let name = String(decoding: shortDays[weekday], as: UTF8.self)
        let monthName = String(decoding: months[month - 1], as: UTF8.self)
        let time = "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))"
        return "\(name), \(two(day)) \(monthName) \(year) \(time) GMT"
    }

    /// The date, if the day exists in its month and the year is within `years` (1970…9999 for HTTP); times past
    /// 23:59:59 are not times. On the proleptic Gregorian calendar, in UTC: the one calendar of HTTP, cookie and
    /// property-list dates.
    static func date(
        year: Int, month: Int, day: Int, time: (Int, Int, Int), years: ClosedRange<Int> = 1970...9999
    ) -> Date? {
        let (hour, minute, second) = time
        guard years.contains(year), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            hour <= 23, minute <= 59, second <= 59
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(((days * 24 + hour) * 60 + minute) * 60 + second))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// RFC 850's two-digit year (RFC 9110 5.6.7): in the current century, unless that puts it more than 50 years
    /// ahead, then in the one before.
    private static func fullYear(twoDigits: Int, now: Date) -> Int {
        let current = civil(fromDays: Int(now.timeIntervalSince1970 / 86_400)).year
        let century = current / 100 * 100
        let candidate = century + twoDigits
        return candidate > current + 50 ? candidate - 100 : candidate
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The calendar date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Reads a date's bytes left to right.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        /// Consumes `literal` if the bytes continue with it (letters in any case).
        mutating func take(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            let matches = literal.withUTF8Buffer { literal in
                (0..<count).allSatisfy { bytes[index + $0].asciiLowercased == literal[$0].asciiLowercased }
            }
            if matches { index += count }
            return matches
        }

        /// Exactly `count` digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - index >= count else { return nil }
            var value = 0
            for offset in 0..<count {
                let byte = bytes[index + offset]
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }

        /// `2DIGIT ":" 2DIGIT ":" 2DIGIT`.
        mutating func time() -> (Int, Int, Int)? {
            guard let hour = digits(2), take(":"), let minute = digits(2), take(":"), let second = digits(2) else {
                return nil
            }
            return (hour, minute, second)
        }

        /// A month's three-letter name, in any case: 1…12.
        mutating func month() -> Int? {
            name(in: HTTPDate.months).map { $0 + 1 }
        }

        /// The index of the name in `names` the bytes continue with (the longest such; letters in any case), consumed.
        mutating func name(in names: [[UInt8]]) -> Int? {
            var found: (index: Int, length: Int)?
            for (position, name) in names.enumerated() where bytes.count - index >= name.count {
                let matches = bytes[index..<index + name.count].lazy.map(\.asciiLowercased).elementsEqual(
                    name.lazy.map(\.asciiLowercased))
                if matches, name.count > (found?.length ?? 0) {
                    found = (position, name.count)
                }
            }
            guard let found else { return nil }
            // A short day name followed by more letters is a long one or nothing: "Sunday" is not "Sun" + "day".
            if found.length == 3, bytes.count > index + 3, (0x61...0x7A).contains(bytes[index + 3].asciiLowercased) {
                return nil
            }
            index += found.length
            return found.index
        }
    }
}
