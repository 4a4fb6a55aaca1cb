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
        if hasInternalSubset(Array(text.utf8)) {
            throw Refusal(description: "the XML body holds an internal DTD subset")
        }
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
            var quote: UInt8?
            scan: while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch (quote, byte) {
                case (let open?, _): if byte == open { quote = nil }
                case (nil, UInt8(ascii: "\"")), (nil, UInt8(ascii: "'")): quote = byte
                case (nil, UInt8(ascii: "[")): return true
                case (nil, UInt8(ascii: ">")): break scan
                default: continue
                }
            }
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
