import Foundation

/// Prepares an XML body for `XMLParser`.
///
/// `XMLParser` on Linux stops the process on inputs that libxml2 accepts (both found by `make fuzz`, inputs kept
/// in `Fuzz/regressions/plist/`): an element name that is not valid UTF-8, which a broken encoding declaration
/// lets through, and a processing instruction without data (`<?x?>`, a null pointer read). Its handlers for
/// declarations inside a DTD read optional C strings the same way. So the parser only ever sees UTF-8 without
/// those constructs: a body that is valid UTF-8 goes through unchanged; one in another encoding it declares
/// (`ISO-8859-1`, `UTF-16` with a byte-order mark, …) is converted, its declaration rewritten; a body with an empty
/// processing instruction or an internal DTD subset (`<!DOCTYPE x [ … ]>`) is refused, as is anything else that
/// is not text. A `<!DOCTYPE …>` without an internal subset, as property lists carry, is fine.
enum XMLBody {
    /// Why a body cannot be parsed as XML.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// `data` as UTF-8 XML that `XMLParser` can be given.
    static func forXMLParser(_ data: Data) throws -> Data {
        let converted = try utf8(data)
        try refuseUnsafeConstructs(String(decoding: converted, as: UTF8.self))
        return converted
    }

    /// `data` as UTF-8 XML: unchanged when it is UTF-8, converted from the encoding it declares otherwise.
    static func utf8(_ data: Data) throws -> Data {
        if String(data: data, encoding: .utf8) != nil { return data }
        if let text = decodeDeclared(data) { return Data(rewritingDeclaration(text).utf8) }
        throw Refusal(description: "the XML body is neither UTF-8 nor in the encoding it declares")
    }

    private static let emptyProcessingInstruction = try? NSRegularExpression(pattern: "<\\?[^?>\\s]*\\s*\\?>")

    /// Throws for the constructs `XMLParser` crashes on.
    private static func refuseUnsafeConstructs(_ text: String) throws {
        let range = NSRange(text.startIndex..., in: text)
        if emptyProcessingInstruction?.firstMatch(in: text, range: range) != nil {
            throw Refusal(description: "the XML body holds a processing instruction without data")
        }
        let bytes = Array(text.utf8)
        if hasInternalSubset(bytes) {
            throw Refusal(description: "the XML body holds an internal DTD subset")
        }
        if elementDepth(of: bytes) > NestingLimit.maximumDepth {
            throw Refusal(description: NestingLimit.reason("the XML body's elements are"))
        }
    }

    /// How deeply the elements of `bytes` nest at most; counting stops past ``NestingLimit/maximumDepth``.
    ///
    /// `XMLParser` streams a deep document without crashing, but keeps about 60 bytes per open element (1,000,000
    /// levels: 62 MB), and a delegate that keeps a stack keeps its own on top: 64 MiB of `<a>` (the default in-memory
    /// body limit) would hold 1.3 GB before the delegate's share. (Without a delegate, Foundation's parser stops near
    /// 256 levels; with one, as every caller parses, it does not.) So, as JSON and property lists are, an XML body is
    /// refused past the limit. Start tags count (an empty-element tag `<a/>` does not), end tags uncount; comments,
    /// CDATA sections, processing instructions and declarations count nothing, and a quoted attribute value or
    /// literal may hold `>` or `/`. A malformed body is the parser's to reject: this only bounds what it would hold.
    static func elementDepth(of bytes: [UInt8]) -> Int {
        let (open, close, slash, bang, question, dash) = (
            UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "/"), UInt8(ascii: "!"), UInt8(ascii: "?"),
            UInt8(ascii: "-")
        )
        /// The index just past the first `terminator` at or after `index`, or the end.
        func skip(past terminator: [UInt8], from index: Int) -> Int {
            var index = index
            while index + terminator.count <= bytes.count {
                if bytes[index] == terminator[0], bytes[index..<(index + terminator.count)].elementsEqual(terminator) {
                    return index + terminator.count
                }
                index += 1
            }
            return bytes.count
        }
        /// The index of the `>` that closes a tag or declaration begun before `index`, quoted text skipped; or the end.
        func closingBracket(from index: Int) -> Int {
            firstUnquoted(of: [close], in: bytes, from: index)
        }
        var (depth, deepest) = (0, 0)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == open, index + 1 < bytes.count else {
                index += 1
                continue
            }
            let next = bytes[index + 1]
            if next == bang, index + 3 < bytes.count, bytes[index + 2] == dash, bytes[index + 3] == dash {
                index = skip(past: commentEnd, from: index + 4)
            } else if next == bang, bytes[(index + 2)...].starts(with: cdataStart) {
                index = skip(past: cdataEnd, from: index + 9)
            } else if next == question {
                index = skip(past: processingInstructionEnd, from: index + 2)
            } else if next == bang {
                index = closingBracket(from: index + 2) + 1
            } else if next == slash {
                depth = max(0, depth - 1)
                index = closingBracket(from: index + 2) + 1
            } else {
                let end = closingBracket(from: index + 1)
                if end < bytes.count, bytes[end - 1] != slash {
                    depth += 1
                    deepest = max(deepest, depth)
                    if depth > NestingLimit.maximumDepth { return depth }
                }
                index = end + 1
            }
        }
        return deepest
    }

    private static let commentEnd = Array("-->".utf8)
    private static let cdataStart = Array("[CDATA[".utf8)
    private static let cdataEnd = Array("]]>".utf8)
    private static let processingInstructionEnd = Array("?>".utf8)

    /// The index of the first of `stops` at or after `index` in `bytes` that is outside a quoted literal (`"…"` or
    /// `'…'`, as attribute values and a DOCTYPE's literals are written), or the end: a `>` or `[` inside quotes closes
    /// or opens nothing.
    private static func firstUnquoted(of stops: [UInt8], in bytes: [UInt8], from index: Int) -> Int {
        var index = index
        var quote: UInt8?
        while index < bytes.count {
            let byte = bytes[index]
            if let open = quote {
                if byte == open { quote = nil }
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                quote = byte
            } else if stops.contains(byte) {
                return index
            }
            index += 1
        }
        return bytes.count
    }

    /// Whether a `<!DOCTYPE` of `bytes` (in any case) opens an internal subset: a `[` before the declaration's
    /// closing `>`, neither inside a quoted literal. The literals are skipped as the grammar writes them
    /// (`SYSTEM "x>"` holds a `>` that does not close anything), so a subset cannot hide behind one; a `[` inside
    /// a literal is the literal's.
    static func hasInternalSubset(_ bytes: [UInt8]) -> Bool {
        let keyword = Array("<!doctype".utf8)
        var index = 0
        while index + keyword.count <= bytes.count {
            guard bytes[index] == UInt8(ascii: "<"),
                zip(bytes[index..<(index + keyword.count)], keyword).allSatisfy({ $0.asciiLowercased == $1 })
            else {
                index += 1
                continue
            }
            index += keyword.count
            let stop = firstUnquoted(of: [UInt8(ascii: "["), UInt8(ascii: ">")], in: bytes, from: index)
            if stop < bytes.count, bytes[stop] == UInt8(ascii: "[") { return true }
            index = stop + 1
        }
        return false
    }

    /// The text of `data` in the encoding its byte-order mark or declaration names.
    private static func decodeDeclared(_ data: Data) -> String? {
        if data.starts(with: [0xFF, 0xFE]) || data.starts(with: [0xFE, 0xFF]) {
            return String(data: data, encoding: .utf16)
        }
        let head = String(decoding: data.prefix(256), as: UTF8.self).lowercased()
        guard head.hasPrefix("<?xml"), let range = head.range(of: "encoding=") else { return nil }
        let rest = head[range.upperBound...].drop { $0 == "\"" || $0 == "'" }
        let name = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        let encodings: [String: String.Encoding] = [
            "iso-8859-1": .isoLatin1, "latin1": .isoLatin1, "iso-8859-2": .isoLatin2, "us-ascii": .ascii,
            "ascii": .ascii, "windows-1252": .windowsCP1252, "cp1252": .windowsCP1252, "windows-1250": .windowsCP1250,
            "utf-16": .utf16, "utf-16le": .utf16LittleEndian, "utf-16be": .utf16BigEndian,
        ]
        guard let encoding = encodings[name] else { return nil }
        return String(data: data, encoding: encoding)
    }

    /// `text` with the `encoding="…"` of its XML declaration replaced by UTF-8.
    private static func rewritingDeclaration(_ text: String) -> String {
        guard text.hasPrefix("<?xml"), let end = text.range(of: "?>") else { return text }
        let declaration = String(text[..<end.lowerBound])
        let pattern = try? NSRegularExpression(
            pattern: "encoding\\s*=\\s*[\"'][^\"']*[\"']", options: [.caseInsensitive])
        let range = NSRange(declaration.startIndex..., in: declaration)
        let rewritten =
            pattern?.stringByReplacingMatches(in: declaration, range: range, withTemplate: "encoding=\"UTF-8\"")
            ?? declaration
        return rewritten + text[end.lowerBound...]
    }
}
