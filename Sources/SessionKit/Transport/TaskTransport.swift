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

    /// Why a task cannot present a client identity (mutual TLS) on this transport; nil when it can.
    var clientIdentityRefusal: NSError? { get }

    /// Whether a download can continue from resume data (`downloadTask(withResumeData:)`).
    var resumesDownloads: Bool { get }

    /// Whether the manager must enforce the configuration's `timeoutIntervalForResource` itself.
    var needsResourceDeadlines: Bool { get }

    /// The task for `source` (never a refusal), not resumed; nil when it cannot be made.
    ///
    /// - Parameters:
    ///   - uploadLength: The size of the body when known before sending.
    ///   - options: The security policy, TLS versions and decoding bounds the task runs under.
    ///   - session: The manager's session (the Foundation transport's tasks run in it; the closures of both receive it).
    func makeTask(
        for source: TaskSource, uploadLength: Int64?, options: TransportTaskOptions, session: URLSession
    )
        -> TransportTask?
}

/// What a task runs under, besides its request.
struct TransportTaskOptions: Sendable {
    /// The policy the server's certificate chain must pass.
    var policy: SecurityPolicy
    /// The TLS versions its connections may negotiate (the Foundation transport cannot choose).
    var tlsVersions = TLSVersionRange()
    /// How far a `Content-Encoding` body may inflate (the Foundation transport cannot see the wire).
    var decodingLimits = CurlTransfer.DecodingLimits()
    /// The client certificate its connections present (mutual TLS).
    var clientIdentity: ClientIdentity?
}

/// A task a transport made, and what its per-task delegate needs to know of it.
struct TransportTask {
    /// The task the caller gets.
    let task: URLSessionTask
    /// Back-pressure between the transfer and the per-task delegate, when the transport can hold a transfer.
    let flowControl: FlowControl?
    /// Whether the per-task delegate writes a download's body to its temporary file (a transport without download
    /// machinery of its own hands it the bytes).
    let writesBodyToFile: Bool
    /// Makes the per-task delegate's progress the task's own (`task.progress`), given (upload, download).
    let adoptProgress: (Progress, Progress) -> Void
}

extension Transport {
    /// A policy that pins cannot protect a plain-http request: refused on every transport, as AFNetworking does.
    static func pinningRefusal(for request: URLRequest, policy: SecurityPolicy) -> NSError? {
        guard policy.pinningMode != .none, request.url?.scheme?.lowercased() == "http" else { return nil }
        return SessionKitError.session(
            .policyNotEnforceable,
            "A pinning security policy needs https; \(request.url?.absoluteString ?? "the URL") is plain http.")
    }
}

/// A manager's implementation of each ``Transport``, looked up by the public choice.
struct TaskTransports: Sendable {
    let curl: CurlTaskTransport
    let foundation: FoundationTaskTransport

    subscript(transport: Transport) -> TaskTransport {
        switch transport {
        case .curl: return curl
        case .foundation: return foundation
        }
    }
}
