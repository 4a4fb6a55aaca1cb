import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A TCP stream to a host and port, optionally over TLS checked by the manager's ``SecurityPolicy``: SessionKit's
/// `URLSessionStreamTask`, which Foundation does not implement on Linux. Made by
/// ``URLSessionManager/streamTask(withHostName:port:)``.
///
/// It runs on libcurl (connect-only mode) whatever the manager's ``URLSessionManager/transport``. The connection
/// opens when the first operation is queued after `resume()`. Reads and writes each run in the order they were
/// queued; every completion handler is called exactly once, on the manager's delegate queue
/// (``URLSessionManager/operationQueue``). The task completes (``URLSessionManager/taskDidComplete``, `state ==
/// .completed`) once: when it is cancelled, when the connection fails, or when both directions are closed (the
/// peer's end of stream and ``closeWrite()``, or ``closeRead()`` and ``closeWrite()``).
///
/// ```swift
/// let task = manager.streamTask(withHostName: "127.0.0.1", port: 7)
/// task.startSecureConnection()  // before any read or write: TLS from the start
/// task.resume()
/// try await task.write(Data("ping\n".utf8), timeout: 10)
/// for try await chunk in task.chunks() { print(chunk.count) }
/// ```
///
/// URLSession's methods of the same names are unavailable on Linux, so these are SessionKit's own: call them on a
/// `SessionStreamTask`, not through a `URLSessionStreamTask` reference.
public final class SessionStreamTask: URLSessionStreamTask, @unchecked Sendable {
    // @unchecked Sendable: all state is in the driver (a lock-protected lifecycle); `driver` is immutable.

    let driver: CurlStreamDriver

    init(driver: CurlStreamDriver) {
        self.driver = driver
        super.init()
        driver.task = self
    }

    /// The host name or address the stream connects to.
    public var host: String { driver.host }
    /// The TCP port the stream connects to.
    public var port: Int { driver.port }

    /// The task's identifier, unique in its manager.
    public override var taskIdentifier: Int { driver.taskIdentifier }
    /// A stream task has no request.
    public override var originalRequest: URLRequest? { nil }
    /// A stream task has no request.
    public override var currentRequest: URLRequest? { nil }
    /// A stream task has no response.
    public override var response: URLResponse? { nil }
    /// Suspended until resumed, running while the stream is open, completed once its completion was delivered.
    public override var state: URLSessionTask.State { driver.taskState }
    /// Why the task ended, if it ended with an error.
    public override var error: Error? { driver.error }
    /// Application bytes received so far.
    public override var countOfBytesReceived: Int64 { driver.countOfBytesReceived }
    /// Application bytes sent so far.
    public override var countOfBytesSent: Int64 { driver.countOfBytesSent }
    /// Starts the task; the connection opens when the first operation is queued (or now if some are).
    public override func resume() { driver.resume() }
    /// Holds the task's I/O; queued operations wait (their timeouts still run).
    public override func suspend() { driver.suspend() }
    /// Ends the task: every pending read and write completes with `URLError.cancelled`, and the connection closes.
    public override func cancel() { driver.cancel() }

    /// Reads between `minBytes` and `maxBytes` bytes, after the reads queued before.
    ///
    /// The handler gets the bytes and whether the end of stream was reached. At the end of stream it gets what was
    /// left, possibly fewer than `minBytes` or none (`atEOF == true`, no error); a read queued after that gets empty
    /// data and `atEOF == true`, as does one queued after ``closeRead()``.
    ///
    /// - Parameters:
    ///   - minBytes: The read completes once this many bytes arrived (at least one).
    ///   - maxBytes: The most bytes it returns.
    ///   - timeout: Seconds from now after which the read fails with `URLError.timedOut` (the bytes that came stay
    ///     for the next read); 0 for none.
    ///   - completionHandler: Called once on the delegate queue with the data, the end-of-stream flag and the error.
    public func readData(
        ofMinLength minBytes: Int, maxLength maxBytes: Int, timeout: TimeInterval,
        completionHandler: @escaping @Sendable (Data?, Bool, Error?) -> Void
    ) {
        driver.read(minimum: minBytes, maximum: maxBytes, timeout: timeout, handler: completionHandler)
    }

    /// Writes `data`, after the writes queued before.
    ///
    /// - Parameters:
    ///   - data: The bytes to send.
    ///   - timeout: Seconds from now after which the write fails with `URLError.timedOut`; 0 for none. A write of
    ///     which nothing went out is dropped and the stream stays open. One that timed out after part of it was
    ///     sent (or, on TLS, once OpenSSL had built a record of it) ends the task with `URLError.timedOut`: every
    ///     pending operation fails, since the peer got part of the bytes and the stream is out of step.
    ///   - completionHandler: Called once on the delegate queue, with nil once every byte was handed to the socket.
    public func write(_ data: Data, timeout: TimeInterval, completionHandler: @escaping @Sendable (Error?) -> Void) {
        driver.write(data, timeout: timeout, handler: completionHandler)
    }

    /// Closes the read side once the reads queued before are done; later reads get the end of stream.
    public func closeRead() { driver.closeRead() }

    /// Shuts the write side (`SHUT_WR`, the peer sees the end of stream) once the writes queued before were sent;
    /// later writes fail. After the peer's own close (its end of stream read, or waiting to be read), this is the
    /// end of the write side, not an error, even when the peer's system answers the TLS close alert with a reset.
    public func closeWrite() { driver.closeWrite() }

    /// Makes the stream TLS, with the manager's ``SecurityPolicy`` deciding in the handshake.
    ///
    /// Called before any read or write, the connection opens with TLS. Called later (STARTTLS), the handshake starts
    /// once the reads and writes queued before it are done, over the same connection, and the operations queued after
    /// it wait for the handshake. Either way a chain the policy refuses fails the task (with the policy's
    /// `URLError`) before any byte of it is sent over TLS. A stream whose read or write side is closed cannot be
    /// upgraded: operations queued after the call fail with `URLError.secureConnectionFailed`. The handshake may take
    /// the configuration's `timeoutIntervalForRequest` (300 s when that is not positive), whatever the operations'
    /// timeouts: a peer that does not answer it in time fails the task with `URLError.timedOut`.
    public func startSecureConnection() { driver.startSecureConnection() }
}

// MARK: - TransportDrivenTask

extension SessionStreamTask: TransportDrivenTask {
    func transportResume() { driver.resume() }
    func transportSuspend() -> Bool { driver.suspend() }
    func transportSetClientIdentity(_ identity: ClientIdentity?) { _ = driver.clientIdentity.set(identity) }
}
