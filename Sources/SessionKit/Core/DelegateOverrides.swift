import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The closures a manager's user set to take over or observe its session's delegate callbacks.
///
/// Closures that return a value replace the default behaviour; the others observe, and the per-task delegate still
/// does its work after them.
struct DelegateOverrides {
    // URLSessionDelegate
    var sessionDidBecomeInvalid: (@Sendable (URLSession, Error?) -> Void)?
    var sessionDidReceiveAuthenticationChallenge:
        (@Sendable (URLSession, URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?

    // URLSessionTaskDelegate
    var taskWillPerformHTTPRedirection:
        (@Sendable (URLSession, URLSessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)?
    var taskDidReceiveAuthenticationChallenge:
        (
            @Sendable (URLSession, URLSessionTask, URLAuthenticationChallenge) -> (
                URLSession.AuthChallengeDisposition, URLCredential?
            )
        )?
    var taskNeedNewBodyStream: (@Sendable (URLSession, URLSessionTask) -> InputStream?)?
    var taskDidSendBodyData: (@Sendable (URLSession, URLSessionTask, Int64, Int64, Int64) -> Void)?
    var taskDidComplete: (@Sendable (URLSession, URLSessionTask, Error?) -> Void)?
    var taskDidFinishCollectingTimings: (@Sendable (URLSession, URLSessionTask, TransferTimings) -> Void)?

    // URLSessionDataDelegate
    var dataTaskDidReceiveResponse:
        (@Sendable (URLSession, URLSessionDataTask, URLResponse) -> URLSession.ResponseDisposition)?
    var dataTaskDidBecomeDownloadTask: (@Sendable (URLSession, URLSessionDataTask, URLSessionDownloadTask) -> Void)?
    var dataTaskDidReceiveData: (@Sendable (URLSession, URLSessionDataTask, Data) -> Void)?
    var dataTaskWillCacheResponse:
        (@Sendable (URLSession, URLSessionDataTask, CachedURLResponse) -> CachedURLResponse?)?

    // URLSessionDownloadDelegate
    var downloadTaskDidFinishDownloading: (@Sendable (URLSession, URLSessionTask, URL) -> URL?)?
    var downloadTaskDidWriteData: (@Sendable (URLSession, URLSessionDownloadTask, Int64, Int64, Int64) -> Void)?
    var downloadTaskDidResume: (@Sendable (URLSession, URLSessionDownloadTask, Int64, Int64) -> Void)?

    // URLSessionStreamDelegate
    var streamTaskReadClosed: (@Sendable (URLSession, URLSessionStreamTask) -> Void)?
    var streamTaskWriteClosed: (@Sendable (URLSession, URLSessionStreamTask) -> Void)?

    // URLSessionWebSocketDelegate
    var webSocketTaskDidOpen: (@Sendable (URLSession, SessionWebSocketTask, String?) -> Void)?
    var webSocketTaskDidClose:
        (@Sendable (URLSession, SessionWebSocketTask, URLSessionWebSocketTask.CloseCode, Data?) -> Void)?
}
