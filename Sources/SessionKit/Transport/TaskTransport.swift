import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How a manager's tasks move bytes: one implementation per ``Transport`` (``FoundationTaskTransport``,
/// ``CurlTaskTransport``). The manager asks its transport for tasks and for what it can do, and never branches on which
/// one it holds.
protocol TaskTransport: Sendable {
    /// Why a task for `request` cannot run under `policy` on this transport, if it cannot.
    func refusal(for request: URLRequest, policy: SecurityPolicy) -> NSError?

    /// Why a task for `request` cannot run with `connection` on this transport (a Unix socket URL, a resolved or
    /// local address, a response-head timeout, a SOCKS proxy), if it cannot.
    func refusal(for request: URLRequest, connection: ConnectionOptions) -> NSError?
    /// Why a task cannot present a client identity (mutual TLS) on this transport; nil when it can.
    var clientIdentityRefusal: NSError? { get }

    /// The request and partial file that continue a download from `resumeData` (`downloadTask(withResumeData:)`),
    /// or why the transport cannot continue it.
    func resumedDownload(from resumeData: Data) -> Result<ResumedDownload, NSError>

    /// Whether a request body stream is read as it is sent, without waiting (a `RequestBodyPipe`), so that a body can
    /// still be written while the response is read (full duplex) and trailers can follow it. When not, the HTTP core
    /// API collects a streamed body before the request is made, and refuses trailers it cannot send.
    var streamsRequestBodies: Bool { get }

    /// Whether a task can run the manager's adapters before each attempt and its retriers after
    /// (``TransportTaskOptions/intercepted``): the transport starts and restarts its own tasks.
    var interceptsTasks: Bool { get }

    /// The task for `source` (never a refusal), not resumed; nil when it cannot be made.
    ///
    /// - Parameters:
    ///   - uploadLength: The size of the body when known before sending.
    ///   - options: The security policy, TLS versions and decoding bounds the task runs under.
    ///   - session: The manager's session (the Foundation transport's tasks run in it; the closures of both receive it).
    ///   - sink: Where the task reports its events (the manager's hub; URLSession reaches it as the session's
    ///     delegate, the curl transport's tasks are handed it).
    func makeTask(
        for source: TaskSource, uploadLength: Int64?, options: TransportTaskOptions, session: URLSession,
        sink: TaskEventSink
    )
        -> TransportTask?

    // MARK: Control of the tasks it made

    /// Resumes `task` if it is suspended, and posts `Notification.Name.sessionKitTaskDidResume`.
    ///
    /// - Parameter announces: Whether the notification is posted (not for a task no caller holds); a transport that
    ///   reports through the event sink asks the sink, which knows.
    func resume(_ task: any TaskReference, announces: Bool)
    /// Suspends `task` and posts `Notification.Name.sessionKitTaskDidSuspend`; false when it was not suspended (it
    /// was suspended already, has ended, or, on a transport that cannot hold a transfer, is loading).
    func suspend(_ task: any TaskReference, announces: Bool) -> Bool
    /// Cancels `task`: it completes once, with `URLError.cancelled`.
    func cancel(_ task: any TaskReference)
    /// Whether the caller's resume and suspend of its tasks reach the event sink from the transport; when not, the
    /// manager tells the task's delegate itself.
    var reportsSuspension: Bool { get }
    /// Whether invalidating the manager's session with `invalidateAndCancel()` cancels its tasks (URLSession's own
    /// do); when not, the manager cancels each.
    var sessionCancelsTasks: Bool { get }
    /// Sets the client identity `task`'s connections present (mutual TLS), before it starts. A transport that cannot
    /// present one ends the task now, with ``clientIdentityRefusal``, when it is `running` (a task of the manager's
    /// that has not completed), rather than let it go without.
    func setClientIdentity(_ identity: ClientIdentity?, for task: any TaskReference, running: Bool)
}

/// A task whose transport keeps URLSession's `resume()`/`suspend()` promises itself, in every state, and reports each
/// change through the manager's event sink (the curl transport's tasks, stream and WebSocket tasks). A task that is not
/// one is URLSession's own, which the manager guards as ``FoundationTaskTransport`` says.
protocol TransportDrivenTask: URLSessionTask {
    /// Resumes the task if it is suspended (a loading one lets its transfer go on).
    func transportResume()
    /// Suspends the task (a loading one holds its transfer); false when it was suspended already or has ended.
    func transportSuspend() -> Bool
    /// Sets the client identity the task's connections present (mutual TLS), before it starts; nil for none.
    func transportSetClientIdentity(_ identity: ClientIdentity?)
}

extension URLSessionTask {
    /// This task as one its transport drives, found by its class (see ``asCurlTask``: no conformance lookup).
    var asTransportDriven: TransportDrivenTask? {
        if let task = asCurlTask { return task }
        switch self {
        case let task as SessionStreamTask: return task
        case let task as SessionWebSocketTask: return task
        default: return nil
        }
    }
}

/// What a task runs under, besides its request.
struct TransportTaskOptions: Sendable {
    /// The policy the server's certificate chain must pass.
    var policy: SecurityPolicy
    /// The TLS versions its connections may negotiate (the Foundation transport cannot choose).
    var tlsVersions = TLSVersionRange()
    /// How far a `Content-Encoding` body may inflate (the Foundation transport cannot see the wire).
    var decodingLimits = CurlTransfer.DecodingLimits()
    /// Where the curl transport reports the connections the task opens, when the manager has metrics.
    var connectionEvents: (any ConnectionEvents)?
    /// Resolved addresses, local address and response-head timeout (the curl transport's alone).
    var connection = ConnectionOptions()
    /// The client certificate its connections present (mutual TLS).
    var clientIdentity: ClientIdentity?
    /// For a download: the resume data it continues, from ``TaskTransport/resumedDownload(from:)``.
    var resumedDownload: ResumedDownload?
    /// For a download: the manager-wide destination closure (`downloadTaskDidFinishDownloading`), which a transport
    /// that writes the file itself asks, with the finished file, before the task's own destination.
    var downloadDestinationOverride: (@Sendable (URLSessionTask, URL) -> URL?)?
    /// Whether the manager's adapters and retriers run around each attempt of the task (the curl transport's tasks
    /// of the task API and the closure verbs, when the manager has an interceptor; the Foundation transport cannot).
    var intercepted = false
}

/// A download continued from resume data: its request (`Range` and `If-Range`) and the partial file it appends to.
struct ResumedDownload: Sendable {
    /// The request for the rest of the entity.
    let request: URLRequest
    /// The bytes received before, which a `206` continues and any other answer replaces.
    let partialFile: URL
    /// How many bytes ``partialFile`` holds.
    let length: Int64
}

/// A task a transport made, and what its per-task delegate needs to know of it.
struct TransportTask {
    /// The task: URLSession's own, or what the transport knows it by (the curl transport's driver, whose
    /// `URLSessionTask` is made when first asked for).
    let reference: any TaskReference
    /// Back-pressure between the transfer and the per-task delegate, when the transport can hold a transfer.
    let flowControl: FlowControl?
    /// Where a download's body is written, when the transport writes it itself (the curl transport: URLSession writes
    /// its own): the per-task delegate feeds it the body, asks it for resume data and lets it hand the file on.
    let downloadSink: BodySink?
    /// Makes the per-task delegate's progress the task's own (`task.progress`), given how to get (upload, download):
    /// the `Progress` objects are built only when asked for.
    let adoptProgress: (@escaping @Sendable () -> Progress, @escaping @Sendable () -> Progress) -> Void
}

extension Transport {
    /// A policy that pins cannot protect a plain-http request: refused on every transport, as AFNetworking does.
    static func pinningRefusal(for request: URLRequest, policy: SecurityPolicy) -> NSError? {
        guard policy.pinningMode != .none, ["http", "http+unix"].contains(request.url?.scheme?.lowercased() ?? "")
        else { return nil }
        return SessionKitError.session(
            .policyNotEnforceable,
            "A pinning security policy needs https; \(request.url?.absoluteString ?? "the URL") is plain http.")
    }
}

/// A manager's implementation of each ``Transport``, looked up by the public choice: the manager names neither.
struct TaskTransports: Sendable {
    private let curl: CurlTaskTransport
    private let foundation: FoundationTaskTransport

    /// Both transports of a manager whose session has `configuration`; the curl transport's tasks report on
    /// `delegateQueue` (the manager's delegate queue, as URLSession's do).
    init(configuration: URLSessionConfiguration, delegateQueue: DispatchQueue, sink: TaskEventSink) {
        curl = CurlTaskTransport(settings: CurlSessionSettings(configuration), delegateQueue: delegateQueue)
        foundation = FoundationTaskTransport(configuration: configuration, sink: sink)
    }

    /// A `URLSession` with `configuration` for the manager's Foundation tasks (and the closures that receive a
    /// session), whose events reach the manager's sink on `queue`.
    func makeSession(configuration: URLSessionConfiguration, queue: OperationQueue) -> URLSession {
        foundation.makeSession(configuration: configuration, queue: queue)
    }

    subscript(transport: Transport) -> TaskTransport {
        switch transport {
        case .curl: return curl
        case .foundation: return foundation
        }
    }

    /// The transport that made `task` and controls it: a task it drives (``TransportDrivenTask``: the curl
    /// transport's, stream and WebSocket tasks) is the curl transport's, any other URLSession's own.
    func owner(of task: any TaskReference) -> TaskTransport {
        task.isTransportDriven ? curl : foundation
    }

    /// A stream task to `host` and `port`, not resumed: stream tasks (and the WebSocket tasks built on them) run on
    /// the curl transport's engines whatever the manager's ``Transport`` (URLSession on Linux has none that work).
    /// A `refusal` makes a task that fails with it when resumed.
    func makeStreamTask(
        host: String, port: Int, options: TransportTaskOptions, session: URLSession, sink: TaskEventSink,
        refusal: NSError? = nil
    ) -> SessionStreamTask {
        curl.makeStreamTask(host: host, port: port, options: options, session: session, sink: sink, refusal: refusal)
    }
}
