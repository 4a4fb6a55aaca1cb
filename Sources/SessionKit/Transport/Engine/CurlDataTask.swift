import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A data task of the curl transport.
final class CurlDataTask: URLSessionDataTask, CurlTask, @unchecked Sendable {
    // @unchecked Sendable: all state lives in the driver, behind its lock.
    let driver: CurlTaskDriver

    /// The task object of `driver`, which makes it (``CurlTaskDriver/task``).
    init(driver: CurlTaskDriver) {
        self.driver = driver
        super.init()
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
