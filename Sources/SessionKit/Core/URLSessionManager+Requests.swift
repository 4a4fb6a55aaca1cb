import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionManager {
    /// Sends `request` through the interceptor pipeline: the manager's ``interceptor`` and `interceptor` adapt it,
    /// a data task sends it, the response serializer reads the body, and the retriers may send it again. Event
    /// monitors see every step. Cancelling the calling Swift task cancels the request.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - interceptor: This call's own adapter and retrier, after the manager's.
    ///   - responseSerializer: Reads the body; nil for the manager's ``responseSerializer``.
    ///   - onCreate: Receives the ``SessionRequest`` as soon as it exists (to suspend, resume or cancel it).
    /// - Returns: The serialized result of the last attempt, with the timings of every transfer.
    /// - Throws: The last attempt's error (a `URLError`, a serialization error), an adapter's error, or the error a
    ///   retrier chose; `URLError.cancelled` when the request or the Swift task was cancelled.
    public func perform(
        _ request: URLRequest,
        interceptor: (any RequestInterceptor)? = nil,
        responseSerializer: URLResponseSerialization? = nil,
        onCreate: @escaping @Sendable (SessionRequest) -> Void = { _ in }
    ) async throws -> HTTPResult {
        let (outcome, sessionRequest) = try await runPipeline(
            request, interceptor: interceptor, responseSerializer: responseSerializer, created: onCreate)
        guard let received = outcome.received, received.isHTTP else {
            throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: request.url as Any])
        }
        return HTTPResult(
            object: outcome.object, received: received, data: outcome.data,
            timings: sessionRequest.timings, retryCount: sessionRequest.retryCount)
    }

    /// The pipeline: adapt, run one task, retry as the retriers decide (not for a streamed request body, nor for a
    /// streamed response whose head reached its reader). Returns the successful attempt's outcome.
    ///
    /// On a transport that restarts its own tasks (curl), one task carries every attempt: its request machine asks the
    /// adapters before each attempt and the retriers after it, under the task's resource timeout, exactly as for a
    /// task of the task API. On URLSession, which cannot, each attempt is a task of its own, adapted and retried here.
    ///
    /// - Parameter announcesTasks: Whether the attempts' tasks post AFNetworking's resume and completion
    ///   notifications; false for the calls that hand out no task-shaped result (the HTTP core API, `bytes(for:)`).
    func runPipeline(
        _ request: URLRequest,
        interceptor extra: (any RequestInterceptor)?,
        responseSerializer: URLResponseSerialization?,
        streamSink: DataStreamSink? = nil,
        upload: UploadBody? = nil,
        announcesTasks: Bool = true,
        created: @escaping @Sendable (SessionRequest) -> Void = { _ in }
    ) async throws -> (TaskOutcome, SessionRequest) {
        let interceptor = combinedInterceptor(extra)
        let retriesInTask = interceptor != nil && taskTransports[transport].interceptsTasks
        let monitor = CompositeEventMonitor.of(eventMonitors)
        let sessionRequest = SessionRequest(request)
        // Both handlers hold the request: `finish()` clears them, so that a finished request is freed. The running
        // task is the request's last (`attempt` records it before resuming it, and cancels it when the request was
        // cancelled first).
        let control = self.control
        // The wait before a retry (on a transport that does not retry in its task), which a cancel ends at once.
        let retryWait = Protected<Task<Void, Error>?>(nil)
        sessionRequest.setCancelHandler {
            monitor.requestDidCancel(sessionRequest)  // before the task's own end, which it causes
            retryWait.read { $0 }?.cancel()
            if let task = sessionRequest.lastAttempt { control.cancel(task) }
        }
        sessionRequest.setSuspendHandler { [weak self] suspending in
            guard let self, let task = sessionRequest.lastAttempt else { return false }
            if suspending {
                guard suspend(reference: task) else { return false }
                if !monitor.isEmpty { monitor.request(sessionRequest, didSuspendTask: task.task) }
            } else {
                if !monitor.isEmpty { monitor.request(sessionRequest, didResumeTask: task.task) }
                resume(reference: task)
            }
            return true
        }
        monitor.requestDidCreate(sessionRequest)
        created(sessionRequest)

        func fail(_ error: Error) -> Error {
            if sessionRequest.finish() { monitor.requestDidFinish(sessionRequest, error: error) }
            return error
        }
        let cancelled = { URLError(.cancelled, userInfo: [NSURLErrorFailingURLErrorKey: request.url as Any]) }

        return try await withTaskCancellationHandler {
            while true {
                guard sessionRequest.beginAttempt(), !Task.isCancelled else { throw fail(cancelled()) }
                var adapted = request
                if let interceptor, !retriesInTask {
                    do {
                        adapted = try await interceptor.adapt(request, for: sessionRequest)
                        monitor.request(sessionRequest, didAdapt: request, to: adapted)
                    } catch {
                        monitor.request(sessionRequest, didFailToAdapt: request, withError: error)
                        throw fail(error)
                    }
                }
                // A task that adapts itself records its adapted request.
                if !retriesInTask { sessionRequest.adapted(adapted) }
                let outcome = await attempt(
                    adapted, of: sessionRequest, monitor: monitor,
                    responseSerializer: responseSerializer, streamSink: streamSink, upload: upload,
                    announces: announcesTasks, interceptor: retriesInTask ? interceptor : nil)
                sessionRequest.attemptEnded(response: outcome.received)
                guard let error = outcome.error else {
                    if sessionRequest.finish() { monitor.requestDidFinish(sessionRequest, error: nil) }
                    return (outcome, sessionRequest)
                }
                // A streamed response whose head reached its reader is never sent again; one that failed before its
                // head may be (its sink is still open, see `attempt`); a streamed request body was read once. A task
                // that retries itself ended for good.
                guard let interceptor, !retriesInTask, streamSink?.hasResponse != true, adapted.httpBodyStream == nil,
                    !sessionRequest.isCancelled, !Task.isCancelled
                else {
                    throw fail(error)
                }
                let decision = await interceptor.retry(sessionRequest, dueTo: error)
                let delay: TimeInterval
                switch decision {
                case .retry: delay = 0
                case .retryAfter(let seconds): delay = max(0, seconds)
                case .doNotRetry: throw fail(error)
                case .doNotRetryWithError(let other): throw fail(other)
                }
                guard sessionRequest.willRetry(after: delay) else { throw fail(cancelled()) }
                monitor.request(sessionRequest, isRetryingAfter: delay, dueTo: error)
                if delay > 0 {
                    let wait = Task { try await Task.sleep(nanoseconds: UInt64(min(delay, 86_400) * 1_000_000_000)) }
                    retryWait.write { $0 = wait }
                    // A cancel between the check above and this store found no wait to end.
                    if sessionRequest.isCancelled { wait.cancel() }
                    defer { retryWait.write { $0 = nil } }
                    do {
                        try await wait.value
                    } catch {
                        throw fail(cancelled())
                    }
                }
            }
        } onCancel: {
            sessionRequest.cancel()
        }
    }

    /// One attempt: a data task for `request` (an upload task of `upload`, a file read anew for each attempt), observed,
    /// resumed, awaited. With `interceptor`, the task adapts and retries itself: its outcome is the request's.
    private func attempt(
        _ request: URLRequest,
        of sessionRequest: SessionRequest,
        monitor: CompositeEventMonitor,
        responseSerializer: URLResponseSerialization?,
        streamSink: DataStreamSink?,
        upload: UploadBody?,
        announces: Bool,
        interceptor: (any RequestInterceptor)?
    ) async -> TaskOutcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<TaskOutcome, Never>) in
            let made = makeTaskReference(
                .sending(request, upload: upload), responseSerializer: responseSerializer,
                streamSink: streamSink,
                observation: TaskDelegate.Observation(request: sessionRequest, monitor: monitor),
                interceptor: interceptor,
                // The completion below runs no caller code: it resumes this Swift task where the outcome is ready.
                completesInPlace: true, announces: announces
            ) { outcome in
                // A failure before the head leaves a stream's sink open, for a retry by the pipeline; the pipeline's
                // caller ends it with the request's final error.
                if outcome.error == nil || streamSink?.hasResponse == true || interceptor != nil {
                    streamSink?.finish(outcome.error)
                }
                continuation.resume(returning: outcome)
            }
            // A request that monitors watch has its `URLSessionTask` made for them (and kept by the request); one that
            // no one watches runs without one, unless someone asks for it later (``SessionRequest/tasks``).
            let task = monitor.isEmpty ? made : made.task
            let started = sessionRequest.taskStarted(task)
            if !monitor.isEmpty {
                monitor.request(sessionRequest, didCreateTask: task.task)
                // Reported before the call: a loopback answer can reach the monitor from the delegate queue before
                // `resume` returns here, and monitors see a request's events in order.
                monitor.request(sessionRequest, didResumeTask: task.task)
            }
            resume(reference: task)
            if !started { control.cancel(task) }  // cancelled while adapting: the task ends at once, as cancelled
        }
    }
}
