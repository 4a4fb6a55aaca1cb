import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The life of one request on the curl transport, from its task's creation to its one completion, as a value: every
/// event is one `mutating func` that returns what the driver (``CurlTaskDriver``) must do, and the driver only performs
/// those actions. No I/O happens here, so every transition is tested without a server (`RequestMachineTests`).
///
/// The states carry their data: a running attempt knows its phase, whether the caller paused it, the redirect or
/// challenge response it holds back and whether the HTTP cache answered in its place; a decision holds the response
/// the manager decides about. What carries over from one attempt to the next (redirects followed, challenge rounds,
/// credentials and the resource deadline) is ``rounds``.
///
/// ```
/// created ──resume──▶ running(connecting ─sent─▶ sending ─head─▶ receiving) ──end──▶ finished / failed
///    │                   │   ▲   (suspend/resume: paused, in any phase and while deciding)
///    │          held end ▼   │ nextAttempt
///    │                 deciding (a redirect or a challenge)
///    └──────── cancel (any state but the three terminal ones) ──▶ cancelled
/// ```
/// A request of a manager with an interceptor (``intercepted``) has three more states, around its attempts: the
/// adapters prepare each attempt's request, and the retriers decide, once an attempt ended, whether the request ends
/// or is sent again, so that the caller's one task carries every attempt:
/// ```
/// created ─resume─▶ adapting ─adapted─▶ running … ─end─▶ concluding ─complete─▶ finished / failed
///                      ▲                                    │ willRetry
///                      └──────────retryNow───────── waitingToRetry
/// ```
/// An event that does not apply in the current state changes nothing and says so (``ControlAction/none``,
/// ``HeadAction/ignore``, ``BodyAction/drop``, ``EndAction/none``).
struct RequestMachine {
    /// Where the request is.
    enum State {
        /// Created, not started: it starts when `resume()` was called once more than `suspend()` (URLSession's
        /// suspend count, which starts at one).
        case created(extraSuspensions: Int)
        /// A transfer is on the engine.
        case running(Attempt)
        /// A transfer ended with a redirect or a challenge; the manager decides what comes next.
        case deciding(HeldResponse, paused: Bool)
        /// Ended with a response.
        case finished
        /// Ended with an error.
        case failed
        /// Ended by `cancel()`.
        case cancelled
        /// The manager's adapters prepare the next attempt's request (an ``intercepted`` request only).
        case adapting(paused: Bool)
        /// An attempt ended; the manager's retriers decide whether the request ends or is sent again.
        case concluding(paused: Bool)
        /// The retriers chose to send the request again, after a delay.
        case waitingToRetry(paused: Bool)
    }

    /// One transfer of the request.
    struct Attempt {
        /// How far the transfer got.
        enum Phase: Equatable {
            /// DNS, TCP, TLS with the policy's check.
            case connecting
            /// The request head and body are going out.
            case sending
            /// The response head arrived; its body is arriving.
            case receiving
        }

        var phase = Phase.connecting
        /// The caller suspended the task: the transfer holds at its next body bytes.
        var paused = false
        /// A redirect or challenge head of this transfer, held back until the transfer ends.
        var held: HeldResponse?
        /// The transfer confirmed a stored response (a 304 to the cache's revalidation): its body is not the task's.
        var answeredByStore = false
    }

    /// A redirect or challenge response, held for the manager's decision.
    struct HeldResponse {
        let response: HTTPURLResponse
        /// The challenge, when it is a 401 or 407 the manager may answer.
        let challenge: AuthenticationChallengeHeader?
        /// The held response's body, kept (up to ``RequestMachine/heldBodyLimit``) for delivery if the manager gives
        /// up a challenge or refuses a redirect (URLSession then returns the redirect's body).
        var body = Data()
    }

    /// What carries over from one attempt to the next.
    struct Rounds {
        var redirects = RedirectState()
        /// Challenges answered so far (URLSession's `previousFailureCount`), the origin's (counted again from 0 at
        /// each origin a redirect leads to) and the proxy's.
        var challengeFailures = (server: 0, proxy: 0)
        /// The server's credential only goes to the origin that asked for it.
        var serverCredential: (credential: CurlTransfer.Credential, origin: String)?
        /// The proxy's credential only goes to the proxy that asked for it (nil: one of the environment's).
        var proxyCredential: (credential: CurlTransfer.Credential, proxy: String?)?
        /// When the resource timeout ends the request, set when its first attempt starts.
        var deadline: Date?
    }

    /// What the driver does after a control event (`resume()`, `suspend()`, `cancel()`, a decision).
    enum ControlAction: Equatable {
        /// Nothing.
        case none
        /// A request that has not started counted a `suspend()` or a `resume()` and still waits.
        case countedSuspension
        case countedResume
        /// Start a transfer of the current request (paused already if the caller suspended the task meanwhile).
        case startTransfer
        /// Ask the manager's adapters for the next attempt's request (an ``RequestMachine/intercepted`` request).
        case adaptRequest
        /// Hold the running transfer in libcurl.
        case pauseTransfer
        /// Let the held transfer go on.
        case resumeTransfer
        /// Stop the running transfer (if any) and complete with `URLError.cancelled`.
        case stopAndCompleteCancelled
    }

    /// What the driver does with an attempt that is about to start.
    enum AttemptPlan: Equatable {
        /// Start it with these credentials (the proxy's first) and at most this long to run (nil: no limit).
        case start(credentials: [CurlTransfer.Credential], remaining: TimeInterval?)
        /// The resource deadline has passed: the request fails with `URLError.timedOut`.
        case timedOut
    }

    /// What the driver does with a response head.
    enum HeadAction: Equatable {
        /// Hand it to the task (the final response).
        case deliver
        /// Keep it back until the transfer ends (a redirect or a challenge).
        case hold
        /// Not the task's: it ended or this head arrived where none can.
        case ignore
    }

    /// What the driver does with body bytes.
    enum BodyAction: Equatable {
        /// Hand them to the task.
        case deliver
        /// Count them as consumed and drop them (a held response's, a body replaced by a stored one, a late one).
        case drop
    }

    /// What the driver does when the running transfer ended.
    enum EndAction {
        /// Nothing: the request is not running (cancelled meanwhile).
        case none
        /// Complete with the response delivered (and whatever the cache still has to do).
        case finish
        /// Complete with the transfer's error (unless a stored response may answer it).
        case fail
        /// Ask the manager whether to follow this redirect.
        case decideRedirect(HeldResponse)
        /// Ask the manager how to answer this challenge.
        case decideChallenge(HeldResponse)
    }

    /// How much of a challenge's body is kept for delivery (a challenge's page is small).
    static let heldBodyLimit = 1 << 20

    private(set) var state = State.created(extraSuspensions: 0)
    private(set) var rounds = Rounds()
    /// Whether the manager's adapters and retriers take part: each attempt is adapted first, and its end is
    /// concluded (complete, or send again) by the manager.
    let intercepted: Bool

    /// A request that has not started; `intercepted` when its manager has an interceptor.
    init(intercepted: Bool = false) {
        self.intercepted = intercepted
    }

    // MARK: - What the task reports

    /// Whether the request has ended (its completion is or was delivered).
    var isTerminal: Bool {
        switch state {
        case .finished, .failed, .cancelled: return true
        default: return false
        }
    }

    /// Whether the caller holds the request (`suspend()` after it started): its transfer takes no more body bytes.
    var isPaused: Bool {
        switch state {
        case .running(let attempt): return attempt.paused
        case .deciding(_, let paused), .adapting(let paused), .concluding(let paused), .waitingToRetry(let paused):
            return paused
        default: return false
        }
    }

    /// What URLSession calls this state.
    var taskState: URLSessionTask.State {
        switch state {
        case .created: return .suspended
        case .running(let attempt): return attempt.paused ? .suspended : .running
        case .deciding(_, let paused), .adapting(let paused), .concluding(let paused), .waitingToRetry(let paused):
            return paused ? .suspended : .running
        case .cancelled: return .canceling
        case .finished, .failed: return .completed
        }
    }

    // MARK: - Control (the caller, any thread; the manager's decisions)

    /// `resume()`: the first one starts the request; on a paused one, the transfer goes on.
    mutating func resume() -> ControlAction {
        switch state {
        case .created(let extra) where extra > 0:
            state = .created(extraSuspensions: extra - 1)
            return .countedResume
        case .created:
            guard !intercepted else {
                state = .adapting(paused: false)
                return .adaptRequest
            }
            state = .running(Attempt())
            return .startTransfer
        case .running(var attempt) where attempt.paused:
            attempt.paused = false
            state = .running(attempt)
            return .resumeTransfer
        case .deciding(let held, paused: true):
            state = .deciding(held, paused: false)
            return .resumeTransfer
        case .adapting(paused: true), .concluding(paused: true), .waitingToRetry(paused: true):
            state = state.withPaused(false)
            return .resumeTransfer
        default:
            return .none
        }
    }

    /// `suspend()`: a started request holds its transfer; one that never started needs one more `resume()`.
    mutating func suspend() -> ControlAction {
        switch state {
        case .created(let extra):
            state = .created(extraSuspensions: extra + 1)
            return .countedSuspension
        case .running(var attempt) where !attempt.paused:
            attempt.paused = true
            state = .running(attempt)
            return .pauseTransfer
        case .deciding(let held, paused: false):
            state = .deciding(held, paused: true)
            return .pauseTransfer
        case .adapting(paused: false), .concluding(paused: false), .waitingToRetry(paused: false):
            state = state.withPaused(true)
            return .pauseTransfer
        default:
            return .none
        }
    }

    /// `cancel()`: any request that has not ended ends cancelled.
    mutating func cancel() -> ControlAction {
        guard !isTerminal else { return .none }
        state = .cancelled
        return .stopAndCompleteCancelled
    }

    /// The manager decided to send another request (the redirect's, or the same one with a credential): a new
    /// attempt, paused from its start if the caller suspended the request while it was being decided.
    mutating func nextAttempt() -> ControlAction {
        guard case .deciding(_, let paused) = state else { return .none }
        state = .running(Attempt(paused: paused))
        return .startTransfer
    }

    // MARK: - Adapters and retriers (an intercepted request)

    /// The adapters gave the attempt's request: its transfer starts (paused if the caller suspended the request
    /// meanwhile). Nothing when the request is not adapting (cancelled meanwhile).
    mutating func adapted() -> ControlAction {
        guard case .adapting(let paused) = state else { return .none }
        state = .running(Attempt(paused: paused))
        return .startTransfer
    }

    /// The attempt ended (with a response or an error) at `now`: true when the manager must now decide whether the
    /// request ends or is sent again; false when the request is not intercepted, not running (it ended meanwhile), or
    /// past its resource deadline (no attempt could start: it completes as it is).
    mutating func attemptEnded(now: Date) -> Bool {
        guard intercepted, rounds.deadline.map({ now < $0 }) ?? true else { return false }
        switch state {
        case .running(let attempt):
            state = .concluding(paused: attempt.paused)
        case .deciding(_, let paused), .adapting(let paused):
            state = .concluding(paused: paused)
        default:
            return false
        }
        return true
    }

    /// What the driver does when the retriers chose to send the request again.
    enum RetryPlan: Equatable {
        /// Wait for the delay, then ``retryNow()``.
        case wait
        /// The delay would end past the resource deadline: the request completes with `URLError.timedOut`.
        case pastDeadline
        /// Nothing: the request is not concluding (cancelled meanwhile).
        case none
    }

    /// The resource deadline, once the first attempt set it.
    var resourceDeadline: Date? { rounds.deadline }

    /// The retriers chose to send the request again after `delay` seconds, at `now`: it waits, unless that would
    /// take it past its resource deadline.
    mutating func willRetry(after delay: TimeInterval, now: Date) -> RetryPlan {
        guard case .concluding(let paused) = state else { return .none }
        if let deadline = rounds.deadline, now.addingTimeInterval(delay) >= deadline { return .pastDeadline }
        state = .waitingToRetry(paused: paused)
        return .wait
    }

    /// The delay passed: the next attempt is adapted. A retry is a new start for redirects and challenges (their
    /// counts and credentials); the resource deadline, the task's, goes on. Nothing when it no longer waits.
    mutating func retryNow() -> ControlAction {
        guard case .waitingToRetry(let paused) = state else { return .none }
        rounds = Rounds(deadline: rounds.deadline)
        state = .adapting(paused: paused)
        return .adaptRequest
    }

    /// The attempt that is about to start, for `url` at `now`: the credentials it carries and the time it has left.
    /// The first attempt starts the resource deadline (`resourceTimeout`; zero or infinite: none). `proxy` names the
    /// proxy the attempt goes through (asked only when a proxy's credential was answered).
    mutating func planAttempt(
        of url: URL?, proxy: () -> String? = { nil }, resourceTimeout: TimeInterval, now: Date
    ) -> AttemptPlan {
        if rounds.deadline == nil, resourceTimeout > 0, resourceTimeout.isFinite {
            rounds.deadline = now.addingTimeInterval(resourceTimeout)
        }
        let remaining = rounds.deadline.map { $0.timeIntervalSince(now) }
        if let remaining, remaining <= 0 { return .timedOut }
        var credentials: [CurlTransfer.Credential] = []
        if let answered = rounds.proxyCredential, answered.proxy == proxy() {
            credentials.append(answered.credential)  // never to another proxy after a redirect
        }
        if let server = rounds.serverCredential, server.origin == RedirectState.origin(of: url) {
            credentials.append(server.credential)  // never to another origin after a redirect
        }
        return .start(credentials: credentials, remaining: remaining)
    }

    /// The request a redirect leads to from `request`, or why it must not be followed (too many, a loop, a scheme
    /// that may not follow).
    mutating func redirect(after response: HTTPURLResponse, from request: URLRequest) -> Result<URLRequest, URLError> {
        let next = rounds.redirects.next(after: response, to: request)
        // Another origin is another protection space: its first challenge is its first (URLSession counts failures
        // per protection space), and proposes a stored credential as a first one does.
        if case .success(let target) = next, RedirectState.leavesOrigin(target, from: request) {
            rounds.challengeFailures.server = 0
        }
        return next
    }

    /// A challenge of the origin (`proxy == false`) or the proxy is put to the manager: how many of its kind were
    /// answered before this one.
    mutating func challengeRound(proxy: Bool) -> Int {
        defer {
            if proxy {
                rounds.challengeFailures.proxy += 1
            } else {
                rounds.challengeFailures.server += 1
            }
        }
        return proxy ? rounds.challengeFailures.proxy : rounds.challengeFailures.server
    }

    /// The manager answered a challenge with `credential`: the next attempts carry it (a server's, to `origin`
    /// only; a proxy's, through `proxy` only).
    mutating func answered(with credential: CurlTransfer.Credential, origin: String, proxy: String? = nil) {
        if credential.forProxy {
            rounds.proxyCredential = (credential, proxy)
        } else {
            rounds.serverCredential = (credential, origin)
        }
    }

    // MARK: - Transfer events

    /// The request went out (its head, and its body when it has one).
    mutating func requestSent() {
        guard case .running(var attempt) = state, attempt.phase == .connecting else { return }
        attempt.phase = .sending
        state = .running(attempt)
    }

    /// A final response head arrived: a redirect with a `Location` and a challenge are held until the transfer ends;
    /// any other is the request's response.
    mutating func headArrived(_ response: ReceivedResponse) -> HeadAction {
        guard case .running(var attempt) = state, attempt.held == nil, attempt.phase != .receiving else {
            return .ignore
        }
        let status = response.statusCode
        // The Foundation response is built only for a head that is held (the common final head needs none).
        if RedirectState.isRedirect(status), response.hasField("Location"), let http = response.httpResponse {
            attempt.held = HeldResponse(response: http, challenge: nil)
        } else if status == 401 || status == 407, let http = response.httpResponse,
            let challenge = AuthenticationChallengeHeader(response: http)
        {
            attempt.held = HeldResponse(response: http, challenge: challenge)
        } else {
            attempt.phase = .receiving
            state = .running(attempt)
            return .deliver
        }
        state = .running(attempt)
        return .hold
    }

    /// A response that did not come from the running transfer is the request's (a stored one, a held one delivered
    /// as it is).
    mutating func responseDelivered() {
        switch state {
        case .running(var attempt):
            attempt.phase = .receiving
            state = .running(attempt)
        case .deciding(_, let paused):
            state = .running(Attempt(phase: .receiving, paused: paused))
        default:
            break
        }
    }

    /// The running transfer confirmed a stored response (a 304): its own body is dropped, the stored one is delivered.
    mutating func storeAnswered() {
        guard case .running(var attempt) = state else { return }
        attempt.answeredByStore = true
        state = .running(attempt)
    }

    /// Body bytes of the running transfer arrived.
    mutating func bodyArrived(_ data: Data) -> BodyAction {
        guard case .running(var attempt) = state else { return .drop }
        if var held = attempt.held {
            if held.body.count + data.count <= Self.heldBodyLimit {
                held.body.append(data)
                attempt.held = held
                state = .running(attempt)
            }
            return .drop
        }
        return attempt.answeredByStore ? .drop : .deliver
    }

    /// Whether trailers of the running transfer are the request's (a held or replaced response's are not).
    var takesTrailers: Bool {
        guard case .running(let attempt) = state else { return false }
        return attempt.held == nil && !attempt.answeredByStore
    }

    /// The running transfer ended, with an error (`failed`) or not.
    mutating func transferEnded(failed: Bool) -> EndAction {
        guard case .running(let attempt) = state else { return .none }
        if failed { return .fail }
        guard let held = attempt.held else { return .finish }
        state = .deciding(held, paused: attempt.paused)
        if held.challenge != nil { return .decideChallenge(held) }
        return .decideRedirect(held)
    }

    /// The request completes: false when it had ended already (or never started), so that it completes once.
    mutating func complete(failed: Bool) -> Bool {
        switch state {
        case .running, .deciding, .adapting, .concluding, .waitingToRetry:
            state = failed ? .failed : .finished
            return true
        case .created, .finished, .failed, .cancelled:
            return false
        }
    }
}

extension RequestMachine.State {
    /// The same waiting state with the caller's pause set to `paused` (other states are returned as they are).
    fileprivate func withPaused(_ paused: Bool) -> Self {
        switch self {
        case .adapting: return .adapting(paused: paused)
        case .concluding: return .concluding(paused: paused)
        case .waitingToRetry: return .waitingToRetry(paused: paused)
        default: return self
        }
    }
}
