import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Builds requests with AFNetworking's query-string and form encoding.
///
/// GET, HEAD and DELETE put the parameters in the URL query; other methods send them as an
/// `application/x-www-form-urlencoded` body. Default headers (`Accept-Language`, `User-Agent`) and those you set
/// are added to every request that does not already carry them.
///
/// ```swift
/// let serializer = HTTPRequestSerializer()
/// serializer.setValue("abc", forHTTPHeaderField: "X-Token")
/// let request = try serializer.request(withMethod: "GET", urlString: "http://127.0.0.1:8080/get",
///                                      parameters: ["q": "swift", "page": 2])
/// // http://127.0.0.1:8080/get?page=2&q=swift
/// ```
open class HTTPRequestSerializer: NSObject, URLRequestSerialization, NSSecureCoding, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: every stored property below is guarded by `state`.

    /// Configuration shared by every request this serializer builds.
    struct State {
        var stringEncoding: String.Encoding = .utf8
        var headers: [String: String] = [:]
        var headerOrder: [String] = []
        var timeoutInterval: TimeInterval?
        var cachePolicy: URLRequest.CachePolicy?
        var httpShouldHandleCookies: Bool?
        var allowsCellularAccess: Bool?
        var httpShouldUsePipelining: Bool?
        var networkServiceType: URLRequest.NetworkServiceType?
        var methodsEncodingParametersInURI: Set<String> = ["GET", "HEAD", "DELETE"]
        var queryStringSerialization: (@Sendable (URLRequest, Any) throws -> String)?
    }

    let state = Protected(State())

    /// Creates a serializer with the default `Accept-Language` and `User-Agent` headers.
    public required override init() {
        super.init()
        let languages = Self.acceptLanguageHeader()
        if !languages.isEmpty { setValue(languages, forHTTPHeaderField: "Accept-Language") }
        setValue(Self.defaultUserAgent, forHTTPHeaderField: "User-Agent")
    }

    // MARK: - NSSecureCoding and NSCopying

    /// Archives use secure coding.
    public class var supportsSecureCoding: Bool { true }

    /// Restores the headers (in order), string encoding, request properties that were set, and the methods that
    /// encode parameters in the URI. The query-string closure is not archived.
    public required init?(coder: NSCoder) {
        super.init()
        guard coder.decodeArchiveVersion(),
            let names = coder.strings("headerNames"), let values = coder.strings("headerValues"),
            names.count == values.count,
            let encoding = coder.number("stringEncoding"), let methods = coder.strings("methodsEncodingParametersInURI")
        else { return nil }
        var state = State()
        state.stringEncoding = String.Encoding(rawValue: encoding.uintValue)
        for (name, value) in zip(names, values) where state.headers[name] == nil {
            state.headers[name] = value
            state.headerOrder.append(name)
        }
        state.methodsEncodingParametersInURI = Set(methods.map { $0.uppercased() })
        state.timeoutInterval = coder.number("timeoutInterval")?.doubleValue
        state.cachePolicy = coder.number("cachePolicy").flatMap { URLRequest.CachePolicy(rawValue: $0.uintValue) }
        state.httpShouldHandleCookies = coder.number("httpShouldHandleCookies")?.boolValue
        state.allowsCellularAccess = coder.number("allowsCellularAccess")?.boolValue
        state.httpShouldUsePipelining = coder.number("httpShouldUsePipelining")?.boolValue
        state.networkServiceType = coder.number("networkServiceType").flatMap {
            URLRequest.NetworkServiceType(rawValue: $0.uintValue)
        }
        self.state.wrappedValue = state
    }

    /// Archives the configuration (not the query-string closure).
    open func encode(with coder: NSCoder) {
        coder.encodeArchiveVersion()
        let state = self.state.wrappedValue
        coder.encode(state.headerOrder as NSArray, forKey: "headerNames")
        coder.encode(state.headerOrder.map { state.headers[$0] ?? "" } as NSArray, forKey: "headerValues")
        coder.encode(NSNumber(value: state.stringEncoding.rawValue), forKey: "stringEncoding")
        coder.encode(state.methodsEncodingParametersInURI.sorted() as NSArray, forKey: "methodsEncodingParametersInURI")
        coder.encodeIfPresent(state.timeoutInterval.map { NSNumber(value: $0) }, forKey: "timeoutInterval")
        coder.encodeIfPresent(state.cachePolicy.map { NSNumber(value: $0.rawValue) }, forKey: "cachePolicy")
        coder.encodeIfPresent(
            state.httpShouldHandleCookies.map { NSNumber(value: $0) }, forKey: "httpShouldHandleCookies")
        coder.encodeIfPresent(state.allowsCellularAccess.map { NSNumber(value: $0) }, forKey: "allowsCellularAccess")
        coder.encodeIfPresent(
            state.httpShouldUsePipelining.map { NSNumber(value: $0) }, forKey: "httpShouldUsePipelining")
        coder.encodeIfPresent(
            state.networkServiceType.map { NSNumber(value: $0.rawValue) }, forKey: "networkServiceType")
    }

    /// An independent serializer of the same class with the same configuration; as in AFNetworking, the
    /// query-string closure is not copied.
    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = type(of: self).init()
        var state = self.state.wrappedValue
        state.queryStringSerialization = nil
        copy.state.wrappedValue = state
        return copy
    }

    // MARK: - Request properties (applied only when set)

    /// The encoding of query strings and form bodies. Default `.utf8`.
    public var stringEncoding: String.Encoding {
        get { state.read { $0.stringEncoding } }
        set { state.write { $0.stringEncoding = newValue } }
    }

    /// The timeout of built requests; applied only once set. Default 60 seconds, as `URLRequest`.
    public var timeoutInterval: TimeInterval {
        get { state.read { $0.timeoutInterval } ?? 60 }
        set { state.write { $0.timeoutInterval = newValue } }
    }

    /// The cache policy of built requests; applied only once set.
    public var cachePolicy: URLRequest.CachePolicy {
        get { state.read { $0.cachePolicy } ?? .useProtocolCachePolicy }
        set { state.write { $0.cachePolicy = newValue } }
    }

    /// Whether built requests send and store cookies; applied only once set.
    public var httpShouldHandleCookies: Bool {
        get { state.read { $0.httpShouldHandleCookies } ?? true }
        set { state.write { $0.httpShouldHandleCookies = newValue } }
    }

    /// Whether built requests may use a cellular link; applied only once set.
    public var allowsCellularAccess: Bool {
        get { state.read { $0.allowsCellularAccess } ?? true }
        set { state.write { $0.allowsCellularAccess = newValue } }
    }

    /// Whether built requests may be pipelined; applied only once set.
    public var httpShouldUsePipelining: Bool {
        get { state.read { $0.httpShouldUsePipelining } ?? false }
        set { state.write { $0.httpShouldUsePipelining = newValue } }
    }

    /// The network service type of built requests; applied only once set.
    public var networkServiceType: URLRequest.NetworkServiceType {
        get { state.read { $0.networkServiceType } ?? .default }
        set { state.write { $0.networkServiceType = newValue } }
    }

    /// Methods whose parameters go in the URL query rather than the body. Default GET, HEAD and DELETE.
    public var httpMethodsEncodingParametersInURI: Set<String> {
        get { state.read { $0.methodsEncodingParametersInURI } }
        set { state.write { $0.methodsEncodingParametersInURI = Set(newValue.map { $0.uppercased() }) } }
    }

    // MARK: - Headers

    /// The headers added to every request that does not already have them.
    public var httpRequestHeaders: [String: String] {
        state.read { $0.headers }
    }

    /// Sets (or, with nil, removes) a default header. Field names are matched without regard to case.
    public func setValue(_ value: String?, forHTTPHeaderField field: String) {
        state.write { state in
            let existing = state.headers.keys.first { $0.equalsIgnoringASCIICase(field) }
            if let existing {
                state.headers[existing] = nil
                state.headerOrder.removeAll { $0 == existing }
            }
            if let value {
                state.headers[field] = value
                state.headerOrder.append(field)
            }
        }
    }

    /// The default header for `field`, matched without regard to case.
    public func value(forHTTPHeaderField field: String) -> String? {
        state.read { state in
            state.headers.first { $0.key.equalsIgnoringASCIICase(field) }?.value
        }
    }

    /// Sets `Authorization: Basic base64(username:password)`.
    public func setAuthorizationHeaderField(username: String, password: String) {
        let token = Data("\(username):\(password)".utf8).base64EncodedString()
        setValue("Basic \(token)", forHTTPHeaderField: "Authorization")
    }

    /// Removes the `Authorization` header.
    public func clearAuthorizationHeader() {
        setValue(nil, forHTTPHeaderField: "Authorization")
    }

    // MARK: - Query string

    /// Replaces the query-string encoding with `block`; an error it throws fails the request with that error.
    public func setQueryStringSerialization(_ block: @escaping @Sendable (URLRequest, Any) throws -> String) {
        state.write { $0.queryStringSerialization = block }
    }

    /// Percent-escapes `string` as a query key or value (AFNetworking's `AFPercentEscapedStringFromString`).
    public static func percentEscapedString(_ string: String) -> String {
        QueryStringEncoding.percentEscaped(string)
    }

    /// The query string for `parameters` (AFNetworking's `AFQueryStringFromParameters`).
    ///
    /// Parameters nested more deeply than ``maximumNestingDepth`` give an empty string; the request-building
    /// methods throw for them instead.
    public static func queryString(from parameters: [String: Any]) -> String {
        (try? QueryStringEncoding.queryString(from: parameters)) ?? ""
    }

    /// How many arrays, dictionaries and sets of parameters (or values of an `Encodable` parameter) may nest, one
    /// inside the other: 500, below the 512 levels `JSONSerialization` itself accepts. Deeper parameters fail with an
    /// error in ``SessionKitError/requestSerializationDomain`` instead of overflowing the stack of the calling thread,
    /// whatever its size.
    public static let maximumNestingDepth = NestingLimit.maximumDepth

    // MARK: - Building requests

    /// Builds a request for `method` and `urlString` with `parameters` encoded.
    ///
    /// `urlString` is read as `URL(string:)` reads it, as AFNetworking does with `[NSURL URLWithString:]`: a relative
    /// reference (`"users"`) gives a request with a relative URL, which a manager then fails to load.
    ///
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain`` for a string that is not a URL or
    ///   parameters that cannot be encoded, or the error of the query-string block.
    public func request(withMethod method: String, urlString: String, parameters: Any?) throws -> URLRequest {
        guard let url = URL(string: urlString) else {
            throw SessionKitError.requestSerialization(.badURL, "The URL \"\(urlString)\" is not a valid URL.")
        }
        var request = URLRequest(url: url)
        let method = method.uppercased()
        // A new request's method is GET already; FoundationNetworking's setter normalizes the name each time (about
        // 8k instructions), so the verb every small request uses skips it.
        if method != "GET" { request.httpMethod = method }
        applyRequestProperties(to: &request)
        let kind = type(of: self)
        guard
            kind == HTTPRequestSerializer.self || kind == JSONRequestSerializer.self
                || kind == PropertyListRequestSerializer.self
        else {
            return try self.request(bySerializingRequest: request, withParameters: parameters)
        }
        // SessionKit's own serialization (no subclass overrides it), done in place: handing the request to
        // `request(bySerializingRequest:withParameters:)` would copy its Foundation storage at the first change
        // (about 7k instructions).
        try serialize(&request, parameters: parameters)
        return request
    }

    /// What ``request(bySerializingRequest:withParameters:)`` does, on `request` itself: each of SessionKit's own
    /// serializers gives its encoding here too.
    func serialize(_ request: inout URLRequest, parameters: Any?) throws {
        try queryEncode(&request, parameters: parameters)
    }

    /// Adds the default headers and encodes `parameters` into `request`.
    open func request(bySerializingRequest request: URLRequest, withParameters parameters: Any?) throws -> URLRequest {
        var request = request
        try queryEncode(&request, parameters: parameters)
        return request
    }

    /// For body serializers, on `request` itself: the query encoding for URI methods; otherwise the default headers,
    /// `contentType` when there are parameters and the request has none, and the body `encode` makes of the
    /// parameters.
    func bodyEncode(
        _ request: inout URLRequest, parameters: Any?, contentType: String, encode: (Any) throws -> Data
    ) throws {
        if encodesParametersInURI(request.httpMethod) {
            return try queryEncode(&request, parameters: parameters)
        }
        applyDefaultHeaders(to: &request, contentType: parameters == nil ? nil : contentType)
        guard let original = parameters else { return }
        request.httpBody = try encode(try Self.propertyListValue(original))
    }

    /// AFNetworking's query and form encoding of `parameters` into `request` itself.
    func queryEncode(_ request: inout URLRequest, parameters: Any?) throws {
        let method = (request.httpMethod ?? "GET").uppercased()
        let (encoding, custom, uriMethods) = state.read {
            ($0.stringEncoding, $0.queryStringSerialization, $0.methodsEncodingParametersInURI)
        }
        applyDefaultHeaders(
            to: &request, contentType: uriMethods.contains(method) ? nil : "application/x-www-form-urlencoded")

        var query: String?
        if let parameters {
            if let custom {
                query = try custom(request, parameters)
            } else {
                query = try QueryStringEncoding.queryString(from: try Self.propertyListValue(parameters))
            }
        }

        if uriMethods.contains(method) {
            if let query, !query.isEmpty, let url = request.url {
                request.url = Self.url(url, appendingQuery: query)
            }
        } else {
            guard let body = (query ?? "").data(using: encoding) else {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeRawData, "The parameters cannot be written in the string encoding \(encoding).")
            }
            request.httpBody = body
        }
    }

    // MARK: - Multipart

    /// Builds a `multipart/form-data` request: `parameters` become form parts, then `block` appends its own.
    ///
    /// - Throws: An error in ``SessionKitError/requestSerializationDomain`` when a part cannot be read.
    public func multipartFormRequest(
        withMethod method: String,
        urlString: String,
        parameters: [String: Any]?,
        constructingBodyWith block: ((MultipartFormData) throws -> Void)?
    ) throws -> URLRequest {
        guard method.uppercased() != "GET", method.uppercased() != "HEAD" else {
            throw SessionKitError.requestSerialization(.badURL, "A multipart body cannot be sent with \(method).")
        }
        var request = try self.request(withMethod: method, urlString: urlString, parameters: nil)
        request.httpBody = nil
        let form = MultipartFormBody()
        if let parameters {
            for pair in try QueryStringEncoding.pairs(key: nil, value: try Self.propertyListValue(parameters)) {
                // As AFNetworking: bytes as they are, `NSNull` as an empty part, anything else as its text.
                let data: Data
                switch pair.value {
                case let bytes as Data:
                    data = bytes
                case nil, is NSNull:
                    data = Data()
                case let value?:
                    guard let encoded = QueryStringEncoding.text(of: value).data(using: stringEncoding) else {
                        throw SessionKitError.requestSerialization(
                            .cannotDecodeRawData, "The parameter \(pair.key) cannot be written in \(stringEncoding).")
                    }
                    data = encoded
                }
                form.appendPart(withFormData: data, name: pair.key)
            }
        }
        try block?(form)
        if let refusal = form.refusal { throw refusal }
        // A form without parts is not a multipart body (RFC 2046's grammar asks for one part): as AFNetworking, the
        // request goes as the serializer made it, an empty form-encoded POST.
        guard !form.isEmpty else { return request }
        let stream = form.makeStream()
        request.httpBodyStream = stream
        // Both fields in one assignment, replacing any of either name (as `setValue` would, at twice the cost).
        var fields = (request.allHTTPHeaderFields ?? [:]).filter { name, _ in
            !name.equalsIgnoringASCIICase("Content-Type") && !name.equalsIgnoringASCIICase("Content-Length")
        }
        fields["Content-Type"] = "multipart/form-data; boundary=\(form.boundary)"
        fields["Content-Length"] = String(stream.contentLength)
        request.allHTTPHeaderFields = fields
        return request
    }

    /// Writes the body stream of a multipart request to `fileURL`, in chunks, on a queue of its own, and returns
    /// the request without a body, ready to be uploaded from that file (with an exact `Content-Length`).
    ///
    /// `completionHandler` runs on that queue once the file is written, with nil or the error.
    public func request(
        withMultipartFormRequest request: URLRequest,
        writingStreamContentsToFile fileURL: URL,
        completionHandler: (@Sendable (Error?) -> Void)?
    ) -> URLRequest {
        var stripped = request
        // The stream is read on the writing queue only, once.
        nonisolated(unsafe) let stream = request.httpBodyStream
        let body = request.httpBody
        stripped.httpBodyStream = nil
        stripped.httpBody = nil
        DispatchQueue(label: "com.sessionkit.multipart.write").async {
            do {
                if let stream {
                    try Self.copy(stream, to: fileURL)
                } else {
                    try (body ?? Data()).write(to: fileURL)
                }
                completionHandler?(nil)
            } catch {
                completionHandler?(error)
            }
        }
        return stripped
    }

    /// Copies `stream` to a new file at `fileURL`, 64 KiB at a time.
    private static func copy(_ stream: InputStream, to fileURL: URL) throws {
        guard FileManager.default.createFile(atPath: fileURL.path, contents: nil) else {
            throw SessionKitError.requestSerialization(.cannotCreateFile, "Cannot create \(fileURL.path).")
        }
        let handle = try FileHandle(forWritingTo: fileURL)
        defer { try? handle.close() }
        if stream.streamStatus == .notOpen { stream.open() }
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count < 0 {
                throw stream.failure
                    ?? SessionKitError.requestSerialization(.cannotDecodeRawData, "The body stream failed.")
            }
            if count == 0 { break }
            try handle.write(contentsOf: buffer[0..<count])
        }
    }

    // MARK: - Helpers

    /// `parameters` as dictionaries, arrays and scalars: unchanged when it already is one, encoded through
    /// `JSONEncoder` when it is another `Encodable` value (so a struct follows the same rules as a dictionary).
    ///
    /// - Throws: A request-serialization error when the value cannot be encoded, or when it nests more deeply than
    ///   ``maximumNestingDepth`` (checked before `JSONEncoder`, which recurses, sees it).
    static func propertyListValue(_ parameters: Any) throws -> Any {
        if parameters is [AnyHashable: Any] || parameters is [Any] || parameters is NSSet
            || parameters is Set<AnyHashable>
        {
            return parameters
        }
        guard let encodable = parameters as? any Encodable else { return parameters }
        let typeName = "\(type(of: parameters))"
        // `JSONEncoder` recurses as deep as the value: a deep value is measured to the limit, then encoded, on a
        // thread with a large stack.
        let deep = NestingProbe.exceeded(by: encodable, limit: NestingLimit.largeStackThreshold)
        return try NestingLimit.onLargeStack(if: deep) {
            guard !deep || !NestingProbe.exceeded(by: encodable, limit: NestingLimit.maximumDepth) else {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeRawData, NestingLimit.reason("The parameters of type \(typeName) are"))
            }
            do {
                let data = try JSONEncoder().encode(encodable)
                return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            } catch {
                throw SessionKitError.requestSerialization(
                    .cannotDecodeRawData, "The parameters of type \(typeName) cannot be encoded: \(error)",
                    underlying: error)
            }
        }
    }

    /// Copies the set request properties onto `request`.
    func applyRequestProperties(to request: inout URLRequest) {
        let state = self.state.wrappedValue
        if let value = state.timeoutInterval { request.timeoutInterval = value }
        if let value = state.cachePolicy { request.cachePolicy = value }
        if let value = state.httpShouldHandleCookies { request.httpShouldHandleCookies = value }
        if let value = state.allowsCellularAccess { request.allowsCellularAccess = value }
        if let value = state.httpShouldUsePipelining { request.usesHTTPPipelining = value }
        if let value = state.networkServiceType { request.networkServiceType = value }
    }

    /// Adds each default header that `request` does not carry yet, and `contentType` as its `Content-Type` unless it
    /// has one, in one assignment of its fields: each `setValue(_:forHTTPHeaderField:)` of Foundation compares and copies
    /// every field again (it cost as much as the rest of building the request).
    func applyDefaultHeaders(to request: inout URLRequest, contentType: String? = nil) {
        let (headers, order) = state.read { ($0.headers, $0.headerOrder) }
        var fields = request.allHTTPHeaderFields ?? [:]
        var changed = false
        func add(_ name: String, _ value: String) {
            guard !fields.keys.contains(where: { $0.equalsIgnoringASCIICase(name) }) else { return }
            fields[name] = value
            changed = true
        }
        for field in order {
            if let value = headers[field] { add(field, value) }
        }
        if let contentType { add("Content-Type", contentType) }
        if changed { request.allHTTPHeaderFields = fields }
    }

    /// Whether `method` sends its parameters in the URL query.
    func encodesParametersInURI(_ method: String?) -> Bool {
        let method = (method ?? "GET").uppercased()
        return state.read { $0.methodsEncodingParametersInURI.contains(method) }
    }

    /// `url` with `query` appended after `?`, or after `&` when it already has a query.
    static func url(_ url: URL, appendingQuery query: String) -> URL {
        var string = url.absoluteString
        var fragment = ""
        if let hashIndex = string.firstIndex(of: "#") {
            fragment = String(string[hashIndex...])
            string = String(string[..<hashIndex])
        }
        let separator = url.query == nil ? "?" : (string.hasSuffix("?") || string.hasSuffix("&") ? "" : "&")
        return URL(string: string + separator + query + fragment) ?? url
    }

    /// `Accept-Language` from the process's preferred languages: at most six, with falling q-values.
    static func acceptLanguageHeader() -> String {
        Locale.preferredLanguages.prefix(6).enumerated().map { index, language in
            let q = 1.0 - Double(index) * 0.1
            let qText = index == 0 ? "1" : String(format: "%.1f", q)
            return "\(language);q=\(qText)"
        }.joined(separator: ", ")
    }

    /// `<executable>/<version> (Linux <kernel release>) SessionKit/<version>`.
    static let defaultUserAgent: String = {
        let info = Bundle.main.infoDictionary
        let executable = (info?["CFBundleExecutable"] as? String) ?? ProcessInfo.processInfo.processName
        let version = (info?["CFBundleShortVersionString"] as? String) ?? (info?["CFBundleVersion"] as? String) ?? "0"
        var system = utsname()
        uname(&system)
        let release = withUnsafeBytes(of: &system.release) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let agent = "\(executable)/\(version) (Linux \(release)) SessionKit/\(SessionKitVersion.current)"
        // A header value must be ASCII: drop anything else rather than send a header servers may reject.
        return String(agent.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 }.map(Character.init))
    }()
}
