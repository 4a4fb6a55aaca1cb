import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One logical request of the interceptor pipeline, across its attempts: adapted, sent as a task, retried.
///
/// AFNetworking's task-returning methods run exactly one `URLSessionTask`. A request that an adapter may change
/// asynchronously and a retrier may send again needs an object that outlives one task: this one. The async verbs of
/// ``HTTPSessionManager`` and ``URLSessionManager/perform(_:interceptor:responseSerializer:onCreate:)`` run
/// through it; interceptors and event monitors see it.
public final class SessionRequest: Sendable {
    // Sendable, checked by the compiler: every mutable field is inside `state`, a `Protected` box.

    /// Identifies the request in logs and event monitors: the same value at every read. Made when first read, since
    /// Foundation on Linux makes a `UUID` by opening and reading `/dev/urandom` (three system calls), and most requests
    /// are never asked.
    public var id: UUID {
        if let id = state.read({ $0.id }) { return id }
        let made = UUID()
        return state.write { state in
            if let id = state.id { return id }  // another thread read it first
            state.id = made
            return made
        }
    }
    /// The request as the serializer built it, before any adapter.
    public let initialRequest: URLRequest

    private struct State {
        var lifecycle = RequestLifecycle()
        var request: URLRequest?
        /// Each attempt's task (what it is known by: see ``TaskReference``).
        var tasks: [any TaskReference] = []
        var response: ReceivedResponse?
        var timings: [TransferTimings] = []
        var retryDelays: [TimeInterval] = []
        var finishReported = false
        /// ``id``, once read.
        var id: UUID?
        /// Cancels the running task; set by the manager.
        var onCancel: (() -> Void)?
        /// Suspends (`true`) or resumes (`false`) the running task; set by the manager.
        var onSuspend: ((Bool) -> Bool)?
    }

    /// Everything that changes, in one lock (a request makes several locked boxes; each costs an allocation).
    private let state = Protected(State())

    init(_ request: URLRequest) {
        initialRequest = request
    }

    /// The request of the current (or last) attempt, after the adapters.
    public var request: URLRequest? { state.read { $0.request } }
    /// The tasks of every attempt so far, oldest first.
    public var tasks: [URLSessionTask] { state.read { $0.tasks }.map(\.task) }
    /// The task of the current (or last) attempt.
    public var task: URLSessionTask? { lastAttempt?.task }

    /// The last attempt's task, without making its `URLSessionTask` (the pipeline's cancel and suspend).
    var lastAttempt: (any TaskReference)? { state.read { $0.tasks.last } }
    /// How many times the request was sent again.
    public var retryCount: Int { state.read { max(0, $0.lifecycle.attempts - 1) } }
    /// The last attempt's response; nil when it got none (a connection refused or reset), as a retrier sees it.
    public var response: HTTPURLResponse? { state.read { $0.response }?.httpResponse }
    /// libcurl's timings of every transfer so far (every attempt, every redirect step), on the curl transport.
    public var timings: [TransferTimings] { state.read { $0.timings } }
    /// The delays the retriers asked for before each retry (0 for an immediate one), in order.
    public var retryDelays: [TimeInterval] { state.read { $0.retryDelays } }
    /// Whether ``cancel()`` ended the request.
    public var isCancelled: Bool { state.read { $0.lifecycle.isCancelled } }

    /// Cancels the request: the running task is cancelled and no further attempt starts. The request then fails
    /// with `URLError.cancelled`.
    public func cancel() {
        let cancel = state.write { state in state.lifecycle.cancel() ? state.onCancel : nil }
        cancel?()
    }

    /// Suspends the running task, as ``URLSessionManager/suspend(_:)`` does (false when it cannot be suspended:
    /// a loading task on the Foundation transport).
    @discardableResult
    public func suspend() -> Bool {
        state.read { $0.onSuspend }?(true) ?? false
    }

    /// Resumes a suspended task.
    public func resume() {
        _ = state.read { $0.onSuspend }?(false)
    }

    // MARK: - Driven by the manager

    func setCancelHandler(_ handler: @escaping () -> Void) {
        state.write { $0.onCancel = handler }
    }

    /// `handler(true)` suspends the running task, `handler(false)` resumes it.
    func setSuspendHandler(_ handler: @escaping (Bool) -> Bool) {
        state.write { $0.onSuspend = handler }
    }

    func beginAttempt() -> Bool { state.write { $0.lifecycle.beginAttempt() } }

    func adapted(_ request: URLRequest) {
        state.write { $0.request = request }
    }

    func taskStarted(_ task: any TaskReference) -> Bool {
        state.write { state in
            state.tasks.append(task)
            return state.lifecycle.taskStarted()
        }
    }

    /// The adapted request of an attempt starts, on the task that carries every attempt (the task API's).
    func attemptStarted() {
        _ = state.write { $0.lifecycle.taskStarted() }
    }

    /// An attempt ended with `response`, nil (or a status of 0) when it got none: ``response`` becomes it, so that a
    /// retrier judges the failed attempt by its own response, never by an earlier attempt's.
    func attemptEnded(response: ReceivedResponse?) {
        let own = response.flatMap { $0.statusCode == 0 ? nil : $0 }
        state.write { $0.response = own }
    }

    func collected(_ timings: TransferTimings) {
        state.write { $0.timings.append(timings) }
    }

    func willRetry(after delay: TimeInterval) -> Bool {
        state.write { state in
            guard state.lifecycle.willRetry() else { return false }
            state.retryDelays.append(delay)
            return true
        }
    }

    /// Ends the request (unless it was cancelled); true the first time only, so that its end is reported once.
    /// Drops the cancel and suspend handlers: they refer to the request and its task, and nothing is left to cancel.
    func finish() -> Bool {
        state.write { state -> Bool in
            _ = state.lifecycle.finish()
            (state.onCancel, state.onSuspend) = (nil, nil)
            defer { state.finishReported = true }
            return !state.finishReported
        }
    }
}
