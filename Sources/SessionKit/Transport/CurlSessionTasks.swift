import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task of the curl transport: a `URLSessionTask` subclass that SessionKit runs itself, through its
/// ``CurlTaskDriver``, with no URLSession work queue or `URLProtocol` in between.
///
/// The three classes below differ only in the Foundation class they extend (so that `is URLSessionDownloadTask` and
/// the manager's `dataTasks`/`uploadTasks`/`downloadTasks` lists stay true); each forwards every member URLSession's
/// callers read to its driver. The state, the counters, the response, the current request and the error are true at
/// every moment and from any thread; `resume()`, `suspend()` and `cancel()` work on the task itself (a loading task
/// holds its transfer in libcurl while suspended) and post SessionKit's resume and suspend notifications.
protocol CurlTask: URLSessionTask {
    /// What runs the task.
    var driver: CurlTaskDriver { get }
}

/// A data task of the curl transport.
final class CurlDataTask: URLSessionDataTask, CurlTask, @unchecked Sendable {
    // @unchecked Sendable: all state lives in the driver, behind its lock.
    let driver: CurlTaskDriver

    init(driver: CurlTaskDriver) {
        self.driver = driver
        super.init()
        driver.task = self
    }

    override var taskIdentifier: Int { driver.taskIdentifier }
    override var originalRequest: URLRequest? { driver.originalRequest }
    override var currentRequest: URLRequest? { driver.currentRequest }
    override var response: URLResponse? { driver.response }
    override var state: URLSessionTask.State { driver.state }
    override var error: Error? { driver.error }
    override var countOfBytesReceived: Int64 { driver.countOfBytesReceived }
    override var countOfBytesSent: Int64 { driver.countOfBytesSent }
    override var countOfBytesExpectedToSend: Int64 { driver.countOfBytesExpectedToSend }
    override var countOfBytesExpectedToReceive: Int64 { driver.countOfBytesExpectedToReceive }
    override var progress: Progress { driver.progress ?? super.progress }
    override func resume() { driver.resume() }
    override func suspend() { driver.suspend() }
    override func cancel() { driver.cancel() }
}

/// An upload task of the curl transport (its body: the request's `Data`, a file or a stream).
final class CurlUploadTask: URLSessionUploadTask, CurlTask, @unchecked Sendable {
    // @unchecked Sendable: all state lives in the driver, behind its lock.
    let driver: CurlTaskDriver

    init(driver: CurlTaskDriver) {
        self.driver = driver
        super.init()
        driver.task = self
    }

    override var taskIdentifier: Int { driver.taskIdentifier }
    override var originalRequest: URLRequest? { driver.originalRequest }
    override var currentRequest: URLRequest? { driver.currentRequest }
    override var response: URLResponse? { driver.response }
    override var state: URLSessionTask.State { driver.state }
    override var error: Error? { driver.error }
    override var countOfBytesReceived: Int64 { driver.countOfBytesReceived }
    override var countOfBytesSent: Int64 { driver.countOfBytesSent }
    override var countOfBytesExpectedToSend: Int64 { driver.countOfBytesExpectedToSend }
    override var countOfBytesExpectedToReceive: Int64 { driver.countOfBytesExpectedToReceive }
    override var progress: Progress { driver.progress ?? super.progress }
    override func resume() { driver.resume() }
    override func suspend() { driver.suspend() }
    override func cancel() { driver.cancel() }
}

/// A download task of the curl transport: its body is written to a temporary file by the per-task delegate and moved
/// to the destination; `cancel(byProducingResumeData:)` gives resume data that `downloadTask(withResumeData:)`
/// continues.
final class CurlDownloadTask: URLSessionDownloadTask, CurlTask, @unchecked Sendable {
    // @unchecked Sendable: all state lives in the driver, behind its lock.
    let driver: CurlTaskDriver

    init(driver: CurlTaskDriver) {
        self.driver = driver
        super.init()
        driver.task = self
    }

    override var taskIdentifier: Int { driver.taskIdentifier }
    override var originalRequest: URLRequest? { driver.originalRequest }
    override var currentRequest: URLRequest? { driver.currentRequest }
    override var response: URLResponse? { driver.response }
    override var state: URLSessionTask.State { driver.state }
    override var error: Error? { driver.error }
    override var countOfBytesReceived: Int64 { driver.countOfBytesReceived }
    override var countOfBytesSent: Int64 { driver.countOfBytesSent }
    override var countOfBytesExpectedToSend: Int64 { driver.countOfBytesExpectedToSend }
    override var countOfBytesExpectedToReceive: Int64 { driver.countOfBytesExpectedToReceive }
    override var progress: Progress { driver.progress ?? super.progress }
    override func resume() { driver.resume() }
    override func suspend() { driver.suspend() }
    override func cancel() { driver.cancel() }

    override func cancel(byProducingResumeData completionHandler: @escaping (Data?) -> Void) {
        nonisolated(unsafe) let handler = completionHandler  // called once, when the task has ended
        driver.cancel(byProducingResumeData: { handler($0) })
    }
}
