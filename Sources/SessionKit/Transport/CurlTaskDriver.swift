import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One task of the curl transport from creation to its one completion: the state its task object reports (from any
/// thread), its transfers on a ``CurlEngine``, the redirects and challenges between them, and the events it hands to
/// the manager's ``TaskEventSink``.
///
/// Events go one way, in one hop: the engine thread queues what a transfer reported (``Event``) and, at the end of
/// its pass, schedules one drain on the manager's delegate queue, which hands them to the sink in order. Decisions
/// (follow a redirect, answer a challenge, start the next transfer) are taken there too. `resume()`, `suspend()`
/// and `cancel()` may come from any thread; the ``TransferLifecycle`` they share with the events lives in one lock.
final class CurlTaskDriver: @unchecked Sendable {
    // @unchecked Sendable: `observed` is a `Protected` box; `conversation` is used on the delegate queue only (and
    // by the first `start`, before any transfer or event exists); the rest is immutable after `init`.

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
        /// The serial queue under the manager's delegate `OperationQueue`: every event and decision runs there, in
        /// a block of its own (an `Operation` per drain cost about 35k instructions per request).
        let delegateQueue: DispatchQueue
        /// The client certificate the task's connections present (mutual TLS), unless the task sets its own.
        var clientIdentity: ClientIdentity? = nil
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
        var lifecycle = TransferLifecycle()
        var completionDelivered = false
        var response: URLResponse?
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
        var progress: Progress?
    }

    /// What the delegate queue keeps between events: redirects followed, challenges answered, the response held
    /// for a decision.
    private struct Conversation {
        var redirects = RedirectState()
        var challengeFailures = (server: 0, proxy: 0)
        /// The server's credential only goes to the origin that asked for it.
        var serverCredential: (credential: CurlTransfer.Credential, origin: String)?
        var proxyCredential: CurlTransfer.Credential?
        /// When the resource timeout ends the task, set when its first transfer starts.
        var deadline: Date?
        /// A redirect or challenge response of the running transfer, with the body kept for a challenge.
        var held: (response: HTTPURLResponse, challenge: AuthenticationChallengeHeader?, body: Data)?
        /// The task's part in the configuration's HTTP cache; nil when the configuration has no `URLCache`.
        var cache: CacheExchange?
        /// The cache's background revalidation of a response served stale, while it runs.
        var backgroundRevalidation: CacheExchange?
    }

    /// The task's identifier, unique in its manager.
    let taskIdentifier: Int
    /// The request the task was created with.
    let originalRequest: URLRequest
    /// Back-pressure between the transfer and the per-task delegate.
    let flowControl = FlowControl()
    /// The public task object this driver runs (it owns the driver).
    weak var task: URLSessionTask?

    private let environment: Environment
    private let observed: Protected<Observed>
    /// The task's client identity, fixed from its first transfer on.
    let clientIdentity: TaskClientIdentity
    private var conversation = Conversation()
    /// A challenge's body is kept for delivery up to this size (a challenge's page is small).
    private static let heldBodyLimit = 1 << 20

    init(taskIdentifier: Int, request: URLRequest, expectedToSend: Int64, environment: Environment) {
        self.taskIdentifier = taskIdentifier
        self.originalRequest = request
        self.environment = environment
        self.clientIdentity = TaskClientIdentity(environment.clientIdentity)
        self.observed = Protected(Observed(currentRequest: request, bytesExpectedToSend: expectedToSend))
        conversation.cache = environment.settings.cache.map { CacheExchange(cache: $0, policy: environment.policy) }
    }

    // MARK: - What the task reports (any thread)

    var state: URLSessionTask.State {
        observed.read { $0.completionDelivered ? .completed : $0.lifecycle.taskState }
    }
    var response: URLResponse? { observed.read { $0.response } }
    var currentRequest: URLRequest? { observed.read { $0.currentRequest } }
    var error: Error? { observed.read { $0.error } }
    var countOfBytesSent: Int64 { observed.read { $0.bytesSent } }
    var countOfBytesExpectedToSend: Int64 { observed.read { $0.bytesExpectedToSend } }
    var countOfBytesReceived: Int64 { observed.read { $0.bytesReceived } }
    var countOfBytesExpectedToReceive: Int64 { observed.read { $0.bytesExpectedToReceive } }
    /// The progress the per-task delegate reports (set by the manager once the delegate exists).
    var progress: Progress? {
        get { observed.read { $0.progress } }
        set { observed.write { $0.progress = newValue } }
    }

    // MARK: - Control (any thread)

    func resume() {
        let action = observed.write { $0.lifecycle.resume() }
        switch action {
        case .startTransfer:
            notify(resumed: true)
            start(prepared(originalRequest), onDelegateQueue: false)
        case .resumeTransfer:
            flowControl.release()
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
        switch observed.write({ $0.lifecycle.suspend() }) {
        case .pauseTransfer:
            _ = flowControl.hold()
        case .countedSuspension:
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
            observed -> (TransferLifecycle.Action, CurlTransfer?, CurlEngine?) in
            let action = observed.lifecycle.cancel()
            guard action == .stopAndCompleteCancelled else { return (action, nil, nil) }
            observed.error = cancelled
            defer { (observed.transfer, observed.engine) = (nil, nil) }
            return (action, observed.transfer, observed.engine)
        }
        guard action == .stopAndCompleteCancelled else { return }
        if let transfer, let engine { engine.remove(transfer) }
        environment.delegateQueue.async { self.deliverCompletion(cancelled) }
    }

    /// Cancels, handing the download's resume data (or nil) to `handler` once the task has ended.
    func cancel(byProducingResumeData handler: @escaping @Sendable (Data?) -> Void) {
        if let task, !environment.sink.task(task, in: environment.session, producingResumeData: handler) {
            handler(nil)
        }
        cancel()
    }

    private func notify(resumed: Bool) {
        guard let task else { return }
        environment.sink.taskDidChangeSuspension(task, in: environment.session, resumed: resumed)
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
    /// and moves there when the cache must read its `URLCache` (which may read its disk).
    private func start(_ request: URLRequest, onDelegateQueue: Bool) {
        let settings = environment.settings
        if conversation.deadline == nil, settings.resourceTimeout > 0, settings.resourceTimeout.isFinite {
            conversation.deadline = Date().addingTimeInterval(settings.resourceTimeout)
        }
        let remaining = conversation.deadline.map { $0.timeIntervalSinceNow }
        if let remaining, remaining <= 0 {
            return fail(
                Self.error(.timedOut, "The request took longer than the session's resource timeout.", url: request.url))
        }
        var request = request
        let cookieStorage = request.httpShouldHandleCookies ? settings.cookieStorage : nil
        if let cookieStorage, let url = request.url, request.value(forHTTPHeaderField: "Cookie") == nil,
            let cookies = cookieStorage.cookies(for: url), !cookies.isEmpty
        {
            for (field, value) in HTTPCookie.requestHeaderFields(with: cookies) {
                request.setValue(value, forHTTPHeaderField: field)
            }
        }
        var credentials: [CurlTransfer.Credential] = conversation.proxyCredential.map { [$0] } ?? []
        if let server = conversation.serverCredential, server.origin == RedirectState.origin(of: request.url) {
            credentials.append(server.credential)  // never to another origin after a redirect
        }
        // What libcurl will add as `Authorization`, for the cache to judge the request as it goes on the wire.
        // A client certificate is a credential too: what is stored for one identity is served to it alone.
        let credentialParts = [
            credentials.first { !$0.forProxy }.map { "\($0.schemes) \($0.user):\($0.password)" },
            clientIdentity.forConnection().map { "client-certificate \($0.connectionKey)" },
        ].compactMap { $0 }
        let wireCredential = credentialParts.isEmpty ? nil : credentialParts.joined(separator: "\u{0}")
        if let plan = conversation.cache?.start(request, credential: wireCredential, mayReadStore: onDelegateQueue) {
            switch plan {
            case .readStoreFirst:
                let original = request
                return environment.delegateQueue.async { self.start(original, onDelegateQueue: true) }
            case .serve(let entry):
                observed.write { $0.currentRequest = request }
                return serveStored(entry)
            case .serveStaleAndRevalidate(let entry, let background):
                observed.write { $0.currentRequest = request }
                serveStored(entry)
                return revalidateInBackground(
                    entry, with: background, credential: wireCredential, credentials: credentials, remaining: remaining)
            case .unavailable:
                return fail(
                    Self.error(
                        .resourceUnavailable,
                        "Nothing is stored in the cache for this request, and its cache policy forbids the network.",
                        url: request.url))
            case .send(let planned):
                request = planned
            }
        }
        observed.write { $0.currentRequest = request }
        if let pipe = (request.httpBodyStream as? PipeInputStream)?.pipe, pipe.isClaimed {
            // A redirect that keeps the body, or an authentication round: a streamed body is never sent twice.
            let refusal = RequestBodyPipe.notReplayable
            return fail(
                URLError(
                    .requestBodyStreamExhausted,
                    userInfo: [
                        NSLocalizedDescriptionKey: refusal.localizedDescription, NSUnderlyingErrorKey: refusal,
                        NSURLErrorFailingURLErrorKey: request.url as Any,
                    ]))
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
                request, credentials: credentials, remaining: remaining, flowControl: flowControl, events: events),
            attach(transfer)
        else {
            return fail(Self.error(.unknown, "libcurl could not be set up for this request.", url: request.url))
        }
    }

    /// A transfer of `request` with the task's settings.
    private func makeTransfer(
        _ request: URLRequest, credentials: [CurlTransfer.Credential], remaining: TimeInterval?,
        flowControl: FlowControl? = nil, events: CurlTransfer.Events
    ) -> CurlTransfer? {
        CurlTransfer(
            request: request, policy: environment.policy, tlsVersions: environment.tlsVersions,
            idleTimeout: min(request.timeoutInterval, environment.settings.idleTimeout), totalTimeout: remaining,
            proxy: proxy(for: request.url), credentials: credentials, decodingLimits: environment.decodingLimits,
            flowControl: flowControl, identity: clientIdentity.forConnection(), events: events)
    }

    /// Sends `request` in the background to revalidate `entry`, just served stale (`stale-while-revalidate`, RFC
    /// 5861), and stores what the server answers once it has arrived; the task does not wait for it.
    private func revalidateInBackground(
        _ entry: CacheEntry, with request: URLRequest, credential: String?, credentials: [CurlTransfer.Credential],
        remaining: TimeInterval?
    ) {
        guard var exchange = conversation.cache.map({ CacheExchange(cache: $0.cache, policy: environment.policy) })
        else { return }
        exchange.prepareBackgroundRevalidation(of: entry, request: request, credential: credential)
        conversation.backgroundRevalidation = exchange
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
                    conversation.backgroundRevalidation?.endBackgroundRevalidation(
                        response: complete ? head?.makeResponse() : nil, body: body ?? Data())
                    conversation.backgroundRevalidation = nil
                }
            },
            uploadProgress: { _, _ in })
        guard let transfer = makeTransfer(request, credentials: credentials, remaining: remaining, events: events),
            let engine = CurlEngine.engine(
                for: environment.policy, tlsVersions: environment.tlsVersions,
                maximumConnectionsPerHost: environment.settings.maximumConnectionsPerHost,
                identity: clientIdentity.forConnection()),
            engine.add(transfer)
        else {
            conversation.backgroundRevalidation?.endBackgroundRevalidation(response: nil, body: Data())
            conversation.backgroundRevalidation = nil
            return
        }
    }

    /// Starts `transfer` on the engine of the task's policy; an engine that retired meanwhile is replaced.
    private func attach(_ transfer: CurlTransfer) -> Bool {
        for _ in 0..<3 {
            guard
                let engine = CurlEngine.engine(
                    for: environment.policy, tlsVersions: environment.tlsVersions,
                    maximumConnectionsPerHost: environment.settings.maximumConnectionsPerHost,
                    identity: clientIdentity.forConnection())
            else { return false }
            let stillRunning = observed.write { observed -> Bool in
                guard !observed.lifecycle.isTerminal else { return false }
                (observed.transfer, observed.engine) = (transfer, engine)
                return true
            }
            guard stillRunning else { return true }  // cancelled meanwhile: its completion is on its way
            flowControl.resume = { [weak engine, weak transfer] in
                if let engine, let transfer { engine.unpause(transfer) }
            }
            transfer.wakeOnBody { [weak engine, weak transfer] in
                if let engine, let transfer { engine.unpause(transfer) }
            }
            if engine.add(transfer) { return true }
        }
        return false
    }

    /// Ends the task with `error` from outside a transfer (set-up failure, deadline), on the delegate queue.
    private func fail(_ error: URLError) {
        environment.delegateQueue.async { self.finish(error) }
    }

    // MARK: - Events (engine thread, then the delegate queue)

    private func enqueue(_ event: Event) {
        observed.write { $0.events.append(event) }
    }

    /// Called by the engine at the end of a pass: one hop to the delegate queue for all the pass produced.
    private func scheduleDrain() {
        let schedule = observed.write { observed -> Bool in
            guard !observed.drainScheduled, !observed.events.isEmpty else { return false }
            observed.drainScheduled = true
            return true
        }
        if schedule { environment.delegateQueue.async { self.drain() } }
    }

    private func drain() {
        #if DEBUG
            dispatchPrecondition(condition: .onQueue(environment.delegateQueue))
        #endif
        let events = observed.write { observed -> [Event] in
            observed.drainScheduled = false
            defer { observed.events.removeAll(keepingCapacity: true) }
            return observed.events
        }
        for event in events {
            guard let task, !observed.read({ $0.lifecycle.isTerminal }) else {
                if case .data(let data) = event { flowControl.consumed(data.count) }
                continue
            }
            handle(event, of: task)
        }
    }

    private func handle(_ event: Event, of task: URLSessionTask) {
        let sink = environment.sink
        let session = environment.session
        switch event {
        case .response(let head):
            guard let response = head.makeResponse() else {
                return cancel()  // Foundation refused the head: nothing sane can follow
            }
            storeCookies(head.lines, of: response)
            if RedirectState.isRedirect(response.statusCode), response.value(forHTTPHeaderField: "Location") != nil {
                conversation.held = (response, nil, Data())  // decided when the transfer ends; its body is dropped
            } else if let challenge = AuthenticationChallengeHeader(response: response) {
                conversation.held = (response, challenge, Data())  // answered when the transfer ends
            } else {
                let wanted = conversation.cache?.wantsResponse(withFields: head.lines) ?? false
                deliverHead(wanted ? cacheReceived(response, of: task) : response, of: task)
            }
        case .data(let data):
            if conversation.held != nil {
                if conversation.held?.challenge != nil,
                    (conversation.held?.body.count ?? 0) + data.count <= Self.heldBodyLimit
                {
                    conversation.held?.body.append(data)
                }
                flowControl.consumed(data.count)
                return
            }
            if conversation.cache?.confirmed != nil {
                flowControl.consumed(data.count)  // a 304's body: the stored one is delivered instead
                return
            }
            conversation.cache?.receivedBody(data)
            observed.write { $0.bytesReceived += Int64(data.count) }
            sink.task(task, in: session, didReceive: data)
        case .sent(let sent, let expected):
            observed.write { observed in
                observed.bytesSent = sent
                if expected > 0 { observed.bytesExpectedToSend = expected }
                if expected >= 0 && sent >= expected { _ = observed.lifecycle.requestSent() }
            }
            sink.task(task, in: session, didSendBodyData: sent, of: expected)
        case .trailers(let lines):
            // A held (redirect, challenge) or replaced (304, stale) response's trailers are not the task's.
            guard conversation.held == nil, conversation.cache?.confirmed == nil else { return }
            sink.task(task, in: session, didReceiveTrailers: lines)
        case .timings(let timings):
            sink.task(task, in: session, didFinishCollecting: timings)
        case .pinningReport(let report):
            sink.task(task, in: session, didFailPinning: report)
        case .end(let error):
            let held = conversation.held
            conversation.held = nil
            if let error {
                if Self.staleMayAnswer.contains(error.code), observed.read({ $0.response }) == nil,
                    let stale = conversation.cache?.staleAfterError()
                {
                    // stale-if-error: the server could not be reached or answered nothing; the stored one answers (a
                    // TLS or policy failure never does: the caller must learn of it).
                    deliverHead(stale.servedResponse(at: Date()), of: task)
                    deliverStoredBody(stale.data, of: task)
                    return finish(nil)
                }
                _ = conversation.cache?.ended(response: nil, failed: true)
                finish(error)
            } else if let held, let challenge = held.challenge {
                _ = observed.write { $0.lifecycle.heldResponseEnded(challenge: true) }
                answer(challenge, of: held.response, body: held.body, task: task)
            } else if let held {
                _ = observed.write { $0.lifecycle.heldResponseEnded(challenge: false) }
                conversation.cache?.redirected(by: held.response)
                followRedirect(held.response, task: task)
            } else {
                endCachedExchange(of: task)
                finish(nil)
            }
        }
    }

    // MARK: - HTTP cache (delegate queue)

    /// A final response head arrived: what the cache makes of it (a 304 to its revalidation is the stored response).
    private func cacheReceived(_ response: HTTPURLResponse, of task: URLSessionTask) -> HTTPURLResponse {
        let request = observed.read { $0.currentRequest }
        let delivered = conversation.cache?.received(response, for: request) ?? response
        if let proposal = conversation.cache?.takeProposal() { approveAndStore(proposal, of: task) }
        return delivered
    }

    /// Asks the manager (`dataTaskWillCacheResponse`) about `proposal`, and stores what it approves.
    private func approveAndStore(_ proposal: CacheExchange.Proposal, of task: URLSessionTask) {
        if let approved = environment.sink.task(task, in: environment.session, willCache: proposal.response) {
            conversation.cache?.store(approved, for: proposal)
        }
    }

    /// The transfer ended well: the cache stores what it kept; a confirmed stored response gives its body.
    private func endCachedExchange(of task: URLSessionTask) {
        guard conversation.cache?.hasWorkAtEnd == true else { return }
        if let proposal = conversation.cache?.ended(response: observed.read { $0.response }, failed: false) {
            approveAndStore(proposal, of: task)
        }
        if let confirmed = conversation.cache?.confirmed { deliverStoredBody(confirmed.data, of: task) }
    }

    /// Answers the task with a stored response, on the delegate queue, as a transfer would have.
    private func serveStored(_ entry: CacheEntry) {
        environment.delegateQueue.async { [self] in
            guard let task, !observed.read({ $0.lifecycle.isTerminal }) else { return }
            deliverHead(entry.servedResponse(at: Date()), of: task)
            deliverStoredBody(entry.data, of: task)
            finish(nil)
        }
    }

    /// Hands the task a body that did not come from the running transfer (a challenge's, a stored one).
    private func deliverStoredBody(_ body: Data, of task: URLSessionTask) {
        guard !body.isEmpty, !observed.read({ $0.lifecycle.isTerminal }) else { return }
        observed.write { $0.bytesReceived += Int64(body.count) }
        flowControl.produced(body.count)  // the per-task delegate counts it as consumed
        environment.sink.task(task, in: environment.session, didReceive: body)
    }

    /// The final response head: the task's response, then the sink's answer.
    private func deliverHead(_ response: HTTPURLResponse, of task: URLSessionTask) {
        observed.write { observed in
            observed.response = response
            observed.bytesExpectedToReceive = response.expectedContentLength
            _ = observed.lifecycle.headReceived()
        }
        if environment.sink.task(task, in: environment.session, didReceive: response) == .cancel {
            cancel()
        }
    }

    private func storeCookies(_ lines: [(String, String)], of response: HTTPURLResponse) {
        let request = observed.read { $0.currentRequest }
        guard request.httpShouldHandleCookies, let storage = environment.settings.cookieStorage, let url = response.url
        else { return }
        for (name, value) in lines where name.equalsIgnoringASCIICase("Set-Cookie") {
            let cookies = HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": value], for: url)
            storage.setCookies(cookies, for: url, mainDocumentURL: nil)
        }
    }

    /// A 3xx ended: ask the manager, then follow, or deliver the 3xx as the response.
    private func followRedirect(_ response: HTTPURLResponse, task: URLSessionTask) {
        let request = requestWithoutCacheFields()
        switch conversation.redirects.next(after: response, to: request) {
        case .failure(let error):
            finish(error)
        case .success(let proposed):
            if let next = environment.sink.task(
                task, in: environment.session, willPerformHTTPRedirection: response,
                newRequest: proposed)
            {
                startNext(next)
            } else {
                deliverHead(response, of: task)
                finish(nil)
            }
        }
    }

    /// A 401 or 407 ended: ask the manager, then retry with a credential, deliver the response, or cancel.
    private func answer(
        _ header: AuthenticationChallengeHeader, of response: HTTPURLResponse, body: Data,
        task: URLSessionTask
    ) {
        let request = requestWithoutCacheFields()
        let proxyURL = header.isProxy ? proxy(for: request.url).flatMap(URL.init(string:)) : nil
        let space = header.protectionSpace(
            for: request.url ?? response.url ?? URL(fileURLWithPath: "/"), proxyURL: proxyURL)
        let failures = header.isProxy ? conversation.challengeFailures.proxy : conversation.challengeFailures.server
        if header.isProxy {
            conversation.challengeFailures.proxy += 1
        } else {
            conversation.challengeFailures.server += 1
        }
        let challenge = URLAuthenticationChallenge(
            protectionSpace: space, proposedCredential: nil, previousFailureCount: failures,
            failureResponse: response, error: nil, sender: ChallengeSender())
        switch environment.sink.task(task, in: environment.session, didReceive: challenge) {
        case .retry(let credential):
            let answer = CurlTransfer.Credential(credential, scheme: header.scheme, forProxy: header.isProxy)
            if header.isProxy {
                conversation.proxyCredential = answer
            } else {
                conversation.serverCredential = (answer, RedirectState.origin(of: request.url))
            }
            startNext(request)
        case .deliverResponse:
            deliverHead(response, of: task)
            deliverStoredBody(body, of: task)
            finish(nil)
        case .cancel:
            cancel()
        }
    }

    /// Sends `request` as the task's next transfer, unless the task ended meanwhile.
    private func startNext(_ request: URLRequest) {
        guard observed.write({ $0.lifecycle.nextTransfer() }) == .startTransfer else { return }
        start(request, onDelegateQueue: true)
    }

    /// The last transfer ended (or could not start): the task completes, once.
    private func finish(_ error: URLError?) {
        var error = error
        if error == nil, observed.read({ $0.response }) == nil {
            // The invariant every completion keeps, whatever went wrong before: a response or an error.
            error = Self.error(.badServerResponse, "The task ended without a response.", url: originalRequest.url)
        }
        let action = observed.write { observed -> TransferLifecycle.Action in
            let action = observed.lifecycle.ended(failed: error != nil)
            if action == .complete {
                observed.error = error
                (observed.transfer, observed.engine) = (nil, nil)
            }
            return action
        }
        guard action == .complete else { return }
        deliverCompletion(error)
    }

    private func deliverCompletion(_ error: URLError?) {
        observed.write { $0.completionDelivered = true }
        guard let task else { return }
        environment.sink.task(task, in: environment.session, didCompleteWithError: error)
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
        return conversation.cache?.removingOwnFields(from: request) ?? request
    }

    /// The configuration's proxy for `url`'s scheme, as `http://host:port`.
    private func proxy(for url: URL?) -> String? {
        url?.scheme?.lowercased() == "https" ? environment.settings.proxies.https : environment.settings.proxies.http
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
