import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - Stream tasks

extension URLSessionManager {
    /// Creates a TCP stream task to `hostname`:`port`, not resumed.
    ///
    /// The task runs on libcurl whatever ``transport`` is (URLSession has no stream tasks on Linux). It is TLS once
    /// ``SessionStreamTask/startSecureConnection()`` is called (from the start, or as an upgrade after plain bytes);
    /// the handshake is checked by the ``securityPolicy`` and the TLS versions set on the manager when the task is
    /// created. Its
    /// completion goes through ``taskDidComplete``; ``streamTaskReadClosed`` and ``streamTaskWriteClosed`` observe
    /// its directions closing. It is listed in ``tasks`` until it completes, and cancelled by
    /// ``invalidateSessionCancelingTasks(_:resetSession:)``. Made after the session was invalidated without a reset,
    /// it is not listed, and `resume()` and every operation fail with ``SessionKitError/Code/sessionInvalidated``, as
    /// data tasks do.
    ///
    /// ```swift
    /// let task = manager.streamTask(withHostName: "127.0.0.1", port: 7)
    /// task.resume()
    /// task.write(Data("hello".utf8), timeout: 10) { error in print(error ?? "sent") }
    /// task.readData(ofMinLength: 5, maxLength: 5, timeout: 10) { data, atEOF, error in
    ///     print(data ?? Data(), atEOF, error as Any)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - hostname: A host name or an IP address.
    ///   - port: The TCP port (1…65535); another value gives a task whose first operation fails.
    public func streamTask(withHostName hostname: String, port: Int) -> SessionStreamTask {
        let options = TransportTaskOptions(
            policy: securityPolicy,
            tlsVersions: TLSVersionRange(
                minimum: tlsMinimumSupportedProtocolVersion, maximum: tlsMaximumSupportedProtocolVersion),
            connection: connectionOptions, clientIdentity: clientIdentity)
        // Under the session lock, as `makeTask` creates tasks: a task made while the session is being invalidated is
        // either refused or registered before the invalidation's cancel loop runs.
        return makeStreamTask { session, refusal in
            let task = taskTransports.makeStreamTask(
                host: hostname, port: port, options: options, session: session, sink: eventSink, refusal: refusal)
            if refusal == nil { registry.add(task) }
            return task
        }
    }
}
