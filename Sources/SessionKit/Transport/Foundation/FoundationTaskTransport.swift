import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSession's own tasks and transport: it trusts the system CA bundle only, cannot enforce a ``SecurityPolicy``,
/// keeps no resume data, and ignores the resource timeout on Linux (this transport enforces it: ``ResourceDeadlines``).
struct FoundationTaskTransport: TaskTransport {
    /// Whether the configuration names a SOCKS5 proxy, which URLSession on Linux does not use.
    let hasSOCKSProxy: Bool
    /// The delegate of the manager's sessions: URLSession's callbacks become the manager's events there.
    let sessionDelegate: FoundationSessionDelegate
    /// The configuration's resource timeout, which URLSession on Linux ignores; nil for the default.
    private let deadlines: ResourceDeadlines?

    /// The transport of a manager whose session has `configuration` and whose tasks report to `sink`.
    init(configuration: URLSessionConfiguration, sink: TaskEventSink) {
        hasSOCKSProxy = CurlSessionSettings.socksProxy(in: configuration) != nil
        sessionDelegate = FoundationSessionDelegate(sink: sink)
        deadlines = ResourceDeadlines(limit: configuration.timeoutIntervalForResource, delegate: sessionDelegate)
    }

    /// A session with `configuration` whose events reach the manager's sink, on `queue`.
    func makeSession(configuration: URLSessionConfiguration, queue: OperationQueue) -> URLSession {
        URLSession(configuration: configuration, delegate: sessionDelegate, delegateQueue: queue)
    }

    func refusal(for request: URLRequest, connection: ConnectionOptions) -> NSError? {
        if UnixSocketURL.isUnixSocket(request.url) {
            return URLError(
                .unsupportedURL,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "URLSession cannot reach a Unix domain socket (\(request.url?.absoluteString ?? "")); use "
                        + "Transport.curl.",
                    NSURLErrorFailingURLErrorKey: request.url as Any,
                ]) as NSError
        }
        var unsupported: [String] = []
        if !connection.resolvedAddresses.isEmpty { unsupported.append("resolvedAddresses") }
        if connection.localAddress != nil { unsupported.append("localAddress") }
        if connection.responseHeadTimeout != nil { unsupported.append("timeoutIntervalForResponseHead") }
        if hasSOCKSProxy { unsupported.append("a SOCKS proxy in connectionProxyDictionary") }
        guard !unsupported.isEmpty else { return nil }
        return SessionKitError.session(
            .unsupportedByTransport,
            "The Foundation transport cannot honour \(unsupported.joined(separator: ", ")) (URLSession on Linux has no "
                + "such setting); use Transport.curl.")
    }

    /// Resumes one of URLSession's own tasks if it is suspended, and posts `sessionKitTaskDidResume`.
    ///
    /// Guarded against a crash of URLSession on Linux: a task resumed while it runs restarts its transfer (and then
    /// stops the process when both end), so resuming a running task does nothing.
    func resume(_ task: any TaskReference, announces: Bool) {
        let task = task.task
        guard task.state == .suspended else { return }
        task.resume()
        if announces { NotificationCenter.default.post(name: .sessionKitTaskDidResume, object: task) }
        deadlines?.started(task)
    }

    /// Suspends one of URLSession's own tasks that has not started, and posts `sessionKitTaskDidSuspend`; false for a
    /// task that is loading or ended.
    ///
    /// Guarded against a crash of URLSession on Linux: `suspend()` on a task that is already loading stops the transfer
    /// later, on URLSession's internal work queue; if a `resume()` lands before that stop has run, URLSession stops the
    /// process (`NativeProtocol.swift`). When the stop runs cannot be observed from outside, so a loading task is not
    /// suspended at all. A task that has not started yet can be suspended and resumed freely.
    func suspend(_ task: any TaskReference, announces: Bool) -> Bool {
        let task = task.task
        guard task.state == .suspended else { return false }
        task.suspend()
        if announces { NotificationCenter.default.post(name: .sessionKitTaskDidSuspend, object: task) }
        return true
    }

    func refusal(for request: URLRequest, policy: SecurityPolicy) -> NSError? {
        if let refusal = Transport.pinningRefusal(for: request, policy: policy) { return refusal }
        guard
            policy.pinningMode != .none || policy.allowInvalidCertificates || !policy.validatesDomainName
                || policy.trustedRootCertificates != nil
        else {
            return nil
        }
        return SessionKitError.session(
            .policyNotEnforceable,
            "The Foundation transport cannot enforce a SecurityPolicy (URLSession on Linux never shows the server's chain); use Transport.curl."
        )
    }

    var clientIdentityRefusal: NSError? { Self.clientIdentityUnsupported }

    /// Why a task of this transport cannot present a client identity.
    static var clientIdentityUnsupported: NSError {
        SessionKitError.session(
            .unsupportedByTransport,
            "The Foundation transport cannot present a client certificate (URLSession on Linux has no mutual TLS); "
                + "use Transport.curl, or set no clientIdentity.")
    }

    /// URLSession on Linux keeps no resume data.
    func resumedDownload(from resumeData: Data) -> Result<ResumedDownload, NSError> {
        .failure(
            SessionKitError.session(
                .resumeDataUnavailable,
                "Downloads cannot be resumed on the foundation transport: URLSession on Linux keeps no resume data."))
    }

    /// URLSession on Linux reads a body stream synchronously on its own queue (a stream that waits for its writer
    /// would hold that queue) and sends no request trailers.
    var streamsRequestBodies: Bool { false }

    func cancel(_ task: any TaskReference) {
        task.cancel()
    }

    /// URLSession's tasks tell SessionKit nothing of a `resume()` or `suspend()`.
    var reportsSuspension: Bool { false }

    var sessionCancelsTasks: Bool { true }

    /// URLSession on Linux has no mutual TLS: a running task given an identity ends now, with
    /// ``clientIdentityUnsupported``, rather than go without it.
    func setClientIdentity(_ identity: ClientIdentity?, for task: any TaskReference, running: Bool) {
        guard identity != nil, running else { return }
        sessionDelegate.cancel(task.task, meaning: .clientIdentityUnsupported)
    }

    /// URLSession starts its tasks on `resume()` and ends them itself: no adapter can run first, no attempt again.
    var interceptsTasks: Bool { false }

    func makeTask(
        for source: TaskSource, uploadLength: Int64?, options: TransportTaskOptions, session: URLSession,
        sink: TaskEventSink
    )
        -> TransportTask?
    {
        let task: URLSessionTask
        switch source {
        case .data(let request):
            task = session.dataTask(with: request)
        case .uploadData(let request, let data):
            task = session.uploadTask(with: request, from: data)
        case .uploadFile(let request, let fileURL):
            task = session.uploadTask(with: request, fromFile: fileURL)
        case .uploadStream(var request):
            // URLSession on Linux sends every stream body chunked; with a Content-Length header as well, strict
            // servers answer 400. The length still sizes the upload progress.
            request.setValue(nil, forHTTPHeaderField: "Content-Length")
            task = session.uploadTask(withStreamedRequest: request)
        case .download(let request):
            task = session.downloadTask(with: request)
        case .refused:
            return nil
        }
        deadlines?.watch(task)
        return TransportTask(reference: task, flowControl: nil, downloadSink: nil, adoptProgress: { _, _ in })
    }
}
