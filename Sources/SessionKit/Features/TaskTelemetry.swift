import Dispatch
import Foundation
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The observation of one task: the span and metrics of its current attempt (the first request, then each redirect
/// it follows), fed from the manager's delegate hub.
///
/// Made by ``RequestTelemetry/Active/begin(_:resendCount:delegateQueue:)`` when the task is created (before it can
/// run), then used on the manager's delegate queue only, where the hub reports the task's redirects, timings and
/// completion, from either transport.
final class TaskTelemetry: @unchecked Sendable {
    // @unchecked Sendable: after `init` (which happens before the task is resumed) every member is used on
    // `delegateQueue`, a serial queue (asserted in debug builds).

    private let tracing: RequestTracing?
    private let metrics: HTTPClientMetrics?
    private let parent: ServiceContext
    private let delegateQueue: DispatchQueue

    /// The attempt in flight; nil once the task completed.
    private var attempt: Attempt?
    /// Requests sent again so far: the pipeline's retries before this task, then each redirect followed.
    private var resendCount: Int
    /// The task's byte counters when the current attempt started (transports without timings).
    private var countersAtStart: (sent: Int64, received: Int64) = (0, 0)
    /// The last transfer's timings of the current attempt (curl transport).
    private var timings: TransferTimings?

    private struct Attempt {
        let description: AttemptDescription
        let span: (any Span)?
        let started: UInt64
    }

    init(
        tracing: RequestTracing?, metrics: HTTPClientMetrics?, parent: ServiceContext, delegateQueue: DispatchQueue,
        first: AttemptDescription, resendCount: Int, request: inout URLRequest
    ) {
        self.tracing = tracing
        self.metrics = metrics
        self.parent = parent
        self.delegateQueue = delegateQueue
        self.resendCount = resendCount
        attempt = start(first, request: &request)
    }

    /// Starts the span and metrics of the attempt that sends `request` (its trace context put into it).
    private func start(_ description: AttemptDescription, request: inout URLRequest) -> Attempt {
        let span = tracing?.startSpan(of: description, resendCount: resendCount, parent: parent, request: &request)
        metrics?.attemptStarted(description)
        return Attempt(description: description, span: span, started: DispatchTime.now().uptimeNanoseconds)
    }

    /// The current attempt's transfer reported its timings (curl transport): its protocol and body sizes.
    func collected(_ timings: TransferTimings) {
        assertOnDelegateQueue()
        self.timings = timings
    }

    /// The task follows a redirect from `response` to `request`: the attempt that got `response` ends, and the one
    /// that sends the returned request (`request` with its own trace context) starts.
    func redirect(_ response: HTTPURLResponse, to request: URLRequest, of task: any TaskReference) -> URLRequest {
        assertOnDelegateQueue()
        end(statusCode: response.statusCode, error: nil, task: task)
        var request = request
        guard let next = AttemptDescription(request) else { return request }
        resendCount += 1
        countersAtStart = (task.countOfBytesSent, task.countOfBytesReceived)
        attempt = start(next, request: &request)
        return request
    }

    /// Another attempt of the task starts, after the manager's retriers chose to send it again on the same task (the
    /// task API on the curl transport; the attempt before it ended through ``complete(_:error:)``): its span starts,
    /// with the resend count, and the returned request carries its trace context.
    func retry(_ request: URLRequest) -> URLRequest {
        assertOnDelegateQueue()
        var request = request
        guard attempt == nil, let next = AttemptDescription(request) else { return request }
        resendCount += 1
        countersAtStart = (0, 0)  // the task's counts start over with the attempt
        attempt = start(next, request: &request)
        return request
    }

    /// The task completed with `error` (nil for a response): the current attempt ends.
    func complete(_ task: any TaskReference, error: Error?) {
        assertOnDelegateQueue()
        let status = task.receivedResponse?.statusCode ?? 0
        end(statusCode: status == 0 ? nil : status, error: error, task: task)
    }

    private func end(statusCode: Int?, error: Error?, task: any TaskReference) {
        guard let attempt else { return }
        self.attempt = nil
        var outcome = AttemptOutcome(statusCode: statusCode, error: error)
        if let timings {
            outcome.protocolVersion = timings.protocolVersion.flatMap(
                AttemptOutcome.protocolVersion(fromStatusLineVersion:))
            (outcome.requestBodySize, outcome.responseBodySize) = (timings.bytesSent, timings.bytesReceived)
        } else {
            outcome.requestBodySize = max(0, task.countOfBytesSent - countersAtStart.sent)
            outcome.responseBodySize = max(0, task.countOfBytesReceived - countersAtStart.received)
        }
        timings = nil
        if let span = attempt.span { RequestTracing.end(span, outcome: outcome) }
        if let metrics {
            let elapsed = DispatchTime.now().uptimeNanoseconds &- attempt.started
            metrics.attemptEnded(attempt.description, outcome: outcome, nanoseconds: Int64(clamping: elapsed))
        }
    }

    private func assertOnDelegateQueue() {
        #if DEBUG
            dispatchPrecondition(condition: .onQueue(delegateQueue))
        #endif
    }
}
