import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates the status code and content type of HTTP responses and returns the body as `Data`.
///
/// Subclasses decode the body after calling ``validate(response:data:)``.
open class HTTPResponseSerializer: NSObject, URLResponseSerialization, NSSecureCoding, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: the acceptable sets are guarded by `settings`.
    private struct Settings {
        var acceptableStatusCodes: IndexSet? = IndexSet(integersIn: 200..<300)
        var acceptableContentTypes: Set<String>?
    }

    private let settings = Protected(Settings())

    /// Creates a serializer that accepts statuses 200–299 and any content type.
    public required override init() {
        super.init()
    }

    // MARK: - NSSecureCoding and NSCopying

    /// Archives use secure coding.
    public class var supportsSecureCoding: Bool { true }

    /// Restores the acceptable status codes and content types of an archive (see ``SecureArchive``).
    public required init?(coder: NSCoder) {
        super.init()
        guard coder.decodeArchiveVersion() else { return nil }
        var settings = Settings(acceptableStatusCodes: nil, acceptableContentTypes: nil)
        if let bounds = coder.object("acceptableStatusCodes") as? [Any] {
            // Ranges as a flat list of bounds: lower, upper, lower, upper, …
            guard bounds.count % 2 == 0, bounds.count <= 2_000 else { return nil }
            var codes = IndexSet()
            for index in stride(from: 0, to: bounds.count, by: 2) {
                guard let lower = (bounds[index] as? NSNumber)?.intValue,
                    let upper = (bounds[index + 1] as? NSNumber)?.intValue,
                    lower >= 0, lower < upper, upper <= 10_000
                else { return nil }
                codes.insert(integersIn: lower..<upper)
            }
            settings.acceptableStatusCodes = codes
        }
        if let types = coder.strings("acceptableContentTypes") { settings.acceptableContentTypes = Set(types) }
        self.settings.wrappedValue = settings
    }

    /// Archives the acceptable status codes (as ranges) and content types.
    open func encode(with coder: NSCoder) {
        coder.encodeArchiveVersion()
        let (codes, types) = settings.read { ($0.acceptableStatusCodes, $0.acceptableContentTypes) }
        if let codes {
            let bounds = codes.rangeView.flatMap { [NSNumber(value: $0.lowerBound), NSNumber(value: $0.upperBound)] }
            coder.encode(bounds as NSArray, forKey: "acceptableStatusCodes")
        }
        if let types { coder.encode(types.sorted() as NSArray, forKey: "acceptableContentTypes") }
    }

    /// An independent serializer of the same class with the same configuration.
    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = type(of: self).init()
        copy.settings.wrappedValue = settings.wrappedValue
        return copy
    }

    /// How many arrays and dictionaries of a body may nest, one inside the other, for the decoding serializers
    /// (JSON, property list, `Decodable`): 500, as for ``SecureArchive``. A deeper body fails with `-1016` in
    /// ``SessionKitError/responseSerializationDomain``, carrying the response and body, instead of overflowing the
    /// stack of the decoding thread, whatever its size.
    public static let maximumNestingDepth = NestingLimit.maximumDepth

    /// The statuses that pass validation; nil accepts all. Default 200–299.
    public var acceptableStatusCodes: IndexSet? {
        get { settings.read { $0.acceptableStatusCodes } }
        set { settings.write { $0.acceptableStatusCodes = newValue } }
    }

    /// The MIME types that pass validation when there is a body; nil accepts any. Default nil.
    public var acceptableContentTypes: Set<String>? {
        get { settings.read { $0.acceptableContentTypes } }
        set { settings.write { $0.acceptableContentTypes = newValue } }
    }

    /// Checks the status code and, when there is body data, the content type.
    ///
    /// Non-HTTP responses pass. Both failures are in ``SessionKitError/responseSerializationDomain``:
    /// `-1011` (`URLError.badServerResponse`) for a status, `-1016` (`URLError.cannotDecodeContentData`) for a
    /// content type; when both fail, the status error chains the content-type error as its underlying error.
    ///
    /// - Throws: The validation error, with the response, body and failing URL in its `userInfo`.
    public func validate(response: HTTPURLResponse?, data: Data?) throws {
        guard let response else { return }
        let (codes, types) = settings.read { ($0.acceptableStatusCodes, $0.acceptableContentTypes) }
        var error: NSError?

        if let types, let data, !data.isEmpty {
            let mimeType = response.mimeType?.lowercased()
            if mimeType == nil || !types.contains(where: { $0.lowercased() == mimeType }) {
                let name = mimeType ?? "(none)"
                error = SessionKitError.responseSerialization(
                    .cannotDecodeContentData,
                    "Request failed: unacceptable content-type: \(name)",
                    response: response, data: data)
            }
        }
        if let codes, !codes.contains(response.statusCode) {
            let phrase = HTTPURLResponse.localizedString(forStatusCode: response.statusCode)
            error = SessionKitError.responseSerialization(
                .badServerResponse,
                "Request failed: \(phrase) (\(response.statusCode))",
                response: response, data: data, underlying: error)
        }
        if let error { throw error }
    }

    /// For decoding subclasses: validates the response, then returns the body to decode and the status failure, if
    /// any (the body of a failed status is still decoded, so that the error can carry the server's document).
    ///
    /// - Parameter isEmpty: Which bodies count as empty; for those the status failure is thrown, or nil returned.
    /// - Throws: A content-type failure at once, alone or under a status failure (the body is not of the expected
    ///   kind), or the status failure of an empty body.
    func bodyToDecode(
        for response: URLResponse?, data: Data?, isEmpty: (Data) -> Bool = { $0.isEmpty }
    ) throws
        -> (body: Data, validationError: Error?)?
    {
        var validationError: Error?
        do {
            try validate(response: response as? HTTPURLResponse, data: data)
        } catch {
            // As AFNetworking: an unacceptable content type, even one chained under a status failure, ends here.
            if SessionKitError.hasCode(.cannotDecodeContentData, in: SessionKitError.responseSerializationDomain, error)
            {
                throw error
            }
            validationError = error
        }
        guard let data, !isEmpty(data) else {
            if let validationError { throw validationError }
            return nil
        }
        return (data, validationError)
    }

    /// What ``responseObject(for:data:)`` returns for an HTTP response of `statusCode` and `mimeType` (``MIMEType/
    /// ofContentType(_:)``: nil when it could not be read without Foundation), when it can be known without the
    /// response object: the serializer is exactly one of SessionKit's classes that decide so (this one, the JSON one;
    /// a subclass may override `responseObject(for:data:)`), and the response passes validation. Nil when
    /// `responseObject(for:data:)` must run on the whole response: to fail (its errors carry the response), to read a
    /// content type that was not read, or for a subclass.
    ///
    /// So that the transport's response head need not become an `HTTPURLResponse` (about 75k instructions in
    /// FoundationNetworking) only to have its status and content type read. Reads no body: cheap enough for the
    /// delegate queue.
    func objectWithoutResponse(statusCode: Int, mimeType: () -> String??, data: Data?) -> Any?? {
        guard type(of: self) == HTTPResponseSerializer.self,
            passesValidation(statusCode: statusCode, mimeType: mimeType, data: data)
        else { return nil }
        return .some(data)
    }

    /// Whether ``validate(response:data:)`` would pass a response of `statusCode` and `mimeType` (asked only when a
    /// content type is checked; nil: not read, which then does not pass).
    final func passesValidation(statusCode: Int, mimeType: () -> String??, data: Data?) -> Bool {
        let (codes, types) = settings.read { ($0.acceptableStatusCodes, $0.acceptableContentTypes) }
        if let codes, !codes.contains(statusCode) { return false }
        guard let types, let data, !data.isEmpty else { return true }
        guard case .some(.some(let mimeType)) = mimeType() else { return false }  // none (fails) or not read
        return types.contains { $0.lowercased() == mimeType }
    }

    /// Validates the response and returns the body unchanged.
    ///
    /// - Throws: The validation error; when only the status failed, the body is in its `userInfo` under
    ///   ``SessionKitError/failingResponseObjectKey``, as AFNetworking returns it next to the error.
    open func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        do {
            try validate(response: response as? HTTPURLResponse, data: data)
        } catch {
            if SessionKitError.hasCode(.cannotDecodeContentData, in: SessionKitError.responseSerializationDomain, error)
            {
                throw error
            }
            throw SessionKitError.carrying(data, in: error)
        }
        return data
    }
}
