@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The curl task's request machine, transition by transition, without I/O: the action each event returns in each
/// state, and the events that do not apply (they change nothing and say so), as AsyncHTTPClient tests its machines.
final class RequestMachineTests: XCTestCase {
    private let url = URL(string: "https://example.com/start")!
    private let now = Date(timeIntervalSince1970: 1000)

    private func response(_ status: Int, _ fields: [String: String] = [:], url: URL? = nil) -> HTTPURLResponse {
        HTTPURLResponse(url: url ?? self.url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
    }

    /// A head as the curl transport reads it (its Foundation response not built yet).
    private func received(_ status: Int, _ fields: KeyValuePairs<String, String> = [:]) -> ReceivedResponse {
        ReceivedResponse(
            CurlTransfer.ResponseHead(
                url: url, statusCode: status, httpVersion: "HTTP/1.1", lines: fields.map { ($0.key, $0.value) }))
    }

    private func running() -> RequestMachine {
        var machine = RequestMachine()
        XCTAssertEqual(machine.resume(), .startTransfer)
        return machine
    }

    /// The state's name and what it carries that the tests look at.
    private func describe(_ machine: RequestMachine) -> String {
        switch machine.state {
        case .created(let extra): return "created(\(extra))"
        case .running(let attempt):
            let held = attempt.held.map { " held \($0.response.statusCode)" } ?? ""
            return "running(\(attempt.phase)\(attempt.paused ? " paused" : "")\(held))"
        case .deciding(let held, let paused): return "deciding(\(held.response.statusCode)\(paused ? " paused" : ""))"
        case .finished: return "finished"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        case .adapting(let paused): return "adapting\(paused ? " paused" : "")"
        case .concluding(let paused): return "concluding\(paused ? " paused" : "")"
        case .waitingToRetry(let paused): return "waitingToRetry\(paused ? " paused" : "")"
        }
    }

    func testACreatedRequestStartsOnItsFirstResumeAndCountsSuspensions() {
        var machine = RequestMachine()
        XCTAssertEqual(machine.taskState, .suspended)
        XCTAssertEqual(machine.suspend(), .countedSuspension)
        XCTAssertEqual(machine.suspend(), .countedSuspension)
        XCTAssertEqual(machine.resume(), .countedResume)
        XCTAssertEqual(machine.resume(), .countedResume, "suspended twice: two resumes are owed before it starts")
        XCTAssertEqual(describe(machine), "created(0)")
        XCTAssertEqual(machine.resume(), .startTransfer)
        XCTAssertEqual(describe(machine), "running(connecting)")
        XCTAssertEqual(machine.taskState, .running)
        XCTAssertEqual(machine.resume(), .none, "resuming a running request does nothing")
    }

    func testAHappyTransfer() {
        var machine = running()
        machine.requestSent()
        XCTAssertEqual(describe(machine), "running(sending)")
        XCTAssertEqual(machine.headArrived(received(200)), .deliver)
        XCTAssertEqual(describe(machine), "running(receiving)")
        XCTAssertEqual(machine.bodyArrived(Data("body".utf8)), .deliver)
        XCTAssertTrue(machine.takesTrailers)
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail("a response ends it well") }
        XCTAssertTrue(machine.complete(failed: false))
        XCTAssertEqual(describe(machine), "finished")
        XCTAssertEqual(machine.taskState, .completed)
        XCTAssertTrue(machine.isTerminal)
    }

    func testCompletingTwiceCompletesOnce() {
        var machine = running()
        guard case .fail = machine.transferEnded(failed: true) else { return XCTFail("an error fails it") }
        XCTAssertTrue(machine.complete(failed: true))
        XCTAssertEqual(describe(machine), "failed")
        XCTAssertFalse(machine.complete(failed: false), "a second completion is refused")
        XCTAssertEqual(machine.cancel(), .none, "cancelling an ended request does nothing")
        XCTAssertEqual(describe(machine), "failed")
    }

    func testCancelBeatsALateEndAndLateEvents() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(200)), .deliver)
        XCTAssertEqual(machine.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(machine.taskState, .canceling)
        XCTAssertEqual(machine.bodyArrived(Data("late".utf8)), .drop, "bytes after a cancel are not delivered")
        XCTAssertFalse(machine.takesTrailers)
        guard case .none = machine.transferEnded(failed: false) else { return XCTFail("the late end is ignored") }
        XCTAssertFalse(machine.complete(failed: false))
        XCTAssertEqual(machine.cancel(), .none)
        XCTAssertEqual(describe(machine), "cancelled")
    }

    func testEventsThatDoNotApplyChangeNothing() {
        var machine = RequestMachine()
        machine.requestSent()
        XCTAssertEqual(machine.headArrived(received(200)), .ignore, "no transfer runs")
        XCTAssertEqual(machine.bodyArrived(Data("x".utf8)), .drop)
        guard case .none = machine.transferEnded(failed: false) else { return XCTFail("no transfer ran") }
        XCTAssertFalse(machine.complete(failed: false), "a request that never started cannot complete")
        XCTAssertEqual(machine.nextAttempt(), .none, "no decision pending")
        XCTAssertEqual(describe(machine), "created(0)")
        XCTAssertEqual(machine.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(machine.resume(), .none, "a cancelled request never starts")

        var receiving = running()
        XCTAssertEqual(receiving.headArrived(received(200)), .deliver)
        XCTAssertEqual(receiving.headArrived(received(200)), .ignore, "one final head per transfer")
        XCTAssertEqual(receiving.nextAttempt(), .none, "no decision pending while a transfer runs")
    }

    func testPauseHoldsWhereTheTransferWasAndGoesOnFromThere() {
        var machine = running()
        machine.requestSent()
        XCTAssertEqual(machine.suspend(), .pauseTransfer)
        XCTAssertEqual(describe(machine), "running(sending paused)")
        XCTAssertTrue(machine.isPaused)
        XCTAssertEqual(machine.taskState, .suspended)
        XCTAssertEqual(machine.suspend(), .none, "already paused")
        XCTAssertEqual(machine.headArrived(received(200)), .deliver, "the head may still arrive while paused")
        XCTAssertEqual(describe(machine), "running(receiving paused)")
        XCTAssertEqual(machine.resume(), .resumeTransfer)
        XCTAssertFalse(machine.isPaused)
        XCTAssertEqual(machine.suspend(), .pauseTransfer)
        guard case .fail = machine.transferEnded(failed: true) else { return XCTFail("a paused request still ends") }
        XCTAssertTrue(machine.complete(failed: true))
        XCTAssertEqual(machine.resume(), .none)
        XCTAssertFalse(machine.isPaused, "an ended request holds nothing")
    }

    /// A redirect is held, its body kept for its decision (a refused redirect is the response, with its body), not
    /// delivered.
    func testARedirectIsHeldWithItsBodyKeptForTheDecision() {
        var machine = running()
        let redirect = response(302, ["Location": "/next"])
        XCTAssertEqual(machine.headArrived(received(302, ["Location": "/next"])), .hold)
        XCTAssertEqual(describe(machine), "running(connecting held 302)")
        XCTAssertEqual(machine.bodyArrived(Data("moved".utf8)), .drop)
        XCTAssertFalse(machine.takesTrailers, "a held response's trailers are not the request's")
        guard case .decideRedirect(let held) = machine.transferEnded(failed: false) else {
            return XCTFail("a held redirect is decided when its transfer ended")
        }
        XCTAssertEqual(held.response.statusCode, 302)
        XCTAssertEqual(String(decoding: held.body, as: UTF8.self), "moved")
        XCTAssertEqual(describe(machine), "deciding(302)")
        XCTAssertEqual(machine.taskState, .running)
        let next = machine.redirect(after: redirect, from: URLRequest(url: url))
        XCTAssertEqual(try next.get().url?.absoluteString, "https://example.com/next")
        XCTAssertEqual(machine.nextAttempt(), .startTransfer)
        XCTAssertEqual(describe(machine), "running(connecting)")
        XCTAssertEqual(machine.nextAttempt(), .none, "one attempt per decision")
    }

    func testARedirectWithoutLocationIsTheResponse() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(302)), .deliver)
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail("it is the final response") }
    }

    func testOnlyAHeldHeadBuildsItsFoundationResponse() {
        var machine = running()
        let final = received(200, ["Content-Type": "text/plain", "Content-Length": "5"])
        XCTAssertEqual(machine.headArrived(final), .deliver)
        XCTAssertFalse(final.isBuilt, "a final head is delivered as read: no HTTPURLResponse yet")
        XCTAssertEqual(final.expectedContentLength, 5)
        var redirected = running()
        let redirect = received(303, ["location": "/other"])
        XCTAssertEqual(redirected.headArrived(redirect), .hold, "the field name is matched in any case")
        XCTAssertTrue(redirect.isBuilt, "a held head is handed to the manager's closures as Foundation's response")
        XCTAssertEqual(redirect.httpResponse?.value(forHTTPHeaderField: "Location"), "/other")
    }

    func testAChallengeKeepsItsBodyUpToTheLimit() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(401, ["WWW-Authenticate": "Basic realm=\"api\""])), .hold)
        XCTAssertEqual(machine.bodyArrived(Data("denied".utf8)), .drop, "kept for the decision, not delivered")
        XCTAssertEqual(machine.bodyArrived(Data(count: RequestMachine.heldBodyLimit)), .drop)
        guard case .decideChallenge(let held) = machine.transferEnded(failed: false) else {
            return XCTFail("a held challenge is decided when its transfer ended")
        }
        XCTAssertEqual(held.challenge?.scheme.lowercased(), "basic")
        XCTAssertEqual(String(decoding: held.body, as: UTF8.self), "denied", "what would pass the limit is not kept")
        XCTAssertEqual(machine.challengeRound(proxy: false), 0)
        XCTAssertEqual(machine.challengeRound(proxy: false), 1, "each round counts URLSession's previousFailureCount")
        XCTAssertEqual(machine.challengeRound(proxy: true), 0, "the proxy's rounds are counted apart")
        machine.responseDelivered()
        XCTAssertEqual(describe(machine), "running(receiving)", "the manager gave up: the challenge is the response")
        XCTAssertTrue(machine.complete(failed: false))
    }

    func testACredentialGoesOnlyToItsOriginAndTheProxysOnlyThroughItsProxy() {
        var machine = running()
        let basic = URLCredential(user: "u", password: "p", persistence: .forSession)
        let server = CurlTransfer.Credential(basic, scheme: "Basic", forProxy: false)
        let proxy = CurlTransfer.Credential(basic, scheme: "Basic", forProxy: true)
        machine.answered(with: server, origin: RedirectState.origin(of: url))
        machine.answered(with: proxy, origin: "", proxy: "http://p1:3128")
        let now = Date()
        let viaP1 = { "http://p1:3128" as String? }
        XCTAssertEqual(
            machine.planAttempt(of: url, proxy: viaP1, resourceTimeout: 0, now: now),
            .start(credentials: [proxy, server], remaining: nil))
        let other = URL(string: "https://other.example/next")
        XCTAssertEqual(
            machine.planAttempt(of: other, proxy: viaP1, resourceTimeout: 0, now: now),
            .start(credentials: [proxy], remaining: nil), "never the server's credential to another origin")
        let plain = URL(string: "http://example.com/start")
        XCTAssertEqual(
            machine.planAttempt(of: plain, proxy: viaP1, resourceTimeout: 0, now: now),
            .start(credentials: [proxy], remaining: nil), "another scheme is another origin")
        XCTAssertEqual(
            machine.planAttempt(of: other, proxy: { "http://p2:3128" }, resourceTimeout: 0, now: now),
            .start(credentials: [], remaining: nil), "never the proxy's credential to another proxy")
        XCTAssertEqual(
            machine.planAttempt(of: other, resourceTimeout: 0, now: now),
            .start(credentials: [], remaining: nil), "nor to no proxy")
    }

    /// The request a redirect from `from` with `location` (and `status`) leads to, or its error.
    private func redirect(
        _ request: URLRequest, to location: String, status: Int = 302
    ) throws -> Result<URLRequest, URLError> {
        var machine = running()
        let response = try XCTUnwrap(
            HTTPURLResponse(
                url: try XCTUnwrap(request.url), statusCode: status, httpVersion: nil,
                headerFields: ["Location": location]))
        return machine.redirect(after: response, from: request)
    }

    /// A server on the network cannot steer a request onto a local Unix socket; a socket's own redirects stay on it.
    func testOnlyARequestOnAUnixSocketIsRedirectedToIt() throws {
        let docker = "http+unix://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/create"
        for from in ["http://evil.example/x", "https://evil.example/x", "https+unix://%2Ftmp%2Fa.sock/x"] {
            let request = URLRequest(url: try XCTUnwrap(URL(string: from)))
            for target in [docker, "https+unix://%2Fvar%2Frun%2Fdocker.sock/"] {
                guard case .failure(let error) = try redirect(request, to: target, status: 307) else {
                    return XCTFail("\(from) → \(target) was followed")
                }
                XCTAssertEqual(error.code, .unsupportedURL, "\(from) → \(target)")
            }
        }
        let onSocket = URLRequest(url: try XCTUnwrap(URL(string: "http+unix://%2Ftmp%2Fa.sock/x")))
        XCTAssertNoThrow(try redirect(onSocket, to: "/y").get(), "a relative Location stays on the socket")
        XCTAssertNoThrow(try redirect(onSocket, to: "http+unix://%2Ftmp%2Fa.sock/z").get())
        XCTAssertThrowsError(try redirect(onSocket, to: "http+unix://%2Ftmp%2Fb.sock/z").get(), "another socket")
    }

    /// What only the first origin may get stays there; fields of a dropped body go with it.
    func testARedirectDropsWhatTheNextRequestMustNotCarry() throws {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data("body".utf8)
        let fields = [
            "Authorization": "Basic dTpw", "Cookie": "a=1", "Proxy-Authorization": "Basic cDpw", "Host": "api.internal",
            "Transfer-Encoding": "chunked", "Expect": "100-continue", "X-Kept": "1",
        ]
        for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
        let away = try redirect(request, to: "https://cdn.example/x", status: 303).get()
        XCTAssertEqual(away.allHTTPHeaderFields ?? [:], ["X-Kept": "1"])
        XCTAssertEqual(away.httpMethod, "GET")
        let home = try redirect(request, to: "/x", status: 307).get()
        XCTAssertEqual(home.allHTTPHeaderFields ?? [:], fields, "the same origin keeps them all, and the body")
        XCTAssertEqual(home.httpBody, request.httpBody)
    }

    /// RFC 9110 10.2.2: a Location without a fragment inherits the request's.
    func testARedirectInheritsTheFragment() throws {
        let request = URLRequest(url: try XCTUnwrap(URL(string: "https://example.com/start#part")))
        XCTAssertEqual(try redirect(request, to: "/next").get().url?.absoluteString, "https://example.com/next#part")
        XCTAssertEqual(
            try redirect(request, to: "/next#own").get().url?.absoluteString, "https://example.com/next#own")
    }

    /// URLSession counts a challenge's failures per protection space: after a redirect to another origin, that
    /// origin's first challenge is its first.
    func testARedirectToAnotherOriginCountsItsChallengesAfresh() throws {
        var machine = running()
        XCTAssertEqual(machine.challengeRound(proxy: false), 0)
        XCTAssertEqual(machine.challengeRound(proxy: false), 1)
        let request = URLRequest(url: url)
        let sameOrigin = try XCTUnwrap(
            HTTPURLResponse(url: url, statusCode: 302, httpVersion: nil, headerFields: ["Location": "/elsewhere"]))
        _ = try machine.redirect(after: sameOrigin, from: request).get()
        XCTAssertEqual(machine.challengeRound(proxy: false), 2, "the same origin goes on counting")
        let otherOrigin = try XCTUnwrap(
            HTTPURLResponse(
                url: url, statusCode: 302, httpVersion: nil, headerFields: ["Location": "https://other.example/"]))
        _ = try machine.redirect(after: otherOrigin, from: request).get()
        XCTAssertEqual(machine.challengeRound(proxy: false), 0, "another origin starts at 0")
    }

    func testTheResourceDeadlineStartsWithTheFirstAttemptAndEndsTheLast() {
        var machine = running()
        let start = Date()
        XCTAssertEqual(
            machine.planAttempt(of: url, resourceTimeout: 10, now: start), .start(credentials: [], remaining: 10))
        XCTAssertEqual(
            machine.planAttempt(of: url, resourceTimeout: 10, now: start.addingTimeInterval(4)),
            .start(credentials: [], remaining: 6), "a redirect's attempt has what is left")
        XCTAssertEqual(machine.planAttempt(of: url, resourceTimeout: 10, now: start.addingTimeInterval(10)), .timedOut)
        var unlimited = running()
        XCTAssertEqual(
            unlimited.planAttempt(of: url, resourceTimeout: .infinity, now: start),
            .start(credentials: [], remaining: nil))
    }

    func testSuspendedWhileDecidingTheNextAttemptStartsPausedAndResumes() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(307, ["Location": "/again"])), .hold)
        guard case .decideRedirect = machine.transferEnded(failed: false) else { return XCTFail("a redirect") }
        XCTAssertEqual(machine.suspend(), .pauseTransfer)
        XCTAssertEqual(machine.taskState, .suspended)
        XCTAssertEqual(machine.nextAttempt(), .startTransfer, "a decision is not lost while the task is held")
        XCTAssertEqual(describe(machine), "running(connecting paused)")
        XCTAssertTrue(machine.isPaused, "the new transfer holds at its first body bytes")
        XCTAssertEqual(machine.resume(), .resumeTransfer)
        XCTAssertEqual(machine.headArrived(received(200)), .deliver)
    }

    func testAStoredResponseReplacesTheTransfersBody() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(304)), .deliver)
        machine.storeAnswered()
        XCTAssertEqual(machine.bodyArrived(Data("not the stored body".utf8)), .drop)
        XCTAssertFalse(machine.takesTrailers, "a replaced response's trailers are not the request's")
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail("the stored response") }
    }

    func testAFailedTransferHoldingARedirectFailsTheRequest() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(301, ["Location": "/x"])), .hold)
        guard case .fail = machine.transferEnded(failed: true) else { return XCTFail("the error wins") }
        XCTAssertEqual(machine.nextAttempt(), .none, "nothing is decided after an error")
        XCTAssertTrue(machine.complete(failed: true))
    }

    func testCancelWhileDecidingStartsNothing() {
        var machine = running()
        XCTAssertEqual(machine.headArrived(received(401, ["WWW-Authenticate": "Basic realm=\"x\""])), .hold)
        guard case .decideChallenge = machine.transferEnded(failed: false) else { return XCTFail("a challenge") }
        XCTAssertEqual(machine.cancel(), .stopAndCompleteCancelled, "a challenge answered by cancelling")
        XCTAssertEqual(machine.nextAttempt(), .none, "nothing starts after a cancel")
        XCTAssertEqual(describe(machine), "cancelled")
    }

    // MARK: - Adapters and retriers (an intercepted request)

    func testAnInterceptedRequestIsAdaptedBeforeItsFirstTransfer() {
        var machine = RequestMachine(intercepted: true)
        XCTAssertEqual(machine.suspend(), .countedSuspension)
        XCTAssertEqual(machine.resume(), .countedResume)
        XCTAssertEqual(machine.resume(), .adaptRequest, "the first start asks the adapters, not the engine")
        XCTAssertEqual(describe(machine), "adapting")
        XCTAssertEqual(machine.taskState, .running)
        XCTAssertEqual(machine.headArrived(received(200)), .ignore, "no transfer runs while adapting")
        XCTAssertEqual(machine.bodyArrived(Data("x".utf8)), .drop)
        guard case .none = machine.transferEnded(failed: false) else { return XCTFail("no transfer ran") }
        XCTAssertEqual(machine.adapted(), .startTransfer)
        XCTAssertEqual(describe(machine), "running(connecting)")
        XCTAssertEqual(machine.adapted(), .none, "adapted once per attempt")
    }

    func testARequestWithoutInterceptorNeverAdaptsNorConcludes() {
        var machine = running()
        XCTAssertEqual(machine.adapted(), .none)
        XCTAssertEqual(machine.headArrived(received(503)), .deliver)
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail("a response ends it") }
        XCTAssertFalse(machine.attemptEnded(now: now), "no retriers to ask: it completes at once")
        XCTAssertEqual(describe(machine), "running(receiving)")
        XCTAssertEqual(machine.willRetry(after: 0, now: now), .none)
        XCTAssertTrue(machine.complete(failed: false))
    }

    func testAnEndedAttemptIsConcludedThenRetriedAsANewStart() {
        var machine = RequestMachine(intercepted: true)
        _ = machine.resume()
        _ = machine.adapted()
        let start = Date(timeIntervalSince1970: 1000)
        guard case .start = machine.planAttempt(of: url, resourceTimeout: 60, now: start) else { return XCTFail() }
        XCTAssertEqual(machine.challengeRound(proxy: false), 0)
        XCTAssertEqual(machine.headArrived(received(503)), .deliver)
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail("a response ends it") }
        XCTAssertTrue(machine.attemptEnded(now: now))
        XCTAssertEqual(describe(machine), "concluding")
        XCTAssertEqual(machine.taskState, .running, "the task has not completed while its retriers decide")
        XCTAssertFalse(machine.isTerminal)
        XCTAssertFalse(machine.attemptEnded(now: now), "one conclusion per attempt")
        XCTAssertEqual(machine.headArrived(received(200)), .ignore)
        XCTAssertEqual(machine.willRetry(after: 0, now: now), .wait)
        XCTAssertEqual(describe(machine), "waitingToRetry")
        XCTAssertEqual(machine.willRetry(after: 0, now: now), .none)
        XCTAssertEqual(machine.adapted(), .none, "not adapting while it waits")
        XCTAssertEqual(machine.retryNow(), .adaptRequest)
        XCTAssertEqual(describe(machine), "adapting")
        XCTAssertEqual(machine.retryNow(), .none)
        XCTAssertEqual(machine.adapted(), .startTransfer)
        XCTAssertEqual(machine.challengeRound(proxy: false), 0, "a retry starts the challenge rounds over")
        guard case .start(_, let remaining) = machine.planAttempt(of: url, resourceTimeout: 60, now: start + 20)
        else { return XCTFail() }
        XCTAssertEqual(remaining, 40, "the resource deadline is the task's: a retry does not restart it")
        XCTAssertEqual(machine.headArrived(received(200)), .deliver)
        guard case .finish = machine.transferEnded(failed: false) else { return XCTFail() }
        XCTAssertTrue(machine.attemptEnded(now: now))
        XCTAssertTrue(machine.complete(failed: false))
        XCTAssertEqual(describe(machine), "finished")
        XCTAssertFalse(machine.attemptEnded(now: now), "an ended request has no attempt to conclude")
    }

    func testAFailedAdaptationOrConclusionCompletesTheRequest() {
        var adapting = RequestMachine(intercepted: true)
        _ = adapting.resume()
        XCTAssertTrue(adapting.complete(failed: true), "an adapter's error ends the request")
        XCTAssertEqual(describe(adapting), "failed")
        XCTAssertEqual(adapting.adapted(), .none, "a late adaptation starts nothing")

        var concluding = RequestMachine(intercepted: true)
        _ = concluding.resume()
        _ = concluding.adapted()
        guard case .fail = concluding.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertTrue(concluding.attemptEnded(now: now))
        XCTAssertTrue(concluding.complete(failed: true), "the retriers let the failure stand")
        XCTAssertEqual(describe(concluding), "failed")
        XCTAssertEqual(concluding.willRetry(after: 0, now: now), .none, "a late verdict changes nothing")
    }

    func testCancelWhileAdaptingConcludingOrWaitingStartsNothing() {
        var adapting = RequestMachine(intercepted: true)
        _ = adapting.resume()
        XCTAssertEqual(adapting.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(adapting.adapted(), .none)
        XCTAssertEqual(describe(adapting), "cancelled")

        var concluding = RequestMachine(intercepted: true)
        _ = concluding.resume()
        _ = concluding.adapted()
        guard case .fail = concluding.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertTrue(concluding.attemptEnded(now: now))
        XCTAssertEqual(concluding.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(concluding.willRetry(after: 0, now: now), .none, "the retriers' late verdict is dropped")
        XCTAssertFalse(concluding.complete(failed: true), "the cancellation was the completion")

        var waiting = RequestMachine(intercepted: true)
        _ = waiting.resume()
        _ = waiting.adapted()
        guard case .fail = waiting.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertTrue(waiting.attemptEnded(now: now))
        XCTAssertEqual(waiting.willRetry(after: 0, now: now), .wait)
        XCTAssertEqual(waiting.cancel(), .stopAndCompleteCancelled)
        XCTAssertEqual(waiting.retryNow(), .none, "the delay's end starts nothing")
        XCTAssertEqual(describe(waiting), "cancelled")
    }

    func testSuspendedBetweenAttemptsTheNextOneStartsPaused() {
        var machine = RequestMachine(intercepted: true)
        _ = machine.resume()
        XCTAssertEqual(machine.suspend(), .pauseTransfer)
        XCTAssertEqual(describe(machine), "adapting paused")
        XCTAssertEqual(machine.taskState, .suspended)
        XCTAssertEqual(machine.suspend(), .none, "paused already")
        XCTAssertEqual(machine.adapted(), .startTransfer)
        XCTAssertEqual(describe(machine), "running(connecting paused)", "the caller's pause carries into the transfer")
        guard case .fail = machine.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertTrue(machine.attemptEnded(now: now))
        XCTAssertEqual(describe(machine), "concluding paused")
        XCTAssertEqual(machine.willRetry(after: 0, now: now), .wait)
        XCTAssertEqual(describe(machine), "waitingToRetry paused")
        XCTAssertEqual(machine.resume(), .resumeTransfer)
        XCTAssertEqual(describe(machine), "waitingToRetry")
        XCTAssertEqual(machine.suspend(), .pauseTransfer)
        XCTAssertEqual(machine.retryNow(), .adaptRequest)
        XCTAssertEqual(describe(machine), "adapting paused")
        XCTAssertEqual(machine.resume(), .resumeTransfer)
        XCTAssertEqual(machine.adapted(), .startTransfer)
        XCTAssertEqual(describe(machine), "running(connecting)")
    }

    func testTheResourceDeadlineEndsAnInterceptedRequestInsteadOfAnotherAttempt() {
        var machine = RequestMachine(intercepted: true)
        _ = machine.resume()
        _ = machine.adapted()
        guard case .start = machine.planAttempt(of: url, resourceTimeout: 10, now: now) else { return XCTFail() }
        guard case .fail = machine.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertTrue(machine.attemptEnded(now: now + 1))
        XCTAssertEqual(
            machine.willRetry(after: 9, now: now + 1), .pastDeadline, "the delay would end at the deadline")
        XCTAssertEqual(describe(machine), "concluding", "the driver completes it with a timeout")
        XCTAssertTrue(machine.complete(failed: true))

        var late = RequestMachine(intercepted: true)
        _ = late.resume()
        _ = late.adapted()
        guard case .start = late.planAttempt(of: url, resourceTimeout: 10, now: now) else { return XCTFail() }
        guard case .fail = late.transferEnded(failed: true) else { return XCTFail() }
        XCTAssertFalse(late.attemptEnded(now: now + 10), "past the deadline no retrier is asked: it completes")
        XCTAssertTrue(late.complete(failed: true))
    }
}
