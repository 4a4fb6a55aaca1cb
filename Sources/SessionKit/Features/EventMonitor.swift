import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Observes every step of the life of the manager's ``SessionRequest``s. Every method has an empty default; a
/// monitor implements the ones it cares about.
///
/// Events of one request arrive in order, on the monitor's ``queue``. On the curl transport one task carries every
/// attempt: created → taskCreated → resumed → [(adapted | failedToAdapt)] → [pinning reports…] → [redirected] →
/// [receivedData…] → [timings…] → (serialized with its error → retrying → adapted → … | taskCompleted → serialized →
/// finished). On the Foundation transport each attempt is a task of its own: created → (adapted | failedToAdapt) →
/// taskCreated → resumed → … → taskCompleted → serialized → (retrying → adapted → taskCreated → … | finished).
/// `adapted` comes only with an interceptor. `suspended` and `cancelled` come when the caller asks for them.
/// Monitors never change what happens; use a ``RequestInterceptor`` for that.
public protocol EventMonitor: AnyObject, Sendable {
    /// Where this monitor's events are delivered, one at a time, in order.
    var queue: DispatchQueue { get }

    /// The request was created (before any adapter ran).
    func requestDidCreate(_ request: SessionRequest)
    /// The adapters turned `initial` into `adapted` for this attempt.
    func request(_ request: SessionRequest, didAdapt initial: URLRequest, to adapted: URLRequest)
    /// An adapter refused `initial`: the request fails with `error` and nothing is sent (on the Foundation transport
    /// no task is created).
    func request(_ request: SessionRequest, didFailToAdapt initial: URLRequest, withError error: Error)
    /// The attempt's task was created.
    func request(_ request: SessionRequest, didCreateTask task: URLSessionTask)
    /// The attempt's task was resumed.
    func request(_ request: SessionRequest, didResumeTask task: URLSessionTask)
    /// The caller suspended the request's task.
    func request(_ request: SessionRequest, didSuspendTask task: URLSessionTask)
    /// The caller cancelled the request.
    func requestDidCancel(_ request: SessionRequest)
    /// The task is about to follow a redirect from `response` to `newRequest`.
    func request(_ request: SessionRequest, willRedirectWith response: HTTPURLResponse, to newRequest: URLRequest)
    /// A chunk of the body arrived.
    func request(_ request: SessionRequest, didReceive data: Data)
    /// libcurl's timings of one transfer (curl transport).
    func request(_ request: SessionRequest, didGather timings: TransferTimings)
    /// The server's certificate chain matched none of the pins of a ``SecurityPolicy`` that only reports
    /// (``SecurityPolicy/reportsOnly``): the connection to `host` went on (curl transport). `report` carries the
    /// chain's public-key hashes, the pins that would have matched.
    func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport)
    /// The attempt's task ended, with `error` or none.
    func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?)
    /// The response serializer ran on the attempt's body: `object` or `error`.
    func request(_ request: SessionRequest, didSerialize object: Any?, error: Error?)
    /// A retrier asked to send the request again after `delay` seconds.
    func request(_ request: SessionRequest, isRetryingAfter delay: TimeInterval, dueTo error: Error)
    /// The request is over: `error` is nil on success.
    func requestDidFinish(_ request: SessionRequest, error: Error?)
}

extension EventMonitor {
    /// Does nothing by default.
    public func requestDidCreate(_ request: SessionRequest) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didAdapt initial: URLRequest, to adapted: URLRequest) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didFailToAdapt initial: URLRequest, withError error: Error) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didResumeTask task: URLSessionTask) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didSuspendTask task: URLSessionTask) {}
    /// Does nothing by default.
    public func requestDidCancel(_ request: SessionRequest) {}
    /// Does nothing by default.
    public func request(
        _ request: SessionRequest, willRedirectWith response: HTTPURLResponse, to newRequest: URLRequest
    ) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didReceive data: Data) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didGather timings: TransferTimings) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, didSerialize object: Any?, error: Error?) {}
    /// Does nothing by default.
    public func request(_ request: SessionRequest, isRetryingAfter delay: TimeInterval, dueTo error: Error) {}
    /// Does nothing by default.
    public func requestDidFinish(_ request: SessionRequest, error: Error?) {}
}

/// Several monitors as one: each event goes to every monitor, on that monitor's own queue.
public final class CompositeEventMonitor: EventMonitor, Sendable {
    // Sendable, checked by the compiler: `monitors` is a `let` array of Sendable monitors.

    /// The monitors, in the order they receive each event.
    public let monitors: [any EventMonitor]
    /// Unused: the composite hands every event to its monitors' own queues at once. One queue serves every
    /// composite (a request makes one; a queue of its own cost each request about 2k instructions).
    public let queue = CompositeEventMonitor.sharedQueue

    private static let sharedQueue = DispatchQueue(label: "com.sessionkit.eventmonitor.composite")

    /// Groups `monitors` (a composite among them is replaced by its own monitors, so that every event reaches a
    /// monitor in one hop).
    public init(monitors: [any EventMonitor]) {
        self.monitors = monitors.flatMap { ($0 as? CompositeEventMonitor)?.monitors ?? [$0] }
    }

    /// The composite of `monitors`: one shared, immutable instance when there are none (every request of a manager
    /// without monitors asks for one).
    static func of(_ monitors: [any EventMonitor]) -> CompositeEventMonitor {
        monitors.isEmpty ? none : CompositeEventMonitor(monitors: monitors)
    }

    /// The composite of no monitor.
    private static let none = CompositeEventMonitor(monitors: [])

    /// Whether no monitor listens: an event for none need not be built (nor its task made).
    var isEmpty: Bool { monitors.isEmpty }

    private func each(_ event: @escaping @Sendable (any EventMonitor) -> Void) {
        for monitor in monitors {
            monitor.queue.async { event(monitor) }
        }
    }

    /// Sends the event to every monitor, on that monitor's queue.
    public func requestDidCreate(_ request: SessionRequest) { each { $0.requestDidCreate(request) } }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didAdapt initial: URLRequest, to adapted: URLRequest) {
        each { $0.request(request, didAdapt: initial, to: adapted) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didFailToAdapt initial: URLRequest, withError error: Error) {
        let error = Unchecked(error)
        each { $0.request(request, didFailToAdapt: initial, withError: error.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) {
        let task = Unchecked(task)
        each { $0.request(request, didCreateTask: task.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didResumeTask task: URLSessionTask) {
        let task = Unchecked(task)
        each { $0.request(request, didResumeTask: task.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didSuspendTask task: URLSessionTask) {
        let task = Unchecked(task)
        each { $0.request(request, didSuspendTask: task.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func requestDidCancel(_ request: SessionRequest) { each { $0.requestDidCancel(request) } }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(
        _ request: SessionRequest, willRedirectWith response: HTTPURLResponse, to newRequest: URLRequest
    ) {
        let response = Unchecked(response)
        each { $0.request(request, willRedirectWith: response.value, to: newRequest) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didReceive data: Data) {
        each { $0.request(request, didReceive: data) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didGather timings: TransferTimings) {
        each { $0.request(request, didGather: timings) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport) {
        each { $0.request(request, didFailPinningFor: host, report: report) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didCompleteTask task: URLSessionTask, error: Error?) {
        let (task, error) = (Unchecked(task), error.map(Unchecked.init))
        each { $0.request(request, didCompleteTask: task.value, error: error?.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, didSerialize object: Any?, error: Error?) {
        let (object, error) = (Unchecked(object), error.map(Unchecked.init))
        each { $0.request(request, didSerialize: object.value, error: error?.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func request(_ request: SessionRequest, isRetryingAfter delay: TimeInterval, dueTo error: Error) {
        let error = Unchecked(error)
        each { $0.request(request, isRetryingAfter: delay, dueTo: error.value) }
    }
    /// Sends the event to every monitor, on that monitor's queue.
    public func requestDidFinish(_ request: SessionRequest, error: Error?) {
        let error = error.map(Unchecked.init)
        each { $0.requestDidFinish(request, error: error?.value) }
    }
}

/// A value handed from the manager's queues to a monitor's queue; it is not mutated after it is handed over.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
