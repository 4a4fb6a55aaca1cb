import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one object that follows a single task from creation to completion.
///
/// It routes each event of its task to the part that handles it: the body to its ``BodySink`` (memory, a file
/// with resume data, or a streamed reader, chosen once here), sizes and counts to its ``TaskProgress``, a finished
/// download to its ``DownloadDestination``, and the end, exactly once as its ``TaskLifecycle`` decides, to its
/// ``CompletionDelivery``. The delegate hub routes every callback of its task here; all of them arrive on the
/// session's serial delegate queue.
final class TaskDelegate: @unchecked Sendable {
    /// Where the delegate cancels its task: never the delegate queue itself (see ``didReceive(data:)``).
    private static let cancellations = DispatchQueue(label: "com.sessionkit.task-delegate.cancellations")

    // @unchecked Sendable: `state` is a `Protected` box, and the body sink
    // guards what other threads reach of it (its in-memory body, its resume-data handler) with `Protected` boxes
    // of its own; `settled` and `chosenError` are used on the delegate queue only (asserted where they are set); the
    // rest is immutable after `init` apart from `Progress`, which is thread-safe.

    /// Where the task's completion goes and what decodes its body.
    struct Delivery {
        let responseSerializer: URLResponseSerialization
        /// The completion queue, with its group.
        let completionQueue: CompletionQueue
        let processingQueue: DispatchQueue
        /// Whether the completion runs where the outcome is ready (the delegate or processing queue) rather than on
        /// the completion queue: for the request pipeline, whose completion only resumes the awaiting Swift task.
        var completesInPlace = false
        /// Whether `sessionKitTaskDidComplete` is posted: not for a task no caller holds (the HTTP core API's).
        var announces = true
    }

    /// The pipeline request this task is an attempt of, and who watches it.
    struct Observation {
        let request: SessionRequest
        let monitor: CompositeEventMonitor
        /// Whether the task's resume, suspend and cancel are the caller's, reported to the monitor from here (a task
        /// of the task API or a closure verb, a WebSocket task); the pipeline reports its own tasks' as it makes them.
        var reportsControl = false

        /// A request made outside the pipeline (the task API, a closure verb, a WebSocket task), whose task the caller
        /// holds: its one attempt begins, with `request` as sent, and `monitors` hear it was created.
        static func outsidePipeline(_ request: URLRequest, monitors: [any EventMonitor]) -> Observation {
            let observation = Observation(
                request: SessionRequest(request), monitor: CompositeEventMonitor.of(monitors),
                reportsControl: true)
            _ = observation.request.beginAttempt()
            observation.request.adapted(request)
            observation.monitor.requestDidCreate(observation.request)
            return observation
        }

        /// The task of a request made outside the pipeline was made: cancelling the request cancels it.
        func taskMade(_ task: URLSessionTask) {
            _ = request.taskStarted(task)
            request.setCancelHandler { [weak task] in task?.cancel() }
            monitor.request(request, didCreateTask: task)
        }

        /// The caller resumed (`resumed`) or suspended `task`: the monitor hears of it when the caller holds the task.
        func taskDidChangeSuspension(_ task: any TaskReference, resumed: Bool) {
            guard reportsControl, !monitor.isEmpty else { return }
            if resumed {
                monitor.request(request, didResumeTask: task.task)
            } else {
                monitor.request(request, didSuspendTask: task.task)
            }
        }

        /// `task` ended, reporting `error`; a cancellation that ended it (`transportError`) of a task the caller holds
        /// is the caller's (or the manager's invalidation's), reported first.
        func taskDidComplete(_ task: any TaskReference, error: Error?, transportError: Error?) {
            // Without monitors, a task no one holds is not made for them.
            guard !monitor.isEmpty else { return }
            if reportsControl, let cancelled = transportError as NSError?, cancelled.domain == NSURLErrorDomain,
                cancelled.code == URLError.cancelled.rawValue
            {
                monitor.requestDidCancel(request)
            }
            monitor.request(request, didCompleteTask: task.task, error: error)
        }

        /// The request made outside the pipeline ended with its task's `response` and `error`: reported once.
        func requestDidEnd(response: ReceivedResponse?, error: Error?) {
            request.attemptEnded(response: response)
            if request.finish() { monitor.requestDidFinish(request, error: error) }
        }
    }

    /// The adapters and retriers around each attempt of a task, on a transport that restarts its own tasks (the
    /// curl transport): the manager's for a task of the task API or a closure verb, the pipeline's for its calls. The
    /// task's ``Observation`` is the request they see.
    struct Interception {
        let interceptor: any RequestInterceptor
        /// Whether a failed attempt may be sent again: a data task whose body can go twice (not a download, whose
        /// file this delegate writes, nor a streamed upload or body, which is read once); a response streamed to a
        /// reader only while no head reached it.
        let retries: Bool
        /// Where the transport gets its answers (the manager's delegate queue).
        let delegateQueue: DispatchQueue
    }

    /// The task: its `URLSessionTask` when the caller holds one, else what the transport knows it by (the curl
    /// transport's driver, whose `URLSessionTask` is made only if someone asks for it: ``TaskReference/task``).
    let reference: any TaskReference
    /// The progress of sending the request body.
    var uploadProgress: Progress { progress.upload }
    /// The progress of receiving the response body.
    var downloadProgress: Progress { progress.download }

    /// The task's progress counts, and its `Progress` objects once asked for.
    let progress: TaskProgress
    private let sink: LimitedBodySink
    private let destination: DownloadDestination
    private let completionDelivery: CompletionDelivery
    private let forcedError: NSError?
    /// Told how many body bytes were handled (back-pressure on the curl transport).
    private let onConsumed: ((Int) -> Void)?
    /// Set at creation, before the task can run: read without a lock.
    private let observation: Observation?
    /// The task's spans and metrics, when the manager has a tracer or metrics factory that records.
    let telemetry: TaskTelemetry?

    /// What changes from any thread, in one lock: the lifecycle, and for a streamed upload the stream to hand
    /// URLSession when it asks for one.
    private let state: Protected<(lifecycle: TaskLifecycle, bodyStream: InputStream?)>
    /// The manager's adapters and retriers, for a task the caller holds; nil otherwise.
    private let interception: Interception?
    /// What the last attempt ended with when the retriers let it stand (delegate queue): its body (taken from the
    /// sink to judge it) and, when its transfer succeeded, what the serializer made of it, so that the completion
    /// does not serialize it again.
    private var settled: (body: Data, serialized: CompletionDelivery.Serialized?)?
    /// The error the caller gets as it was thrown, in place of the transport's: a retrier's choice
    /// (`.doNotRetryWithError`) or an adapter's refusal. Bridged to `NSError` on its way through the transport, a Swift
    /// error could not be cast back to its own type on Linux.
    private var chosenError: Error?
    /// Where a streamed body goes, which also takes the response trailers; nil for other bodies.
    private let trailerSink: DataStreamSink?

    /// Creates the delegate of `task`.
    ///
    /// - Parameters:
    ///   - task:        The task (its `URLSessionTask`, or what its transport knows it by); the delegate keeps it alive
    ///     until it completes.
    ///   - delivery:    The serializer and the queues of the completion.
    ///   - uploadProgressHandler:   Called on the delegate queue as bytes are sent.
    ///   - downloadProgressHandler: Called on the delegate queue as bytes arrive.
    ///   - destination: For downloads, where to move the file.
    ///   - bodyStream:  For streamed uploads, the stream to hand URLSession when it asks for one.
    ///   - uploadLength: The size of the request body when known before sending.
    ///   - forcedError: When set, the task ends with this error whatever URLSession reports.
    ///   - downloadSink: The transport's writer of this download's file, when the transport has no URLSession
    ///     download machinery (the curl transport); the body goes there.
    ///   - continuesResumeData: Whether the download continues the partial file of resume data.
    ///   - onConsumed:  Told how many body bytes were handled (back-pressure).
    ///   - streamSink:  Where a streamed body goes instead of memory.
    ///   - observation: The pipeline request this task is an attempt of, and its monitor.
    ///   - interception: The manager's adapters and retriers, for a task the caller holds (with its `observation`).
    ///   - control:     Resumes or suspends the task on behalf of its `Progress`, with notifications.
    ///   - telemetry:   The task's spans and metrics, ended by the delegate hub.
    ///   - completion:  Called once, on the completion queue.
    init(
        task: any TaskReference,
        delivery: Delivery,
        uploadProgressHandler: (@Sendable (Progress) -> Void)?,
        downloadProgressHandler: (@Sendable (Progress) -> Void)?,
        destination: (@Sendable (URL, URLResponse) -> URL)?,
        bodyStream: InputStream?,
        uploadLength: Int64?,
        forcedError: NSError?,
        downloadSink: BodySink? = nil,
        continuesResumeData: Bool = false,
        onConsumed: ((Int) -> Void)? = nil,
        streamSink: DataStreamSink? = nil,
        observation: Observation? = nil,
        interception: Interception? = nil,
        bodyLimits: ResponseBodyLimits = .default,
        control: TaskControl,
        telemetry: TaskTelemetry? = nil,
        completion: @escaping @Sendable (TaskOutcome) -> Void
    ) {
        self.reference = task
        self.telemetry = telemetry
        self.observation = observation
        self.interception = observation == nil ? nil : interception
        self.destination = DownloadDestination(destination: destination)
        self.state = Protected((TaskLifecycle(), bodyStream))
        self.forcedError = forcedError
        self.onConsumed = onConsumed
        self.trailerSink = streamSink
        let url = task.originalURL
        if let downloadSink {
            sink = LimitedBodySink(downloadSink, limit: bodyLimits.maximumToFile, name: "the download limit", url: url)
        } else if let streamSink {
            sink = LimitedBodySink(
                StreamBodySink(streamSink), limit: bodyLimits.maximumStreamed,
                name: "the streamed-body limit", url: url)
        } else {
            sink = LimitedBodySink(
                MemoryBodySink(), limit: bodyLimits.maximumInMemory, name: "the in-memory limit",
                url: url)
        }
        self.bodyKind = downloadSink != nil ? .file : (streamSink != nil ? .stream : .memory)
        self.continuesResumeData = continuesResumeData && downloadSink != nil
        progress = TaskProgress(
            task: task, uploadLength: uploadLength, control: control,
            uploadHandler: uploadProgressHandler, downloadHandler: downloadProgressHandler)
        completionDelivery = CompletionDelivery(delivery: delivery, observation: observation, completion: completion)
    }

    /// Whether the task's resumption, suspension and completion are posted as notifications (not for a task no
    /// caller holds).
    var announces: Bool { completionDelivery.delivery.announces }

    // MARK: - Observation by the request pipeline

    /// The caller resumed (`resumed`) or suspended the task: its monitor hears of it when the caller holds the task.
    func taskDidChangeSuspension(_ task: any TaskReference, resumed: Bool) {
        observation?.taskDidChangeSuspension(task, resumed: resumed)
    }

    /// A pin mismatch the policy only reports (delegate queue): the request's monitors hear of it.
    func didFailPinning(_ report: PinningReport) {
        if let observation {
            observation.monitor.request(observation.request, didFailPinningFor: report.host, report: report)
        }
    }

    /// libcurl's timings of one transfer of this task (engine thread).
    func didCollect(_ timings: TransferTimings) {
        if let observation {
            observation.request.collected(timings)
            observation.monitor.request(observation.request, didGather: timings)
        }
    }

    /// The task follows a redirect from `response` to `request` (as decided by the manager's closure).
    func willRedirect(_ response: HTTPURLResponse, to request: URLRequest) {
        guard let observation else { return }
        observation.monitor.request(observation.request, willRedirectWith: response, to: request)
    }

    // MARK: - Adapters and retriers (a task the caller holds, on the curl transport)

    /// The request the manager's adapters make of `request` for the next attempt, or the error that ends the task;
    /// `then` runs on the delegate queue.
    func adapt(_ request: URLRequest, then: @escaping @Sendable (Result<URLRequest, Error>) -> Void) {
        guard let interception, let observation else { return then(.success(request)) }
        let (sessionRequest, monitor) = (observation.request, observation.monitor)
        Task {
            let result: Result<URLRequest, Error>
            do {
                let adapted = try await interception.interceptor.adapt(request, for: sessionRequest)
                // What an adapter sets goes on the wire as it is: checked as the task's own request was.
                if let refusal = HTTPFieldValidation.error(for: adapted) { throw refusal }
                sessionRequest.adapted(adapted)
                sessionRequest.attemptStarted()
                monitor.request(sessionRequest, didAdapt: request, to: adapted)
                result = .success(adapted)
            } catch {
                monitor.request(sessionRequest, didFailToAdapt: request, withError: error)
                result = .failure(error)
            }
            interception.delegateQueue.async { [self] in
                // Unless the caller cancelled meanwhile: the task then ends as cancelled.
                if case .failure(let refusal) = result, reference.state != .canceling, reference.state != .completed {
                    chosenError = refusal
                }
                // A retry's attempt is a span of its own, whose trace context the adapted request carries.
                then(result.map { request in telemetry?.retry(request) ?? request })
            }
        }
    }

    /// An attempt ended with `error` (nil: with its response): the serializer judges the response, and when either
    /// failed the retriers decide whether the task sends its request again, unless that would start past the task's
    /// resource `deadline`. `then` runs on the delegate queue.
    func attemptEnded(error: Error?, deadline: Date?, then: @escaping @Sendable (AttemptVerdict) -> Void) {
        // A streamed body whose head reached its reader is never sent again: the reader may have seen the response.
        guard let interception, interception.retries, let observation, state.read({ $0.lifecycle.acceptsData }),
            !sink.hasRefused, trailerSink?.hasResponse != true
        else {
            return then(.complete)
        }
        dispatchPrecondition(condition: .onQueue(interception.delegateQueue))
        let received = reference.receivedResponse
        let body = sink.takeBody()
        completionDelivery.serialize(
            received: received, data: body, fileURL: nil, error: error.map { $0 as NSError }
        ) { [self] result in
            // The serializer's object goes to the completion unchanged, as the completion's own serialization does.
            nonisolated(unsafe) let serialized = result
            guard let failure = error ?? serialized.error else {
                return interception.delegateQueue.async { [self] in
                    settled = (body, serialized)
                    then(.complete)
                }
            }
            let sessionRequest = observation.request
            sessionRequest.attemptEnded(response: received)
            let interceptor = interception.interceptor
            let decided: @Sendable (RetryDecision) -> Void = { [self] decision in
                interception.delegateQueue.async { [self] in
                    conclude(
                        decision, failure: failure, transportError: error, body: body, serialized: serialized,
                        deadline: deadline, then: then)
                }
            }
            Task {
                decided(
                    sessionRequest.isCancelled ? .doNotRetry : await interceptor.retry(sessionRequest, dueTo: failure))
            }
        }
    }

    /// Carries out a retrier's `decision` on the attempt that failed with `failure`: its `transportError`, or else
    /// the serializer's error in `serialized` (delegate queue). When the transfer itself succeeded, the attempt's
    /// `body` and `serialized` are the completion's, if the attempt stands.
    private func conclude(
        _ decision: RetryDecision, failure: Error, transportError: Error?, body: Data,
        serialized: CompletionDelivery.Serialized, deadline: Date?, then: @Sendable (AttemptVerdict) -> Void
    ) {
        guard let interception, let observation else { return then(.complete) }
        dispatchPrecondition(condition: .onQueue(interception.delegateQueue))
        // Nothing changes once the task ended meanwhile (a `cancel()` completes it at once, with its own error).
        guard state.read({ $0.lifecycle.acceptsData }) else { return then(.complete) }
        let sessionRequest = observation.request
        let delay: TimeInterval
        switch decision {
        case .retry: delay = 0
        case .retryAfter(let seconds): delay = max(0, seconds)
        case .doNotRetry: delay = -1
        case .doNotRetryWithError(let other): (delay, chosenError) = (-1, other)
        }
        if delay >= 0, let deadline, Date().addingTimeInterval(delay) >= deadline {
            // The retry would start past the resource timeout: it is neither made nor reported, nor counted.
            settled = (body, nil)
            return then(.pastDeadline)
        }
        guard delay >= 0, sessionRequest.willRetry(after: delay), sessionRequest.beginAttempt() else {
            settled = (body, transportError == nil ? serialized : nil)
            return then(.complete)
        }
        if transportError == nil {
            // The attempt's response came and its serializer refused it: the monitor hears that before the retry,
            // as it does when each attempt is a task of its own.
            observation.monitor.request(sessionRequest, didSerialize: serialized.object, error: serialized.error)
        }
        observation.monitor.request(sessionRequest, isRetryingAfter: delay, dueTo: failure)
        telemetry?.complete(reference, error: transportError)  // the failed attempt's span ends, as a redirect's does
        // The next attempt's body and progress start from nothing.
        sink.restart()
        progress.restartDownload()
        then(.retry(after: delay))
    }

    // MARK: - Events from the hub (delegate queue)

    /// Where a download made from resume data resumes, as URLSession's `didResumeAtOffset` reports it.
    struct DownloadResumption: Equatable {
        /// The bytes on disk that are kept: 0 when the server sent the whole entity again instead of the rest.
        let offset: Int64
        /// The whole entity's expected size, the kept bytes included; -1 when unknown.
        let expectedTotalBytes: Int64
    }

    /// The response head arrived: the body sink prepares for it, and the expected length sizes the download
    /// progress. Returns where the download resumes when this task continues resume data, else nil.
    func didReceive(response: ReceivedResponse) -> DownloadResumption? {
        let held = sink.receive(response)
        progress.didReceiveResponse(expectedLength: response.expectedContentLength, held: held)
        // The sink tells what it held only when that is news, which for resume data is always the case: the file
        // continues (its length) or was emptied (0).
        guard continuesResumeData, let held else { return nil }
        return DownloadResumption(offset: held, expectedTotalBytes: progress.downloadTotal)
    }

    /// Asks for resume data when the task ends (it is then cancelled by the caller); false when the task keeps
    /// nothing to resume from.
    func produceResumeData(_ handler: @escaping (Data?) -> Void) -> Bool {
        sink.produceResumeData(handler)
    }

    /// Where the body goes, for the limit that applies to it.
    private enum BodyKind { case memory, file, stream }
    private let bodyKind: BodyKind
    /// Whether the task continues the partial file of resume data (`downloadTask(withResumeData:)`).
    private let continuesResumeData: Bool

    /// Applies `limits` to this task's body (before it arrives).
    func setBodyLimits(_ limits: ResponseBodyLimits) {
        switch bodyKind {
        case .memory: sink.setLimit(limits.maximumInMemory)
        case .file: sink.setLimit(limits.maximumToFile)
        case .stream: sink.setLimit(limits.maximumStreamed)
        }
    }

    /// The response's trailers arrived after its body: a streamed body's reader gets them.
    func didReceive(trailers: [(String, String)]) {
        trailerSink?.receive(trailers: trailers)
    }

    /// A chunk of the body arrived.
    func didReceive(data: Data) {
        guard state.read({ $0.lifecycle.acceptsData }) else {
            onConsumed?(data.count)
            return
        }
        if let observation {
            observation.monitor.request(observation.request, didReceive: data)
        }
        switch sink.append(data) {
        case .handedOver:
            break  // consumed when its reader takes it, not when it is queued for the reader
        case .refused:
            // The disk refused the bytes, or a body limit: the completion reports why. Not cancelled from here:
            // URLSession 6.3's `cancel()` waits on its work queue, which can be waiting for this delegate queue.
            let task = reference
            Self.cancellations.async { task.cancel() }
            onConsumed?(data.count)
        case .stored:
            progress.didReceiveBody(count: data.count)
            onConsumed?(data.count)
        }
    }

    /// Body bytes were sent.
    func didSendBodyData(totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        progress.didSendBodyData(totalBytesSent: totalBytesSent, totalBytesExpectedToSend: totalBytesExpectedToSend)
    }

    /// A download wrote bytes to its temporary file.
    func didWriteData(totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        progress.didWriteData(
            totalBytesWritten: totalBytesWritten, totalBytesExpectedToWrite: totalBytesExpectedToWrite)
    }

    /// URLSession asks for the body stream of a streamed upload. The stream can be handed out once: a second
    /// request for it (a redirect that resends the body) gets nil and the task fails rather than send a
    /// half-read stream.
    func takeBodyStream() -> InputStream? {
        state.write { state in
            defer { state.bodyStream = nil }
            return state.bodyStream
        }
    }

    /// A download finished into the temporary `location`, which URLSession deletes once this returns: move it to
    /// the destination now. `override` is the manager-wide destination closure's answer, if it has one. A move
    /// posts `sessionKitDownloadTaskDidMoveFileSuccessfully` or `sessionKitDownloadTaskDidFailToMoveFile`, on the
    /// delegate queue, as AFNetworking does.
    func didFinishDownloading(to location: URL, override: URL?) {
        let moved = destination.move(location, of: reference.task, override: override)
        _ = state.write { $0.lifecycle.didFinishDownloading(fileURL: moved.fileURL, moveError: moved.error) }
    }

    /// The task ended. Serializes the body off the delegate queue, then calls the completion and posts
    /// `Notification.Name.sessionKitTaskDidComplete` on the completion queue.
    func didComplete(error: Error?) {
        // A download this delegate wrote itself is moved here, as URLSession would have moved it.
        let error = sink.finish(error: error) { location, override in
            didFinishDownloading(to: location, override: override)
        }
        let action = state.write {
            $0.lifecycle.didComplete(error: error.map { $0 as NSError }, forcedError: forcedError)
        }
        var data = sink.takeBody()
        guard case .deliver(let fileURL, let finalError) = action else { return }
        if let settled { data = settled.body }  // the sink gave it up to the retriers' judgement
        if finalError == nil && chosenError == nil { progress.didSucceed() }
        completionDelivery.deliver(
            task: reference, data: data, fileURL: fileURL, error: finalError,
            serialized: finalError == nil ? settled?.serialized : nil, chosenError: chosenError)
    }
}
