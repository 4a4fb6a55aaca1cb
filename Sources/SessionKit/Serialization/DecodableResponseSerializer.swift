import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates a response and decodes its JSON body into `T`.
///
/// A decoding failure is an error in ``SessionKitError/responseSerializationDomain`` (code -1016) whose reason
/// names the key path and what was wrong, with the `DecodingError` as its underlying error.
public final class DecodableResponseSerializer<T: Decodable>: URLResponseSerialization {
    /// The validation rules applied before decoding.
    public let validator: HTTPResponseSerializer
    private let decoder: JSONDecoder

    /// Creates a serializer for `type`, validating with `validator` (default: statuses 200–299, any type).
    public init(
        _ type: T.Type, decoder: JSONDecoder = JSONDecoder(),
        validator: HTTPResponseSerializer = HTTPResponseSerializer()
    ) {
        self.decoder = decoder
        self.validator = validator
    }

    /// Validates the response and returns the decoded `T`.
    public func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        try decode(response: response, data: data)
    }

    /// Validates the response and returns the decoded `T`, typed.
    public func decode(response: URLResponse?, data: Data?) throws -> T {
        try validator.validate(response: response as? HTTPURLResponse, data: data)
        // `JSONDecoder` and `T`'s own `init(from:)` recurse as deep as the JSON nests: the depth is measured first,
        // and a deep body within the limit is decoded on a thread with a large stack.
        let body = data ?? Data()
        let (depth, trailingComma) = NestingLimit.scan(json: body)
        guard depth <= NestingLimit.maximumDepth else {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "Cannot decode \(T.self): " + NestingLimit.reason("the response body is"),
                response: response, data: data)
        }
        guard !trailingComma else {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData,
                "Cannot decode \(T.self): the response body has a comma before a closing bracket (RFC 8259).",
                response: response, data: data)
        }
        let decoder = self.decoder
        do {
            return try NestingLimit.onLargeStack(if: depth > NestingLimit.largeStackThreshold) {
                try decoder.decode(T.self, from: body)
            }
        } catch let error as DecodingError {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "Cannot decode \(T.self): \(Self.describe(error))",
                response: response, data: data, underlying: error)
        }
    }

    /// "at a.b[2]: ..." for a decoding error.
    static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [CodingKey]) -> String {
            let text = codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }.joined()
            return text.isEmpty ? "the top level" : String(text.drop { $0 == "." })
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "at \(path(context.codingPath)): expected \(type). \(context.debugDescription)"
        case .valueNotFound(let type, let context):
            return "at \(path(context.codingPath)): no value of \(type). \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "at \(path(context.codingPath + [key])): key not found. \(context.debugDescription)"
        case .dataCorrupted(let context):
            return "at \(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
