import Foundation

/// Prepares an XML body for `XMLParser`.
///
/// `XMLParser` on Linux stops the process when libxml2 hands it an element or attribute name that is not valid
/// UTF-8, which a body with broken bytes and a broken encoding declaration makes it do (found by `make fuzz`, input
/// kept in `Fuzz/regressions/plist/`). So the parser only ever sees UTF-8: a body that is valid UTF-8 goes through
/// unchanged; one in another encoding it declares (`ISO-8859-1`, `UTF-16` with a byte-order mark, …) is converted,
/// its declaration rewritten; anything else is refused.
enum XMLBody {
    /// Why a body cannot be parsed as XML.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// `data` as UTF-8 XML.
    static func utf8(_ data: Data) throws -> Data {
        if String(data: data, encoding: .utf8) != nil { return data }
        if let text = decodeDeclared(data) {
            return Data(rewritingDeclaration(text).utf8)
        }
        throw Refusal(description: "the XML body is neither UTF-8 nor in the encoding it declares")
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
        let pattern = try? NSRegularExpression(pattern: "encoding\\s*=\\s*[\"'][^\"']*[\"']", options: [.caseInsensitive])
        let range = NSRange(declaration.startIndex..., in: declaration)
        let rewritten = pattern?.stringByReplacingMatches(in: declaration, range: range, withTemplate: "encoding=\"UTF-8\"")
            ?? declaration
        return rewritten + text[end.lowerBound...]
    }
}
