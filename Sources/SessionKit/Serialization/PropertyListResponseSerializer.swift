import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Validates a response and decodes its property-list body (XML or binary).
///
/// Accepts `application/x-plist`. An empty body gives nil; a body that is not a property list fails with
/// `-1016` in ``SessionKitError/responseSerializationDomain``, chaining the validation error if there was one.
///
/// Bodies are read by SessionKit's own bounded readers, not Foundation's `PropertyListSerialization`, which on
/// Linux can crash on a hostile binary property list and leaks memory on malformed ones. Values come back as
/// Swift types: `[String: Any]`, `[Any]`, `String`, `Int`, `Double`, `Bool`, `Date`, `Data`. Sets, dictionary
/// keys that are not strings and OpenStep property lists are refused.
open class PropertyListResponseSerializer: HTTPResponseSerializer, @unchecked Sendable {
    // @unchecked Sendable: the options are guarded by `options`.
    private struct Options {
        var format: PropertyListSerialization.PropertyListFormat = .xml
        var readOptions: PropertyListSerialization.ReadOptions = []
    }

    private let options = Protected(Options())

    /// Creates a serializer for `application/x-plist`.
    public required init() {
        super.init()
        acceptableContentTypes = ["application/x-plist"]
    }

    /// Restores the validation rules, format and read options of an archive.
    public required init?(coder: NSCoder) {
        super.init(coder: coder)
        guard
            let format = coder.number("format").flatMap({
                PropertyListSerialization.PropertyListFormat(rawValue: $0.uintValue)
            }),
            let read = coder.number("readOptions")
        else { return nil }
        options.wrappedValue = Options(
            format: format, readOptions: PropertyListSerialization.ReadOptions(rawValue: read.uintValue))
    }

    /// Archives the validation rules, format and read options.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        let options = self.options.wrappedValue
        coder.encode(NSNumber(value: options.format.rawValue), forKey: "format")
        coder.encode(NSNumber(value: options.readOptions.rawValue), forKey: "readOptions")
    }

    /// An independent serializer with the same configuration.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let copy = super.copy(with: zone)
        (copy as? PropertyListResponseSerializer)?.options.wrappedValue = options.wrappedValue
        return copy
    }

    /// Creates a serializer with the given format and read options.
    public convenience init(
        format: PropertyListSerialization.PropertyListFormat,
        readOptions: PropertyListSerialization.ReadOptions
    ) {
        self.init()
        self.format = format
        self.readOptions = readOptions
    }

    /// The format expected, as AFNetworking keeps it; decoding accepts XML and binary whatever its value.
    public var format: PropertyListSerialization.PropertyListFormat {
        get { options.read { $0.format } }
        set { options.write { $0.format = newValue } }
    }

    /// AFNetworking's read options, kept for compatibility: results are Swift values, whose mutability is the
    /// caller's `var`.
    public var readOptions: PropertyListSerialization.ReadOptions {
        get { options.read { $0.readOptions } }
        set { options.write { $0.readOptions = newValue } }
    }

    /// Validates the response and returns the decoded property list (nil for an empty body).
    open override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        guard let (data, validationError) = try bodyToDecode(for: response, data: data) else { return nil }
        let object: Any
        do {
            object = try PropertyListReader.object(from: data)
        } catch {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "The response body is not a property list: \(error)",
                response: response, data: data, underlying: validationError ?? error)
        }
        if let validationError { throw SessionKitError.carrying(object, in: validationError) }
        return object
    }
}
