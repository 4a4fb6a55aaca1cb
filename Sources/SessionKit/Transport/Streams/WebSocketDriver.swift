import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One WebSocket task from creation to its one completion: its ``WebSocketLifecycle`` (in one lock), the handlers of
/// its receives, sends and pings, and the ``SessionStreamTask`` it runs on — the connect-only libcurl stream, TLS
/// from the start for `wss` with the manager's ``SecurityPolicy`` deciding in the handshake, so that a refused chain
/// fails the stream's first write: the upgrade request is never sent.
///
/// Calls come from any thread; the stream's completions come on the delegate queue. Every transition returns the
/// lifecycle's actions; I/O actions are performed at once, outside the lock, and completions go to an outbox that one
/// drain on the delegate queue empties in order, so that each handler runs once, on the delegate queue, never on the
/// engine thread.
final class WebSocketDriver: @unchecked Sendable {
    // @unchecked Sendable: `state` is a `Protected` box; the rest is immutable after `init` (`task` is a weak
    // reference set once by the task's initializer).

    /// What a WebSocket task needs from its manager.
    struct Environment: Sendable {
        let sink: TaskEventSink
        /// The session the manager's closures receive.
        let session: URLSession
        /// The serial queue under the manager's delegate `OperationQueue`.
        let delegateQueue: DispatchQueue
        /// Where `Set-Cookie` fields of the server's 101 go; nil when the configuration does not set cookies.
        let cookies: CookieJar?
        /// Set when the manager refused the task (its session was invalidated), or its URL or fields cannot be
        /// sent: `resume()` and every operation fail with it, and the task completes with it, without connecting.
        var refusal: NSError?
        /// Asked when the task is resumed: the manager's request adapters as they are then, as the work that adapts
        /// the upgrade request and returns the handshake to send (or throws to refuse it); nil when the manager has
        /// no interceptor.
        var adaptation: @Sendable () -> (@Sendable () async throws -> WebSocketHandshake)? = { nil }
    }

    typealias ReceiveHandler = @Sendable (Result<SessionWebSocketTask.Message, Error>) -> Void
    typealias ErrorHandler = @Sendable (Error?) -> Void

    private enum Completion {
        case actions([WebSocketLifecycle.Action])
        case refused(NSError, fail: (@Sendable (NSError) -> Void)?, completes: Bool)
    }

    private struct State {
        var lifecycle: WebSocketLifecycle
        var lastOperation = 0
        var receiveHandlers: [Int: ReceiveHandler] = [:]
        var sendHandlers: [Int: ErrorHandler] = [:]
        var pingHandlers: [Int: ErrorHandler] = [:]
        var outbox: [Completion] = []
        var drainScheduled = false
        /// I/O actions the transitions made, in their order, waiting to be performed (see ``performIO()``).
        var io: [WebSocketLifecycle.Action] = []
        /// Whether a thread is performing ``io``.
        var performingIO = false
        var completionDelivered = false
        var refusalFinished = false
        /// Suspended by the caller after the connection started (before, the lifecycle is idle).
        var suspended = false
        /// The error an adapter refused the upgrade request with: the task's error, as thrown.
        var adaptationError: Error?
        /// The adapters' work, from the resume to the `.adapt` action that runs it.
        var adapt: (@Sendable () async throws -> WebSocketHandshake)?
        /// The adaptation's Swift task while it runs, cancelled with the WebSocket task.
        var adaptation: Task<Void, Never>?
    }

    let request: URLRequest
    /// The stream the connection runs on (not resumed until the task is).
    let stream: SessionStreamTask
    private let secure: Bool
    private let environment: Environment
    private let state: Protected<State>
    weak var task: SessionWebSocketTask?

    init(
        request: URLRequest, handshake: WebSocketHandshake, secure: Bool, stream: SessionStreamTask,
        timeout: TimeInterval, environment: Environment
    ) {
        self.request = request
        self.stream = stream
        self.secure = secure
        self.environment = environment
        let handshakeTimeout = timeout > 0 && timeout.isFinite ? timeout : 300
        state = Protected(
            State(
                lifecycle: WebSocketLifecycle(
                    handshake: handshake, handshakeTimeout: handshakeTimeout,
                    closeTimeout: min(handshakeTimeout, 10))))
    }

    // MARK: - What the task reports (any thread)

    var taskState: URLSessionTask.State {
        state.read { state in
            if state.completionDelivered { return .completed }
            switch state.lifecycle.phase {
            case .idle: return .suspended
            case .closed: return state.lifecycle.error?.code == .cancelled ? .canceling : .running
            default: return state.suspended ? .suspended : .running
            }
        }
    }

    var error: Error? {
        state.read { state -> Error? in
            state.refusalFinished ? environment.refusal : state.adaptationError ?? state.lifecycle.error
        }
    }
    var response: HTTPURLResponse? {
        state.read { $0.lifecycle.accepted?.response ?? $0.lifecycle.refusedResponse }
    }
    var negotiatedProtocol: String? { state.read { $0.lifecycle.accepted?.negotiatedProtocol } }
    var closeCode: URLSessionWebSocketTask.CloseCode {
        state.read { state in
            state.lifecycle.closeCode.flatMap { URLSessionWebSocketTask.CloseCode(rawValue: Int($0)) } ?? .invalid
        }
    }
    var closeReason: Data? { state.read { $0.lifecycle.closeReason } }
    var rawCloseCode: Int? { state.read { $0.lifecycle.closeCode.map(Int.init) } }
    var maximumMessageSize: Int {
        get { state.read { $0.lifecycle.maximumMessageSize } }
        set { state.write { $0.lifecycle.maximumMessageSize = max(0, newValue) } }
    }
    var offersCompression: Bool {
        get { state.read { $0.lifecycle.offersCompression } }
        set { state.write { $0.lifecycle.offersCompression = newValue } }
    }
    var isCompressed: Bool { state.read { $0.lifecycle.accepted?.deflate != nil } }
    var countOfBytesReceived: Int64 { stream.countOfBytesReceived }
    var countOfBytesSent: Int64 { stream.countOfBytesSent }

    // MARK: - Calls of the task (any thread)

    func resume() {
        if refuse(nil) { return }
        let adapt = environment.adaptation()
        let actions = apply(registering: { state in
            if state.lifecycle.phase == .idle { state.adapt = adapt }
            return 0
        }) { lifecycle, _ in lifecycle.resume(adapts: adapt != nil) }
        var resumed = !actions.isEmpty
        if !resumed {
            // Started already: only a suspended task has something to resume (its stream's I/O).
            resumed = state.write { state -> Bool in
                defer { state.suspended = false }
                return state.suspended
            }
            if resumed { stream.resume() }
        }
        if resumed, let task { environment.sink.taskDidChangeSuspension(task, in: environment.session, resumed: true) }
    }

    /// Holds the connection's I/O once it started; queued operations wait. False when it was not running.
    @discardableResult
    func suspend() -> Bool {
        guard environment.refusal == nil else { return false }
        let suspended = state.write { state -> Bool in
            // While the request is adapted nothing is connected to hold: the task runs on.
            guard !state.suspended, state.lifecycle.phase != .idle, state.lifecycle.phase != .adapting,
                state.lifecycle.phase != .closed
            else {
                return false
            }
            state.suspended = true
            return true
        }
        guard suspended else { return false }
        stream.suspend()
        if let task { environment.sink.taskDidChangeSuspension(task, in: environment.session, resumed: false) }
        return true
    }

    func cancel() {
        if refuse(nil) { return }
        apply { $0.cancel() }
        cancelEndedAdaptation()
    }

    /// Cancels the adapters' Swift task once the WebSocket task ended (cancelled or closed while adapting).
    private func cancelEndedAdaptation() {
        state.write { state -> Task<Void, Never>? in
            guard state.lifecycle.phase == .closed else { return nil }
            defer { state.adaptation = nil }
            return state.adaptation
        }?.cancel()
    }

    func close(code: Int, reason: Data?) {
        if refuse(nil) { return }
        // `.invalid` and the codes reserved for reporting (1005, 1006, 1015) must not be sent (RFC 6455 7.4.1).
        let raw = UInt16(clamping: max(0, code))
        let sendable = WebSocketMessageReader.isSendable(raw) ? raw : 1000
        apply { $0.close(code: sendable, reason: reason) }
        cancelEndedAdaptation()
    }

    func send(_ message: SessionWebSocketTask.Message, handler: @escaping ErrorHandler) {
        if refuse({ handler($0) }) { return }
        apply(registering: { state in
            state.lastOperation += 1
            state.sendHandlers[state.lastOperation] = handler
            return state.lastOperation
        }) { $0.send(message, id: $1) }
    }

    func receive(handler: @escaping ReceiveHandler) {
        if refuse({ handler(.failure($0)) }) { return }
        apply(registering: { state in
            state.lastOperation += 1
            state.receiveHandlers[state.lastOperation] = handler
            return state.lastOperation
        }) { $0.receive(id: $1) }
    }

    func sendPing(handler: @escaping ErrorHandler) {
        if refuse({ handler($0) }) { return }
        apply(registering: { state in
            state.lastOperation += 1
            state.pingHandlers[state.lastOperation] = handler
            return state.lastOperation
        }) { $0.sendPing(id: $1) }
    }

    /// For a refused task: fails the operation through `fail` on the delegate queue, and completes the task with the
    /// refusal the first time; false for a task that was not refused.
    private func refuse(_ fail: (@Sendable (NSError) -> Void)?) -> Bool {
        guard let refusal = environment.refusal else { return false }
        state.write { state in
            state.outbox.append(.refused(refusal, fail: fail, completes: !state.refusalFinished))
            state.refusalFinished = true
        }
        flush()
        return true
    }

    // MARK: - Transitions

    @discardableResult
    private func apply(
        _ transition: (inout WebSocketLifecycle) -> [WebSocketLifecycle.Action]
    ) -> [WebSocketLifecycle.Action] {
        apply(registering: { _ in 0 }) { lifecycle, _ in transition(&lifecycle) }
    }

    /// Runs `transition` under the lock (after `register` stored the operation's handler), then performs its I/O
    /// actions in order and schedules its completions.
    @discardableResult
    private func apply(
        registering register: (inout State) -> Int,
        _ transition: (inout WebSocketLifecycle, Int) -> [WebSocketLifecycle.Action]
    ) -> [WebSocketLifecycle.Action] {
        let actions = state.write { state -> [WebSocketLifecycle.Action] in
            let id = register(&state)
            let actions = transition(&state.lifecycle, id)
            if actions.contains(where: Self.isCompletion) { state.outbox.append(.actions(actions)) }
            state.io.append(contentsOf: actions)
            return actions
        }
        performIO()
        if actions.contains(where: Self.isCompletion) { flush() }
        return actions
    }

    /// Performs the queued I/O actions in the order the transitions made them, one thread at a time. The order is the
    /// lock's: a data frame is compressed under it (permessage-deflate's context carries from one message to the
    /// next), so two threads sending at once must hand their frames to the stream in that order too, or the peer
    /// inflates a message against the wrong history. A thread that finds another one performing leaves its actions
    /// to it.
    private func performIO() {
        var batch = state.write { state -> [WebSocketLifecycle.Action] in
            guard !state.performingIO, !state.io.isEmpty else { return [] }
            state.performingIO = true
            defer { state.io = [] }
            return state.io
        }
        while !batch.isEmpty {
            for action in batch { perform(action) }
            batch = state.write { state -> [WebSocketLifecycle.Action] in
                guard !state.io.isEmpty else {
                    state.performingIO = false
                    return []
                }
                defer { state.io = [] }
                return state.io
            }
        }
    }

    private static func isCompletion(_ action: WebSocketLifecycle.Action) -> Bool {
        switch action {
        case .opened, .deliver, .completeSend, .completePing, .closed, .finish: return true
        default: return false
        }
    }

    /// Performs an I/O action; completions wait for the drain.
    private func perform(_ action: WebSocketLifecycle.Action) {
        switch action {
        case .adapt:
            let adapt = state.write { state -> (@Sendable () async throws -> WebSocketHandshake)? in
                defer { state.adapt = nil }
                return state.adapt
            }
            guard let adapt else { return }
            let adaptation = Task { [self] in
                defer { state.write { $0.adaptation = nil } }
                do {
                    let handshake = try await adapt()
                    apply { $0.adapted(handshake) }
                } catch {
                    // Operations made meanwhile fail with a URLError saying why; the task with the adapter's own.
                    let failure =
                        error as? URLError
                        ?? URLError(
                            .unknown,
                            userInfo: [
                                NSLocalizedDescriptionKey: "A request adapter refused the WebSocket upgrade: \(error)",
                                NSUnderlyingErrorKey: error,
                            ])
                    // Under the lock of the transition: a cancel before it keeps its own error.
                    apply(registering: { state in
                        if state.lifecycle.phase == .adapting { state.adaptationError = error }
                        return 0
                    }) { lifecycle, _ in lifecycle.adaptationFailed(failure) }
                }
            }
            let ended = state.write { state -> Bool in
                guard state.lifecycle.phase == .adapting else { return true }
                state.adaptation = adaptation
                return false
            }
            // Cancelled or closed before the task could be kept: nobody else will cancel it.
            if ended { adaptation.cancel() }
        case .connect(let request):
            if secure { stream.startSecureConnection() }
            stream.resume()
            write(request, tag: .handshake)
        case .read(let timeout):
            stream.readData(ofMinLength: 1, maxLength: 64 * 1024, timeout: timeout) { [self] data, atEOF, error in
                apply { $0.received(data, atEOF: atEOF, error: Self.urlError(error)) }
            }
        case .write(let frame, let tag):
            var generator = SystemRandomNumberGenerator()
            write(frame.encoded(maskKey: UInt32.random(in: 0...UInt32.max, using: &generator)), tag: tag)
        case .scheduleCloseTimeout(let seconds):
            environment.delegateQueue.asyncAfter(deadline: .now() + seconds) { [weak self] in
                self?.apply { $0.closeTimedOut() }
            }
        case .shutdown:
            // RFC 6455 7.1.1: the server should close the TCP connection first, so that it, not the client, holds
            // TIME_WAIT. After the close frame (the stream's writes keep their order) the stream is read to its end,
            // whatever comes dropped, and closed then; a peer that holds the connection open is cut off after 10 s.
            Self.readToEnd(stream)
            let stream = stream
            environment.delegateQueue.asyncAfter(deadline: .now() + 10) { stream.cancel() }
        case .abort:
            stream.cancel()
        case .opened, .deliver, .completeSend, .completePing, .closed, .finish:
            break
        }
    }

    /// Reads `stream` until the peer closed it (or it failed, or was cancelled), dropping what it reads, then closes it.
    private static func readToEnd(_ stream: SessionStreamTask) {
        stream.readData(ofMinLength: 1, maxLength: 64 * 1024, timeout: 0) { _, atEOF, error in
            if atEOF || error != nil {
                stream.cancel()
            } else {
                readToEnd(stream)
            }
        }
    }

    private func write(_ data: Data, tag: WebSocketLifecycle.WriteTag) {
        stream.write(data, timeout: 0) { [self] error in
            apply { $0.written(tag, error: Self.urlError(error)) }
        }
    }

    private static func urlError(_ error: Error?) -> URLError? {
        guard let error else { return nil }
        if let error = error as? URLError { return error }
        let nsError = error as NSError
        return URLError(.networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: nsError.localizedDescription])
    }

    /// Schedules one drain on the delegate queue for the completions queued so far.
    private func flush() {
        let schedule = state.write { state -> Bool in
            guard !state.drainScheduled, !state.outbox.isEmpty else { return false }
            state.drainScheduled = true
            return true
        }
        if schedule { environment.delegateQueue.async { self.drain() } }
    }

    // MARK: - Delegate queue

    private func drain() {
        // Checked in release builds too: the events' confinement is what every decision below relies on, and the
        // check is one read of the current queue.
        dispatchPrecondition(condition: .onQueue(environment.delegateQueue))
        let completions = state.write { state -> [Completion] in
            state.drainScheduled = false
            defer { state.outbox.removeAll() }
            return state.outbox
        }
        for completion in completions {
            switch completion {
            case .refused(let refusal, let fail, let completes):
                fail?(refusal)
                if completes { finish(refusal) }
            case .actions(let actions):
                for action in actions { deliver(action) }
            }
        }
    }

    private func deliver(_ action: WebSocketLifecycle.Action) {
        switch action {
        case .opened(let accepted):
            storeCookies(of: accepted)
            if let task {
                environment.sink.webSocketTask(
                    task, in: environment.session, didOpenWithProtocol: accepted.negotiatedProtocol)
            }
        case .closed(let code, let reason):
            if let task {
                environment.sink.webSocketTask(
                    task, in: environment.session,
                    didCloseWith: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .invalid, reason: reason)
            }
        case .deliver(let id, let result):
            state.write { $0.receiveHandlers.removeValue(forKey: id) }?(result.mapError { $0 })
        case .completeSend(let id, let error):
            state.write { $0.sendHandlers.removeValue(forKey: id) }?(error)
        case .completePing(let id, let error):
            state.write { $0.pingHandlers.removeValue(forKey: id) }?(error)
        case .finish(let error):
            finish(state.read { $0.adaptationError } ?? error)
        default:
            break
        }
    }

    private func finish(_ error: Error?) {
        let first = state.write { state -> Bool in
            defer { state.completionDelivered = true }
            return !state.completionDelivered
        }
        guard first, let task else { return }
        environment.sink.task(task, in: environment.session, didCompleteWithError: error)
    }

    private func storeCookies(of accepted: WebSocketHandshake.Accepted) {
        guard request.httpShouldHandleCookies, let jar = environment.cookies,
            let url = WebSocketDriver.httpURL(for: request.url)
        else { return }
        jar.store(
            accepted.setCookies, from: url,
            mainDocumentURL: request.mainDocumentURL)
    }

    /// The `http`/`https` URL of a `ws`/`wss` one: where its cookies live.
    static func httpURL(for url: URL?) -> URL? {
        guard let url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        switch components.scheme?.lowercased() {
        case "ws": components.scheme = "http"
        case "wss": components.scheme = "https"
        default: break
        }
        return components.url
    }
}

/// The sink of the stream under a WebSocket task: the WebSocket task reports to the manager itself, and its stream
/// is no task of the manager's, so its events go nowhere.
final class WebSocketStreamSink: TaskEventSink {
    func taskDidChangeSuspension(_ task: any TaskReference, in session: URLSession, resumed: Bool) {}
    func task(
        _ task: any TaskReference, in session: URLSession, didReceive response: ReceivedResponse
    ) -> URLSession.ResponseDisposition { .allow }
    func task(_ task: any TaskReference, in session: URLSession, didReceive data: Data) {}
    func task(
        _ task: any TaskReference, in session: URLSession, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {}
    func task(
        _ task: any TaskReference, in session: URLSession, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) -> URLRequest? { nil }
    func task(
        _ task: any TaskReference, in session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) -> ChallengeAction { .cancel }
    func task(
        _ task: any TaskReference, in session: URLSession, willCache proposed: CachedURLResponse
    ) -> CachedURLResponse? { nil }
    func task(_ task: any TaskReference, in session: URLSession, didReceiveTrailers trailers: [(String, String)]) {}
    func task(_ task: any TaskReference, in session: URLSession, didFinishCollecting timings: TransferTimings) {}
    func task(
        _ task: any TaskReference, in session: URLSession,
        producingResumeData handler: @escaping @Sendable (Data?) -> Void
    ) -> Bool { false }
    func streamTaskReadClosed(_ task: URLSessionStreamTask, in session: URLSession) {}
    func streamTaskWriteClosed(_ task: URLSessionStreamTask, in session: URLSession) {}
    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didOpenWithProtocol negotiatedProtocol: String?
    ) {}
    func webSocketTask(
        _ task: SessionWebSocketTask, in session: URLSession, didCloseWith code: URLSessionWebSocketTask.CloseCode,
        reason: Data?
    ) {}
    func task(_ task: any TaskReference, in session: URLSession, didCompleteWithError error: Error?) {}
    // URLSession's own events: a stream of SessionKit's never has them.
    func sessionDidBecomeInvalid(_ session: URLSession, error: Error?) {}
    func session(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?) { (.cancelAuthenticationChallenge, nil) }
    func taskNeedsNewBodyStream(_ task: URLSessionTask, in session: URLSession) -> InputStream? { nil }
    func task(_ dataTask: URLSessionDataTask, in session: URLSession, didBecome downloadTask: URLSessionDownloadTask) {}
    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {}
    func task(
        _ task: URLSessionDownloadTask, in session: URLSession, didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64
    ) {}
    func task(_ task: URLSessionDownloadTask, in session: URLSession, didFinishDownloadingTo location: URL) {}
}
