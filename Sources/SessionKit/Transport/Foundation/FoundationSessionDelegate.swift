import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The delegate of the manager's `URLSession`: turns URLSession's callbacks into the manager's ``TaskEventSink``
/// events, the path the curl transport's tasks report on, after working around what URLSession on Linux gets wrong.
///
/// Every workaround of URLSession's behaviour lives here or in ``FoundationTaskTransport``, none in the manager:
/// - a redirect that would be sent without the body of the request it follows is not followed;
/// - a 401 or 407 always gets an answer URLSession completes (a credential, or a cancellation that this delegate turns
///   back into the delivery of the challenge's response);
/// - a task SessionKit cancels for a reason of its own (the resource timeout, a client identity it cannot present)
///   ends with that reason rather than `URLError.cancelled`;
/// - the bytes an upload report says were sent add up to its total (URLSession on Linux reads the total from another
///   counter than the increment, so that the last increments of a body overshoot it).
final class FoundationSessionDelegate: NSObject, Sendable {
    // Sendable, checked by the compiler: `sink` is immutable and Sendable, `cancellations` and `sentTotals` are
    // `Protected` boxes.

    /// What the coming cancellation of a task means, when SessionKit cancels it for a reason of its own (URLSession
    /// can end a task early only by cancelling it).
    enum CancellationMeaning {
        /// The response of an authentication challenge nobody answered is the task's result.
        case challengeResponse
        /// The session's resource timeout ran out (URLSession on Linux does not enforce it).
        case resourceTimeout
        /// The task was given a client identity, which URLSession on Linux cannot present.
        case clientIdentityUnsupported
    }

    /// A meaning noted for a task, which it keeps weakly: a mark noted after its task's completion took the marks (a
    /// resource deadline swept during the completion) must not be read by a later task at the same address.
    private struct Mark {
        weak var task: URLSessionTask?
        let meaning: CancellationMeaning
    }

    private let sink: TaskEventSink
    private let cancellations = Protected<[ObjectIdentifier: Mark]>([:])
    /// The total of request body bytes last reported for each task still sending.
    private let sentTotals = Protected<[ObjectIdentifier: Int64]>([:])

    /// A delegate reporting to `sink` (the manager's hub).
    init(sink: TaskEventSink) {
        self.sink = sink
    }

    /// Cancels `task`, which then ends with `meaning`'s error rather than `URLError.cancelled`.
    func cancel(_ task: URLSessionTask, meaning: CancellationMeaning) {
        mark(task, meaning)
        task.cancel()
    }

    /// Notes what the cancellation that is about to end `task` means; the first meaning noted wins. Marks whose task
    /// is gone are dropped.
    private func mark(_ task: URLSessionTask, _ meaning: CancellationMeaning) {
        cancellations.write { marks in
            if marks.values.contains(where: { $0.task == nil }) { marks = marks.filter { $0.value.task != nil } }
            if marks[ObjectIdentifier(task)]?.task !== task {
                marks[ObjectIdentifier(task)] = Mark(task: task, meaning: meaning)
            }
        }
    }

    /// The error `task` ends with, given URLSession's `error` and what SessionKit meant by cancelling it, if it did.
    private func completionError(of task: URLSessionTask, _ error: Error?) -> Error? {
        guard let mark = cancellations.write({ $0.removeValue(forKey: ObjectIdentifier(task)) }), mark.task === task,
            (error as NSError?)?.code == NSURLErrorCancelled
        else { return error }
        switch mark.meaning {
        case .challengeResponse:
            return nil  // the challenge's response, already received, is the result
        case .resourceTimeout:
            return URLError(
                .timedOut,
                userInfo: [
                    NSLocalizedDescriptionKey: "The request took longer than the session's resource timeout.",
                    NSURLErrorFailingURLErrorKey: task.originalRequest?.url as Any,
                    "NSErrorFailingURLStringKey": task.originalRequest?.url?.absoluteString as Any,
                ])
        case .clientIdentityUnsupported:
            return FoundationTaskTransport.clientIdentityUnsupported
        }
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
}

// MARK: - URLSessionDelegate

extension FoundationSessionDelegate: URLSessionDelegate {
    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        sink.sessionDidBecomeInvalid(session, error: error)
    }

    func urlSession(
        _ session: URLSession,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // URLSession on Linux raises no session-level challenge (no server trust); answered for completeness.
        let (disposition, credential) = sink.session(session, didReceive: challenge)
        completionHandler(
            disposition == .useCredential && credential == nil ? .performDefaultHandling : disposition, credential)
    }
}

// MARK: - URLSessionTaskDelegate

extension FoundationSessionDelegate: URLSessionTaskDelegate {
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
        completionHandler(sink.task(task, in: session, willPerformHTTPRedirection: response, newRequest: request))
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // URLSession on Linux (FoundationNetworking 6.3) never ends a task whose 401 challenge gets the default
        // handling without a stored credential, and crashes on `.useCredential` without a credential. So the answer
        // it gets is always one it completes: a credential, or a cancellation that the completion turns back into
        // the delivery of the 401 when that is what the manager decided.
        let method = challenge.protectionSpace.authenticationMethod
        switch sink.task(task, in: session, didReceive: challenge) {
        case .retry(let credential)
        where method == NSURLAuthenticationMethodHTTPBasic || method == NSURLAuthenticationMethodHTTPDigest:
            completionHandler(.useCredential, credential)
        case .retry, .deliverResponse:
            // URLSession answers Basic and Digest only (any other scheme with a credential stops the process).
            mark(task, .challengeResponse)
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
        completionHandler(sink.taskNeedsNewBodyStream(task, in: session))
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        // The increment is what the total moved by since the last report; a report that moves nothing is dropped,
        // and a total that went back (the body sent again, for a credential) starts over.
        let increment = sentTotals.write { totals -> Int64? in
            var last = totals[ObjectIdentifier(task)] ?? 0
            if totalBytesSent < last { last = 0 }
            guard totalBytesSent > last else { return nil }
            totals[ObjectIdentifier(task)] = totalBytesSent
            return totalBytesSent - last
        }
        guard let increment else { return }
        sink.task(
            task, in: session, didSendBodyData: increment, totalBytesSent: totalBytesSent,
            totalBytesExpectedToSend: totalBytesExpectedToSend)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        sentTotals.write { _ = $0.removeValue(forKey: ObjectIdentifier(task)) }
        sink.task(task, in: session, didCompleteWithError: completionError(of: task, error))
    }
}

// MARK: - URLSessionDataDelegate

extension FoundationSessionDelegate: URLSessionDataDelegate {
    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        completionHandler(sink.task(dataTask, in: session, didReceive: ReceivedResponse(response)))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask)
    {
        sink.task(dataTask, in: session, didBecome: downloadTask)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        sink.task(dataTask, in: session, didReceive: data)
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        willCacheResponse proposedResponse: CachedURLResponse,
        completionHandler: @escaping (CachedURLResponse?) -> Void
    ) {
        completionHandler(sink.task(dataTask, in: session, willCache: proposedResponse))
    }
}

// MARK: - URLSessionDownloadDelegate

extension FoundationSessionDelegate: URLSessionDownloadDelegate {
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        sink.task(downloadTask, in: session, didFinishDownloadingTo: location)
    }

    func urlSession(
        _ session: URLSession,
        downloadTask: URLSessionDownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {
        sink.task(
            downloadTask, in: session, didWriteData: bytesWritten, totalBytesWritten: totalBytesWritten,
            totalBytesExpectedToWrite: totalBytesExpectedToWrite)
    }

    func urlSession(
        _ session: URLSession,
        downloadTask: URLSessionDownloadTask,
        didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64
    ) {
        sink.task(downloadTask, in: session, didResumeAtOffset: fileOffset, expectedTotalBytes: expectedTotalBytes)
    }
}
