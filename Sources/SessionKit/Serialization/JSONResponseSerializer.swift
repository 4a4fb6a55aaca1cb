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
        guard let reading = coder.number("readingOptions"), let removes = coder.number("removesKeysWithNullValues") else {
            return nil
        }
        options.wrappedValue = Options(readingOptions: JSONSerialization.ReadingOptions(rawValue: reading.uintValue),
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
        guard let (data, validationError) = try bodyToDecode(for: response, data: data, isEmpty: { body in
            body.isEmpty || body == Data([0x20]) || statusCode == 204
        }) else { return nil }

        let (readingOptions, removesNulls) = options.read { ($0.readingOptions, $0.removesKeysWithNullValues) }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: readingOptions)
        } catch {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData,
                "The response body is not valid JSON.",
                response: response, data: data, underlying: validationError ?? error)
        }
        let result = removesNulls ? Self.removingNullValues(from: object) : object
        if let validationError { throw SessionKitError.carrying(result, in: validationError) }
        return result
    }

    /// `object` with every `null` removed, through nested dictionaries and arrays: a dictionary loses the keys whose
    /// value is `null` and an array its `null` elements, as AFNetworking's `AFJSONObjectByRemovingKeysWithNullValues`.
    static func removingNullValues(from object: Any) -> Any {
        if let array = object as? [Any] {
            return array.filter { !($0 is NSNull) }.map { removingNullValues(from: $0) }
        }
        if let dictionary = object as? [String: Any] {
            var result: [String: Any] = [:]
            for (key, value) in dictionary where !(value is NSNull) {
                result[key] = removingNullValues(from: value)
            }
            return result
        }
        return object
    }
}
