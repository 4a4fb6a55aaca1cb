import Foundation

/// The lines of a response head as libcurl hands them to the header callback, one at a time, read as RFC 9112 writes
/// them: a status line (``StatusLine``), field lines `name: value` (RFC 9112 5), obsolete line folding (5.2), and the
/// blank line that ends the head. Pure and I/O-free, so that it is fuzzed as it runs.
///
/// What is not HTTP fails the response rather than being dropped silently: a status line that is not one, a field
/// line before the status line, a field name that is not a token (whitespace before the colon included: RFC 9112 5.1
/// calls it a past source of response splitting), a line without a colon, a fold with nothing to continue. CR, LF
/// and NUL inside a value are replaced with a space (RFC 9110 5.5).
struct ResponseHeadParser {
    /// What one line was.
    enum Outcome: Equatable {
        /// A status line: a head starts (the first, or the next after a 1xx or an authentication round).
        case status(StatusLine)
        /// A field line (or a fold of the last one): the field as it now stands.
        case field(name: String, value: String)
        /// The blank line that ends the head.
        case end
        /// Not HTTP: the response fails with this reason.
        case malformed(String)
    }

    /// What a line is on its own, without a head around it (a trailer line after the body is one too).
    enum FieldLine: Equatable {
        case field(name: String, value: String)
        /// An obsolete fold: more of the previous field's value.
        case fold(String)
        case blank
        case invalid(String)
    }

    /// The status line of the head being read; nil before one.
    private(set) var status: StatusLine?
    /// The fields of the head being read, in order, as received (a repeated field kept apart).
    private(set) var fields: [(String, String)] = []

    /// Reads one line (with or without its CRLF).
    mutating func read(_ line: UnsafeRawBufferPointer) -> Outcome {
        if line.starts(with: Self.statusLinePrefix) {
            guard let status = StatusLine(line) else {
                return .malformed("the status line is not HTTP's: \"\(Self.excerpt(line))\"")
            }
            self.status = status
            // One allocation for a usual head, rather than one per doubling.
            fields = []
            fields.reserveCapacity(16)
            return .status(status)
        }
        switch Self.fieldLine(line) {
        case .blank:
            return status == nil ? .malformed("a head without a status line") : .end
        case .invalid(let reason):
            return .malformed(reason)
        case .field(let name, let value):
            guard status != nil else { return .malformed("a field line before the status line") }
            fields.append((name, value))
            return .field(name: name, value: value)
        case .fold(let more):
            // RFC 9112 5.2: a user agent replaces each obs-fold with a space.
            guard status != nil, let last = fields.popLast() else {
                return .malformed("a folded line with no field to continue")
            }
            let value = last.1.isEmpty ? more : more.isEmpty ? last.1 : last.1 + " " + more
            fields.append((last.0, value))
            return .field(name: last.0, value: value)
        }
    }

    /// Reads `line` as a field line, a fold, or the blank line.
    static func fieldLine(_ line: UnsafeRawBufferPointer) -> FieldLine {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if end == 0 { return .blank }
        if line[0] == 0x20 || line[0] == 0x09 { return .fold(value(of: line, from: 0, to: end)) }
        // One pass finds the colon and checks the name's bytes.
        var colon = 0
        var nameIsToken = true
        while colon < end {
            let byte = line[colon]
            if byte == UInt8(ascii: ":") { break }
            if !isTokenByte(byte) { nameIsToken = false }
            colon += 1
        }
        guard colon < end else {
            return .invalid("a head line without a colon: \"\(excerpt(line))\"")
        }
        guard colon > 0, nameIsToken else {
            return .invalid("a field name that is not a token: \"\(excerpt(line))\"")
        }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<colon]), as: UTF8.self)
        return .field(name: name, value: value(of: line, from: colon + 1, to: end))
    }

    /// The value between `start` and `end`: CR, LF and NUL replaced with a space, then without surrounding whitespace.
    private static func value(of line: UnsafeRawBufferPointer, from start: Int, to end: Int) -> String {
        func isBlank(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A || byte == 0
        }
        var start = start
        var end = end
        while start < end, isBlank(line[start]) { start += 1 }
        while end > start, isBlank(line[end - 1]) { end -= 1 }
        let bytes = line[start..<end]
        guard bytes.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes), as: UTF8.self)
        }
        return String(decoding: bytes.map { $0 == 0x0D || $0 == 0x0A || $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
    }

    /// RFC 9110 5.6.2's tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    /// The start of `line` for an error message (printable ASCII, at most 80 bytes).
    private static func excerpt(_ line: UnsafeRawBufferPointer) -> String {
        let text = line.prefix { $0 != 0x0D && $0 != 0x0A }.prefix(80)
        return String(decoding: text.map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
            .trimmingCharacters(in: .whitespaces)
    }

    private static let statusLinePrefix = Array("HTTP/".utf8)
}
