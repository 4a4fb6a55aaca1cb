import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates a response and returns an `XMLParser` over its body, ready for your delegate.
///
/// Accepts `application/xml` and `text/xml`. An empty body gives nil. The parser is not run: call `parse()` with
/// your `XMLParserDelegate` set. The parser reads UTF-8 only: a body in another encoding it declares is converted,
/// and one that is neither fails with `-1016` (`XMLParser` on Linux crashes on names that are not UTF-8).
///
/// ```swift
/// manager.responseSerializer = XMLParserResponseSerializer()
/// let result = try await manager.get("feed.xml")
/// let parser = result.object as? XMLParser
/// parser?.delegate = myDelegate
/// parser?.parse()
/// ```
open class XMLParserResponseSerializer: HTTPResponseSerializer, @unchecked Sendable {
    // @unchecked Sendable: no state beyond the superclass's, which guards its own.

    /// Creates a serializer for the XML content types.
    public required init() {
        super.init()
        acceptableContentTypes = ["application/xml", "text/xml"]
    }

    /// Restores the validation rules of an archive.
    public required init?(coder: NSCoder) {
        super.init(coder: coder)
    }

    /// Validates the response and returns an `XMLParser` over the body (nil for an empty body).
    open override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        guard let (data, validationError) = try bodyToDecode(for: response, data: data) else { return nil }
        let parser: XMLParser
        do {
            parser = XMLParser(data: try XMLBody.forXMLParser(data))
        } catch {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "The response body is not XML that can be parsed: \(error)",
                response: response, data: data, underlying: validationError ?? error)
        }
        // A status failure still hands over the parser, in the error, as AFNetworking returns it next to the error.
        if let validationError { throw SessionKitError.carrying(parser, in: validationError) }
        return parser
    }
}
