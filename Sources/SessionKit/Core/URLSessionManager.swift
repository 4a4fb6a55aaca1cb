import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Creates and manages the tasks of one `URLSession`, AFNetworking's `AFURLSessionManager` for Linux.
///
/// Every task gets a per-task delegate that collects its body, reports its upload and download `Progress`, runs
/// the ``responseSerializer`` off the delegate queue and calls the completion handler exactly once, on
/// ``completionQueue`` (by default the manager's own serial queue, never the main queue) inside
/// ``completionGroup``.
///
/// ```swift
/// let manager = URLSessionManager()
/// let request = URLRequest(url: URL(string: "http://127.0.0.1:8080/get")!)
/// let task = manager.dataTask(with: request) { response, object, error in
///     print(object ?? error ?? "nothing")
/// }
/// manager.resume(task)
/// ```
///
/// Delegate callbacks can be observed or taken over through the closure properties (``taskDidComplete``,
/// ``taskWillPerformHTTPRedirection``, …). Invalidate the session with
/// ``invalidateSessionCancelingTasks(_:resetSession:)``; a manager that is released finishes its running tasks
/// and then lets its session go.
open class URLSessionManager: NSObject, NSSecureCoding, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: mutable state lives in `Protected` boxes (`sessionState`, `settings`, `overrides`)
    // and in the thread-safe `TaskRegistry`.

    /// The queue URLSession delivers delegate callbacks on: serial, one per manager. Its `underlyingQueue` is the
    /// manager's own serial dispatch queue, where the curl transport's tasks deliver the same callbacks.
    public let operationQueue: OperationQueue
    /// The serial queue under ``operationQueue``.
    let delegateDispatchQueue = DispatchQueue(label: "com.sessionkit.manager.delegate")

    /// The configuration each session of this manager is built from (a copy is used).
    public let sessionConfiguration: URLSessionConfiguration

    let registry = TaskRegistry()
    let overrides = Protected(DelegateOverrides())
    /// The tracer and metrics factory of ``tracer`` and ``metricsFactory`` (URLSessionManager+Observability.swift).
    let telemetry = Protected(RequestTelemetry())
    /// Resumes, suspends and cancels tasks through the transport that made each.
    let control: TaskControl
    /// Where every task of this manager reports its events, whichever transport runs it: handed to the curl transport
    /// with each task it makes, and reached by URLSession's callbacks through the Foundation transport's session
    /// delegate.
    let eventSink: SessionDelegateHub

    private struct SessionState {
        var session: URLSession?
        /// Set when the session was invalidated without a reset: new tasks are refused.
        var refusesTasks = false
    }

    private struct Settings {
        var responseSerializer: URLResponseSerialization = JSONResponseSerializer()
        var securityPolicy: SecurityPolicy = .default
        var transport: Transport = .curl
        var tlsVersions = TLSVersionRange()
        var responseBodyLimits = ResponseBodyLimits.default
        var completionQueue: DispatchQueue?
        var completionGroup: DispatchGroup?
        var interceptor: (any RequestInterceptor)?
        var eventMonitors: [any EventMonitor] = []
        var connection = ConnectionOptions()
        var clientIdentity: ClientIdentity?
    }

    private let sessionState = Protected(SessionState())
    /// The implementation of each ``Transport`` for this manager.
    let taskTransports: TaskTransports
    /// Why every task must fail when the configuration's additional headers cannot go on the wire; checked once,
    /// when the configuration is read (as the curl transport reads it), not for each task.
    private let additionalHeadersError: NSError?
    private let settings = Protected(Settings())
    /// The completion queue when the caller set none: serial, so its hops are shared (``CompletionQueue``).
    private let ownCompletions = CompletionQueue.Batch(
        serial: DispatchQueue(label: "com.sessionkit.manager.completion"))
    private let privateCompletionGroup = DispatchGroup()

    /// Where response serializers run: off the delegate queue, concurrently across tasks.
    static let processingQueue = DispatchQueue(label: "com.sessionkit.manager.processing", attributes: .concurrent)

    /// Creates a manager and its session.
    ///
    /// - Parameter sessionConfiguration: The session's configuration; nil means `.default`.
    public init(sessionConfiguration: URLSessionConfiguration? = nil) {
        self.sessionConfiguration = sessionConfiguration ?? .default
        self.additionalHeadersError = Self.additionalHeadersError(of: self.sessionConfiguration)
        self.eventSink = SessionDelegateHub(registry: registry, overrides: overrides)
        self.taskTransports = TaskTransports(
            configuration: self.sessionConfiguration, delegateQueue: delegateDispatchQueue, sink: eventSink)
        self.control = TaskControl(transports: taskTransports)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "com.sessionkit.manager.delegate"
        // The curl transport's tasks deliver straight onto this queue, in order with URLSession's operations.
        queue.underlyingQueue = delegateDispatchQueue
        self.operationQueue = queue
        super.init()
        _ = session
    }

    // MARK: - NSSecureCoding and NSCopying

    /// Archives use secure coding.
    public class var supportsSecureCoding: Bool { true }

    /// Restores a manager from an archive (see ``SecureArchive``): its session configuration's fields, its
    /// response serializer and its transport. Closures, queues and running tasks are not archived.
    public required convenience init?(coder: NSCoder) {
        guard coder.decodeArchiveVersion(), let configuration = Self.decodeConfiguration(from: coder) else {
            return nil
        }
        self.init(sessionConfiguration: configuration)
        guard restoreArchivedSettings(from: coder) else { return nil }
    }

    /// Archives the session configuration's fields (one by one: `URLSessionConfiguration` is not `NSCoding` on
    /// Linux), the response serializer when it is archivable, and the transport.
    open func encode(with coder: NSCoder) {
        coder.encodeArchiveVersion()
        Self.encode(sessionConfiguration, to: coder)
        if let serializer = responseSerializer as? NSObject & NSSecureCoding {
            coder.encode(serializer, forKey: "responseSerializer")
        }
        coder.encode(transport.rawValue as NSString, forKey: "transport")
        coder.encode(securityPolicy, forKey: "securityPolicy")
    }

    /// An independent manager with its own session, an equal configuration and copies of its serializers.
    /// Closures are not copied, as in AFNetworking.
    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = URLSessionManager(sessionConfiguration: Self.copied(sessionConfiguration))
        copyArchivedSettings(to: copy)
        return copy
    }

    /// Reads the response serializer and transport of an archive into this manager.
    func restoreArchivedSettings(from coder: NSCoder) -> Bool {
        if let object = coder.object("responseSerializer") {
            guard let serializer = object as? URLResponseSerialization else { return false }
            responseSerializer = serializer
        }
        guard let name = coder.string("transport"), let transport = Transport(rawValue: name) else { return false }
        self.transport = transport
        if let object = coder.object("securityPolicy") {
            guard let policy = object as? SecurityPolicy else { return false }
            securityPolicy = policy
        }
        return true
    }

    /// Gives `copy` copies of this manager's serializer and its transport.
    func copyArchivedSettings(to copy: URLSessionManager) {
        let serializer = responseSerializer
        copy.responseSerializer =
            ((serializer as? NSCopying)?.copy(with: nil) as? URLResponseSerialization) ?? serializer
        copy.transport = transport
        copy.securityPolicy = securityPolicy.copy(with: nil) as? SecurityPolicy ?? securityPolicy
        copy.clientIdentity = clientIdentity  // shared in memory by a copy, never archived (a secret)
    }

    static func copied(_ configuration: URLSessionConfiguration) -> URLSessionConfiguration {
        configuration.copy() as? URLSessionConfiguration ?? configuration
    }

    /// Writes the configuration fields SessionKit archives.
    static func encode(_ configuration: URLSessionConfiguration, to coder: NSCoder) {
        coder.encode(NSNumber(value: configuration.timeoutIntervalForRequest), forKey: "timeoutIntervalForRequest")
        coder.encode(NSNumber(value: configuration.timeoutIntervalForResource), forKey: "timeoutIntervalForResource")
        coder.encode(configuration.additionalHeaderFields as NSDictionary, forKey: "httpAdditionalHeaders")
        coder.encode(NSNumber(value: configuration.requestCachePolicy.rawValue), forKey: "requestCachePolicy")
        coder.encode(
            NSNumber(value: configuration.httpMaximumConnectionsPerHost), forKey: "httpMaximumConnectionsPerHost")
        coder.encode(NSNumber(value: configuration.usesHTTPPipelining), forKey: "httpShouldUsePipelining")
        coder.encode(NSNumber(value: configuration.httpShouldSetCookies), forKey: "httpShouldSetCookies")
        coder.encode(NSNumber(value: configuration.httpCookieAcceptPolicy.rawValue), forKey: "httpCookieAcceptPolicy")
        coder.encode(NSNumber(value: configuration.allowsCellularAccess), forKey: "allowsCellularAccess")
    }

    /// Builds a `.default` configuration with the archived fields; nil when one is missing or out of range.
    static func decodeConfiguration(from coder: NSCoder) -> URLSessionConfiguration? {
        guard let requestTimeout = coder.number("timeoutIntervalForRequest")?.doubleValue,
            let resourceTimeout = coder.number("timeoutIntervalForResource")?.doubleValue,
            requestTimeout.isFinite, requestTimeout > 0, resourceTimeout.isFinite, resourceTimeout > 0,
            let headers = coder.stringDictionary("httpAdditionalHeaders"),
            let cachePolicy = coder.number("requestCachePolicy").flatMap({
                URLRequest.CachePolicy(rawValue: $0.uintValue)
            }),
            let connections = coder.number("httpMaximumConnectionsPerHost")?.intValue, connections > 0,
            let pipelining = coder.number("httpShouldUsePipelining")?.boolValue,
            let setCookies = coder.number("httpShouldSetCookies")?.boolValue,
            let acceptPolicy = coder.number("httpCookieAcceptPolicy").flatMap({
                HTTPCookie.AcceptPolicy(rawValue: $0.uintValue)
            }),
            let cellular = coder.number("allowsCellularAccess")?.boolValue
        else { return nil }
        let configuration = URLSessionConfiguration.default
        configuration.timeoutIntervalForRequest = requestTimeout
        configuration.timeoutIntervalForResource = resourceTimeout
        configuration.httpAdditionalHeaders = headers.isEmpty ? nil : headers
        configuration.requestCachePolicy = cachePolicy
        configuration.httpMaximumConnectionsPerHost = connections
        configuration.usesHTTPPipelining = pipelining
        configuration.httpShouldSetCookies = setCookies
        configuration.httpCookieAcceptPolicy = acceptPolicy
        configuration.allowsCellularAccess = cellular
        return configuration
    }

    deinit {
        // Running tasks finish and complete; the session then releases its delegate (and, through it, the hub).
        sessionState.read { $0.refusesTasks ? nil : $0.session }?.finishTasksAndInvalidate()
    }

    // MARK: - Configuration

    /// The session the manager's tasks run in. After an invalidation with a reset
    /// (``invalidateSessionCancelingTasks(_:resetSession:)``) a new one is built on first use; without a reset this
    /// stays the invalidated session.
    public var session: URLSession {
        sessionState.write { state in
            if let session = state.session { return session }
            let session = makeSession()
            state.session = session
            return session
        }
    }

    /// Decodes the bodies of tasks created from now on. Default ``JSONResponseSerializer``.
    ///
    /// A task keeps the serializer that was set when it was created.
    open var responseSerializer: any URLResponseSerialization {
        get { settings.read { $0.responseSerializer } }
        set { settings.write { $0.responseSerializer = newValue } }
    }

    /// Adapts and retries every request of the pipeline (``perform(_:interceptor:responseSerializer:onCreate:)``,
    /// the async verbs of ``HTTPSessionManager``, the HTTP core API), before a call's own interceptor; on the curl
    /// transport also the tasks of the task API and the closure verbs, whose one task then carries every attempt (a
    /// download and a streamed upload are adapted, not retried). Default nil. Not archived or copied.
    public var interceptor: (any RequestInterceptor)? {
        get { settings.read { $0.interceptor } }
        set { settings.write { $0.interceptor = newValue } }
    }

    /// Observe every step of the pipeline's requests (``EventMonitor``). Default none. Not archived or copied.
    public var eventMonitors: [any EventMonitor] {
        get { settings.read { $0.eventMonitors } }
        set { settings.write { $0.eventMonitors = newValue } }
    }

    /// The manager's interceptor, then `extra`, as one; nil when there is neither.
    func combinedInterceptor(_ extra: (any RequestInterceptor)?) -> (any RequestInterceptor)? {
        switch (interceptor, extra) {
        case (nil, nil): return nil
        case (let one?, nil), (nil, let one?): return one
        case (let first?, let second?): return Interceptor(interceptors: [first, second])
        }
    }

    /// How the requests of this manager move bytes. Default ``Transport/curl``. Tasks created after a change
    /// run in a new session; running tasks finish in the old one.
    public var transport: Transport {
        get { settings.read { $0.transport } }
        set {
            let changed = settings.write { settings -> Bool in
                defer { settings.transport = newValue }
                return settings.transport != newValue
            }
            guard changed else { return }
            sessionState.write { state in
                guard !state.refusesTasks, let session = state.session else { return }
                session.finishTasksAndInvalidate()
                state.session = nil
            }
        }
    }

    /// The policy the server's certificate chain must pass. Default ``SecurityPolicy/default``.
    ///
    /// Enforced by the ``Transport/curl`` transport, in the TLS handshake of the connection that carries each
    /// request. The Foundation transport cannot see the chain: with it, a policy other than the default (pins,
    /// invalid certificates allowed, no domain validation) makes requests fail with a clear error rather than be
    /// silently ignored. A pinning policy refuses plain `http` URLs, as AFNetworking does.
    open var securityPolicy: SecurityPolicy {
        get { settings.read { $0.securityPolicy } }
        set { settings.write { $0.securityPolicy = newValue } }
    }

    /// Bounds on the response bodies of tasks created from now on (in memory, to a file, streamed, decoded). Default
    /// ``ResponseBodyLimits/default``: 64 MiB in memory, a decompression ratio of 100.
    public var responseBodyLimits: ResponseBodyLimits {
        get { settings.read { $0.responseBodyLimits } }
        set { settings.write { $0.responseBodyLimits = newValue } }
    }

    /// Overrides ``responseBodyLimits`` for one task of this manager, before it is resumed (the size limits; the
    /// decompression limits are the manager's).
    public func setResponseBodyLimits(_ limits: ResponseBodyLimits, for task: URLSessionTask) {
        registry.delegate(for: task)?.setBodyLimits(limits)
    }

    /// The client certificate and key that every https request of this manager presents when the server asks for
    /// one (mutual TLS); nil (the default) for none. A task can have its own (``setClientIdentity(_:for:)``).
    ///
    /// Presented in the TLS handshake of the connection that carries the request, on the curl transport; the
    /// ``securityPolicy`` still decides whether the server is trusted. Connections made with one identity (or none)
    /// are never reused for a request with another. The identity is a secret: it is not written into the manager's
    /// archive (`NSSecureCoding`) and never logged; a copy of the manager (`copy()`) shares it. On the Foundation
    /// transport, which cannot present one, every request fails while it is set
    /// (``SessionKitError/Code/unsupportedByTransport``).
    ///
    /// ```swift
    /// let p12 = try Data(contentsOf: URL(fileURLWithPath: "/run/secrets/client.p12"))
    /// manager.clientIdentity = try ClientIdentity(pkcs12: p12, password: password)
    /// ```
    public var clientIdentity: ClientIdentity? {
        get { settings.read { $0.clientIdentity } }
        set { settings.write { $0.clientIdentity = newValue } }
    }

    /// Sets the client identity of one task of this manager, instead of ``clientIdentity`` (nil: none at all), before
    /// the task is resumed: its connections present it when a server asks for a certificate. Set after the task
    /// started, it changes nothing. Data, upload and download tasks of the curl transport, stream tasks and WebSocket
    /// tasks take it (the last two present the manager's identity of their creation otherwise).
    ///
    /// On the Foundation transport a task given an identity fails at once with
    /// ``SessionKitError/Code/unsupportedByTransport``: it is never sent without it.
    ///
    /// ```swift
    /// let task = manager.dataTask(with: request) { response, object, error in … }
    /// manager.setClientIdentity(tenantIdentity, for: task)
    /// task.resume()
    /// ```
    public func setClientIdentity(_ identity: ClientIdentity?, for task: URLSessionTask) {
        // A task of a transport that cannot present one ends now rather than go without.
        control.setClientIdentity(identity, for: task, running: registry.delegate(for: task) != nil)
    }

    /// The oldest TLS version the curl transport accepts; default TLS 1.2 (older ones are refused in the handshake).
    ///
    /// `URLSessionConfiguration` on Linux has no `tlsMinimumSupportedProtocolVersion`, so the manager carries it. The
    /// Foundation transport cannot choose and uses libcurl's and OpenSSL's defaults.
    public var tlsMinimumSupportedProtocolVersion: tls_protocol_version_t {
        get { settings.read { $0.tlsVersions.minimum } }
        set { settings.write { $0.tlsVersions.minimum = newValue } }
    }

    /// The newest TLS version the curl transport offers; nil (the default) for the newest libcurl and OpenSSL know.
    public var tlsMaximumSupportedProtocolVersion: tls_protocol_version_t? {
        get { settings.read { $0.tlsVersions.maximum } }
        set { settings.write { $0.tlsVersions.maximum = newValue } }
    }

    /// Host names answered with a given address on the curl transport, as `"host:port"` → `"address"` (curl's
    /// `--resolve`, AsyncHTTPClient's DNS override), for tasks created from now on (HTTP, stream and WebSocket tasks).
    ///
    /// The request still goes to its URL's host: its `Host` field, its TLS server name (SNI) and the
    /// ``securityPolicy``'s check of the certificate use that name, so a certificate for another name still fails.
    /// Connections made to an overridden address are reused only by requests with the same override. An entry that
    /// is not `host:port` with an IPv4 or IPv6 address fails each task with `URLError.badURL`; the Foundation
    /// transport refuses tasks while this is not empty (``SessionKitError/Code/unsupportedByTransport``). Not
    /// archived.
    ///
    /// ```swift
    /// manager.resolvedAddresses = ["api.internal.example:443": "10.0.0.7"]
    /// let result = try await manager.get("https://api.internal.example/health")
    /// ```
    public var resolvedAddresses: [String: String] {
        get { settings.read { $0.connection.resolvedAddresses } }
        set { settings.write { $0.connection.resolvedAddresses = newValue } }
    }

    /// The local IP address or network interface the curl transport's outgoing connections are bound to (libcurl's
    /// `CURLOPT_INTERFACE`: `"192.0.2.10"`, `"eth1"`, or `"if!eth1"` / `"host!192.0.2.10"` to say which), for tasks
    /// created from now on; nil (the default) lets the system choose.
    ///
    /// An address or interface that cannot be used fails the task with `URLError.cannotConnectToHost`, whose
    /// description says so. The Foundation transport refuses tasks while it is set. Not archived.
    ///
    /// ```swift
    /// manager.localAddress = "10.1.2.3"   // leave through the interface with this address
    /// ```
    public var localAddress: String? {
        get { settings.read { $0.connection.localAddress } }
        set { settings.write { $0.connection.localAddress = newValue } }
    }

    /// The longest wait, on the curl transport, from sending a request (its last byte) to the first byte of its
    /// response head, for tasks created from now on; nil (the default) for no such limit.
    ///
    /// Apart from the configuration's `timeoutIntervalForRequest` (an idle limit: no byte for that long) and
    /// `timeoutIntervalForResource` (the whole task): a server that answers quickly and then sends its body slowly is
    /// not cut by it. Each request of a task (a redirect, an authentication round) gets the full limit. When it fires,
    /// the task fails with `URLError.timedOut`, whose `userInfo[SessionKitError.timeoutLimitKey]` is
    /// `"timeoutIntervalForResponseHead"` (the other limits name themselves the same way). The Foundation transport
    /// refuses tasks while it is set. Not archived.
    ///
    /// ```swift
    /// manager.timeoutIntervalForResponseHead = 5   // a slow backend fails fast; a long download still streams
    /// ```
    public var timeoutIntervalForResponseHead: TimeInterval? {
        get { settings.read { $0.connection.responseHeadTimeout } }
        set { settings.write { $0.connection.responseHeadTimeout = newValue } }
    }

    /// The connection options of tasks created now.
    var connectionOptions: ConnectionOptions { settings.read { $0.connection } }

    /// The queue completion handlers run on; nil means the manager's private serial queue.
    public var completionQueue: DispatchQueue? {
        get { settings.read { $0.completionQueue } }
        set { settings.write { $0.completionQueue = newValue } }
    }

    /// The group completion handlers run in; nil means the manager's private group.
    public var completionGroup: DispatchGroup? {
        get { settings.read { $0.completionGroup } }
        set { settings.write { $0.completionGroup = newValue } }
    }

    // MARK: - Data tasks

    /// Creates (but does not resume) a data task for `request`.
    ///
    /// - Parameters:
    ///   - request:          The request; its body, if any, is sent.
    ///   - uploadProgress:   Called on the delegate queue as the body is sent.
    ///   - downloadProgress: Called on the delegate queue as the response body arrives.
    ///   - completionHandler: Called once on ``completionQueue`` with the response, the serialized object and the
    ///     error (transport or serialization).
    open func dataTask(
        with request: URLRequest,
        uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (URLResponse?, Any?, Error?) -> Void)? = nil
    ) -> URLSessionDataTask {
        let task = makeTask(
            .data(request), uploadProgress: uploadProgress, downloadProgress: downloadProgress,
            completion: Self.objectCompletion(completionHandler))
        // A data source always makes a data task; the fallback only satisfies the type checker.
        return task as? URLSessionDataTask ?? RefusalSession.shared.dataTask()
    }

    // MARK: - Upload tasks

    /// Creates an upload task that sends the file at `fileURL` as the body of `request`.
    ///
    /// A file that cannot be read gives a task that fails with that error when resumed.
    open func uploadTask(
        with request: URLRequest,
        fromFile fileURL: URL,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (URLResponse?, Any?, Error?) -> Void)? = nil
    ) -> URLSessionTask {
        makeTask(
            .uploadFile(request, fileURL), uploadProgress: progress,
            completion: Self.objectCompletion(completionHandler))
    }

    /// Creates an upload task that sends `bodyData` as the body of `request`.
    open func uploadTask(
        with request: URLRequest,
        from bodyData: Data?,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (URLResponse?, Any?, Error?) -> Void)? = nil
    ) -> URLSessionTask {
        makeTask(
            .uploadData(request, bodyData ?? Data()), uploadProgress: progress,
            completion: Self.objectCompletion(completionHandler))
    }

    /// Creates an upload task that streams `request.httpBodyStream` as the body.
    ///
    /// The stream is handed to URLSession once; set ``taskNeedNewBodyStream`` to provide a fresh stream when a
    /// redirect or an authentication challenge makes URLSession send the body again.
    open func uploadTask(
        withStreamedRequest request: URLRequest,
        progress: (@Sendable (Progress) -> Void)? = nil,
        completionHandler: (@Sendable (URLResponse?, Any?, Error?) -> Void)? = nil
    ) -> URLSessionTask {
        makeTask(.uploadStream(request), uploadProgress: progress, completion: Self.objectCompletion(completionHandler))
    }

    // MARK: - Download tasks

    /// Creates a download task for `request`.
    ///
    /// - Parameters:
    ///   - request:     The request to download.
    ///   - progress:    Called on the delegate queue as the file is written.
    ///   - destination: Where to move the downloaded file, given its temporary location and the response; the file
    ///     must not exist yet. Without it, the file is deleted once the download ends.
    ///   - completionHandler: Called once on ``completionQueue`` with the response, the final file URL and the
    ///     error (transport, validation by ``responseSerializer``, or the move).
    open func downloadTask(
        with request: URLRequest,
        progress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, URLResponse) -> URL)? = nil,
        completionHandler: (@Sendable (URLResponse?, URL?, Error?) -> Void)? = nil
    ) -> URLSessionTask {
        makeTask(
            .download(request), downloadProgress: progress, destination: destination,
            completion: Self.fileCompletion(completionHandler))
    }

    /// Creates a download task that resumes from `resumeData`.
    ///
    /// URLSession's built-in transport on Linux never produces resume data, so on ``Transport/foundation`` this
    /// returns a task that fails, when resumed, with ``SessionKitError/Code/resumeDataUnavailable``.
    open func downloadTask(
        withResumeData resumeData: Data,
        progress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, URLResponse) -> URL)? = nil,
        completionHandler: (@Sendable (URLResponse?, URL?, Error?) -> Void)? = nil
    ) -> URLSessionTask {
        switch taskTransports[transport].resumedDownload(from: resumeData) {
        case .failure(let error):
            return makeTask(
                .refused(error, download: true), downloadProgress: progress, destination: destination,
                completion: Self.fileCompletion(completionHandler))
        case .success(let resumed):
            return makeTask(
                .download(resumed.request), downloadProgress: progress, destination: destination,
                resumedDownload: resumed, completion: Self.fileCompletion(completionHandler))
        }
    }

    /// Cancels `task` and hands its resume data to `completionHandler` (nil when there is none).
    ///
    /// On the curl transport a download keeps what it received; `downloadTask(withResumeData:…)` continues it with
    /// `Range` and `If-Range`. A download cut by the network carries its resume data in the error's `userInfo` under
    /// `URLSessionDownloadTaskResumeData`, as on Apple platforms. The Foundation transport never has resume data.
    public func cancel(
        _ task: URLSessionTask, producingResumeData completionHandler: @escaping @Sendable (Data?) -> Void
    ) {
        if registry.delegate(for: task)?.produceResumeData(completionHandler) != true {
            completionHandler(nil)
        }
        task.cancel()
    }

    // MARK: - Progress

    /// The upload progress of a running task of this manager.
    public func uploadProgress(for task: URLSessionTask) -> Progress? {
        registry.delegate(for: task)?.uploadProgress
    }

    /// The download progress of a running task of this manager.
    public func downloadProgress(for task: URLSessionTask) -> Progress? {
        registry.delegate(for: task)?.downloadProgress
    }

    // MARK: - Tasks

    /// The tasks created by this manager that have not completed, oldest first.
    public var tasks: [URLSessionTask] { registry.tasks }

    /// The running data tasks (upload tasks excluded).
    public var dataTasks: [URLSessionDataTask] {
        tasks.compactMap { $0 is URLSessionUploadTask ? nil : $0 as? URLSessionDataTask }
    }

    /// The running upload tasks.
    public var uploadTasks: [URLSessionUploadTask] { tasks.compactMap { $0 as? URLSessionUploadTask } }

    /// The running download tasks.
    public var downloadTasks: [URLSessionDownloadTask] { tasks.compactMap { $0 as? URLSessionDownloadTask } }

    /// Resumes `task` and posts `Notification.Name.sessionKitTaskDidResume`.
    ///
    /// A task that is already running is left alone: URLSession on Linux would start its transfer a second time.
    public func resume(_ task: URLSessionTask) {
        resume(reference: task)
    }

    /// Resumes `task` (what it is known by: see ``TaskReference``), as ``resume(_:)`` does.
    func resume(reference task: any TaskReference) {
        let delegate = registry.delegate(for: task)
        if !control.reportsSuspension(of: task), task.state == .suspended {
            // A transport that tells no sink (URLSession's own tasks): the monitor hears of it here, before any of
            // the task's events can.
            delegate?.taskDidChangeSuspension(task, resumed: true)
        }
        control.resume(task, announces: delegate?.announces ?? true)
    }

    /// Suspends `task` and posts `Notification.Name.sessionKitTaskDidSuspend`.
    ///
    /// On the Foundation transport a task that is already loading is not suspended: URLSession on Linux stops the
    /// process when such a task is resumed before its suspension has been carried out (see `Docs/Architecture.md`).
    /// A task that has not been resumed yet can be suspended.
    ///
    /// - Returns: Whether the task was suspended.
    @discardableResult
    public func suspend(_ task: URLSessionTask) -> Bool {
        suspend(reference: task)
    }

    /// Suspends `task` (what it is known by: see ``TaskReference``), as ``suspend(_:)`` does.
    @discardableResult
    func suspend(reference task: any TaskReference) -> Bool {
        let delegate = registry.delegate(for: task)
        let suspended = control.suspend(task, announces: delegate?.announces ?? true)
        // A transport that reports through the sink has told the delegate; URLSession's own tasks, here.
        if suspended, !control.reportsSuspension(of: task) {
            delegate?.taskDidChangeSuspension(task, resumed: false)
        }
        return suspended
    }

    // MARK: - Invalidation

    /// Invalidates the session.
    ///
    /// - Parameters:
    ///   - cancelPendingTasks: Cancel running tasks (their completions get `URLError.cancelled`) instead of letting
    ///     them finish.
    ///   - resetSession: Build a new session on next use. Without a reset, tasks created afterwards fail with
    ///     ``SessionKitError/Code/sessionInvalidated`` when resumed.
    public func invalidateSessionCancelingTasks(_ cancelPendingTasks: Bool, resetSession: Bool) {
        sessionState.write { state in
            guard let session = state.session else {
                if !resetSession { state.refusesTasks = true }
                return
            }
            if cancelPendingTasks {
                // The tasks a transport of SessionKit's drives: URLSession does not know them.
                for task in registry.references where !control.sessionCancels(task) {
                    control.cancel(task)
                }
                session.invalidateAndCancel()
            } else {
                session.finishTasksAndInvalidate()
            }
            // Without a reset, `session` keeps answering the invalidated session, as in AFNetworking.
            state.session = resetSession ? nil : session
            state.refusesTasks = !resetSession
        }
    }

    /// Runs `work` on the completion queue, inside the completion group.
    func onCompletionQueue(_ work: @escaping () -> Void) {
        // The caller's closure runs once, on the completion queue only.
        nonisolated(unsafe) let work = work
        let (queue, group) = settings.read { ($0.completionQueue, $0.completionGroup) }
        completionQueue(queue, group).async { work() }
    }

    /// The completion queue: the caller's `queue`, or (nil) the manager's own, whose hops are shared; with `group`, or
    /// the manager's own group.
    private func completionQueue(_ queue: DispatchQueue?, _ group: DispatchGroup?) -> CompletionQueue {
        let group = group ?? privateCompletionGroup
        guard let queue else { return CompletionQueue(own: ownCompletions, group: group) }
        return CompletionQueue(callers: queue, group: group)
    }

    // MARK: - Task creation

    /// Runs `make` under the session lock, as ``makeTask`` creates its tasks, with the session (made now if there is
    /// none) and the error to refuse the task with when the session was invalidated without a reset. A task `make`
    /// registers cannot escape the cancel loop of ``invalidateSessionCancelingTasks(_:resetSession:)``.
    func makeStreamTask<Task>(_ make: (URLSession, _ refusal: NSError?) -> Task) -> Task {
        sessionState.write { state in
            let session = state.session ?? makeSession()
            state.session = session
            return make(session, state.refusesTasks ? Self.invalidatedError : nil)
        }
    }

    /// Creates the task for `source`, registers its per-task delegate and returns it, not resumed.
    func makeTask(
        _ source: TaskSource,
        uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, URLResponse) -> URL)? = nil,
        responseSerializer: URLResponseSerialization? = nil,
        resumedDownload: ResumedDownload? = nil,
        streamSink: DataStreamSink? = nil,
        completion: @escaping @Sendable (TaskOutcome) -> Void
    ) -> URLSessionTask {
        makeTaskReference(
            source, uploadProgress: uploadProgress, downloadProgress: downloadProgress, destination: destination,
            responseSerializer: responseSerializer, resumedDownload: resumedDownload, streamSink: streamSink,
            completion: completion
        ).task
    }

    /// Creates the task for `source`, registers its per-task delegate and returns what it is known by, not resumed:
    /// its `URLSessionTask` when the caller gets one (`announces`), else possibly only what the transport knows it by
    /// (the curl transport's driver: see ``TaskReference``), for the request pipeline.
    func makeTaskReference(
        _ source: TaskSource,
        uploadProgress: (@Sendable (Progress) -> Void)? = nil,
        downloadProgress: (@Sendable (Progress) -> Void)? = nil,
        destination: (@Sendable (URL, URLResponse) -> URL)? = nil,
        responseSerializer: URLResponseSerialization? = nil,
        resumedDownload: ResumedDownload? = nil,
        streamSink: DataStreamSink? = nil,
        observation: TaskDelegate.Observation? = nil,
        interceptor pipelineInterceptor: (any RequestInterceptor)? = nil,
        completesInPlace: Bool = false,
        announces: Bool = true,
        completion: @escaping @Sendable (TaskOutcome) -> Void
    ) -> any TaskReference {
        var source = source
        let uploadLength = Self.uploadLength(of: source)
        // Read once: every setting the task takes is from the same moment (and one copy costs less than several).
        let settings = self.settings.wrappedValue
        let (transport, policy, tlsVersions, limits, identity, managerInterceptor) = (
            settings.transport, settings.securityPolicy, settings.tlsVersions, settings.responseBodyLimits,
            settings.clientIdentity, settings.interceptor
        )
        // A task made outside the request pipeline (the task API, the closure verbs) is one request of its own to the
        // event monitors and to the manager's adapters and retriers (which the curl transport runs around each of
        // its attempts), so that they see every request whatever API made it.
        var observation = observation
        var completion = completion
        var implicitObservation: TaskDelegate.Observation?
        let taskTransport = taskTransports[transport]
        // The pipeline's calls bring their own (the manager's with the call's); the transport runs them around each
        // attempt when it restarts its own tasks.
        let interceptor =
            taskTransport.interceptsTasks ? (observation == nil ? managerInterceptor : pipelineInterceptor) : nil
        if observation == nil, let request = source.request, case let monitors = settings.eventMonitors,
            !monitors.isEmpty || interceptor != nil
        {
            let implicit = TaskDelegate.Observation.outsidePipeline(request, monitors: monitors)
            (observation, implicitObservation) = (implicit, implicit)
            let caller = completion
            completion = { outcome in
                implicit.requestDidEnd(response: outcome.received, error: outcome.error)
                caller(outcome)
            }
        }
        let interception = interceptor.map { interceptor in
            TaskDelegate.Interception(
                interceptor: interceptor, retries: Self.mayRetry(source),
                delegateQueue: delegateDispatchQueue)
        }
        let connection = settings.connection
        if let request = source.request,
            let refusal = HTTPFieldValidation.error(for: request) ?? additionalHeadersError
                ?? taskTransport.refusal(for: request, policy: policy)
                ?? taskTransport.refusal(for: request, connection: connection)
                ?? (identity != nil ? taskTransport.clientIdentityRefusal : nil)
        {
            source = .refused(refusal, download: source.isDownload)
        }
        if case .uploadFile(_, let fileURL) = source, !FileManager.default.isReadableFile(atPath: fileURL.path) {
            source = .refused(
                SessionKitError.requestSerialization(.fileDoesNotExist, "The file \(fileURL.path) cannot be read."),
                download: false)
        }
        // Traces and metrics (URLSessionManager+Observability.swift): the attempt's span starts and its trace context
        // goes into the request before the transport sees it; the hub ends it.
        var taskTelemetry: TaskTelemetry?
        let observability = telemetry.read { $0.active }
        if let active = observability, var request = source.request {
            let resends = observation?.request.retryCount ?? 0
            taskTelemetry = active.begin(&request, resendCount: resends, delegateQueue: delegateDispatchQueue)
            source = source.replacingRequest(with: request)
        }
        // Created under the session lock: URLSession stops the process when a task is created in a session that
        // another thread has just invalidated.
        let made: TransportTask? = sessionState.write { state in
            if state.refusesTasks { return nil }
            if case .refused = source { return nil }
            let session = state.session ?? makeSession()
            state.session = session
            var options = TransportTaskOptions(
                policy: policy, tlsVersions: tlsVersions,
                decodingLimits: .init(ratio: limits.maximumDecompressionRatio, size: limits.maximumDecompressedSize),
                connectionEvents: observability?.metrics, connection: connection, clientIdentity: identity,
                intercepted: interception != nil)
            if source.isDownload {
                // For a transport that writes the file itself: no URLSession download callback asks the manager-wide
                // destination, so its writer asks it (read when the download ends, as AFNetworking reads it).
                let overrides = self.overrides
                options.resumedDownload = resumedDownload
                options.downloadDestinationOverride = { task, location in
                    overrides.read { $0.downloadTaskDidFinishDownloading }.flatMap { $0(session, task, location) }
                }
            }
            return taskTransport.makeTask(
                for: source, uploadLength: uploadLength, options: options, session: session, sink: eventSink)
        }
        // A caller that gets the task (and monitors outside the pipeline, which hear of it now) has it made now; the
        // delegate then holds it, and it holds its transport's part.
        let handsOut = announces || implicitObservation != nil
        let created = made.map { handsOut ? $0.reference.task : $0.reference }
        let task: any TaskReference
        let forcedError: NSError?
        let registry: TaskRegistry
        if let created {
            (task, forcedError, registry) = (created, nil, self.registry)
        } else {
            let refusal = RefusalSession.shared
            let isDownload: Bool
            switch source {
            case .refused(let error, let download):
                (forcedError, isDownload) = (error, download)
            case .download:
                (forcedError, isDownload) = (Self.invalidatedError, true)
            default:
                (forcedError, isDownload) = (Self.invalidatedError, false)
            }
            task = isDownload ? refusal.downloadTask() : refusal.dataTask()
            registry = refusal.registry
            if let taskTelemetry {  // never sent: the attempt failed
                delegateDispatchQueue.async { taskTelemetry.complete(task, error: forcedError) }
            }
        }

        let flowControl = made?.flowControl
        let delivery = TaskDelegate.Delivery(
            responseSerializer: responseSerializer ?? settings.responseSerializer,
            completionQueue: completionQueue(settings.completionQueue, settings.completionGroup),
            processingQueue: Self.processingQueue, completesInPlace: completesInPlace, announces: announces)
        let delegate = TaskDelegate(
            task: task, delivery: delivery,
            uploadProgressHandler: uploadProgress, downloadProgressHandler: downloadProgress,
            destination: destination, bodyStream: Self.bodyStream(of: source),
            uploadLength: uploadLength, forcedError: forcedError, downloadSink: made?.downloadSink,
            continuesResumeData: resumedDownload != nil,
            onConsumed: flowControl.map { flow in { flow.consumed($0) } },
            streamSink: streamSink, observation: observation, interception: interception, bodyLimits: limits,
            control: control, telemetry: made == nil ? nil : taskTelemetry, completion: completion)
        if let flowControl { streamSink?.onConsumed = { flowControl.consumed($0) } }
        streamSink?.cancelTask = { [weak task] in task?.cancel() }
        // Through the progress itself (it holds its task weakly): the task must not keep its delegate alive.
        let progress = delegate.progress
        made?.adoptProgress({ progress.upload }, { progress.download })
        implicitObservation?.taskMade(task.task)
        registry.add(delegate)
        return task
    }

    /// Builds a session whose delegate reports to the manager's hub.
    private func makeSession() -> URLSession {
        let configuration = sessionConfiguration.copy() as? URLSessionConfiguration ?? sessionConfiguration
        return taskTransports.makeSession(configuration: configuration, queue: operationQueue)
    }

    /// Whether a task for `source` may send its request again for a retrier: a data task whose body is bytes or a
    /// file (which the transport opens anew for each transfer); a download's file and a streamed request body are
    /// read once. A task whose response body goes to a reader as it arrives is sent again only while no head reached
    /// the reader (``TaskDelegate/attemptEnded(error:then:)`` checks).
    private static func mayRetry(_ source: TaskSource) -> Bool {
        switch source {
        case .data(let request): return request.httpBodyStream == nil
        case .uploadData, .uploadFile: return true
        default: return false
        }
    }

    private static func bodyStream(of source: TaskSource) -> InputStream? {
        if case .uploadStream(let request) = source { return request.httpBodyStream }
        return nil
    }

    private static func uploadLength(of source: TaskSource) -> Int64? {
        switch source {
        case .data(let request):
            return request.httpBody.map { Int64($0.count) }
        case .uploadData(_, let data):
            return Int64(data.count)
        case .uploadFile(_, let fileURL):
            let size = try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? NSNumber
            return size?.int64Value
        case .uploadStream(let request):
            return request.value(forHTTPHeaderField: "Content-Length").flatMap(Int64.init)
        case .download, .refused:
            return nil
        }
    }

    /// The error for `configuration`'s `httpAdditionalHeaders`, when one of them cannot go on the wire.
    private static func additionalHeadersError(of configuration: URLSessionConfiguration) -> NSError? {
        let fields = configuration.additionalHeaderFields
        return fields.isEmpty ? nil : HTTPFieldValidation.error(forFields: fields)
    }

    /// Adapts a public `(response, object, error)` handler.
    static func objectCompletion(
        _ handler: (@Sendable (URLResponse?, Any?, Error?) -> Void)?
    ) -> @Sendable (TaskOutcome) -> Void {
        { outcome in handler?(outcome.response, outcome.object, outcome.error) }
    }

    /// Adapts a public `(response, fileURL, error)` handler.
    static func fileCompletion(
        _ handler: (@Sendable (URLResponse?, URL?, Error?) -> Void)?
    ) -> @Sendable (TaskOutcome) -> Void {
        { outcome in handler?(outcome.response, outcome.fileURL, outcome.error) }
    }

    private static var invalidatedError: NSError {
        SessionKitError.session(.sessionInvalidated, "The manager's session was invalidated; it creates no more tasks.")
    }
}
