import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends parameters as a property-list body (`Content-Type: application/x-plist` unless the request sets one).
///
/// Methods in ``HTTPRequestSerializer/httpMethodsEncodingParametersInURI`` still put the parameters in the query.
open class PropertyListRequestSerializer: HTTPRequestSerializer, @unchecked Sendable {
    // @unchecked Sendable: the options are guarded by `options`.
    private struct Options {
        var format: PropertyListSerialization.PropertyListFormat = .xml
        var writeOptions: PropertyListSerialization.WriteOptions = 0
    }

    private let options = Protected(Options())

    /// Creates a serializer writing XML property lists.
    public required init() {
        super.init()
    }

    /// Restores the configuration, format and write options of an archive.
    public required init?(coder: NSCoder) {
        super.init(coder: coder)
        guard
            let format = coder.number("format").flatMap({
                PropertyListSerialization.PropertyListFormat(rawValue: $0.uintValue)
            }),
            let write = coder.number("writeOptions")
        else { return nil }
        options.wrappedValue = Options(format: format, writeOptions: write.intValue)
    }

    /// Archives the configuration, format and write options.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        let options = self.options.wrappedValue
        coder.encode(NSNumber(value: options.format.rawValue), forKey: "format")
        coder.encode(NSNumber(value: options.writeOptions), forKey: "writeOptions")
    }

    /// An independent serializer with the same configuration.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let copy = super.copy(with: zone)
        (copy as? PropertyListRequestSerializer)?.options.wrappedValue = options.wrappedValue
        return copy
    }

    /// Creates a serializer with the given format and write options.
    public convenience init(
        format: PropertyListSerialization.PropertyListFormat,
        writeOptions: PropertyListSerialization.WriteOptions
    ) {
        self.init()
        self.format = format
        self.writeOptions = writeOptions
    }

    /// The format of the body: `.xml` (default) or `.binary`.
    public var format: PropertyListSerialization.PropertyListFormat {
        get { options.read { $0.format } }
        set { options.write { $0.format = newValue } }
    }

    /// Options for `PropertyListSerialization` when writing.
    public var writeOptions: PropertyListSerialization.WriteOptions {
        get { options.read { $0.writeOptions } }
        set { options.write { $0.writeOptions = newValue } }
    }

    /// Encodes `parameters` as a property list into the body, or into the query for URI methods.
    ///
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain``, code -1016, when `parameters` cannot be
    ///   written as a property list (a null value, say) or nests more deeply than
    ///   ``HTTPRequestSerializer/maximumNestingDepth``.
    open override func request(
        bySerializingRequest request: URLRequest, withParameters parameters: Any?
    ) throws
        -> URLRequest
    {
        var request = request
        try serialize(&request, parameters: parameters)
        return request
    }

    /// The property-list encoding, on `request` itself.
    override func serialize(_ request: inout URLRequest, parameters: Any?) throws {
        let (format, writeOptions) = options.read { ($0.format, $0.writeOptions) }
        try bodyEncode(&request, parameters: parameters, contentType: "application/x-plist") { value in
            // `PropertyListSerialization` recurses without bound: the depth is measured first, without recursion,
            // and a deep value within the limit is written on a thread with a large stack.
            let depth = NestingLimit.depth(of: value)
            guard depth <= NestingLimit.maximumDepth else {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeContentData, NestingLimit.reason("The `parameters` argument is"))
            }
            return try NestingLimit.onLargeStack(if: depth > NestingLimit.largeStackThreshold) {
                guard PropertyListSerialization.propertyList(value, isValidFor: format) else {
                    throw SessionKitError.requestSerialization(
                        .cannotDecodeContentData, "The `parameters` argument is not a valid property list.")
                }
                do {
                    return try PropertyListSerialization.data(
                        fromPropertyList: value, format: format, options: writeOptions)
                } catch {
                    throw SessionKitError.requestSerialization(
                        .cannotDecodeContentData, "The `parameters` argument is not a valid property list.",
                        underlying: error)
                }
            }
        }
    }
}
