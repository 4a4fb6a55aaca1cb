import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates a response and decodes its JSON body.
///
/// Accepts `application/json`, `text/json` and `text/javascript`. An empty body, a single space and a 204 give a
/// nil object and no error. When the status fails validation the body is still parsed, so the error's
/// `userInfo` carries the server's error document next to the raw body.
open class JSONResponseSerializer: HTTPResponseSerializer, @unchecked Sendable {
    // @unchecked Sendable: the options are guarded by `options`.
    private struct Options {
        var readingOptions: JSONSerialization.ReadingOptions = []
        var removesKeysWithNullValues = false
    }

    private let options = Protected(Options())

    /// Creates a serializer for the JSON content types.
    public required init() {
        super.init()
        acceptableContentTypes = ["application/json", "text/json", "text/javascript"]
    }

    /// Restores the validation rules, reading options and null removal of an archive.
    public required init?(coder: NSCoder) {
        super.init(coder: coder)
        guard let reading = coder.number("readingOptions"), let removes = coder.number("removesKeysWithNullValues")
        else {
            return nil
        }
        options.wrappedValue = Options(
            readingOptions: JSONSerialization.ReadingOptions(rawValue: reading.uintValue),
            removesKeysWithNullValues: removes.boolValue)
    }

    /// Archives the validation rules, reading options and null removal.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        let options = self.options.wrappedValue
        coder.encode(NSNumber(value: options.readingOptions.rawValue), forKey: "readingOptions")
        coder.encode(NSNumber(value: options.removesKeysWithNullValues), forKey: "removesKeysWithNullValues")
    }

    /// An independent serializer with the same configuration.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let copy = super.copy(with: zone)
        (copy as? JSONResponseSerializer)?.options.wrappedValue = options.wrappedValue
        return copy
    }

    /// Creates a serializer with the given reading options.
    public convenience init(readingOptions: JSONSerialization.ReadingOptions) {
        self.init()
        self.readingOptions = readingOptions
    }

    /// Options for `JSONSerialization` when reading. Default none.
    public var readingOptions: JSONSerialization.ReadingOptions {
        get { options.read { $0.readingOptions } }
        set { options.write { $0.readingOptions = newValue } }
    }

    /// Whether `null`s are removed, recursively: keys whose value is `null` from dictionaries, `null` elements from
    /// arrays.
    public var removesKeysWithNullValues: Bool {
        get { options.read { $0.removesKeysWithNullValues } }
        set { options.write { $0.removesKeysWithNullValues = newValue } }
    }

    /// The key under which a failing response's decoded error document is stored in the error's `userInfo`; the
    /// same key as ``SessionKitError/failingResponseObjectKey``.
    public static let failingResponseObjectKey = SessionKitError.failingResponseObjectKey

    /// Validates the response and returns the decoded JSON object (nil for an empty body).
    open override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        let statusCode = (response as? HTTPURLResponse)?.statusCode
        guard
            let (data, validationError) = try bodyToDecode(
                for: response, data: data,
                isEmpty: { body in Self.isEmpty(body, statusCode: statusCode) })
        else { return nil }

        let object: Any
        switch decoded(data) {
        case .success(let value):
            object = value
        case .failure(.tooDeep):
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, NestingLimit.reason("The response body is"),
                response: response, data: data, underlying: validationError)
        case .failure(.trailingComma):
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData,
                "The response body is not valid JSON: a comma before a closing bracket (RFC 8259).",
                response: response, data: data, underlying: validationError)
        case .failure(.invalid(let error)):
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData,
                "The response body is not valid JSON.",
                response: response, data: data, underlying: validationError ?? error)
        }
        if let validationError { throw SessionKitError.carrying(object, in: validationError) }
        return object
    }

    /// The decoded body of a response that passes validation, read without Foundation's response object (exactly
    /// this class); nil when ``responseObject(for:data:)`` must run: validation fails, the content type was not read,
    /// or the body does not decode (its errors carry the response). Parses the body: for the processing queue.
    override func objectWithoutResponse(statusCode: Int, mimeType: () -> String??, data: Data?) -> Any?? {
        guard type(of: self) == JSONResponseSerializer.self,
            passesValidation(statusCode: statusCode, mimeType: mimeType, data: data)
        else { return nil }
        guard let data, !Self.isEmpty(data, statusCode: statusCode) else { return .some(nil) }
        guard case .success(let object) = decoded(data) else { return nil }
        return .some(object)
    }

    /// Why a body did not decode.
    private enum DecodingFailure: Error {
        /// Nested deeper than ``HTTPResponseSerializer/maximumNestingDepth``.
        case tooDeep
        /// A `,` right before a `]` or `}` (RFC 8259), which Foundation's parser on Linux would accept.
        case trailingComma
        /// Not JSON: `JSONSerialization`'s error.
        case invalid(Error)
    }

    /// `data` as JSON, with the reading options and `null`s removed when asked.
    ///
    /// `JSONSerialization` parses by recursion: the depth is measured first, on the bytes, and a deep body within the
    /// limit is parsed on a thread with a large stack.
    private func decoded(_ data: Data) -> Result<Any, DecodingFailure> {
        let (readingOptions, removesNulls) = options.read { ($0.readingOptions, $0.removesKeysWithNullValues) }
        let (depth, trailingComma) = NestingLimit.scan(json: data)
        guard depth <= NestingLimit.maximumDepth else { return .failure(.tooDeep) }
        guard !trailingComma else { return .failure(.trailingComma) }
        let object: Any
        do {
            object = try NestingLimit.onLargeStack(if: depth > NestingLimit.largeStackThreshold) {
                try JSONSerialization.jsonObject(with: data, options: readingOptions)
            }
        } catch {
            return .failure(.invalid(error))
        }
        return .success(removesNulls ? Self.removingNullValues(from: object) : object)
    }

    /// Which bodies count as empty: none, a single space (as AFNetworking), or any body of a 204.
    private static func isEmpty(_ body: Data, statusCode: Int?) -> Bool {
        body.isEmpty || body == Data([0x20]) || statusCode == 204
    }

    /// `object` with every `null` removed, through nested dictionaries and arrays: a dictionary loses the keys whose
    /// value is `null` and an array its `null` elements, as AFNetworking's `AFJSONObjectByRemovingKeysWithNullValues`.
    ///
    /// The walk keeps its own stack of the containers being rebuilt rather than recursing.
    static func removingNullValues(from object: Any) -> Any {
        /// A container being rebuilt: its members left after the `null`s, and those already rebuilt.
        struct Container {
            let isArray: Bool
            let members: [(key: String, value: Any)]
            var rebuilt: [(key: String, value: Any)] = []

            init?(_ object: Any) {
                if let array = object as? [Any] {
                    isArray = true
                    members = array.filter { !isNull($0) }.map { (key: "", value: $0) }
                } else if let dictionary = object as? [String: Any] {
                    isArray = false
                    members = dictionary.filter { !isNull($0.value) }.map { (key: $0.key, value: $0.value) }
                } else {
                    return nil
                }
            }

            var value: Any {
                if isArray { return rebuilt.map(\.value) }
                return Dictionary(rebuilt, uniquingKeysWith: { first, _ in first })
            }
        }

        /// Whether `value` is `null`; a container is not asked (`is NSNull` would bridge it to `NSArray`, by recursion).
        func isNull(_ value: Any) -> Bool {
            !(value is [Any]) && !(value is [String: Any]) && value is NSNull
        }

        guard let root = Container(object) else { return object }
        var open = [root]
        while let last = open.indices.last {
            let position = open[last].rebuilt.count
            guard position < open[last].members.count else {
                let finished = open.removeLast()
                guard let parent = open.indices.last else { return finished.value }
                let key = open[parent].members[open[parent].rebuilt.count].key
                open[parent].rebuilt.append((key: key, value: finished.value))
                continue
            }
            let member = open[last].members[position]
            if let nested = Container(member.value) {
                open.append(nested)
            } else {
                open[last].rebuilt.append(member)
            }
        }
        return object
    }
}
