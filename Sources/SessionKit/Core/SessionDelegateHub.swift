import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The delegate of one `URLSession`: routes each callback to the user's override closure, if any, and to the
/// per-task delegate of the task it concerns.
///
/// The hub holds no reference to its manager, so a manager that goes away is not kept alive by its session: the
/// hub keeps serving the tasks still running until the session is invalidated.
final class SessionDelegateHub: NSObject, Sendable {
    // Sendable, checked by the compiler: all state lives in `Protected` boxes or is immutable.
    private let registry: TaskRegistry
    private let overrides: Protected<DelegateOverrides>

    /// Creates a hub over the manager's `registry` and `overrides`.
    init(registry: TaskRegistry, overrides: Protected<DelegateOverrides>) {
        self.registry = registry
        self.overrides = overrides
    }
}

// MARK: - URLSessionDelegate

extension SessionDelegateHub: URLSessionDelegate {
    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        overrides.read { $0.sessionDidBecomeInvalid }?(session, error)
        var userInfo: [String: Any] = [:]
        if let error { userInfo[SessionKitNotificationKey.error] = error }
        NotificationCenter.default.post(name: .sessionKitSessionDidInvalidate, object: session, userInfo: userInfo)
    }

    func urlSession(
        _ session: URLSession,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // URLSession on Linux raises no session-level challenge (no server trust); answered for completeness.
        if let override = overrides.read({ $0.sessionDidReceiveAuthenticationChallenge }) {
            let (disposition, credential) = override(session, challenge)
            completionHandler(
                disposition == .useCredential && credential == nil ? .performDefaultHandling : disposition,
                credential)
        } else {
            completionHandler(.performDefaultHandling, nil)
        }
    }
}

// MARK: - URLSessionTaskDelegate

extension SessionDelegateHub: URLSessionTaskDelegate {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        // URLSession on Linux (FoundationNetworking 6.3) sends a followed request with an empty body in place of the
        // one the task sent (a 307 or 308, a PUT answered by a 301). Rather than send the request without its body,
        // such a redirect is not followed, whatever the override would say: its response is the task's.
        if Self.losesBody(of: task, redirectedTo: request) { return completionHandler(nil) }
        var decided =
            overrides.read({ $0.taskWillPerformHTTPRedirection }).map { $0(session, task, response, request) }
            ?? request
        if let request = decided, let delegate = registry.delegate(for: task) {
            // The redirect's attempt: a span of its own, whose trace context the followed request carries.
            let followed = delegate.telemetry?.redirect(response, to: request, of: task) ?? request
            decided = followed
            delegate.willRedirect(response, to: followed)
        }
        completionHandler(decided)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // URLSession on Linux (FoundationNetworking 6.3) never ends a task whose 401 challenge gets the default
        // handling without a stored credential, and crashes on `.useCredential` without a credential. So the answer
        // it gets is always one it completes: a credential, or a cancellation that ``urlSession(_:task:didCompleteWithError:)``
        // turns back into the delivery of the 401 when that is what the manager decided.
        let method = challenge.protectionSpace.authenticationMethod
        let challenge = ChallengeResolver.proposingStoredCredential(
            challenge, from: session.configuration.urlCredentialStorage)
        switch ChallengeResolver(overrides: overrides).resolve(challenge, for: task, in: session) {
        case .retry(let credential)
        where method == NSURLAuthenticationMethodHTTPBasic || method == NSURLAuthenticationMethodHTTPDigest:
            completionHandler(.useCredential, credential)
        case .retry, .deliverResponse:
            // URLSession answers Basic and Digest only (any other scheme with a credential stops the process).
            registry.markCancellation(of: task, as: .challengeResponse)
            completionHandler(.cancelAuthenticationChallenge, nil)
        case .cancel:
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping (InputStream?) -> Void
    ) {
        if let override = overrides.read({ $0.taskNeedNewBodyStream }) {
            completionHandler(override(session, task))
        } else {
            completionHandler(registry.delegate(for: task)?.takeBodyStream())
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        overrides.read { $0.taskDidSendBodyData }?(session, task, bytesSent, totalBytesSent, totalBytesExpectedToSend)
        registry.delegate(for: task)?.didSendBodyData(
            totalBytesSent: totalBytesSent, totalBytesExpectedToSend: totalBytesExpectedToSend)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        // Removed first, so that a finished task leaves nothing in the registry whatever its completion does.
        let delegate = registry.remove(task)
        var error = error
        if let meaning = registry.takeCancellationMeaning(for: task), (error as NSError?)?.code == NSURLErrorCancelled {
            switch meaning {
            case .challengeResponse:
                error = nil  // the challenge's response, already received, is the result
            case .resourceTimeout:
                error = Self.error(.timedOut, "The request took longer than the session's resource timeout.", of: task)
            case .clientIdentityUnsupported:
                error = FoundationTaskTransport().clientIdentityRefusal
            }
        }
        if error == nil, ReceivedResponse.of(task) == nil, !(task is URLSessionStreamTask) {
            // A completion carries a response or an error, on every transport and whatever its parser made of the
            // bytes: a task that would end with neither fails instead.
            error = Self.error(.badServerResponse, "The task ended without a response or an error.", of: task)
        }
        // A WebSocket task has no delegate; the cast is skipped for every other task.
        let telemetry =
            delegate != nil ? delegate?.telemetry : (task as? SessionWebSocketTask).flatMap(registry.takeTelemetry(of:))
        telemetry?.complete(task, error: error)
        overrides.read { $0.taskDidComplete }?(session, task, error)
        delegate?.didComplete(error: error)
    }

    /// Whether following a redirect of `task` to `request` would send `request` without the body the redirected
    /// request carried: the redirected request has a body (an upload task, or a body of its own) and a method that
    /// sends one, and so does `request` (a redirect that becomes a GET drops the body, as it should).
    static func losesBody(of task: URLSessionTask, redirectedTo request: URLRequest) -> Bool {
        guard let current = task.currentRequest,
            !bodilessMethods.contains((current.httpMethod ?? "GET").uppercased()),
            !bodilessMethods.contains((request.httpMethod ?? "GET").uppercased())
        else { return false }
        return task is URLSessionUploadTask || current.httpBody != nil || current.httpBodyStream != nil
    }

    /// The methods whose requests carry no body.
    private static let bodilessMethods: Set<String> = ["GET", "HEAD"]

    /// A `URLError` of `code` saying `reason`, with the task's URL.
    private static func error(_ code: URLError.Code, _ reason: String, of task: URLSessionTask) -> URLError {
        URLError(
            code,
            userInfo: [
                NSLocalizedDescriptionKey: reason, NSURLErrorFailingURLErrorKey: task.originalRequest?.url as Any,
                "NSErrorFailingURLStringKey": task.originalRequest?.url?.absoluteString as Any,
            ])
    }
}

// MARK: - URLSessionDataDelegate

extension SessionDelegateHub: URLSessionDataDelegate {
    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        // No task of the Foundation transport continues resume data (Linux's URLSession keeps none).
        _ = registry.delegate(for: dataTask)?.didReceive(response: ReceivedResponse(response))
        if let override = overrides.read({ $0.dataTaskDidReceiveResponse }) {
            completionHandler(override(session, dataTask, response))
        } else {
            completionHandler(.allow)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask)
    {
        overrides.read { $0.dataTaskDidBecomeDownloadTask }?(session, dataTask, downloadTask)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        overrides.read { $0.dataTaskDidReceiveData }?(session, dataTask, data)
        registry.delegate(for: dataTask)?.didReceive(data: data)
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        willCacheResponse proposedResponse: CachedURLResponse,
        completionHandler: @escaping (CachedURLResponse?) -> Void
    ) {
        if let override = overrides.read({ $0.dataTaskWillCacheResponse }) {
            completionHandler(override(session, dataTask, proposedResponse))
        } else {
            completionHandler(proposedResponse)
        }
    }
}

// MARK: - URLSessionDownloadDelegate

extension SessionDelegateHub: URLSessionDownloadDelegate {
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // As AFNetworking: the manager-wide closure wins when it returns a URL, else the task's destination.
        let override = overrides.read { $0.downloadTaskDidFinishDownloading }.flatMap { closure in
            closure(session, downloadTask, location)
        }
        registry.delegate(for: downloadTask)?.didFinishDownloading(to: location, override: override)
    }

    func urlSession(
        _ session: URLSession,
        downloadTask: URLSessionDownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {
        overrides.read { $0.downloadTaskDidWriteData }?(
            session, downloadTask, bytesWritten, totalBytesWritten, totalBytesExpectedToWrite)
        registry.delegate(for: downloadTask)?.didWriteData(
            totalBytesWritten: totalBytesWritten, totalBytesExpectedToWrite: totalBytesExpectedToWrite)
    }

    func urlSession(
        _ session: URLSession,
        downloadTask: URLSessionDownloadTask,
        didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64
    ) {
        overrides.read { $0.downloadTaskDidResume }?(session, downloadTask, fileOffset, expectedTotalBytes)
    }
}

// MARK: - TaskEventSink (the curl transport's own tasks)

/// The curl transport's tasks report here, on the delegate queue, what URLSession reports through the delegate
/// methods above; each event then takes the same path: the closure overrides, then the per-task delegate.
extension SessionDelegateHub: TaskEventSink {
    func taskDidChangeSuspension(_ task: URLSessionTask, in session: URLSession, resumed: Bool) {
        let delegate = registry.delegate(for: task)
        delegate?.taskDidChangeSuspension(task, resumed: resumed)
        // A task no caller holds (the HTTP core API's) is not announced, as its completion is not.
        if delegate?.announces == false { return }
        NotificationCenter.default.post(
            name: resumed ? .sessionKitTaskDidResume : .sessionKitTaskDidSuspend, object: task)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, didReceive response: ReceivedResponse
    )
        -> URLSession.ResponseDisposition
    {
        let resumption = registry.delegate(for: task)?.didReceive(response: response)
        if let resumption, let downloadTask = task as? URLSessionDownloadTask {
            // Before the first byte, as URLSession reports a download continued from resume data.
            urlSession(
                session, downloadTask: downloadTask, didResumeAtOffset: resumption.offset,
                expectedTotalBytes: resumption.expectedTotalBytes)
        }
        guard let dataTask = task as? URLSessionDataTask,
            let override = overrides.read({ $0.dataTaskDidReceiveResponse })
        else { return .allow }
        return override(session, dataTask, response.urlResponse)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didReceive data: Data) {
        if let dataTask = task as? URLSessionDataTask {
            overrides.read { $0.dataTaskDidReceiveData }?(session, dataTask, data)
        } else if let downloadTask = task as? URLSessionDownloadTask,
            let override = overrides.read({ $0.downloadTaskDidWriteData })
        {
            override(
                session, downloadTask, Int64(data.count), task.countOfBytesReceived, task.countOfBytesExpectedToReceive)
        }
        registry.delegate(for: task)?.didReceive(data: data)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didSendBodyData sent: Int64, of expected: Int64) {
        urlSession(session, task: task, didSendBodyData: 0, totalBytesSent: sent, totalBytesExpectedToSend: expected)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) -> URLRequest? {
        var decided =
            overrides.read({ $0.taskWillPerformHTTPRedirection }).map { $0(session, task, response, request) }
            ?? request
        if let request = decided, let delegate = registry.delegate(for: task) {
            // The redirect's attempt: a span of its own, whose trace context the followed request carries.
            let followed = delegate.telemetry?.redirect(response, to: request, of: task) ?? request
            decided = followed
            delegate.willRedirect(response, to: followed)
        }
        return decided
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, didReceive challenge: URLAuthenticationChallenge
    )
        -> ChallengeAction
    {
        let challenge = ChallengeResolver.proposingStoredCredential(
            challenge, from: session.configuration.urlCredentialStorage)
        return ChallengeResolver(overrides: overrides).resolve(challenge, for: task, in: session)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didReceiveTrailers trailers: [(String, String)]) {
        registry.delegate(for: task)?.didReceive(trailers: trailers)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didFinishCollecting timings: TransferTimings) {
        let delegate = registry.delegate(for: task)
        delegate?.telemetry?.collected(timings)
        delegate?.didCollect(timings)
        overrides.read { $0.taskDidFinishCollectingTimings }?(session, task, timings)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didFailPinning report: PinningReport) {
        registry.delegate(for: task)?.didFailPinning(report)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, willCache proposed: CachedURLResponse
    )
        -> CachedURLResponse?
    {
        guard let dataTask = task as? URLSessionDataTask,
            let override = overrides.read({ $0.dataTaskWillCacheResponse })
        else { return proposed }
        return override(session, dataTask, proposed)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession,
        producingResumeData handler: @escaping @Sendable (Data?) -> Void
    ) -> Bool {
        registry.delegate(for: task)?.produceResumeData(handler) ?? false
    }

    func streamTaskReadClosed(_ task: URLSessionStreamTask, in session: URLSession) {
        overrides.read { $0.streamTaskReadClosed }?(session, task)
    }

    func streamTaskWriteClosed(_ task: URLSessionStreamTask, in session: URLSession) {
        overrides.read { $0.streamTaskWriteClosed }?(session, task)
    }

    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didOpenWithProtocol negotiatedProtocol: String?
    ) {
        overrides.read { $0.webSocketTaskDidOpen }?(session, task, negotiatedProtocol)
    }

    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didCloseWith code: URLSessionWebSocketTask.CloseCode,
        reason: Data?
    ) {
        overrides.read { $0.webSocketTaskDidClose }?(session, task, code, reason)
    }

    func task(_ task: URLSessionTask, in session: URLSession, didCompleteWithError error: Error?) {
        urlSession(session, task: task, didCompleteWithError: error)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, adapt request: URLRequest,
        then: @escaping @Sendable (Result<URLRequest, Error>) -> Void
    ) {
        guard let delegate = registry.delegate(for: task) else { return then(.success(request)) }
        delegate.adapt(request, then: then)
    }

    func task(
        _ task: URLSessionTask, in session: URLSession, attemptEndedWith error: Error?,
        then: @escaping @Sendable (AttemptVerdict) -> Void
    ) {
        guard let delegate = registry.delegate(for: task) else { return then(.complete) }
        delegate.attemptEnded(error: error, then: then)
    }
}
