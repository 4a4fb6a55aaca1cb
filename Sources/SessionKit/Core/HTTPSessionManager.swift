import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A ``URLSessionManager`` for an HTTP API: a base URL, a request serializer and the HTTP verbs, each in a closure
/// form (AFNetworking's `GET:parameters:headers:progress:success:failure:`) and an async form.
///
/// ```swift
/// let manager = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:8080/v1"))
/// manager.requestSerializer = JSONRequestSerializer()
/// manager.get("users", parameters: ["page": 2], headers: nil, progress: nil,
///             success: { task, object in print(object ?? "empty") },
///             failure: { task, error in print(error) })
///
/// let result = try await manager.post("users", parameters: ["name": "Ada"])
/// print(result.statusCode, result.object ?? "")
/// ```
///
/// Relative paths resolve against ``baseURL`` as in AFNetworking: with `http://a/v1/`, `foo` is `http://a/v1/foo`,
/// `/foo` is `http://a/foo`, `""` is `http://a/v1/`, and an absolute URL wins.
open class HTTPSessionManager: URLSessionManager, @unchecked Sendable {
    // @unchecked Sendable: `requestSerializerStorage` is a `Protected` box; `baseURL` is set once in `init`.

    /// The URL relative paths resolve against. A URL with a path is stored with a trailing slash
    /// (`http://a/v1` becomes `http://a/v1/`), so that `foo` lands under it.
    public private(set) var baseURL: URL?

    /// What a plain relative path is appended to, resolving it against ``baseURL``: the base's string when it ends
    /// with `/` (with `/` added to an authority without a path), and has no query or fragment; nil otherwise.
    /// Foundation's resolution and `absoluteString` cost about 10k instructions a call.
    private let appendableBase: String?

    private let requestSerializerStorage = Protected<HTTPRequestSerializer>(HTTPRequestSerializer())

    /// Creates a manager.
    ///
    /// - Parameters:
    ///   - baseURL: The URL relative paths resolve against, or nil to pass absolute URLs only.
    ///   - sessionConfiguration: The session's configuration; nil means `.default`.
    public init(baseURL: URL? = nil, sessionConfiguration: URLSessionConfiguration? = nil) {
        let normalized = baseURL.map(Self.normalizedBaseURL)
        self.baseURL = normalized
        appendableBase = normalized.flatMap { url in
            let base = url.absoluteString
            guard !base.contains("?"), !base.contains("#") else { return nil }
            if base.hasSuffix("/") { return base }
            // RFC 3986 5.2.3: with an authority and an empty path, the path merges under "/".
            return url.host != nil && url.path.isEmpty ? base + "/" : nil
        }
        super.init(sessionConfiguration: sessionConfiguration)
    }

    /// A progress closure; it runs on the delegate queue.
    public typealias ProgressHandler = @Sendable (Progress) -> Void
    /// What a verb's success closure gets: the task and the serialized response object.
    public typealias Success = @Sendable (URLSessionDataTask, Any?) -> Void
    /// What a verb's failure closure gets: the task (nil when the request could not be built) and the error.
    public typealias Failure = @Sendable (URLSessionDataTask?, Error) -> Void

    // MARK: - NSSecureCoding and NSCopying

    /// Restores a manager from an archive: what ``URLSessionManager`` archives, plus the base URL and the request
    /// serializer.
    public required convenience init?(coder: NSCoder) {
        guard coder.decodeArchiveVersion(), let configuration = Self.decodeConfiguration(from: coder) else {
            return nil
        }
        var baseURL: URL?
        if let object = coder.object("baseURL") {
            guard let url = object as? URL, url.scheme != nil else { return nil }
            baseURL = url
        }
        self.init(baseURL: baseURL, sessionConfiguration: configuration)
        guard restoreArchivedSettings(from: coder),
            let serializer = coder.object("requestSerializer") as? HTTPRequestSerializer
        else { return nil }
        requestSerializer = serializer
    }

    /// Archives what ``URLSessionManager`` archives, plus the base URL and the request serializer.
    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        if let baseURL { coder.encode(baseURL.absoluteURL as NSURL, forKey: "baseURL") }
        coder.encode(requestSerializer, forKey: "requestSerializer")
    }

    /// An independent manager with its own session, the same base URL and copies of its serializers.
    open override func copy(with zone: NSZone? = nil) -> Any {
        let copy = HTTPSessionManager(baseURL: baseURL, sessionConfiguration: Self.copied(sessionConfiguration))
        copyArchivedSettings(to: copy)
        copy.requestSerializer = requestSerializer.copy(with: zone) as? HTTPRequestSerializer ?? requestSerializer
        return copy
    }

    /// Builds the requests of the verb methods. Default ``HTTPRequestSerializer``.
    open var requestSerializer: HTTPRequestSerializer {
        get { requestSerializerStorage.wrappedValue }
        set { requestSerializerStorage.wrappedValue = newValue }
    }

    // MARK: - Verbs (closure forms)

    /// Creates and resumes a `GET` task.
    ///
    /// - Parameters:
    ///   - urlString:  A path relative to ``baseURL``, or an absolute URL.
    ///   - parameters: Encoded into the query by ``requestSerializer``.
    ///   - headers:    Set on this request, over the serializer's headers.
    ///   - progress:   Download progress, on the delegate queue.
    ///   - success:    Called on the completion queue with the task and the serialized object.
    ///   - failure:    Called on the completion queue with the task (nil when the request could not be built)
    ///     and the error.
    /// - Returns: The task, or nil when the request could not be built.
    @discardableResult
    open func get(
        _ urlString: String, parameters: Any?, headers: [String: String]?, progress: ProgressHandler?,
        success: Success?, failure: Failure?
    ) -> URLSessionDataTask? {
        start("GET", urlString, parameters, headers, download: progress, success: success, failure: failure)
    }

    /// Creates and resumes a `HEAD` task; `success` gets the task only.
    @discardableResult
    open func head(
        _ urlString: String, parameters: Any?, headers: [String: String]?,
        success: (@Sendable (URLSessionDataTask) -> Void)?, failure: Failure?
    ) -> URLSessionDataTask? {
        start("HEAD", urlString, parameters, headers, success: { task, _ in success?(task) }, failure: failure)
    }

    /// Creates and resumes a `POST` task; `progress` reports the upload.
    @discardableResult
    open func post(
        _ urlString: String, parameters: Any?, headers: [String: String]?, progress: ProgressHandler?,
        success: Success?, failure: Failure?
    ) -> URLSessionDataTask? {
        start("POST", urlString, parameters, headers, upload: progress, success: success, failure: failure)
    }

    /// Creates and resumes a multipart `POST` task: `parameters` become form parts, then `block` appends its own.
    @discardableResult
    open func post(
        _ urlString: String,
        parameters: [String: Any]?,
        headers: [String: String]?,
        constructingBodyWith block: ((MultipartFormData) throws -> Void)?,
        progress: ProgressHandler?,
        success: Success?,
        failure: Failure?
    ) -> URLSessionDataTask? {
        let completion = Self.verbCompletion(success: success, failure: failure)
        let request: URLRequest
        do {
            var built = try requestSerializer.multipartFormRequest(
                withMethod: "POST", urlString: try absoluteURLString(urlString), parameters: parameters,
                constructingBodyWith: block)
            Self.apply(headers, to: &built)
            request = built
        } catch {
            reportBuildFailure(error, failure: failure)
            return nil
        }
        let task = makeTask(.uploadStream(request), uploadProgress: progress, completion: completion)
        return resumed(task as? URLSessionDataTask)
    }

    /// Creates and resumes a `PUT` task.
    @discardableResult
    open func put(
        _ urlString: String, parameters: Any?, headers: [String: String]?, success: Success?, failure: Failure?
    )
        -> URLSessionDataTask?
    {
        start("PUT", urlString, parameters, headers, success: success, failure: failure)
    }

    /// Creates and resumes a `PATCH` task.
    @discardableResult
    open func patch(
        _ urlString: String, parameters: Any?, headers: [String: String]?, success: Success?, failure: Failure?
    )
        -> URLSessionDataTask?
    {
        start("PATCH", urlString, parameters, headers, success: success, failure: failure)
    }

    /// Creates and resumes a `DELETE` task; parameters go in the query.
    @discardableResult
    open func delete(
        _ urlString: String, parameters: Any?, headers: [String: String]?, success: Success?, failure: Failure?
    )
        -> URLSessionDataTask?
    {
        start("DELETE", urlString, parameters, headers, success: success, failure: failure)
    }

    /// Creates a task for any method, without resuming it.
    ///
    /// - Returns: The task, or nil when the request could not be built; `failure(nil, error)` then runs on the
    ///   completion queue.
    open func dataTask(
        withHTTPMethod method: String,
        urlString: String,
        parameters: Any?,
        headers: [String: String]?,
        uploadProgress: ProgressHandler?,
        downloadProgress: ProgressHandler?,
        success: Success?,
        failure: Failure?
    ) -> URLSessionDataTask? {
        let request: URLRequest
        do {
            request = try buildRequest(method: method, urlString: urlString, parameters: parameters, headers: headers)
        } catch {
            reportBuildFailure(error, failure: failure)
            return nil
        }
        let task = makeTask(
            .data(request), uploadProgress: uploadProgress, downloadProgress: downloadProgress,
            completion: Self.verbCompletion(success: success, failure: failure))
        return task as? URLSessionDataTask
    }

    // MARK: - Verbs (async forms)

    /// Sends a `GET` and returns the serialized result. Cancelling the Swift task cancels the request.
    /// - Throws: The transport, validation or serialization error.
    public func get(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("GET", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `HEAD` and returns the result (its body is empty).
    public func head(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("HEAD", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `POST` and returns the serialized result.
    public func post(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("POST", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `PUT` and returns the serialized result.
    public func put(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("PUT", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `PATCH` and returns the serialized result.
    public func patch(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("PATCH", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `DELETE` and returns the serialized result.
    public func delete(
        _ urlString: String, parameters: Any? = nil, headers: [String: String]? = nil
    ) async throws -> HTTPResult {
        try await perform("DELETE", urlString, parameters: parameters, headers: headers)
    }

    /// Sends a `GET` and decodes the JSON body into `T` (statuses outside 200–299 fail first).
    /// - Throws: The transport or validation error, or a decoding error naming the key path.
    public func get<T: Decodable>(
        _ urlString: String,
        parameters: Any? = nil,
        headers: [String: String]? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await decode("GET", urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
    }

    /// Sends a `POST` and decodes the JSON body into `T`.
    public func post<T: Decodable>(
        _ urlString: String,
        parameters: Any? = nil,
        headers: [String: String]? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await decode("POST", urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
    }

    /// Sends a request with any method and returns the serialized result.
    ///
    /// - Parameters:
    ///   - method: The HTTP method, such as `GET` or `PUT`.
    ///   - urlString: A path resolved against ``baseURL``, or an absolute URL.
    ///   - parameters: Serialized into the query or the body by the ``requestSerializer``.
    ///   - headers: Set on the request after the serializer's headers.
    ///   - interceptor: This call's own adapter and retrier, after the manager's
    ///     ``URLSessionManager/interceptor``.
    public func request(
        _ method: String,
        _ urlString: String,
        parameters: Any? = nil,
        headers: [String: String]? = nil,
        interceptor: (any RequestInterceptor)? = nil
    ) async throws -> HTTPResult {
        try await perform(method, urlString, parameters: parameters, headers: headers, interceptor: interceptor)
    }

    /// The closure form of ``request(_:_:parameters:headers:interceptor:)``: the request runs through the
    /// interceptors, and `success` or `failure` is called once on the ``URLSessionManager/completionQueue`` (AFNetworking's shape; an
    /// adapter's refusal and a request that cannot be built reach `failure` too, the latter with no request).
    ///
    /// - Returns: A handle whose `cancel()` cancels the request.
    @discardableResult
    public func request(
        _ method: String,
        _ urlString: String,
        parameters: Any? = nil,
        headers: [String: String]? = nil,
        interceptor: (any RequestInterceptor)? = nil,
        success: (@Sendable (SessionRequest, HTTPResult) -> Void)?,
        failure: (@Sendable (SessionRequest?, Error) -> Void)?
    ) -> Task<Void, Never> {
        let request: URLRequest
        do {
            request = try buildRequest(method: method, urlString: urlString, parameters: parameters, headers: headers)
        } catch {
            onCompletionQueue { failure?(nil, error) }
            return Task {}
        }
        let created = Protected<SessionRequest?>(nil)
        return Task { [self] in
            do {
                let result = try await perform(
                    request, interceptor: interceptor, onCreate: { created.wrappedValue = $0 })
                let sessionRequest = created.wrappedValue
                onCompletionQueue { if let sessionRequest { success?(sessionRequest, result) } }
            } catch {
                let sessionRequest = created.wrappedValue
                onCompletionQueue { failure?(sessionRequest, error) }
            }
        }
    }

    /// Sends a `GET` and returns as soon as the response head arrived, with the body as a stream of chunks (see
    /// ``URLSessionManager/bytes(for:interceptor:)``).
    public func stream(
        _ urlString: String,
        parameters: Any? = nil,
        headers: [String: String]? = nil,
        interceptor: (any RequestInterceptor)? = nil
    ) async throws -> StreamedResponse {
        let request = try buildRequest(method: "GET", urlString: urlString, parameters: parameters, headers: headers)
        return try await bytes(for: request, interceptor: interceptor)
    }

    // MARK: - Helpers

    /// `urlString` resolved against ``baseURL``; `""` is the base URL itself, as `[NSURL URLWithString:@""
    /// relativeToURL:]` makes it.
    func absoluteURLString(_ urlString: String) throws -> String {
        if urlString.isEmpty, let baseURL { return baseURL.absoluteString }
        if let appendableBase, Self.isPlainRelativePath(urlString) { return appendableBase + urlString }
        guard let url = URL(string: urlString, relativeTo: baseURL) else {
            throw SessionKitError.requestSerialization(.badURL, "\"\(urlString)\" is not a valid URL.")
        }
        return url.absoluteString
    }

    /// Whether RFC 3986 resolves `path` against a base ending in `/` (no query, no fragment) by appending it: a
    /// relative path of unreserved characters and `/` only (no scheme, query, fragment, percent sign or authority),
    /// with no `.` or `..` segment to remove.
    static func isPlainRelativePath(_ path: String) -> Bool {
        guard let first = path.utf8.first, first != UInt8(ascii: "/") else { return false }
        var segmentStart = true
        var dots = 0
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "/"):
                if segmentStart && (dots == 1 || dots == 2) { return false }
                (segmentStart, dots) = (true, 0)
                continue
            case UInt8(ascii: "."):
                if segmentStart { dots += 1 }
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
                (segmentStart, dots) = (false, 0)
            default:
                return false
            }
        }
        return !(segmentStart && (dots == 1 || dots == 2))
    }

    func buildRequest(
        method: String, urlString: String, parameters: Any?, headers: [String: String]?
    ) throws
        -> URLRequest
    {
        // URLRequest on Linux drops a value with CR, LF or NUL without a word: check before it sees them.
        if let error = HTTPFieldValidation.error(forMethod: method)
            ?? HTTPFieldValidation.error(forFields: requestSerializer.httpRequestHeaders)
            ?? HTTPFieldValidation.error(forFields: headers ?? [:])
        {
            throw error
        }
        var request = try requestSerializer.request(
            withMethod: method, urlString: try absoluteURLString(urlString), parameters: parameters)
        Self.apply(headers, to: &request)
        return request
    }

    private static func apply(_ headers: [String: String]?, to request: inout URLRequest) {
        for (field, value) in headers ?? [:] {
            request.setValue(value, forHTTPHeaderField: field)
        }
    }

    /// Creates the task of a verb with no progress closures and resumes it.
    private func start(
        _ method: String, _ urlString: String, _ parameters: Any?, _ headers: [String: String]?,
        upload: ProgressHandler? = nil, download: ProgressHandler? = nil, success: Success?, failure: Failure?
    ) -> URLSessionDataTask? {
        resumed(
            dataTask(
                withHTTPMethod: method, urlString: urlString, parameters: parameters, headers: headers,
                uploadProgress: upload, downloadProgress: download, success: success, failure: failure))
    }

    private func resumed(_ task: URLSessionDataTask?) -> URLSessionDataTask? {
        if let task { resume(task) }
        return task
    }

    private func reportBuildFailure(_ error: Error, failure: Failure?) {
        onCompletionQueue { failure?(nil, error) }
    }

    private static func verbCompletion(
        success: Success?,
        failure: Failure?
    ) -> @Sendable (TaskOutcome) -> Void {
        { outcome in
            let task = outcome.task as? URLSessionDataTask
            if let error = outcome.error {
                failure?(task, error)
            } else if let task {
                success?(task, outcome.object)
            }
        }
    }

    private func perform(
        _ method: String,
        _ urlString: String,
        parameters: Any?,
        headers: [String: String]?,
        responseSerializer: URLResponseSerialization? = nil,
        interceptor: (any RequestInterceptor)? = nil
    ) async throws -> HTTPResult {
        let request = try buildRequest(method: method, urlString: urlString, parameters: parameters, headers: headers)
        return try await perform(request, interceptor: interceptor, responseSerializer: responseSerializer)
    }

    private func decode<T: Decodable>(
        _ method: String,
        _ urlString: String,
        parameters: Any?,
        headers: [String: String]?,
        as type: T.Type,
        decoder: JSONDecoder
    ) async throws -> T {
        let serializer = DecodableResponseSerializer(type, decoder: decoder)
        let result = try await perform(
            method, urlString, parameters: parameters, headers: headers,
            responseSerializer: serializer)
        guard let value = result.object as? T else {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "The response carried no \(T.self).",
                response: result.response, data: result.data)
        }
        return value
    }

    /// AFNetworking's rule: a base URL with a path gets a trailing slash.
    private static func normalizedBaseURL(_ url: URL) -> URL {
        guard !url.path.isEmpty, !url.absoluteString.hasSuffix("/") else { return url }
        return URL(string: url.absoluteString + "/") ?? url.appendingPathComponent("")
    }
}
