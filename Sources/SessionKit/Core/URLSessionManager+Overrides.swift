import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - Closure overrides of delegate callbacks

/// Each property observes or takes over one delegate callback of the manager's session, as AFNetworking's
/// `set…Block:` methods do. Closures run on the delegate queue (``URLSessionManager/operationQueue``); keep them
/// short. Closures that return a value replace the default behaviour; the others observe, and the per-task
/// delegate still does its work.
extension URLSessionManager {
    /// Observes the session becoming invalid.
    public var sessionDidBecomeInvalid: (@Sendable (URLSession, Error?) -> Void)? {
        get { overrides.read { $0.sessionDidBecomeInvalid } }
        set { overrides.write { $0.sessionDidBecomeInvalid = newValue } }
    }

    /// Answers session-level authentication challenges; without it, the default handling applies.
    public var sessionDidReceiveAuthenticationChallenge:
        (@Sendable (URLSession, URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?
    {
        get { overrides.read { $0.sessionDidReceiveAuthenticationChallenge } }
        set { overrides.write { $0.sessionDidReceiveAuthenticationChallenge = newValue } }
    }

    /// Decides each redirect: return the request to follow (possibly changed) or nil to stop and complete with the redirect response.
    public var taskWillPerformHTTPRedirection:
        (@Sendable (URLSession, URLSessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)?
    {
        get { overrides.read { $0.taskWillPerformHTTPRedirection } }
        set { overrides.write { $0.taskWillPerformHTTPRedirection = newValue } }
    }

    /// Answers task-level authentication challenges (HTTP Basic, Digest…); without it, the default handling applies.
    public var taskDidReceiveAuthenticationChallenge:
        (
            @Sendable (URLSession, URLSessionTask, URLAuthenticationChallenge) -> (
                URLSession.AuthChallengeDisposition, URLCredential?
            )
        )?
    {
        get { overrides.read { $0.taskDidReceiveAuthenticationChallenge } }
        set { overrides.write { $0.taskDidReceiveAuthenticationChallenge = newValue } }
    }

    /// Provides the body stream of a streamed upload, instead of the request's `httpBodyStream`.
    public var taskNeedNewBodyStream: (@Sendable (URLSession, URLSessionTask) -> InputStream?)? {
        get { overrides.read { $0.taskNeedNewBodyStream } }
        set { overrides.write { $0.taskNeedNewBodyStream = newValue } }
    }

    /// Observes body bytes sent: bytes sent now, in total, and expected in total.
    public var taskDidSendBodyData: (@Sendable (URLSession, URLSessionTask, Int64, Int64, Int64) -> Void)? {
        get { overrides.read { $0.taskDidSendBodyData } }
        set { overrides.write { $0.taskDidSendBodyData = newValue } }
    }

    /// Observes each task ending, before its completion handler is scheduled.
    public var taskDidComplete: (@Sendable (URLSession, URLSessionTask, Error?) -> Void)? {
        get { overrides.read { $0.taskDidComplete } }
        set { overrides.write { $0.taskDidComplete = newValue } }
    }

    /// Decides what to do with a response head; without it, the transfer goes on (`.allow`).
    public var dataTaskDidReceiveResponse:
        (@Sendable (URLSession, URLSessionDataTask, URLResponse) -> URLSession.ResponseDisposition)?
    {
        get { overrides.read { $0.dataTaskDidReceiveResponse } }
        set { overrides.write { $0.dataTaskDidReceiveResponse = newValue } }
    }

    /// Observes a data task turned into a download task.
    public var dataTaskDidBecomeDownloadTask:
        (@Sendable (URLSession, URLSessionDataTask, URLSessionDownloadTask) -> Void)?
    {
        get { overrides.read { $0.dataTaskDidBecomeDownloadTask } }
        set { overrides.write { $0.dataTaskDidBecomeDownloadTask = newValue } }
    }

    /// Observes each chunk of a response body as it arrives.
    public var dataTaskDidReceiveData: (@Sendable (URLSession, URLSessionDataTask, Data) -> Void)? {
        get { overrides.read { $0.dataTaskDidReceiveData } }
        set { overrides.write { $0.dataTaskDidReceiveData = newValue } }
    }

    /// Decides what is stored in the URL cache; return nil to store nothing.
    public var dataTaskWillCacheResponse:
        (@Sendable (URLSession, URLSessionDataTask, CachedURLResponse) -> CachedURLResponse?)?
    {
        get { overrides.read { $0.dataTaskWillCacheResponse } }
        set { overrides.write { $0.dataTaskWillCacheResponse = newValue } }
    }

    /// Chooses where every download of this manager goes; when it returns nil, the task's own destination applies.
    /// Asked on both transports with the temporary file. The task is a `URLSessionTask`, not a
    /// `URLSessionDownloadTask` as in AFNetworking: on the curl transport a download runs as a data task.
    public var downloadTaskDidFinishDownloading: (@Sendable (URLSession, URLSessionTask, URL) -> URL?)? {
        get { overrides.read { $0.downloadTaskDidFinishDownloading } }
        set { overrides.write { $0.downloadTaskDidFinishDownloading = newValue } }
    }

    /// Observes download bytes written: now, in total, and expected in total.
    public var downloadTaskDidWriteData: (@Sendable (URLSession, URLSessionDownloadTask, Int64, Int64, Int64) -> Void)?
    {
        get { overrides.read { $0.downloadTaskDidWriteData } }
        set { overrides.write { $0.downloadTaskDidWriteData = newValue } }
    }

    /// Observes a download made from resume data (`downloadTask(withResumeData:…)`) getting its response, before its
    /// first byte, as URLSession's `urlSession(_:downloadTask:didResumeAtOffset:expectedTotalBytes:)`: the bytes
    /// kept on disk (0 when the server sent the whole entity again) and the whole entity's expected size (-1 when
    /// unknown). Called on the curl transport, the only one that resumes downloads; the task's own download progress
    /// starts at the same offset.
    public var downloadTaskDidResume: (@Sendable (URLSession, URLSessionDownloadTask, Int64, Int64) -> Void)? {
        get { overrides.read { $0.downloadTaskDidResume } }
        set { overrides.write { $0.downloadTaskDidResume = newValue } }
    }

    /// Observes libcurl's timings of each transfer of a task on the curl transport (DNS, connect, TLS, first byte,
    /// total), before its completion handler runs. URLSession on Linux delivers no `URLSessionTaskMetrics`.
    public var taskDidFinishCollectingTimings: (@Sendable (URLSession, URLSessionTask, TransferTimings) -> Void)? {
        get { overrides.read { $0.taskDidFinishCollectingTimings } }
        set { overrides.write { $0.taskDidFinishCollectingTimings = newValue } }
    }

    /// Observes a stream task's read side closing: the peer ended its stream, or ``SessionStreamTask/closeRead()``
    /// took effect once the reads queued before it were done (`URLSessionStreamDelegate`'s `readClosedFor`).
    public var streamTaskReadClosed: (@Sendable (URLSession, URLSessionStreamTask) -> Void)? {
        get { overrides.read { $0.streamTaskReadClosed } }
        set { overrides.write { $0.streamTaskReadClosed = newValue } }
    }

    /// Observes a stream task's write side closing: ``SessionStreamTask/closeWrite()`` took effect once the writes
    /// queued before it were sent (`URLSessionStreamDelegate`'s `writeClosedFor`).
    public var streamTaskWriteClosed: (@Sendable (URLSession, URLSessionStreamTask) -> Void)? {
        get { overrides.read { $0.streamTaskWriteClosed } }
        set { overrides.write { $0.streamTaskWriteClosed = newValue } }
    }

    /// Observes a WebSocket task's opening handshake succeeding, with the subprotocol the server chose (nil when it
    /// chose none), as URLSession's `urlSession(_:webSocketTask:didOpenWithProtocol:)`. Called once per task, before
    /// the completions of the operations queued before the connection opened; never for a handshake that failed.
    ///
    /// ```swift
    /// manager.webSocketTaskDidOpen = { _, task, subprotocol in print("open", task.taskIdentifier, subprotocol ?? "-") }
    /// ```
    public var webSocketTaskDidOpen: (@Sendable (URLSession, SessionWebSocketTask, String?) -> Void)? {
        get { overrides.read { $0.webSocketTaskDidOpen } }
        set { overrides.write { $0.webSocketTaskDidOpen = newValue } }
    }

    /// Observes a WebSocket task's close handshake, as URLSession's `urlSession(_:webSocketTask:didCloseWith:reason:)`:
    /// called once, when the server's close frame arrived — the server closed first, or answered the close frame of
    /// ``SessionWebSocketTask/cancel(with:reason:)`` — with the code and reason of the server's frame
    /// (`.noStatusReceived` and nil for a frame without a code), before ``taskDidComplete``.
    ///
    /// As URLSession does, it is called for a close frame only: not for a connection that failed (a refused
    /// handshake, a protocol violation closed with `.protocolError`, `.invalidFramePayloadData` or
    /// `.messageTooBig`), was cancelled, ended without a close frame, or whose peer never answered the close frame
    /// in time. ``taskDidComplete`` reports each of those, and ``SessionWebSocketTask/closeCode`` the code sent.
    public var webSocketTaskDidClose:
        (@Sendable (URLSession, SessionWebSocketTask, URLSessionWebSocketTask.CloseCode, Data?) -> Void)?
    {
        get { overrides.read { $0.webSocketTaskDidClose } }
        set { overrides.write { $0.webSocketTaskDidClose = newValue } }
    }
}
