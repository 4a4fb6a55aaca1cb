import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A task of the curl transport: a `URLSessionTask` subclass that SessionKit runs itself, through its
/// ``CurlTaskDriver``, with no URLSession work queue or `URLProtocol` in between.
///
/// Its three classes (`CurlDataTask`, `CurlUploadTask`, `CurlDownloadTask`) differ only in the Foundation class they extend (so that `is URLSessionDownloadTask` and
/// the manager's `dataTasks`/`uploadTasks`/`downloadTasks` lists stay true); each forwards every member URLSession's
/// callers read to its driver. The state, the counters, the response, the current request and the error are true at
/// every moment and from any thread; `resume()`, `suspend()` and `cancel()` work on the task itself (a loading task
/// holds its transfer in libcurl while suspended) and post SessionKit's resume and suspend notifications.
protocol CurlTask: TransportDrivenTask {
    /// What runs the task.
    var driver: CurlTaskDriver { get }
}

extension URLSessionTask {
    /// This task as one of the curl transport's, found by its class: a cast to the protocol looks the conformance up
    /// along the class chain at every call (about 2k instructions on Linux), and a request asks several times.
    var asCurlTask: CurlTask? {
        switch self {
        case let task as CurlDataTask: return task
        case let task as CurlUploadTask: return task
        case let task as CurlDownloadTask: return task
        default: return nil
        }
    }
}

extension CurlTask {
    func transportResume() { driver.resume() }
    func transportSuspend() -> Bool { driver.suspend() }
    func transportSetClientIdentity(_ identity: ClientIdentity?) { _ = driver.clientIdentity.set(identity) }
}
