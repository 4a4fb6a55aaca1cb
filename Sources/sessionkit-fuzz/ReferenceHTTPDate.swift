import Foundation

/// A second reader of HTTP dates, written to be obviously correct rather than fast: RFC 9110 5.6.7's three grammars
/// as anchored regular expressions over ASCII matched without regard to case (RFC 9111 4.2), and Foundation's Gregorian
/// calendar in GMT for the arithmetic and the day's existence (a day name need not be the date's). The `date` fuzz target checks SessionKit's `HTTPDate` against it on every input.
enum ReferenceHTTPDate {
    private static let shortDays = "(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
    private static let longDays = "(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
    private static let months = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    private static let time = "([0-9]{2}):([0-9]{2}):([0-9]{2})"
    private static let imf = regex("\\A\(shortDays), ([0-9]{2}) \(months) ([0-9]{4}) \(time) GMT\\z")
    private static let rfc850 = regex(
        "\\A\(longDays), ([0-9]{2})-\(months)-([0-9]{2}) \(time) GMT\\z")
    private static let asctime = regex(
        "\\A\(shortDays) \(months) ([0-9]{2}| [0-9]) \(time) ([0-9]{4})\\z")

    private static func regex(_ pattern: String) -> NSRegularExpression? {
        try? NSRegularExpression(pattern: pattern, options: .caseInsensitive)
    }

    /// The date `text` names, or nil.
    static func parse(_ text: String, now: Date) -> Date? {
        let range = NSRange(text.startIndex..., in: text)
        func groups(_ expression: NSRegularExpression?) -> [String]? {
            guard let match = expression?.firstMatch(in: text, range: range) else { return nil }
            return (1..<match.numberOfRanges).map { index in
                Range(match.range(at: index), in: text).map { String(text[$0]) } ?? ""
            }
        }
        let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let fields:
            (weekday: String, day: String, month: String, year: Int?, hour: String, minute: String, second: String)
        if let g = groups(imf) {
            fields = (g[0], g[1], g[2], Int(g[3]), g[4], g[5], g[6])
        } else if let g = groups(rfc850) {
            guard let twoDigits = Int(g[3]) else { return nil }
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "GMT") ?? calendar.timeZone
            let current = calendar.component(.year, from: now)
            var year = current / 100 * 100 + twoDigits
            if year > current + 50 { year -= 100 }
            fields = (String(g[0].prefix(3)), g[1], g[2], year, g[4], g[5], g[6])
        } else if let g = groups(asctime) {
            fields = (g[0], g[2].trimmingCharacters(in: .whitespaces), g[1], Int(g[6]), g[3], g[4], g[5])
        } else {
            return nil
        }
        guard let year = fields.year, (1970...9999).contains(year), let day = Int(fields.day),
            let month = monthNames.firstIndex(where: { $0.caseInsensitiveCompare(fields.month) == .orderedSame }).map({
                $0 + 1
            }), let hour = Int(fields.hour),
            let minute = Int(fields.minute), let second = Int(fields.second), hour <= 23, minute <= 59, second <= 59
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        guard let gmt = TimeZone(identifier: "GMT") else { return nil }
        calendar.timeZone = gmt
        let components = DateComponents(
            calendar: calendar, timeZone: gmt, year: year, month: month, day: day, hour: hour, minute: minute,
            second: second)
        guard let date = calendar.date(from: components),
            calendar.component(.day, from: date) == day, calendar.component(.month, from: date) == month
        else { return nil }
        return date
    }
}
