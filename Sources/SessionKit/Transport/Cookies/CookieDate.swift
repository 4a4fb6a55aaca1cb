import Foundation

/// The dates of a cookie's `Expires` attribute, read with RFC 6265 5.1.1's algorithm: the way browsers read them, not
/// HTTP's date grammar.
///
/// The value is cut into tokens at delimiters (anything but letters, digits, `:` and bytes outside printable ASCII);
/// the first token that reads as a time (`08:04:19`), a day of the month (`7`), a month (a token starting with `jan` …
/// `dec`, any case) and a year (two to four digits) gives each part, and the rest is ignored. So `Wed, 09-Jun-2121
/// 10:18:14 GMT`, `Wed Jun 9 10:18:14 2121` and `09 jun 21 10:18:14` are the same date. A two-digit year 70–99 is
/// 19xx, 00–69 is 20xx. Not a date: a part missing, a day outside 1–31 or one its month does not have, a year before
/// 1601, or a time past 23:59:59. An `Expires` that is not a date is ignored (the cookie lasts the session).
enum CookieDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        .map { Array($0.utf8) }

    /// The date `text` names, or nil.
    static func parse(_ text: String) -> Date? {
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        for token in tokens(of: Array(text.utf8)) {
            if time == nil, let found = self.time(token) {
                time = found
            } else if day == nil, let found = leadingNumber(token, digits: 1...2) {
                day = found
            } else if month == nil, let found = self.month(token) {
                month = found
            } else if year == nil, let found = leadingNumber(token, digits: 2...4) {
                year = found
            }
        }
        guard let time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        return HTTPDate.date(year: year, month: month, day: day, time: time, years: 1601...9999)
    }

    /// delimiter = %x09 / %x20-2F / %x3B-40 / %x5B-60 / %x7B-7E
    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte) || (0x5B...0x60).contains(byte)
            || (0x7B...0x7E).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    private static func tokens(of bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes.split(whereSeparator: isDelimiter)
    }

    /// The number the digits at the start of `token` write, and how many there are.
    private static func number(_ token: ArraySlice<UInt8>) -> (value: Int, digits: Int) {
        let digits = token.prefix(while: isDigit)
        // At most four digits are ever accepted: more are counted, not added up (no overflow).
        return (digits.prefix(4).reduce(0) { $0 * 10 + Int($1 - 0x30) }, digits.count)
    }

    /// A number of `digits` digits at the start of `token`, followed by its end or a non-digit.
    private static func leadingNumber(_ token: ArraySlice<UInt8>, digits: ClosedRange<Int>) -> Int? {
        let (value, count) = number(token)
        return digits.contains(count) ? value : nil
    }

    /// hms-time = time-field ":" time-field ":" time-field, each of one or two digits, then the token's end or a
    /// non-digit.
    private static func time(_ token: ArraySlice<UInt8>) -> (Int, Int, Int)? {
        var rest = token
        var fields: [Int] = []
        for index in 0..<3 {
            let (value, count) = number(rest)
            guard (1...2).contains(count) else { return nil }
            fields.append(value)
            rest = rest.dropFirst(count)
            if index < 2 {
                guard rest.first == UInt8(ascii: ":") else { return nil }
                rest = rest.dropFirst()
            }
        }
        return (fields[0], fields[1], fields[2])
    }

    /// A token whose first three letters name a month, without regard to case.
    private static func month(_ token: ArraySlice<UInt8>) -> Int? {
        guard token.count >= 3 else { return nil }
        let name = token.prefix(3).map(\.asciiLowercased)
        return months.firstIndex(of: name).map { $0 + 1 }
    }
}
