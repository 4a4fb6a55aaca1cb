import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One task of the curl transport from creation to its one completion: the state its task object reports (from any
/// thread), its transfers on a ``CurlEngine``, the redirects and challenges between them, and the events it hands to
/// the manager's ``TaskEventSink``. What happens next is decided by the task's ``RequestMachine`` (an I/O-free value);
/// this class only performs the actions the machine returns, and the HTTP cache's (``CacheExchange``).
///
/// Events go one way, in one hop: the engine thread queues what a transfer reported (``Event``) and, at the end of
/// its pass, schedules one drain on the manager's delegate queue, which hands them to the sink in order. Decisions
/// (follow a redirect, answer a challenge, start the next transfer) are taken there too. `resume()`, `suspend()`
/// and `cancel()` may come from any thread; the machine they share with the events lives in one lock.
final class CurlTaskDriver: @unchecked Sendable {
    // @unchecked Sendable: `observed` is a `Protected` box; `cache` and `backgroundRevalidation` are used on the
    // delegate queue only (and by the first `start`, before any transfer or event exists), checked by the drain, by
    // `start` and by `revalidateInBackground`; the rest is immutable after `init`.

    /// What a task needs from its manager.
    struct Environment: Sendable {
        let policy: SecurityPolicy
        /// The TLS versions the task's connections may negotiate.
        let tlsVersions: TLSVersionRange
        /// How far a `Content-Encoding` body may inflate.
        let decodingLimits: CurlTransfer.DecodingLimits
        let settings: CurlSessionSettings
        let sink: TaskEventSink
        /// The session the manager's closures receive.
        let session: URLSession
        /// The way to the serial queue under the manager's delegate `OperationQueue`: every event and decision runs
        /// there, in a block of its own (an `Operation` per drain cost about 35k instructions per request).
        let hop: DelegateQueueHop
        /// The manager's delegate queue.
        var delegateQueue: DispatchQueue { hop.queue }
        /// Where the task's transfers report their connections, when the manager has metrics.
        var connectionEvents: (any ConnectionEvents)? = nil
        /// Resolved addresses, local address, response-head timeout.
        var connection = ConnectionOptions()
        /// The client certificate the task's connections present (mutual TLS), unless the task sets its own.
        var clientIdentity: ClientIdentity? = nil
        /// Whether the manager's adapters prepare each attempt and its retriers conclude it (the sink's
        /// `adapt` and `attemptEndedWith` calls): the task then carries every attempt of its request.
        var intercepted = false
    }

    /// What a transfer reported, queued on the engine thread and handled on the delegate queue.
    enum Event {
        case response(CurlTransfer.ResponseHead)
        case data(Data)
        case sent(Int64, Int64)
        case trailers([(String, String)])
        case timings(TransferTimings)
        case pinningReport(PinningReport)
        case end(URLError?)
    }

    private struct Observed {
        var machine = RequestMachine()
        var completionDelivered = false
        var response: ReceivedResponse?
        var currentRequest: URLRequest
        var error: Error?
        var bytesSent: Int64 = 0
        var bytesExpectedToSend: Int64
        var bytesReceived: Int64 = 0
        var bytesExpectedToReceive: Int64 = -1
        var transfer: CurlTransfer?
        var engine: CurlEngine?
        var events: [Event] = []
        var drainScheduled = false
        var progressSource: (@Sendable () -> Progress)?
        /// The retry delay's timer, while the task waits to send its request again.
        var retryTimer: DispatchWorkItem?
        /// The stream of ``bodyFile`` the last transfer read (the task's own, as opposed to one an adapter or a
        /// redirect closure put in its place).
        var fileStream: InputStream?
        /// The caller's body stream a transfer's pump read (``InputStreamPump``): never given to a second one.
        var pumpedStream: InputStream?
        /// The task object, once made (``task``): held from the task's first resume until it has completed, so that
        /// it stays the same object while the task runs (it holds this driver), then only by whoever kept it. A task
        /// never resumed is not held: dropped by everyone, it and this driver go.
        var heldTask: URLSessionTask?
        weak var madeTask: URLSessionTask?
        /// Whether the task was ever resumed.
        var wasResumed = false

        /// Holds the task object while the task runs (see ``heldTask``).
        mutating func holdTaskWhileRunning() {
            guard wasResumed, !completionDelivered, heldTask == nil else { return }
            heldTask = madeTask
        }
    }

    /// Which `URLSessionTask` class the task object is: the manager's `dataTasks`, `uploadTasks` and `downloadTasks`
    /// lists, and `is URLSessionDownloadTask`, go by it.
    enum Kind: Sendable {
        case data, upload, download
    }

    /// The task's identifier, unique in its manager.
    let taskIdentifier: Int
    /// The request the task was created with.
    let originalRequest: URLRequest
    /// Back-pressure between the transfer and the per-task delegate; the caller's pause is the machine's.
    let flowControl: FlowControl
    /// The class of ``task``.
    let kind: Kind

    private let environment: Environment
    private let observed: Protected<Observed>
    /// The task's part in the configuration's HTTP cache; nil when the configuration has no `URLCache`.
    private var cache: CacheExchange?
    /// The cache's background revalidation of a response served stale, while it runs.
    private var backgroundRevalidation: CacheExchange?
    /// The task's client identity, fixed from its first transfer on.
    let clientIdentity: TaskClientIdentity
    /// The file an upload task sends: opened anew for every transfer (a 307 or 308 redirect, a challenge's next
    /// round, a retry), since a stream read by one transfer has nothing left for the next.
    private let bodyFile: URL?
    /// Whether the task is an upload task: a POST's body then gets no default `Content-Type`, as URLSession's upload
    /// tasks send it (a data task's `httpBody` gets `application/x-www-form-urlencoded`).
    private let isUpload: Bool

    init(
        taskIdentifier: Int, request: URLRequest, kind: Kind = .data, bodyFile: URL? = nil, isUpload: Bool = false,
        expectedToSend: Int64, environment: Environment
    ) {
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.bodyFile = bodyFile
        self.isUpload = isUpload
        self.originalRequest = request
        self.environment = environment
        self.clientIdentity = TaskClientIdentity(environment.clientIdentity)
        self.observed = Protected(
            Observed(
                machine: RequestMachine(intercepted: environment.intercepted), currentRequest: request,
                bytesExpectedToSend: expectedToSend, fileStream: bodyFile == nil ? nil : request.httpBodyStream))
        cache = environment.settings.cache.map { CacheExchange(cache: $0, policy: environment.policy) }
        // The box, not the driver: the transfer may outlive the task, and a weak reference costs at every callback.
        flowControl = FlowControl(callerHolds: { [observed] in observed.read { $0.machine.isPaused } })
    }

    // MARK: - What the task reports (any thread)

    /// The public task object that forwards to this driver, made when first asked for: a call that hands out no task
    /// and that nothing watches runs without one (see ``TaskReference``).
    var task: URLSessionTask {
        if let made = observed.read({ $0.madeTask }) { return made }
        // Made outside the lock (Foundation's initializer takes locks of its own); the first one stored is the task.
        let made: URLSessionTask
        switch kind {
        case .data: made = CurlDataTask(driver: self)
        case .upload: made = CurlUploadTask(driver: self)
        case .download: made = CurlDownloadTask(driver: self)
        }
        return observed.write { observed in
            if let existing = observed.madeTask { return existing }
            observed.madeTask = made
            observed.holdTaskWhileRunning()
            return made
        }
    }

    var state: URLSessionTask.State {
        observed.read { $0.completionDelivered ? .completed : $0.machine.taskState }
    }
    var response: URLResponse? { observed.read { $0.response }?.urlResponse }
    /// The task's response as received (its Foundation object built only when someone asks).
    var receivedResponse: ReceivedResponse? { observed.read { $0.response } }
    var currentRequest: URLRequest? { observed.read { $0.currentRequest } }
    var error: Error? { observed.read { $0.error } }
    var countOfBytesSent: Int64 { observed.read { $0.bytesSent } }
    var countOfBytesExpectedToSend: Int64 { observed.read { $0.bytesExpectedToSend } }
    var countOfBytesReceived: Int64 { observed.read { $0.bytesReceived } }
    var countOfBytesExpectedToReceive: Int64 { observed.read { $0.bytesExpectedToReceive } }
    /// The progress the per-task delegate reports (built when first asked for).
    var progress: Progress? { observed.read { $0.progressSource }?() }
    /// Where ``progress`` comes from (set by the manager once the per-task delegate exists).
    var progressSource: (@Sendable () -> Progress)? {
        get { observed.read { $0.progressSource } }
        set { observed.write { $0.progressSource = newValue } }
    }

    // MARK: - Control (any thread)

    func resume() {
        let action = observed.write { observed in
            observed.wasResumed = true
            observed.holdTaskWhileRunning()
            return observed.machine.resume()
        }
        switch action {
        case .startTransfer:
            notify(resumed: true)
            // Its URL was checked when the task was made (`TaskTransport.refusal(for:connection:)`).
            start(prepared(originalRequest), onDelegateQueue: false, urlChecked: true)
        case .adaptRequest:
            notify(resumed: true)
            adaptThenStart(onDelegateQueue: false)
        case .resumeTransfer:
            flowControl.callerReleased()
            notify(resumed: true)
        case .countedResume:
            notify(resumed: true)
        default:
            break
        }
    }

    /// Holds a loading task's transfer, or counts one more suspension of a task that has not started; false when
    /// the task is paused already or ended.
    @discardableResult
    func suspend() -> Bool {
        switch observed.write({ $0.machine.suspend() }) {
        case .pauseTransfer, .countedSuspension:
            break
        default:
            return false
        }
        notify(resumed: false)
        return true
    }

    func cancel() {
        let cancelled = Self.error(.cancelled, "The task was cancelled.", url: originalRequest.url)
        let (action, transfer, engine) = observed.write {
            observed -> (RequestMachine.ControlAction, CurlTransfer?, CurlEngine?) in
            let action = observed.machine.cancel()
            guard action == .stopAndCompleteCancelled else { return (action, nil, nil) }
            observed.error = cancelled
            observed.retryTimer?.cancel()  // the timer would keep the driver until its delay ends
            observed.retryTimer = nil
            defer { (observed.transfer, observed.engine) = (nil, nil) }
            return (action, observed.transfer, observed.engine)
        }
        guard action == .stopAndCompleteCancelled else { return }
        if let transfer, let engine { engine.remove(transfer) }
        environment.delegateQueue.async { self.deliverCompletion(cancelled) }
    }

    /// Cancels, handing the download's resume data (or nil) to `handler` once the task has ended.
    func cancel(byProducingResumeData handler: @escaping @Sendable (Data?) -> Void) {
        if !environment.sink.task(self, in: environment.session, producingResumeData: handler) {
            handler(nil)
        }
        cancel()
    }

    private func notify(resumed: Bool) {
        environment.sink.taskDidChangeSuspension(self, in: environment.session, resumed: resumed)
    }

    // MARK: - Adapters and retriers (an intercepted task)

    /// Asks the manager's adapters for this attempt's request (made from the task's original request each time),
    /// then starts its transfer; an adapter's error ends the task at once (it is not an attempt a retrier judges).
    ///
    /// `onDelegateQueue`: whether this runs on the delegate queue (a retry's) or on the caller's thread (`resume()`).
    private func adaptThenStart(onDelegateQueue: Bool) {
        // The sink answers on the delegate queue, or at once on this thread when it has nothing to adapt the request
        // with: the start then runs where this call does.
        let asking = Protected(true)
        environment.sink.task(self, in: environment.session, adapt: originalRequest) { [self] result in
            let answeredHere = asking.read { $0 }
            switch result {
            case .success(let request):
                guard observed.write({ $0.machine.adapted() }) == .startTransfer else { return }
                start(prepared(request), onDelegateQueue: answeredHere ? onDelegateQueue : true)
            case .failure(let error):
                complete(error)
            }
        }
        asking.wrappedValue = false
    }

    /// The manager's verdict on the attempt that ended with `error` (nil: with its response).
    private func conclude(_ verdict: AttemptVerdict, error: Error?) {
        let delay: TimeInterval
        switch verdict {
        case .complete: return complete(error)
        case .pastDeadline: return complete(Self.resourceTimedOut(originalRequest.url))
        case .retry(let after): delay = after
        }
        // Weak: a cancelled timer keeps its block until its deadline, and the task (which the manager's registry
        // holds until it completes) keeps its driver while it waits.
        let retry = DispatchWorkItem { [weak self] in
            guard let self else { return }
            observed.write { $0.retryTimer = nil }
            guard observed.write({ $0.machine.retryNow() }) == .adaptRequest else { return }
            adaptThenStart(onDelegateQueue: true)
        }
        let plan = observed.write { observed -> RequestMachine.RetryPlan in
            let plan = observed.machine.willRetry(after: delay, now: Date())
            guard plan == .wait else { return plan }
            // The next attempt's response and counts are its own.
            observed.response = nil
            (observed.bytesSent, observed.bytesReceived, observed.bytesExpectedToReceive) = (0, 0, -1)
            (observed.transfer, observed.engine) = (nil, nil)
            if delay > 0 { observed.retryTimer = retry }
            return plan
        }
        switch plan {
        case .none:
            break  // cancelled meanwhile: its completion is on its way
        case .pastDeadline:
            // The retry would start past the task's resource timeout: the task ends as URLSession ends it then.
            complete(Self.resourceTimedOut(originalRequest.url))
        case .wait:
            if delay > 0 {
                environment.delegateQueue.asyncAfter(deadline: .now() + min(delay, 86_400), execute: retry)
            } else {
                retry.perform()
            }
        }
    }

    // MARK: - Transfers

    /// `request` with what the configuration adds: its additional headers (the request's own win).
    private func prepared(_ request: URLRequest) -> URLRequest {
        var request = request
        for (field, value) in environment.settings.additionalHeaders
        where request.value(forHTTPHeaderField: field) == nil {
            request.setValue(value, forHTTPHeaderField: field)
        }
        return request
    }

    /// Runs `request` (the first one, or the next of a redirect or challenge) on the engine of the task's policy.
    ///
    /// `onDelegateQueue`: whether this runs on the delegate queue; the first transfer starts on the caller's thread,
    /// and moves there when the cache must read its `URLCache` (which may read its disk). `urlChecked`: whether
    /// `request`'s URL is one ``CurlTaskTransport/refusal(for:)`` passed already (the task's original request).
    private func start(_ request: URLRequest, onDelegateQueue: Bool, urlChecked: Bool = false) {
        // `cache` is the delegate queue's, but for the first start (before any transfer or event exists).
        if onDelegateQueue { dispatchPrecondition(condition: .onQueue(environment.delegateQueue)) }
        // Every request of the task, not only its first: a redirect's (`Location: http:///x`), an adapter's, the
        // manager's redirect closure's.
        if !urlChecked, let refusal = CurlTaskTransport.refusal(for: request.url) { return fail(refusal) }
        let settings = environment.settings
        let plan = observed.write {
            $0.machine.planAttempt(
                of: request.url, proxy: { self.challengeProxy(for: request.url) },
                resourceTimeout: settings.resourceTimeout,
                now: Date())
        }
        guard case .start(let credentials, let remaining) = plan else {
            return fail(Self.resourceTimedOut(request.url))
        }
        let asked = request
        var request = request
        var addedCookies = false
        if request.httpShouldHandleCookies, let jar = settings.cookies, let url = request.url,
            request.value(forHTTPHeaderField: "Cookie") == nil, let cookies = jar.header(for: url)
        {
            request.setValue(cookies, forHTTPHeaderField: "Cookie")
            addedCookies = true
        }
        /// The task's current request, which the next transfer (a redirect, a challenge's round) starts from: without
        /// the cookies added here, so that it asks the storage anew and sends what a redirect response just set.
        func current(_ request: URLRequest) -> URLRequest {
            guard addedCookies else { return request }
            var request = request
            request.setValue(nil, forHTTPHeaderField: "Cookie")
            return request
        }
        // What libcurl will add as `Authorization`, for the cache to judge the request as it goes on the wire.
        // A client certificate is a credential too: what is stored for one identity is served to it alone.
        var wireCredential = credentials.first { !$0.forProxy }.map { "\($0.schemes) \($0.user):\($0.password)" }
        if let identity = clientIdentity.forConnection() {
            wireCredential = [wireCredential, "client-certificate \(identity.connectionKey)"].compactMap { $0 }
                .joined(separator: "\u{0}")
        }
        if let plan = cache?.start(request, credential: wireCredential, mayReadStore: onDelegateQueue) {
            switch plan {
            case .readStoreFirst:
                return environment.hop.async(.start(self, asked))
            case .serve(let entry):
                observed.write { $0.currentRequest = current(request) }
                return serveStored(entry)
            case .serveStaleAndRevalidate(let entry, let background):
                observed.write { $0.currentRequest = current(request) }
                serveStored(entry)
                return revalidateInBackground(
                    entry, with: background, credential: wireCredential, credentials: credentials, remaining: remaining)
            case .unavailable:
                return fail(
                    Self.error(
                        .resourceUnavailable,
                        "Nothing is stored in the cache for this request, and its cache policy forbids the network.",
                        url: request.url))
            case .unsatisfiable:
                observed.write { $0.currentRequest = current(request) }
                return serveUnsatisfiable(request.url)
            case .send(let planned):
                request = planned
            }
        }
        // An upload task's own read of its file never waits: read in place, not on a thread of its own.
        var readsFileInPlace = false
        if let bodyFile, let stream = request.httpBodyStream, stream === observed.read({ $0.fileStream }) {
            // This transfer's own read of the file, with its size now (a stream another party set is left as it is).
            let fresh = InputStream(url: bodyFile)
            request.httpBodyStream = fresh
            observed.write { $0.fileStream = fresh }
            readsFileInPlace = true
            let size = try? FileManager.default.attributesOfItem(atPath: bodyFile.path)[.size] as? NSNumber
            if let size { request.setValue(size.stringValue, forHTTPHeaderField: "Content-Length") }
        }
        if let multipart = request.httpBodyStream as? MultipartBodyStream, !multipart.claim() {
            // Given to an earlier transfer (this task's before a redirect or an authentication round, or another
            // task's that sent the same request), which read it as far as it got, often to its end: sent from the
            // rest, the body would fall short of its `Content-Length`, and the server would take the connection's
            // next request for the missing bytes. It goes again from its first byte.
            guard let fresh = multipart.replay(), fresh.claim() else {
                let failingURL: [String: Any] = [NSURLErrorFailingURLErrorKey: request.url as Any]
                return fail(RequestBodyPipe.notReplayableError(userInfo: failingURL))
            }
            request.httpBodyStream = fresh
        }
        let pumped = request.httpBodyStream.flatMap {
            InputStreamPump.pumps($0, readInPlace: readsFileInPlace) ? $0 : nil
        }
        let pumpedAgain = observed.write { observed -> Bool in
            observed.currentRequest = current(request)
            guard let pumped else { return false }
            defer { observed.pumpedStream = pumped }
            return observed.pumpedStream === pumped
        }
        if pumpedAgain || (request.httpBodyStream as? PipeInputStream)?.pipe.isClaimed == true {
            // A redirect that keeps the body, or an authentication round: a streamed body is never sent twice (a
            // caller's stream would be read by a second pump beside the first one's, which may still wait in `read`).
            let failingURL: [String: Any] = [NSURLErrorFailingURLErrorKey: request.url as Any]
            return fail(RequestBodyPipe.notReplayableError(userInfo: failingURL))
        }
        let events = CurlTransfer.Events(
            response: { [self] head in enqueue(.response(head)) },
            data: { [self] data in enqueue(.data(data)) },
            completion: { [self] error in enqueue(.end(error)) },
            uploadProgress: { [self] sent, expected in enqueue(.sent(sent, expected)) },
            trailers: { [self] lines in enqueue(.trailers(lines)) },
            timings: { [self] timings in enqueue(.timings(timings)) },
            pinningReport: { [self] report in enqueue(.pinningReport(report)) },
            flush: { [self] in scheduleDrain() })
        guard
            let transfer = makeTransfer(
                request, credentials: credentials, remaining: remaining, flowControl: flowControl,
                pumpsBodyStream: pumped != nil, bodyFile: readsFileInPlace ? bodyFile : nil, events: events),
            attach(transfer)
        else {
            return fail(Self.error(.unknown, "libcurl could not be set up for this request.", url: request.url))
        }
    }

    /// A transfer of `request` with the task's settings.
    private func makeTransfer(
        _ request: URLRequest, credentials: [CurlTransfer.Credential], remaining: TimeInterval?,
        flowControl: FlowControl? = nil, pumpsBodyStream: Bool = false, bodyFile: URL? = nil,
        events: CurlTransfer.Events
    ) -> CurlTransfer? {
        CurlTransfer(
            request: request, policy: environment.policy, tlsVersions: environment.tlsVersions,
            idleTimeout: min(request.timeoutInterval, environment.settings.idleTimeout), totalTimeout: remaining,
            proxy: proxy(for: request.url), credentials: credentials, decodingLimits: environment.decodingLimits,
            flowControl: flowControl, connection: environment.connection, identity: clientIdentity.forConnection(),
            events: events,
            connectionObserver: environment.connectionEvents.flatMap {
                CurlConnectionObserver(events: $0, url: request.url)
            },
            pumpsBodyStream: pumpsBodyStream, bodyFile: bodyFile, formTypeByDefault: !isUpload)
    }

    /// Sends `request` in the background to revalidate `entry`, just served stale (`stale-while-revalidate`, RFC
    /// 5861), and stores what the server answers once it has arrived; the task does not wait for it.
    private func revalidateInBackground(
        _ entry: CacheEntry, with request: URLRequest, credential: String?, credentials: [CurlTransfer.Credential],
        remaining: TimeInterval?
    ) {
        // Reached only from a start that read the store, on the delegate queue, which `backgroundRevalidation` is
        // confined to.
        dispatchPrecondition(condition: .onQueue(environment.delegateQueue))
        guard var exchange = cache.map({ CacheExchange(cache: $0.cache, policy: environment.policy) })
        else { return }
        exchange.prepareBackgroundRevalidation(of: entry, request: request, credential: credential)
        backgroundRevalidation = exchange
        let limit = exchange.cache.maximumBodySize
        // The body, until it grows past what the cache would store (then nil: nothing is stored).
        let answer = Protected<(head: CurlTransfer.ResponseHead?, body: Data?)>((nil, Data()))
        let events = CurlTransfer.Events(
            response: { head in answer.write { $0.head = head } },
            data: { data in
                answer.write { answer in
                    guard let body = answer.body, body.count + data.count <= limit else { return answer.body = nil }
                    answer.body?.append(data)
                }
            },
            completion: { [self] error in
                environment.delegateQueue.async { [self] in
                    let (head, body) = answer.read { ($0.head, $0.body) }
                    let complete = error == nil && body != nil
                    backgroundRevalidation?.endBackgroundRevalidation(
                        response: complete ? head?.makeResponse() : nil, body: body ?? Data())
                    backgroundRevalidation = nil
                }
            },
            uploadProgress: { _, _ in })
        guard let transfer = makeTransfer(request, credentials: credentials, remaining: remaining, events: events),
            CurlEngine.withEngine(
                for: environment.policy, tlsVersions: environment.tlsVersions,
                maximumConnectionsPerHost: environment.settings.maximumConnectionsPerHost,
                identity: clientIdentity.forConnection(), { $0.add(transfer) }) == true
        else {
            backgroundRevalidation?.endBackgroundRevalidation(response: nil, body: Data())
            backgroundRevalidation = nil
            return
        }
    }

    /// Starts `transfer` on the engine of the task's policy, made when none runs. The table of engines is held
    /// meanwhile, so the engine cannot retire before it took the transfer.
    private func attach(_ transfer: CurlTransfer) -> Bool {
        CurlEngine.withEngine(
            for: environment.policy, tlsVersions: environment.tlsVersions,
            maximumConnectionsPerHost: environment.settings.maximumConnectionsPerHost,
            identity: clientIdentity.forConnection()
        ) { engine -> Bool in
            let stillRunning = observed.write { observed -> Bool in
                guard !observed.machine.isTerminal else { return false }
                (observed.transfer, observed.engine) = (transfer, engine)
                return true
            }
            guard stillRunning else { return true }  // cancelled meanwhile: its completion is on its way
            // One closure for both ways a paused transfer resumes: the reader caught up, or the body's writer wrote.
            let unpause: @Sendable () -> Void = { [weak engine, weak transfer] in
                if let engine, let transfer { engine.unpause(transfer) }
            }
            flowControl.resume = unpause
            transfer.wakeOnBody(unpause)
            return engine.add(transfer)
        } ?? false
    }

    /// Ends the task with `error` from outside a transfer (set-up failure, deadline), on the delegate queue.
    private func fail(_ error: URLError) {
        environment.delegateQueue.async { self.finish(error) }
    }

    // MARK: - Events (engine thread, then the delegate queue)

    private func enqueue(_ event: Event) {
        observed.write { observed in
            // A transfer's usual events (head, body, timings, end) in one allocation rather than three.
            if observed.events.isEmpty { observed.events.reserveCapacity(4) }
            observed.events.append(event)
        }
    }

    /// Called by the engine at the end of a pass: one hop to the delegate queue for all the pass produced.
    private func scheduleDrain() {
        let schedule = observed.write { observed -> Bool in
            guard !observed.drainScheduled, !observed.events.isEmpty else { return false }
            observed.drainScheduled = true
            return true
        }
        if schedule { environment.hop.async(.drain(self)) }
    }

    /// Starts the task's first transfer on the delegate queue (the HTTP cache reads its store there first).
    func startOnDelegateQueue(_ request: URLRequest) {
        start(request, onDelegateQueue: true)
    }

    /// Hands the events the engine queued to the manager, in order (delegate queue, through ``DelegateQueueHop``).
    func drain() {
        // Checked in release builds too: the events' confinement is what every decision below relies on, and the
        // check is one read of the current queue.
        dispatchPrecondition(condition: .onQueue(environment.delegateQueue))
        let events = observed.write { observed -> [Event] in
            observed.drainScheduled = false
            // Handed over whole: keeping its capacity here would copy it, since the drain holds it.
            defer { observed.events = [] }
            return observed.events
        }
        for event in events {
            guard !observed.read({ $0.machine.isTerminal }) else {
                if case .data(let data) = event { flowControl.consumed(data.count) }
                continue
            }
            handle(event)
        }
    }

    private func handle(_ event: Event) {
        let sink = environment.sink
        let session = environment.session
        switch event {
        case .response(let head):
            let response = ReceivedResponse(head)
            storeCookies(head.lines, for: head.url)
            // A redirect is decided when its transfer ends (its body is dropped), a challenge answered then.
            guard observed.write({ $0.machine.headArrived(response) }) == .deliver else { return }
            if cache?.wantsResponse(withFields: head.lines) == true, let http = response.httpResponse {
                deliverHead(ReceivedResponse(cacheReceived(http)))
            } else {
                deliverHead(response)
            }
            if cache?.confirmed != nil { observed.write { $0.machine.storeAnswered() } }
        case .data(let data):
            let action = observed.write { observed -> RequestMachine.BodyAction in
                let action = observed.machine.bodyArrived(data)
                if action == .deliver { observed.bytesReceived += Int64(data.count) }
                return action
            }
            guard action == .deliver else { return flowControl.consumed(data.count) }
            cache?.receivedBody(data)
            sink.task(self, in: session, didReceive: data)
        case .sent(let sent, let expected):
            let increment = observed.write { observed -> Int64 in
                defer { observed.bytesSent = sent }
                if expected > 0 { observed.bytesExpectedToSend = expected }
                if expected >= 0 && sent >= expected { observed.machine.requestSent() }
                return max(0, sent - observed.bytesSent)
            }
            sink.task(
                self, in: session, didSendBodyData: increment, totalBytesSent: sent, totalBytesExpectedToSend: expected)
        case .trailers(let lines):
            // A held (redirect, challenge) or replaced (304, stale) response's trailers are not the task's.
            guard observed.read({ $0.machine.takesTrailers }) else { return }
            sink.task(self, in: session, didReceiveTrailers: lines)
        case .timings(let timings):
            sink.task(self, in: session, didFinishCollecting: timings)
        case .pinningReport(let report):
            sink.task(self, in: session, didFailPinning: report)
        case .end(let error):
            switch observed.write({ $0.machine.transferEnded(failed: error != nil) }) {
            case .none:
                break
            case .fail:
                if let error, Self.staleMayAnswer.contains(error.code), observed.read({ $0.response }) == nil,
                    let stale = cache?.staleAfterError()
                {
                    // stale-if-error: the server could not be reached or answered nothing; the stored one answers (a
                    // TLS or policy failure never does: the caller must learn of it).
                    deliverHead(stale.servedResponse(at: Date()))
                    deliverStoredBody(stale.data)
                    return finish(nil)
                }
                _ = cache?.ended(response: nil, failed: true)
                finish(error)
            case .finish:
                endCachedExchange()
                finish(nil)
            case .decideChallenge(let held):
                if let challenge = held.challenge {
                    answer(challenge, of: held.response, body: held.body)
                }
            case .decideRedirect(let held):
                cache?.redirected(by: held.response)
                followRedirect(held.response, body: held.body)
            }
        }
    }

    // MARK: - HTTP cache (delegate queue)

    /// A final response head arrived: what the cache makes of it (a 304 to its revalidation is the stored response).
    private func cacheReceived(_ response: HTTPURLResponse) -> HTTPURLResponse {
        let request = observed.read { $0.currentRequest }
        let delivered = cache?.received(response, for: request) ?? response
        if let proposal = cache?.takeProposal() { approveAndStore(proposal) }
        return delivered
    }

    /// Asks the manager (`dataTaskWillCacheResponse`) about `proposal`, and stores what it approves.
    private func approveAndStore(_ proposal: CacheExchange.Proposal) {
        if let approved = environment.sink.task(self, in: environment.session, willCache: proposal.response) {
            cache?.store(approved, for: proposal)
        }
    }

    /// The transfer ended well: the cache stores what it kept; a confirmed stored response gives its body.
    private func endCachedExchange() {
        guard cache?.hasWorkAtEnd == true else { return }
        if let proposal = cache?.ended(response: observed.read { $0.response }?.httpResponse, failed: false) {
            approveAndStore(proposal)
        }
        if let confirmed = cache?.confirmed { deliverStoredBody(confirmed.data) }
    }

    /// Answers the task with a stored response, on the delegate queue, as a transfer would have.
    private func serveStored(_ entry: CacheEntry) {
        environment.delegateQueue.async { [self] in
            guard !observed.read({ $0.machine.isTerminal }) else { return }
            deliverHead(entry.servedResponse(at: Date()))
            deliverStoredBody(entry.data)
            finish(nil)
        }
    }

    /// Answers a request whose `only-if-cached` nothing stored satisfies with the cache's own 504 (Gateway Timeout),
    /// empty, without the network (RFC 9111 5.2.1.7).
    private func serveUnsatisfiable(_ url: URL?) {
        environment.delegateQueue.async { [self] in
            guard !observed.read({ $0.machine.isTerminal }) else { return }
            guard let url,
                let response = HTTPURLResponse(
                    url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: ["Content-Length": "0"])
            else {
                return finish(URLError(.resourceUnavailable))
            }
            deliverHead(response)
            finish(nil)
        }
    }

    /// Hands the task a body that did not come from the running transfer (a challenge's, a stored one).
    private func deliverStoredBody(_ body: Data) {
        guard !body.isEmpty, !observed.read({ $0.machine.isTerminal }) else { return }
        observed.write { $0.bytesReceived += Int64(body.count) }
        flowControl.produced(body.count)  // the per-task delegate counts it as consumed
        environment.sink.task(self, in: environment.session, didReceive: body)
    }

    /// The final response head: the task's response, then the sink's answer.
    private func deliverHead(_ response: HTTPURLResponse) {
        deliverHead(ReceivedResponse(response))
    }

    /// The final response head as received: the task's response, then the sink's answer.
    private func deliverHead(_ response: ReceivedResponse) {
        observed.write { observed in
            observed.response = response
            observed.bytesExpectedToReceive = response.expectedContentLength
            observed.machine.responseDelivered()
        }
        if environment.sink.task(self, in: environment.session, didReceive: response) == .cancel {
            cancel()
        }
    }

    private func storeCookies(_ lines: [(String, String)], for url: URL) {
        // Most responses set none: the request (behind the lock) is read only for those that do.
        let values = lines.compactMap { $0.0.equalsIgnoringASCIICase("Set-Cookie") ? $0.1 : nil }
        guard !values.isEmpty, let jar = environment.settings.cookies else { return }
        let request = observed.read { $0.currentRequest }
        guard request.httpShouldHandleCookies else { return }
        jar.store(values, from: url, mainDocumentURL: request.mainDocumentURL)
    }

    /// A 3xx ended: ask the manager, then follow, or deliver the 3xx as the response.
    private func followRedirect(_ response: HTTPURLResponse, body: Data) {
        let request = requestWithoutCacheFields()
        switch observed.write({ $0.machine.redirect(after: response, from: request) }) {
        case .failure(let error):
            finish(error)
        case .success(let proposed):
            if let next = environment.sink.task(
                self, in: environment.session, willPerformHTTPRedirection: response,
                newRequest: proposed)
            {
                // The manager's closure may return any request: it goes on the wire only if it could have been made.
                if let refusal = HTTPFieldValidation.error(for: next) { return complete(refusal) }
                startNext(next)
            } else {
                // Refused: the redirect is the response, with its body (as URLSession returns it).
                deliverHead(response)
                deliverStoredBody(body)
                finish(nil)
            }
        }
    }

    /// A 401 or 407 ended: ask the manager, then retry with a credential, deliver the response, or cancel.
    private func answer(
        _ header: AuthenticationChallengeHeader, of response: HTTPURLResponse, body: Data
    ) {
        let request = requestWithoutCacheFields()
        let proxyURL = header.isProxy ? challengeProxy(for: request.url).flatMap(URL.init(string:)) : nil
        let space = header.protectionSpace(
            for: request.url ?? response.url ?? URL(fileURLWithPath: "/"), proxyURL: proxyURL)
        let failures = observed.write { $0.machine.challengeRound(proxy: header.isProxy) }
        let challenge = URLAuthenticationChallenge(
            protectionSpace: space, proposedCredential: nil, previousFailureCount: failures,
            failureResponse: response, error: nil, sender: ChallengeSender())
        switch environment.sink.task(self, in: environment.session, didReceive: challenge) {
        case .retry(let credential):
            let answer = CurlTransfer.Credential(credential, scheme: header.scheme, forProxy: header.isProxy)
            let proxy = header.isProxy ? challengeProxy(for: request.url) : nil
            observed.write {
                $0.machine.answered(with: answer, origin: RedirectState.origin(of: request.url), proxy: proxy)
            }
            startNext(request)
        case .deliverResponse:
            deliverHead(response)
            deliverStoredBody(body)
            finish(nil)
        case .cancel:
            cancel()
        }
    }

    /// Sends `request` as the task's next transfer, unless the task ended meanwhile.
    private func startNext(_ request: URLRequest) {
        guard observed.write({ $0.machine.nextAttempt() }) == .startTransfer else { return }
        start(request, onDelegateQueue: true)
    }

    /// The last transfer of an attempt ended (or could not start): the task completes, once, unless the manager's
    /// retriers send it again.
    private func finish(_ error: URLError?) {
        var error = error
        if error == nil, observed.read({ $0.response }) == nil {
            // The invariant every completion keeps, whatever went wrong before: a response or an error.
            error = Self.error(.badServerResponse, "The task ended without a response.", url: originalRequest.url)
        }
        if environment.intercepted {
            let (concludes, deadline) = observed.write {
                ($0.machine.attemptEnded(now: Date()), $0.machine.resourceDeadline)
            }
            if concludes {
                environment.sink.task(self, in: environment.session, attemptEndedWith: error, deadline: deadline) {
                    [self, error] verdict in conclude(verdict, error: error)
                }
                return
            }
        }
        complete(error)
    }

    /// The task completes with `error` (nil: with its response), once.
    private func complete(_ error: Error?) {
        let completes = observed.write { observed -> Bool in
            guard observed.machine.complete(failed: error != nil) else { return false }
            observed.error = error
            (observed.transfer, observed.engine) = (nil, nil)
            return true
        }
        guard completes else { return }
        deliverCompletion(error)
    }

    private func deliverCompletion(_ error: Error?) {
        observed.write { $0.completionDelivered = true }
        environment.sink.task(self, in: environment.session, didCompleteWithError: error)
        // From now on the task object lives as long as someone keeps it (the caller, a monitor, the request).
        let released = observed.write { observed -> URLSessionTask? in
            defer { observed.heldTask = nil }
            return observed.heldTask
        }
        _ = released  // released outside the lock: its deinit may take Foundation's
    }

    // MARK: - Helpers

    /// The failures a stored response may answer in place of (`stale-if-error`): the network's, not the handshake's,
    /// the policy's or the caller's.
    private static let staleMayAnswer: Set<URLError.Code> = [
        .cannotConnectToHost, .cannotFindHost, .networkConnectionLost, .timedOut, .dnsLookupFailed,
        .notConnectedToInternet,
    ]

    /// The running transfer's request without the conditional fields the cache added: what the next transfer (a
    /// redirect, a challenge's next round) starts from.
    private func requestWithoutCacheFields() -> URLRequest {
        let request = observed.read { $0.currentRequest }
        return cache?.removingOwnFields(from: request) ?? request
    }

    /// The configuration's proxy for `url`'s scheme, as `http://host:port`.
    private func proxy(for url: URL?) -> String? {
        url?.scheme?.lowercased() == "https" ? environment.settings.proxies.https : environment.settings.proxies.http
    }

    /// The proxy a request to `url` goes through: the configuration's, else the one libcurl takes from the
    /// environment; none for a host `no_proxy` names. A 407's protection space is this proxy's, and its credential
    /// goes through it only.
    private func challengeProxy(for url: URL?) -> String? {
        EnvironmentProxy.proxy(for: url, configured: proxy(for: url))
    }

    /// The error of a task that ran past the session's resource timeout.
    private static func resourceTimedOut(_ url: URL?) -> URLError {
        error(.timedOut, "The request took longer than the session's resource timeout.", url: url)
    }

    private static func error(_ code: URLError.Code, _ reason: String, url: URL?) -> URLError {
        URLError(
            code,
            userInfo: [
                NSLocalizedDescriptionKey: reason, NSURLErrorFailingURLErrorKey: url as Any,
                "NSErrorFailingURLStringKey": url?.absoluteString as Any,
            ])
    }
}

extension CurlTaskDriver: TaskReference {
    var registryKey: ObjectIdentifier { ObjectIdentifier(self) }
    var originalURL: URL? { originalRequest.url }
    var isTransportDriven: Bool { true }
    var isDownload: Bool { kind == .download }
}
