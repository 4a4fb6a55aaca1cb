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
    var sessionDidBecomeInvalid: ((URLSession, Error?) -> Void)?
    var sessionDidReceiveAuthenticationChallenge:
        ((URLSession, URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?

    // URLSessionTaskDelegate
    var taskWillPerformHTTPRedirection: ((URLSession, URLSessionTask, HTTPURLResponse, URLRequest) -> URLRequest?)?
    var taskDidReceiveAuthenticationChallenge:
        ((URLSession, URLSessionTask, URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?
    var taskNeedNewBodyStream: ((URLSession, URLSessionTask) -> InputStream?)?
    var taskDidSendBodyData: ((URLSession, URLSessionTask, Int64, Int64, Int64) -> Void)?
    var taskDidComplete: ((URLSession, URLSessionTask, Error?) -> Void)?
    var taskDidFinishCollectingTimings: ((URLSession, URLSessionTask, TransferTimings) -> Void)?

    // URLSessionDataDelegate
    var dataTaskDidReceiveResponse: ((URLSession, URLSessionDataTask, URLResponse) -> URLSession.ResponseDisposition)?
    var dataTaskDidBecomeDownloadTask: ((URLSession, URLSessionDataTask, URLSessionDownloadTask) -> Void)?
    var dataTaskDidReceiveData: ((URLSession, URLSessionDataTask, Data) -> Void)?
    var dataTaskWillCacheResponse: ((URLSession, URLSessionDataTask, CachedURLResponse) -> CachedURLResponse?)?

    // URLSessionDownloadDelegate
    var downloadTaskDidFinishDownloading: ((URLSession, URLSessionTask, URL) -> URL?)?
    var downloadTaskDidWriteData: ((URLSession, URLSessionDownloadTask, Int64, Int64, Int64) -> Void)?
    var downloadTaskDidResume: ((URLSession, URLSessionDownloadTask, Int64, Int64) -> Void)?
}
