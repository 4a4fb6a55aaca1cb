import Foundation

/// Reads XML and binary property lists with SessionKit's own bounded readers instead of Foundation's
/// `PropertyListSerialization`, which on Linux crashes on some binary inputs and leaks memory on every malformed
/// one (measured: about 600 bytes per failed parse). OpenStep ("old-style") property lists are refused: no HTTP
/// API sends them, and their parser is the leakiest.
enum PropertyListReader {
    /// Why bytes are not a property list SessionKit reads.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The object in `data`, an XML or binary property list.
    static func object(from data: Data) throws -> Any {
        if BinaryPropertyListReader.isBinaryPropertyList(data) {
            return try BinaryPropertyListReader.read(data)
        }
        guard looksLikeXML(data) else { throw Refusal("not an XML or binary property list") }
        do {
            return try XMLPropertyListReader.read(data)
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal("\(error)")
        }
    }

    /// Whether `data` starts, after an optional byte-order mark and white space, with `<`.
    private static func looksLikeXML(_ data: Data) -> Bool {
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        return bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "<")
    }
}

/// Reads an XML property list (`<plist><dict><key>…`) with a small tokenizer of its own.
///
/// Not `XMLParser`: on Linux it crashes on some inputs and leaks memory on every malformed document (measured by
/// fuzzing: the RSS of the fuzz target grew by about 1.6 KB per input through it). Property lists need a tiny part
/// of XML: elements without namespaces, text with the five named entities and character references, CDATA,
/// comments, processing instructions, and a `<!DOCTYPE>` without an internal subset. Everything else is refused.
struct XMLPropertyListReader {
    /// How deep arrays and dictionaries may nest.
    static let maximumDepth = NestingLimit.maximumDepth

    private typealias Refusal = PropertyListReader.Refusal

    private let bytes: [UInt8]
    private var index = 0

    private init(_ bytes: [UInt8]) {
        self.bytes = bytes
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
    }

    /// The top object of `data`.
    static func read(_ data: Data) throws -> Any {
        var reader = XMLPropertyListReader([UInt8](try XMLBody.utf8(data)))
        return try reader.document()
    }

    private struct Tag {
        let name: String
        let selfClosing: Bool
    }

    private mutating func document() throws -> Any {
        try skipMisc()
        let first = try startTag()
        let value: Any
        if first.name == "plist" {
            guard !first.selfClosing else { throw Refusal("empty <plist>") }
            try skipMisc()
            value = try self.value(try startTag())
            try skipMisc()
            try endTag("plist")
        } else {
            value = try self.value(first)
        }
        try skipMisc()
        guard index == bytes.count else { throw Refusal("content after the property list") }
        return value
    }

    /// A dictionary or array whose members are being read.
    private struct Container {
        let isArray: Bool
        var array: [Any] = []
        var dictionary: [String: Any] = [:]
        var key = ""
    }

    /// The value that starts with `tag`, its containers read with a stack of their own rather than by recursion, so
    /// that deep nesting cannot overflow the thread's stack.
    private mutating func value(_ first: Tag) throws -> Any {
        var open: [Container] = []
        var tag = first
        while true {
            var finished: Any?
            if (tag.name == "dict" || tag.name == "array") && !tag.selfClosing {
                guard open.count < Self.maximumDepth else {
                    throw Refusal("nested more deeply than \(Self.maximumDepth) levels")
                }
                open.append(Container(isArray: tag.name == "array"))
            } else {
                finished = try scalar(tag)
            }
            // Hands each finished value to its container, closing containers that end, until the next member starts.
            while true {
                if let value = finished {
                    guard !open.isEmpty else { return value }
                    let last = open.count - 1
                    if open[last].isArray {
                        open[last].array.append(value)
                    } else {
                        open[last].dictionary[open[last].key] = value
                    }
                    finished = nil
                }
                try skipMisc()
                let last = open.count - 1
                if open[last].isArray {
                    if try atEndTag("array") {
                        finished = open.removeLast().array
                        continue
                    }
                } else {
                    if try atEndTag("dict") {
                        finished = open.removeLast().dictionary
                        continue
                    }
                    let keyTag = try startTag()
                    guard keyTag.name == "key" else { throw Refusal("<\(keyTag.name)> where a <key> belongs") }
                    open[last].key = keyTag.selfClosing ? "" : try text(until: "key")
                    try skipMisc()
                }
                tag = try startTag()
                break
            }
        }
    }

    /// A value that holds no other: a string, number, Boolean, date or data, or an empty `<dict/>` or `<array/>`.
    private mutating func scalar(_ tag: Tag) throws -> Any {
        switch tag.name {
        case "dict":
            return [String: Any]()
        case "array":
            return [Any]()
        case "string":
            return tag.selfClosing ? "" : try text(until: "string")
        case "integer":
            let text = tag.selfClosing ? "" : try text(until: "integer")
            guard let integer = Self.integer(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw Refusal("bad <integer>")
            }
            return integer
        case "real":
            let text = tag.selfClosing ? "" : try text(until: "real")
            guard let real = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw Refusal("bad <real>")
            }
            return real
        case "true", "false":
            if !tag.selfClosing { try endTag(tag.name) }
            return tag.name == "true"
        case "date":
            let text = tag.selfClosing ? "" : try text(until: "date")
            guard let date = Self.date(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw Refusal("bad <date>")
            }
            return date
        case "data":
            // Base64 as writers lay it out, over lines and indented; only white space (`<data>\n</data>`) is no bytes.
            let text = (tag.selfClosing ? "" : try text(until: "data")).filter { !$0.isWhitespace }
            guard let data = text.isEmpty ? Data() : Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                throw Refusal("bad <data>")
            }
            return data
        default:
            throw Refusal("unknown element <\(tag.name)>")
        }
    }

    // MARK: - Tokens

    private func peek(_ literal: String) -> Bool {
        let utf8 = Array(literal.utf8)
        return bytes.count - index >= utf8.count && bytes[index..<index + utf8.count].elementsEqual(utf8)
    }

    /// Skips past the next occurrence of `literal`.
    private mutating func skip(past literal: String) throws {
        let utf8 = Array(literal.utf8)
        while index <= bytes.count - utf8.count {
            if bytes[index..<index + utf8.count].elementsEqual(utf8) {
                index += utf8.count
                return
            }
            index += 1
        }
        throw Refusal("unterminated construct, expected \(literal)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    /// Skips white space, comments, processing instructions and a DOCTYPE without an internal subset.
    private mutating func skipMisc() throws {
        while true {
            skipWhitespace()
            if peek("<?") {
                try skip(past: "?>")
            } else if peek("<!--") {
                try skip(past: "-->")
            } else if peek("<!DOCTYPE") {
                while index < bytes.count, bytes[index] != UInt8(ascii: ">") {
                    if bytes[index] == UInt8(ascii: "[") { throw Refusal("internal DTD subsets are not accepted") }
                    index += 1
                }
                guard index < bytes.count else { throw Refusal("unterminated DOCTYPE") }
                index += 1
            } else {
                return
            }
        }
    }

    private mutating func name() throws -> String {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            let isNameByte =
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: ":")
            guard isNameByte else { break }
            index += 1
        }
        guard index > start else { throw Refusal("expected a name") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// `<name attributes…>` or `<name …/>`; attributes are skipped.
    private mutating func startTag() throws -> Tag {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "<"), !peek("</") else {
            throw Refusal("expected an element")
        }
        index += 1
        let tagName = try name()
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw Refusal("unterminated tag") }
            if peek("/>") {
                index += 2
                return Tag(name: tagName, selfClosing: true)
            }
            if bytes[index] == UInt8(ascii: ">") {
                index += 1
                return Tag(name: tagName, selfClosing: false)
            }
            _ = try name()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else { throw Refusal("bad attribute") }
            index += 1
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                throw Refusal("bad attribute value")
            }
            let quote = bytes[index]
            index += 1
            while index < bytes.count, bytes[index] != quote { index += 1 }
            guard index < bytes.count else { throw Refusal("unterminated attribute") }
            index += 1
        }
    }

    private mutating func atEndTag(_ expected: String) throws -> Bool {
        guard peek("</") else { return false }
        try endTag(expected)
        return true
    }

    private mutating func endTag(_ expected: String) throws {
        guard peek("</") else { throw Refusal("expected </\(expected)>") }
        index += 2
        let found = try name()
        skipWhitespace()
        guard found == expected, index < bytes.count, bytes[index] == UInt8(ascii: ">") else {
            throw Refusal("expected </\(expected)>")
        }
        index += 1
    }

    /// Character data up to `</name>`, with entities, character references, CDATA and comments.
    private mutating func text(until endName: String) throws -> String {
        var result = [UInt8]()
        while index < bytes.count {
            if peek("</") {
                try endTag(endName)
                return String(decoding: result, as: UTF8.self)
            } else if peek("<![CDATA[") {
                index += 9
                let start = index
                try skip(past: "]]>")
                result += bytes[start..<index - 3]
            } else if peek("<!--") {
                try skip(past: "-->")
            } else if bytes[index] == UInt8(ascii: "<") {
                throw Refusal("an element inside <\(endName)>")
            } else if bytes[index] == UInt8(ascii: "&") {
                result += try entity()
            } else if bytes[index] == 0x0D {
                // XML's end-of-line handling (1.0 2.11): CR LF and a lone CR are LF (a `&#13;` stays a CR).
                result.append(0x0A)
                index += index + 1 < bytes.count && bytes[index + 1] == 0x0A ? 2 : 1
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        throw Refusal("unterminated <\(endName)>")
    }

    /// `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&apos;`, `&#NN;`, `&#xNN;` as UTF-8.
    private mutating func entity() throws -> [UInt8] {
        guard let end = bytes[index...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
            throw Refusal("bad entity")
        }
        let body = String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
        index = end + 1
        switch body {
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "amp": return [UInt8(ascii: "&")]
        case "quot": return [UInt8(ascii: "\"")]
        case "apos": return [UInt8(ascii: "'")]
        default:
            let value: UInt32?
            if body.hasPrefix("#x") || body.hasPrefix("#X") {
                value = UInt32(body.dropFirst(2), radix: 16)
            } else if body.hasPrefix("#") {
                value = UInt32(body.dropFirst(), radix: 10)
            } else {
                value = nil
            }
            guard let value, value != 0, let scalar = Unicode.Scalar(value) else {
                throw Refusal("bad entity &\(body);")
            }
            return Array(String(Character(scalar)).utf8)
        }
    }

    /// An `<integer>` as Foundation reads it: decimal or `0x` hexadecimal, signed within 64 bits, or unsigned up to
    /// 2^64 − 1 (a `UInt64` past `Int.max`, as writers that store unsigned numbers write them).
    private static func integer(_ text: String) -> Any? {
        let negative = text.hasPrefix("-")
        let unsigned = negative || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
        guard let first = unsigned.first, first != "+", first != "-" else { return nil }
        let isHex = unsigned.hasPrefix("0x") || unsigned.hasPrefix("0X")
        guard let magnitude = UInt64(isHex ? unsigned.dropFirst(2) : unsigned, radix: isHex ? 16 : 10) else {
            return nil
        }
        if negative {
            return magnitude <= UInt64(Int.max) + 1 ? Int(truncatingIfNeeded: 0 &- magnitude) : nil
        }
        return magnitude <= UInt64(Int.max) ? Int(magnitude) : magnitude
    }

    private static let dateLock = NSLock()
    // Guarded by dateLock: date(_:) is its only user and holds the lock.
    nonisolated(unsafe) private static let dateFormatter = ISO8601DateFormatter()

    /// A date as property lists write it, `2026-11-22T05:00:00Z`, on the proleptic Gregorian calendar as Foundation
    /// writes it (an `ISO8601DateFormatter` reads a date before 1582-10-15 on the Julian calendar, days off); another
    /// ISO 8601 form (a time zone offset) as the formatter reads it.
    static func date(_ text: String) -> Date? {
        if let date = gregorianDate(text) { return date }
        dateLock.lock()
        defer { dateLock.unlock() }
        return dateFormatter.date(from: text)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` on the proleptic Gregorian calendar, or nil.
    private static func gregorianDate(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        // YYYY-MM-DDTHH:MM:SSZ
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard bytes[range].allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return bytes[range].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        return HTTPDate.date(year: year, month: month, day: day, time: (hour, minute, second), years: 0...9999)
    }
}
