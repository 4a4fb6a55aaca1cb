import Foundation

/// HTTP dates (RFC 9110 5.6.7): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), read without a `DateFormatter` (one
/// costs more to create than a whole cached response does to serve).
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The date `text` names, or nil when it is not an HTTP date.
    static func parse(_ text: String) -> Date? {
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
                } else if year == nil {
                    // RFC 850's two-digit year: the century that puts it no more than 50 years ahead.
                    year = token.count == 2 ? (number >= 70 ? 1900 + number : 2000 + number) : number
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
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), year >= 1970
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(((days * 24 + hour) * 60 + minute) * 60 + second))
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
