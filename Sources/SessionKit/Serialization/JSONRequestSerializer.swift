import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends parameters as a JSON body (`Content-Type: application/json` unless the request sets one).
///
/// Methods in ``HTTPRequestSerializer/httpMethodsEncodingParametersInURI`` still put the parameters in the query.
open class JSONRequestSerializer: HTTPRequestSerializer, @unchecked Sendable {
    // @unchecked Sendable: `writingOptionsStorage` is guarded by its own `Protected` box.
    private let writingOptionsStorage = Protected<JSONSerialization.WritingOptions>([])

    /// Options for `JSONSerialization` when writing the body. Default none.
    public var writingOptions: JSONSerialization.WritingOptions {
        get { writingOptionsStorage.wrappedValue }
        set { writingOptionsStorage.wrappedValue = newValue }
    }

    /// Creates a serializer with the default headers and no writing options.
    public required init() {
        super.init()
    }

    /// Restores the configuration and writing options of an archive.
    public required init?(coder: NSCoder) {
        super.init(coder: coder)
        guard let options = coder.number("writingOptions") else { return nil }
        writingOptionsStorage.wrappedValue = JSONSerialization.WritingOptions(rawValue: options.uintValue)
    }

    /// Archives the configuration and writing options.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        coder.encode(NSNumber(value: writingOptions.rawValue), forKey: "writingOptions")
    }

    /// An independent serializer with the same configuration.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let copy = super.copy(with: zone)
        (copy as? JSONRequestSerializer)?.writingOptions = writingOptions
        return copy
    }

    /// Encodes `parameters` as JSON into the body, or into the query for URI methods.
    ///
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain``, code -1016, when `parameters` is not
    ///   a valid JSON object or nests more deeply than ``HTTPRequestSerializer/maximumNestingDepth``.
    open override func request(
        bySerializingRequest request: URLRequest, withParameters parameters: Any?
    ) throws
        -> URLRequest
    {
        var request = request
        try serialize(&request, parameters: parameters)
        return request
    }

    /// The JSON encoding, on `request` itself.
    override func serialize(_ request: inout URLRequest, parameters: Any?) throws {
        let options = writingOptions
        try bodyEncode(&request, parameters: parameters, contentType: "application/json") { value in
            // `JSONSerialization` recurses without bound: the depth is measured first, without recursion, and a deep
            // value within the limit is written on a thread with a large stack.
            let depth = NestingLimit.depth(of: value)
            guard depth <= NestingLimit.maximumDepth else {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeContentData, NestingLimit.reason("The `parameters` argument is"))
            }
            return try NestingLimit.onLargeStack(if: depth > NestingLimit.largeStackThreshold) {
                guard JSONSerialization.isValidJSONObject(value) else {
                    throw SessionKitError.requestSerialization(
                        .cannotDecodeContentData, "The `parameters` argument is not valid JSON.")
                }
                do {
                    return try JSONSerialization.data(withJSONObject: value, options: options)
                } catch {
                    throw SessionKitError.requestSerialization(
                        .cannotDecodeContentData, "The `parameters` argument is not valid JSON.", underlying: error)
                }
            }
        }
    }
}
