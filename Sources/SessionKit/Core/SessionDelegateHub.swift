import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where every task of one manager reports its events, whichever transport runs it (``TaskEventSink``): routes each
/// event to the user's override closure, if any, and to the per-task delegate of the task it concerns.
///
/// The hub holds no reference to its manager, so a manager that goes away is not kept alive by its session: the
/// hub keeps serving the tasks still running until the session is invalidated.
final class SessionDelegateHub: Sendable {
    // Sendable, checked by the compiler: all state lives in `Protected` boxes or is immutable.
    private let registry: TaskRegistry
    private let overrides: Protected<DelegateOverrides>

    /// Creates a hub over the manager's `registry` and `overrides`.
    init(registry: TaskRegistry, overrides: Protected<DelegateOverrides>) {
        self.registry = registry
        self.overrides = overrides
    }
}

// MARK: - TaskEventSink

/// Every task reports here, on the delegate queue: the curl transport's directly, URLSession's through
/// ``FoundationSessionDelegate``. Each event takes the same path: the closure overrides, then the per-task delegate.
extension SessionDelegateHub: TaskEventSink {
    func taskDidChangeSuspension(_ task: any TaskReference, in session: URLSession, resumed: Bool) {
        let delegate = registry.delegate(for: task)
        delegate?.taskDidChangeSuspension(task, resumed: resumed)
        if delegate == nil, let webSocket = task as? SessionWebSocketTask {
            registry.observers(of: webSocket)?.observation?.taskDidChangeSuspension(task, resumed: resumed)
        }
        // A task no caller holds (the HTTP core API's) is not announced, as its completion is not.
        if delegate?.announces == false { return }
        NotificationCenter.default.post(
            name: resumed ? .sessionKitTaskDidResume : .sessionKitTaskDidSuspend, object: task.task)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, didReceive response: ReceivedResponse
    )
        -> URLSession.ResponseDisposition
    {
        let resumption = registry.delegate(for: task)?.didReceive(response: response)
        if let resumption, let downloadTask = task.task as? URLSessionDownloadTask {
            // Before the first byte, as URLSession reports a download continued from resume data.
            self.task(
                downloadTask, in: session, didResumeAtOffset: resumption.offset,
                expectedTotalBytes: resumption.expectedTotalBytes)
        }
        // The task is made for the closure only: a call that hands none out has none until then.
        guard !task.isDownload, let override = overrides.read({ $0.dataTaskDidReceiveResponse }),
            let dataTask = task.task as? URLSessionDataTask
        else { return .allow }
        return override(session, dataTask, response.urlResponse)
    }

    func task(_ task: any TaskReference, in session: URLSession, didReceive data: Data) {
        if !task.isDownload {
            if let override = overrides.read({ $0.dataTaskDidReceiveData }),
                let dataTask = task.task as? URLSessionDataTask
            {
                override(session, dataTask, data)
            }
        } else if let override = overrides.read({ $0.downloadTaskDidWriteData }),
            let downloadTask = task.task as? URLSessionDownloadTask
        {
            override(
                session, downloadTask, Int64(data.count), downloadTask.countOfBytesReceived,
                downloadTask.countOfBytesExpectedToReceive)
        }
        registry.delegate(for: task)?.didReceive(data: data)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        if let override = overrides.read({ $0.taskDidSendBodyData }) {
            override(session, task.task, bytesSent, totalBytesSent, totalBytesExpectedToSend)
        }
        registry.delegate(for: task)?.didSendBodyData(
            totalBytesSent: totalBytesSent, totalBytesExpectedToSend: totalBytesExpectedToSend)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) -> URLRequest? {
        var decided =
            overrides.read({ $0.taskWillPerformHTTPRedirection }).map { $0(session, task.task, response, request) }
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
        _ task: any TaskReference, in session: URLSession, didReceive challenge: URLAuthenticationChallenge
    )
        -> ChallengeAction
    {
        let challenge = ChallengeResolver.proposingStoredCredential(
            challenge, from: session.configuration.urlCredentialStorage)
        return ChallengeResolver(overrides: overrides).resolve(challenge, for: task.task, in: session)
    }

    func task(_ task: any TaskReference, in session: URLSession, didReceiveTrailers trailers: [(String, String)]) {
        registry.delegate(for: task)?.didReceive(trailers: trailers)
    }

    func task(_ task: any TaskReference, in session: URLSession, didFinishCollecting timings: TransferTimings) {
        let delegate = registry.delegate(for: task)
        delegate?.telemetry?.collected(timings)
        delegate?.didCollect(timings)
        if let override = overrides.read({ $0.taskDidFinishCollectingTimings }) {
            override(session, task.task, timings)
        }
    }

    func task(_ task: any TaskReference, in session: URLSession, didFailPinning report: PinningReport) {
        registry.delegate(for: task)?.didFailPinning(report)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, willCache proposed: CachedURLResponse
    )
        -> CachedURLResponse?
    {
        guard !task.isDownload, let override = overrides.read({ $0.dataTaskWillCacheResponse }),
            let dataTask = task.task as? URLSessionDataTask
        else { return proposed }
        return override(session, dataTask, proposed)
    }

    func task(
        _ task: any TaskReference, in session: URLSession,
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

    func task(_ task: any TaskReference, in session: URLSession, didCompleteWithError error: Error?) {
        // Removed first, so that a finished task leaves nothing in the registry whatever its completion does.
        let delegate = registry.remove(task)
        var error = error
        if error == nil, task.receivedResponse == nil, !(task is URLSessionStreamTask) {
            // A completion carries a response or an error, on every transport and whatever its parser made of the
            // bytes: a task that would end with neither fails instead.
            error = URLError(
                .badServerResponse,
                userInfo: [
                    NSLocalizedDescriptionKey: "The task ended without a response or an error.",
                    NSURLErrorFailingURLErrorKey: task.originalURL as Any,
                    "NSErrorFailingURLStringKey": task.originalURL?.absoluteString as Any,
                ])
        }
        // A WebSocket task has no delegate; the cast is skipped for every other task.
        let webSocket =
            delegate != nil ? nil : (task as? SessionWebSocketTask).flatMap(registry.takeObservers(of:))
        (delegate?.telemetry ?? webSocket?.telemetry)?.complete(task, error: error)
        if let override = overrides.read({ $0.taskDidComplete }) { override(session, task.task, error) }
        delegate?.didComplete(error: error)
        if let observation = webSocket?.observation {
            // The WebSocket task's request ends with its connection.
            observation.taskDidComplete(task, error: error, transportError: error)
            observation.requestDidEnd(response: task.receivedResponse, error: error)
        }
    }

    func sessionDidBecomeInvalid(_ session: URLSession, error: Error?) {
        overrides.read { $0.sessionDidBecomeInvalid }?(session, error)
        var userInfo: [String: Any] = [:]
        if let error { userInfo[SessionKitNotificationKey.error] = error }
        NotificationCenter.default.post(name: .sessionKitSessionDidInvalidate, object: session, userInfo: userInfo)
    }

    func session(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        overrides.read({ $0.sessionDidReceiveAuthenticationChallenge }).map { $0(session, challenge) }
            ?? (.performDefaultHandling, nil)
    }

    func taskNeedsNewBodyStream(_ task: URLSessionTask, in session: URLSession) -> InputStream? {
        if let override = overrides.read({ $0.taskNeedNewBodyStream }) { return override(session, task) }
        return registry.delegate(for: task)?.takeBodyStream()
    }

    func task(_ dataTask: URLSessionDataTask, in session: URLSession, didBecome downloadTask: URLSessionDownloadTask) {
        overrides.read { $0.dataTaskDidBecomeDownloadTask }?(session, dataTask, downloadTask)
    }

    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        overrides.read { $0.downloadTaskDidWriteData }?(
            session, task, bytesWritten, totalBytesWritten, totalBytesExpectedToWrite)
        registry.delegate(for: task)?.didWriteData(
            totalBytesWritten: totalBytesWritten, totalBytesExpectedToWrite: totalBytesExpectedToWrite)
    }

    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64
    ) {
        overrides.read { $0.downloadTaskDidResume }?(session, task, fileOffset, expectedTotalBytes)
    }

    func task(_ task: URLSessionDownloadTask, in session: URLSession, didFinishDownloadingTo location: URL) {
        // As AFNetworking: the manager-wide closure wins when it returns a URL, else the task's destination.
        let override = overrides.read { $0.downloadTaskDidFinishDownloading }.flatMap { closure in
            closure(session, task, location)
        }
        registry.delegate(for: task)?.didFinishDownloading(to: location, override: override)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, adapt request: URLRequest,
        then: @escaping @Sendable (Result<URLRequest, Error>) -> Void
    ) {
        guard let delegate = registry.delegate(for: task) else { return then(.success(request)) }
        delegate.adapt(request, then: then)
    }

    func task(
        _ task: any TaskReference, in session: URLSession, attemptEndedWith error: Error?, deadline: Date?,
        then: @escaping @Sendable (AttemptVerdict) -> Void
    ) {
        guard let delegate = registry.delegate(for: task) else { return then(.complete) }
        delegate.attemptEnded(error: error, deadline: deadline, then: then)
    }
}
