import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One stream task from creation to its one completion: its ``StreamLifecycle`` (in one lock), the completion
/// handlers of its queued reads and writes, its ``CurlStreamConnection`` on a stream ``CurlEngine``, and the events it
/// hands to the manager's ``TaskEventSink``.
///
/// Calls come from any thread; the engine thread does the I/O. Completions go one way, in order, in one hop: every
/// transition appends them to an outbox under the lock, and one drain on the manager's delegate queue runs the
/// handlers and the sink's callbacks. Nothing runs user code on the engine thread or blocks it.
final class CurlStreamDriver: @unchecked Sendable {
    // @unchecked Sendable: `state` is a `Protected` box; the rest is immutable after `init` (`task` is a weak
    // reference set once by the task's initializer).

    /// What a stream task needs from its manager.
    struct Environment: Sendable {
        let policy: SecurityPolicy
        let tlsVersions: TLSVersionRange
        /// How long connecting, and the TLS handshake of an upgrade, may take (the configuration's request timeout).
        let connectTimeout: TimeInterval
        let sink: TaskEventSink
        /// The session the manager's closures receive.
        let session: URLSession
        /// The serial queue under the manager's delegate `OperationQueue`.
        let delegateQueue: DispatchQueue
        /// Set when the manager refused the task (its session was invalidated): `resume()` and every operation fail
        /// with it, and the task completes with it, without connecting.
        var refusal: NSError?
        /// The configuration's proxies for plain and secure streams (`http://…`, `socks5h://…`); nil for libcurl's
        /// choice from the environment.
        var proxies: (http: String?, https: String?) = (nil, nil)
        /// Resolved addresses and local address.
        var connection = ConnectionOptions()
        /// The client certificate the connection presents when the server asks for one (mutual TLS).
        var clientIdentity: ClientIdentity? = nil
    }

    typealias ReadHandler = @Sendable (Data?, Bool, Error?) -> Void
    typealias WriteHandler = @Sendable (Error?) -> Void

    private struct State {
        var lifecycle: StreamLifecycle
        var lastOperation = 0
        var readHandlers: [Int: ReadHandler] = [:]
        var writeHandlers: [Int: WriteHandler] = [:]
        var outbox: [StreamLifecycle.Completion] = []
        var drainScheduled = false
        var completionDelivered = false
        var engine: CurlEngine?
        /// Whether the completion of a refused task (``Environment/refusal``) was scheduled.
        var refusalFinished = false
    }

    /// The task's identifier, unique in its manager.
    let taskIdentifier: Int
    let host: String
    let port: Int
    /// The public task object this driver runs (it owns the driver).
    weak var task: URLSessionStreamTask?

    /// The client identity the connection presents, fixed when it connects.
    let clientIdentity: TaskClientIdentity
    private let environment: Environment
    private let state: Protected<State>

    init(taskIdentifier: Int, host: String, port: Int, environment: Environment) {
        self.taskIdentifier = taskIdentifier
        self.host = host
        self.port = port
        self.environment = environment
        self.clientIdentity = TaskClientIdentity(environment.clientIdentity)
        state = Protected(State(lifecycle: StreamLifecycle(handshakeTimeout: environment.connectTimeout)))
    }

    // MARK: - What the task reports (any thread)

    var taskState: URLSessionTask.State {
        state.read { state in
            if state.completionDelivered { return .completed }
            if case .ended(let error) = state.lifecycle.phase {
                return error?.code == .cancelled ? .canceling : .running
            }
            return state.lifecycle.taskState
        }
    }

    var error: Error? {
        state.read { state -> Error? in state.refusalFinished ? environment.refusal : state.lifecycle.error }
    }
    var countOfBytesReceived: Int64 { state.read { $0.lifecycle.bytesReceived } }
    var countOfBytesSent: Int64 { state.read { $0.lifecycle.bytesSent } }

    // MARK: - Calls of the task (any thread)

    func resume() {
        if refuse(nil) { return }
        var resumed = false
        apply { lifecycle in
            let (step, changed) = lifecycle.resume()
            resumed = changed
            return step
        }
        if resumed, let task { environment.sink.taskDidChangeSuspension(task, in: environment.session, resumed: true) }
    }

    /// Holds the task's I/O; false when it was suspended already or ended.
    @discardableResult
    func suspend() -> Bool {
        guard environment.refusal == nil else { return false }
        guard state.write({ $0.lifecycle.suspend() }) else { return false }
        if let task { environment.sink.taskDidChangeSuspension(task, in: environment.session, resumed: false) }
        return true
    }

    func cancel() {
        if refuse(nil) { return }
        apply { $0.cancel() }
    }

    func read(minimum: Int, maximum: Int, timeout: TimeInterval, handler: @escaping ReadHandler) {
        if refuse({ handler(nil, false, $0) }) { return }
        let deadline = Self.deadline(after: timeout)
        apply(registering: { state in
            state.lastOperation += 1
            state.readHandlers[state.lastOperation] = handler
            return state.lastOperation
        }) { lifecycle, id in
            lifecycle.read(
                .init(id: id, minimum: max(0, minimum), maximum: max(1, maximum, minimum), deadline: deadline))
        }
        scheduleExpiry(at: deadline)
    }

    func write(_ data: Data, timeout: TimeInterval, handler: @escaping WriteHandler) {
        if refuse({ handler($0) }) { return }
        let deadline = Self.deadline(after: timeout)
        apply(registering: { state in
            state.lastOperation += 1
            state.writeHandlers[state.lastOperation] = handler
            return state.lastOperation
        }) { lifecycle, id in
            lifecycle.write(.init(id: id, data: data, deadline: deadline))
        }
        scheduleExpiry(at: deadline)
    }

    func closeRead() {
        if refuse(nil) { return }
        apply { $0.closeRead() }
    }

    func closeWrite() {
        if refuse(nil) { return }
        apply { $0.closeWrite() }
    }

    func startSecureConnection() {
        if refuse(nil) { return }
        let error = URLError(
            .secureConnectionFailed,
            userInfo: [
                NSLocalizedDescriptionKey:
                    "startSecureConnection() came after a direction of the stream was closed: a TLS handshake needs both."
            ])
        apply { $0.startSecureConnection(error: error) }
    }

    /// For a refused task (``Environment/refusal``): fails the operation through `fail` on the delegate queue, and
    /// completes the task with the refusal the first time; false for a task that was not refused.
    private func refuse(_ fail: (@Sendable (NSError) -> Void)?) -> Bool {
        guard let refusal = environment.refusal else { return false }
        let completes = state.write { state -> Bool in
            defer { state.refusalFinished = true }
            return !state.refusalFinished
        }
        let sink = environment.sink
        let session = environment.session
        environment.delegateQueue.async {
            fail?(refusal)
            guard completes else { return }
            self.state.write { $0.completionDelivered = true }
            if let task = self.task { sink.task(task, in: session, didCompleteWithError: refusal) }
        }
        return true
    }

    /// Applies the lifecycle's expiry at `deadline` on the delegate queue, whatever the engine does: the engine's pass
    /// checks deadlines only while the stream is open and resumed, and a task not resumed yet, suspended or still
    /// connecting must time out too.
    private func scheduleExpiry(at deadline: UInt64?) {
        guard let deadline else { return }
        environment.delegateQueue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) { [weak self] in
            self?.apply { $0.expire(now: Self.now()) }
        }
    }

    /// Monotonic nanoseconds now.
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private static func deadline(after timeout: TimeInterval) -> UInt64? {
        guard timeout > 0, timeout.isFinite, timeout < 1e9 else { return nil }
        return now() + UInt64(timeout * 1e9)
    }

    // MARK: - Transitions

    private func apply(_ transition: (inout StreamLifecycle) -> StreamLifecycle.Step) {
        apply(registering: { _ in 0 }) { lifecycle, _ in transition(&lifecycle) }
    }

    /// Runs `transition` under the lock (after `register` stored the operation's handler), then does what it says:
    /// deliver, connect, wake the engine.
    private func apply(
        registering register: (inout State) -> Int,
        _ transition: (inout StreamLifecycle, Int) -> StreamLifecycle.Step
    ) {
        let (step, engine) = state.write { state -> (StreamLifecycle.Step, CurlEngine?) in
            let id = register(&state)
            let step = transition(&state.lifecycle, id)
            state.outbox += step.completions
            return (step, state.engine)
        }
        if !step.completions.isEmpty { flush() }
        if step.connect { connect() }
        if step.wake { engine?.wake() }
    }

    /// Opens the connection on the stream engine of the task's policy.
    private func connect() {
        let secure = state.read { $0.lifecycle.isSecure }
        guard
            let connection = CurlStreamConnection(
                host: host, port: port, secure: secure, policy: environment.policy,
                tlsVersions: environment.tlsVersions, connectTimeout: environment.connectTimeout,
                proxy: secure ? environment.proxies.https : environment.proxies.http,
                connection: environment.connection, identity: clientIdentity.forConnection(), driver: self)
        else {
            return apply {
                $0.connected(
                    StreamLifecycle.error(
                        .badURL,
                        "\(self.host):\(self.port) is not a host name or IP address with a port 1…65535 (or libcurl "
                            + "could not be set up)."))
            }
        }
        let added = CurlEngine.withEngine(
            for: environment.policy, tlsVersions: environment.tlsVersions, streams: true
        ) { engine -> Bool in
            state.write { $0.engine = engine }
            return engine.add(connection)
        }
        if added == true { return }
        connection.released()
        apply { $0.connected(StreamLifecycle.error(.unknown, "libcurl's engine could not be started.")) }
    }

    // MARK: - Engine thread

    /// A transition from the engine thread; its completions wait for ``flush()`` at the end of the pass.
    func engineUpdate(_ transition: (inout StreamLifecycle) -> StreamLifecycle.Step) {
        state.write { state in
            state.outbox += transition(&state.lifecycle).completions
        }
    }

    func engineInspect<Result>(_ body: (StreamLifecycle) -> Result) -> Result {
        state.read { body($0.lifecycle) }
    }

    /// Schedules one drain on the delegate queue for the completions queued so far.
    func flush() {
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
        let completions = state.write { state -> [StreamLifecycle.Completion] in
            state.drainScheduled = false
            defer { state.outbox.removeAll() }
            return state.outbox
        }
        let sink = environment.sink
        let session = environment.session
        for completion in completions {
            switch completion {
            case .read(let id, let data, let atEOF, let error):
                state.write { $0.readHandlers.removeValue(forKey: id) }?(data, atEOF, error)
            case .write(let id, let error):
                state.write { $0.writeHandlers.removeValue(forKey: id) }?(error)
            case .readClosed:
                if let task { sink.streamTaskReadClosed(task, in: session) }
            case .writeClosed:
                if let task { sink.streamTaskWriteClosed(task, in: session) }
            case .finished(let error):
                state.write {
                    $0.completionDelivered = true
                    $0.engine = nil
                }
                if let task { sink.task(task, in: session, didCompleteWithError: error) }
            }
        }
    }
}
