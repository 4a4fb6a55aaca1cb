import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

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
        return try XMLPropertyListReader.read(data)
    }

    /// Whether `data` starts, after an optional byte-order mark and white space, with `<`.
    private static func looksLikeXML(_ data: Data) -> Bool {
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        return bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "<")
    }
}

/// Reads an XML property list (`<plist><dict><key>…`) with `XMLParser`, depth-limited, entities not resolved.
final class XMLPropertyListReader: NSObject, XMLParserDelegate {
    /// How deep arrays and dictionaries may nest.
    static let maximumDepth = 512

    private enum Container {
        case array([Any])
        case dictionary([String: Any], pendingKey: String?)
    }

    private var containers: [Container] = []
    private var text = ""
    private var result: Any?
    private var failure: PropertyListReader.Refusal?
    private var sawPlist = false

    /// The top object of `data`.
    static func read(_ data: Data) throws -> Any {
        let reader = XMLPropertyListReader()
        let parser: XMLParser
        do {
            parser = XMLParser(data: try XMLBody.utf8(data))
        } catch {
            throw PropertyListReader.Refusal("\(error)")
        }
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        let parsed = parser.parse()
        if let failure = reader.failure { throw failure }
        guard parsed, let result = reader.result, reader.containers.isEmpty else {
            throw PropertyListReader.Refusal("malformed XML property list")
        }
        return result
    }

    private func fail(_ message: String, _ parser: XMLParser) {
        if failure == nil { failure = PropertyListReader.Refusal(message) }
        parser.abortParsing()
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        text = ""
        switch name {
        case "plist":
            if sawPlist || !containers.isEmpty || result != nil { fail("misplaced <plist>", parser) }
            sawPlist = true
        case "array", "dict":
            guard containers.count < Self.maximumDepth else { return fail("nested too deeply", parser) }
            containers.append(name == "array" ? .array([]) : .dictionary([:], pendingKey: nil))
        case "key", "string", "integer", "real", "true", "false", "date", "data":
            break
        default:
            fail("unknown element <\(name)>", parser)
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard text.utf8.count + string.utf8.count <= 64 << 20 else { return fail("text too long", parser) }
        text += string
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        text += String(decoding: CDATABlock, as: UTF8.self)
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        let value: Any
        switch name {
        case "plist":
            return
        case "key":
            guard case .dictionary(let dictionary, nil)? = containers.last else { return fail("misplaced <key>", parser) }
            containers[containers.count - 1] = .dictionary(dictionary, pendingKey: text)
            return
        case "array":
            guard case .array(let array)? = containers.popLast() else { return fail("unbalanced <array>", parser) }
            value = array
        case "dict":
            guard case .dictionary(let dictionary, let pending)? = containers.popLast(), pending == nil else {
                return fail("unbalanced <dict>", parser)
            }
            value = dictionary
        case "string":
            value = text
        case "integer":
            guard let integer = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                return fail("bad <integer>", parser)
            }
            value = integer
        case "real":
            guard let real = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                return fail("bad <real>", parser)
            }
            value = real
        case "true":
            value = true
        case "false":
            value = false
        case "date":
            guard let date = ISO8601DateFormatter().date(from: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                return fail("bad <date>", parser)
            }
            value = date
        case "data":
            guard let data = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                return fail("bad <data>", parser)
            }
            value = data
        default:
            return fail("unknown element <\(name)>", parser)
        }
        text = ""
        place(value, parser)
    }

    /// Puts a finished value into its container, or makes it the result.
    private func place(_ value: Any, _ parser: XMLParser) {
        switch containers.last {
        case nil:
            guard result == nil else { return fail("more than one top-level value", parser) }
            result = value
        case .array(var array)?:
            array.append(value)
            containers[containers.count - 1] = .array(array)
        case .dictionary(var dictionary, let key)?:
            guard let key else { return fail("a value without a <key>", parser) }
            dictionary[key] = value
            containers[containers.count - 1] = .dictionary(dictionary, pendingKey: nil)
        }
    }
}
