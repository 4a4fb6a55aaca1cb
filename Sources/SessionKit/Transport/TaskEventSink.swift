import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where every task of a manager sends its events, whichever transport runs it: the same callbacks URLSession sends
/// its delegate, for any kind of task, always on the manager's delegate queue. The curl transport's tasks call it
/// directly; URLSession's reach it through ``FoundationSessionDelegate``, which works around URLSession's faults
/// first. The manager's delegate hub implements it, so that events of both transports take one path: the closure
/// overrides, then the per-task delegate.
///
/// Every call names the `URLSession` the manager's closures receive (the manager's session when the task was made).
protocol TaskEventSink: AnyObject, Sendable {
    /// The task was resumed (`resumed == true`) or suspended by its caller.
    func taskDidChangeSuspension(_ task: any TaskReference, in session: URLSession, resumed: Bool)

    /// The response head arrived (its Foundation object built only if a receiver asks for it); the answer says
    /// whether the task goes on.
    func task(
        _ task: any TaskReference, in session: URLSession, didReceive response: ReceivedResponse
    ) -> URLSession.ResponseDisposition

    /// Body bytes arrived.
    func task(_ task: any TaskReference, in session: URLSession, didReceive data: Data)

    /// Request body bytes were sent: `bytesSent` since the last report, `totalBytesSent` so far, of
    /// `totalBytesExpectedToSend` (-1 when unknown).
    func task(
        _ task: any TaskReference, in session: URLSession, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64)

    /// A redirect response ended a transfer: the request to send next, or nil to deliver the redirect response.
    func task(
        _ task: any TaskReference, in session: URLSession, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    )
        -> URLRequest?

    /// A 401 or 407 ended a transfer: what to do about it.
    func task(
        _ task: any TaskReference, in session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) -> ChallengeAction

    /// A response is about to be stored in the HTTP cache: what to store (`proposed`, another one, or nil for none).
    func task(
        _ task: any TaskReference, in session: URLSession, willCache proposed: CachedURLResponse
    )
        -> CachedURLResponse?

    /// The response's trailer fields arrived after its body (chunked HTTP/1.1, HTTP/2), as received.
    func task(_ task: any TaskReference, in session: URLSession, didReceiveTrailers trailers: [(String, String)])

    /// A transfer ended: libcurl's timings of it.
    func task(_ task: any TaskReference, in session: URLSession, didFinishCollecting timings: TransferTimings)

    /// The server's chain matched no pin, and the policy only reports it (``SecurityPolicy/reportsOnly``): the
    /// connection went on.
    func task(_ task: any TaskReference, in session: URLSession, didFailPinning report: PinningReport)

    /// The task is about to be cancelled: `handler` gets its resume data once it ends; false when it has none.
    func task(
        _ task: any TaskReference, in session: URLSession,
        producingResumeData handler: @escaping @Sendable (Data?) -> Void
    ) -> Bool

    /// A stream task's read side closed (the peer's end of stream, or `closeRead()` once earlier reads were done).
    func streamTaskReadClosed(_ task: URLSessionStreamTask, in session: URLSession)

    /// A stream task's write side closed (`closeWrite()` once earlier writes were sent).
    func streamTaskWriteClosed(_ task: URLSessionStreamTask, in session: URLSession)

    /// A WebSocket task's opening handshake succeeded; `negotiatedProtocol` is the subprotocol the server chose.
    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didOpenWithProtocol negotiatedProtocol: String?)

    /// The server's close frame ended a WebSocket task's connection: its code and reason.
    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didCloseWith code: URLSessionWebSocketTask.CloseCode,
        reason: Data?)

    /// The task ended, exactly once.
    func task(_ task: any TaskReference, in session: URLSession, didCompleteWithError error: Error?)

    // MARK: Events of URLSession's own tasks and session (the Foundation transport's)

    /// The session became invalid (after `finishTasksAndInvalidate()` or `invalidateAndCancel()`).
    func sessionDidBecomeInvalid(_ session: URLSession, error: Error?)

    /// A challenge for the whole session: how to answer it.
    func session(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?)

    /// The transport needs the request body stream again (to send it once more): a new stream, or nil for none.
    func taskNeedsNewBodyStream(_ task: URLSessionTask, in session: URLSession) -> InputStream?

    /// A data task became a download task (its response disposition said so).
    func task(_ dataTask: URLSessionDataTask, in session: URLSession, didBecome downloadTask: URLSessionDownloadTask)

    /// A download's bytes were written to its file: `bytesWritten` since the last report, of the totals.
    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)

    /// A download continues from resume data: the bytes kept at `fileOffset`, of `expectedTotalBytes`.
    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64)

    /// A download's file is complete at `location` (the transport's temporary file, removed after this returns).
    func task(_ task: URLSessionDownloadTask, in session: URLSession, didFinishDownloadingTo location: URL)

    /// A task of a manager with an interceptor is about to send an attempt: `then` gets the request its adapters
    /// made of `request`, or the error that ends the task (called once, on the delegate queue).
    func task(
        _ task: any TaskReference, in session: URLSession, adapt request: URLRequest,
        then: @escaping @Sendable (Result<URLRequest, Error>) -> Void)

    /// An attempt of such a task ended, with `error` or with its response: `then` gets whether the task completes
    /// now or is sent again (called once, on the delegate queue). `deadline` is the task's resource deadline, if it
    /// has one: a retry that would start past it is not made (nor reported).
    func task(
        _ task: any TaskReference, in session: URLSession, attemptEndedWith error: Error?, deadline: Date?,
        then: @escaping @Sendable (AttemptVerdict) -> Void)
}

/// What the manager decides when an attempt of a task with adapters and retriers ended.
enum AttemptVerdict: Equatable {
    /// The task completes with this attempt's outcome.
    case complete
    /// The task sends its request again (adapted again) after this many seconds.
    case retry(after: TimeInterval)
    /// The retriers asked for a retry that would start past the task's resource deadline: the task fails with
    /// `URLError.timedOut`, as URLSession ends a task past its resource timeout.
    case pastDeadline
}

extension TaskEventSink {
    /// A sink without request monitors (a WebSocket's stream) has no one to tell.
    func task(_ task: any TaskReference, in session: URLSession, didFailPinning report: PinningReport) {}

    /// A sink without adapters sends the request as it is.
    func task(
        _ task: any TaskReference, in session: URLSession, adapt request: URLRequest,
        then: @escaping @Sendable (Result<URLRequest, Error>) -> Void
    ) {
        then(.success(request))
    }

    /// A sink without retriers completes every task at its first attempt's end.
    func task(
        _ task: any TaskReference, in session: URLSession, attemptEndedWith error: Error?, deadline: Date?,
        then: @escaping @Sendable (AttemptVerdict) -> Void
    ) {
        then(.complete)
    }
}
