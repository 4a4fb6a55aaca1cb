import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a manager's event sink, registry and per-task delegates know a task by: the `URLSessionTask` itself for
/// URLSession's own tasks and for stream and WebSocket tasks, and the curl transport's driver for its tasks, whose
/// `URLSessionTask` is made only when someone asks for it (``task``).
///
/// A call that hands no task out and that no one watches (the HTTP core API's, `bytes(for:)`'s, with no event monitor
/// and no task-level closure set) then runs without one: Foundation's `URLSessionTask` costs two dispatch queues, a
/// `Progress` and a lock per request on Linux.
protocol TaskReference: AnyObject, Sendable {
    /// The task as URLSession's API hands it out, made when first asked for. The same object from then on while the
    /// task runs; once it has completed, a task no one kept may be made anew.
    var task: URLSessionTask { get }
    /// The key the registry finds the task under: the same for a curl task's `URLSessionTask` and its driver.
    var registryKey: ObjectIdentifier { get }
    /// The URL of the request the task was made with.
    var originalURL: URL? { get }
    /// The request body bytes sent so far (of the current attempt), as `URLSessionTask` counts them.
    var countOfBytesSent: Int64 { get }
    /// The response body bytes received so far (of the current attempt), as `URLSessionTask` counts them.
    var countOfBytesReceived: Int64 { get }
    /// The task's state, as `URLSessionTask.state` reports it.
    var state: URLSessionTask.State { get }
    /// The task's response as its transport holds it (its Foundation object built only when asked for).
    var receivedResponse: ReceivedResponse? { get }
    /// Whether a transport of SessionKit's drives the task (``TransportDrivenTask``: the curl transport's, stream and
    /// WebSocket tasks), rather than URLSession.
    var isTransportDriven: Bool { get }
    /// Whether the task is a download task (its body goes to a file).
    var isDownload: Bool { get }
    /// Cancels the task: it completes once, with `URLError.cancelled`.
    func cancel()
}

extension URLSessionTask: TaskReference {
    var task: URLSessionTask { self }

    var registryKey: ObjectIdentifier {
        if let task = asCurlTask { return ObjectIdentifier(task.driver) }
        return ObjectIdentifier(self)
    }

    var originalURL: URL? { originalRequest?.url }

    var receivedResponse: ReceivedResponse? { ReceivedResponse.of(self) }

    var isTransportDriven: Bool { asTransportDriven != nil }

    var isDownload: Bool { self is URLSessionDownloadTask }
}
