import Foundation

/// HTTP dates (RFC 9110 5.6.7): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), read without a `DateFormatter` (one
/// costs more to create than a whole cached response does to serve).
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The date `text` names, or nil when it is not an HTTP date (or names a year outside 1970…9999: a hostile year
    /// would overflow the arithmetic).
    static func parse(_ text: String, now: Date = Date()) -> Date? {
        var day: Int?
        var month: Int?
        var year: Int?
        var time: (Int, Int, Int)?
        let separators = CharacterSet(charactersIn: " ,-\t")
        for token in text.components(separatedBy: separators) where !token.isEmpty {
            if token.contains(":") {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3, time == nil else { return nil }
                time = (parts[0], parts[1], parts[2])
            } else if let number = Int(token) {
                if day == nil, token.count <= 2 {
                    day = number
                } else if year == nil, token.count <= 4 {
                    year = token.count == 2 ? fullYear(twoDigits: number, now: now) : number
                } else {
                    return nil
                }
            } else if month == nil, let index = months.firstIndex(of: String(token.prefix(3)).lowercased()),
                token.count == 3
            {
                month = index + 1
            }
        }
        guard let day, let month, let year, let (hour, minute, second) = time, (1...31).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), (1970...9999).contains(year)
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(((days * 24 + hour) * 60 + minute) * 60 + second))
    }

    /// RFC 850's two-digit year (RFC 9110 5.6.7): in the current century, unless that puts it more than 50 years
    /// ahead, then in the one before.
    private static func fullYear(twoDigits: Int, now: Date) -> Int {
        let current = 1970 + Int(now.timeIntervalSince1970 / 31_556_952)  // close enough to tell 50 years
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
}
