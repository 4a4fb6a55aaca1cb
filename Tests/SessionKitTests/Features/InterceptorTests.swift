import Foundation
import HTTPTypes
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Adapters, retriers, the retry policy and the authentication interceptor, against the loopback server.
final class InterceptorTests: LoopbackTestCase {
    private func flakyPath(failures: Int, query: String = "") -> String {
        "/flaky/\(UUID().uuidString)?failures=\(failures)" + (query.isEmpty ? "" : "&\(query)")
    }

    /// An interceptor whose adapter sets `field` to what `value` makes of its current value.
    private func setting(_ field: String, _ value: @escaping @Sendable (String?) -> String) -> Interceptor {
        Interceptor(adapt: { request, _ in
            var request = request
            request.setValue(value(request.value(forHTTPHeaderField: field)), forHTTPHeaderField: field)
            return request
        })
    }

    func testAdapterAddsATokenToEveryRequest() async throws {
        let manager = makeManager()
        manager.interceptor = setting("Authorization") { _ in "Bearer adapted" }
        let result = try await manager.get("/headers")
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(server.requests.last?.header("Authorization"), "Bearer adapted")
    }

    func testPerCallInterceptorRunsAfterTheManagers() async throws {
        let manager = makeManager()
        manager.interceptor = setting("X-Order") { _ in "manager" }
        let call = setting("X-Order") { ($0 ?? "") + ",call" }
        _ = try await manager.request("GET", "/get", interceptor: call)
        XCTAssertEqual(server.requests.last?.header("X-Order"), "manager,call")
    }

    func testAdapterErrorReachesTheCallerAndNothingIsSent() async throws {
        let manager = makeManager()
        let refusal = NSError(domain: "test.adapter", code: 7, userInfo: [NSLocalizedDescriptionKey: "no token"])
        manager.interceptor = Interceptor(adapt: { _, _ in throw refusal })
        do {
            _ = try await manager.get("/get")
            XCTFail("the adapter refused the request")
        } catch {
            XCTAssertEqual((error as NSError).domain, "test.adapter")
            XCTAssertEqual((error as NSError).code, 7)
        }
        // The closure form of the pipeline gets the same error through its failure path: `perform` throws it.
        do {
            _ = try await manager.perform(URLRequest(url: server.url("/get")))
            XCTFail("the adapter refused the request")
        } catch {
            XCTAssertEqual((error as NSError).code, 7)
        }
        XCTAssertTrue(server.requests.isEmpty, "an adapted-away request sends nothing")
    }

    /// A Swift error of the adapter's own: on Linux one bridged to `NSError` cannot be cast back.
    private struct TokenUnavailable: Error, Equatable {
        let reason: String
    }

    func testAnAdaptersOwnErrorReachesEveryAPIAsThrown() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(adapt: { _, _ in throw TokenUnavailable(reason: "expired") })
        do {
            _ = try await manager.get("/get")
            XCTFail("the adapter refused the request")
        } catch let error as TokenUnavailable {
            XCTAssertEqual(error, TokenUnavailable(reason: "expired"))
        }
        do {
            let core = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/get")
            _ = try await manager.data(for: core)
            XCTFail("the adapter refused the request")
        } catch let error as TokenUnavailable {
            XCTAssertEqual(error.reason, "expired")
        }
        if LoopbackTestCase.testTransport == .curl {
            // The closure verb's task is adapted on the curl transport only (URLSession starts its own tasks).
            let failure: Error? = try await awaitCallback { done in
                manager.get(
                    "/get", parameters: nil, headers: nil, progress: nil, success: { _, _ in done(nil) },
                    failure: { _, error in done(error) })
            }
            XCTAssertEqual(
                failure as? TokenUnavailable, TokenUnavailable(reason: "expired"), "\(String(describing: failure))")
        }
        XCTAssertTrue(server.requests.isEmpty, "an adapted-away request sends nothing")
    }

    func testClosureFormReportsAnAdaptersRefusalToTheFailureClosure() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(adapt: { _, _ in throw URLError(.userAuthenticationRequired) })
        let error: Error? = try await awaitCallback { done in
            manager.request(
                "GET", "/get", success: { _, _ in done(nil) },
                failure: { request, error in
                    XCTAssertNotNil(request)
                    done(error)
                })
        }
        XCTAssertEqual((error as? URLError)?.code, .userAuthenticationRequired)
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01)
        let retried: Int? = try await awaitCallback { done in
            manager.request(
                "GET", flakyPath(failures: 1), success: { request, result in done(result.retryCount) },
                failure: { _, _ in done(nil) })
        }
        XCTAssertEqual(retried, 1)
        XCTAssertEqual(server.requests.count, 2)
    }

    func testRetryPolicyRetriesA503TwiceWithTheDelaysItAskedFor() async throws {
        let manager = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        manager.interceptor = RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.2, jitters: false)
        let result = try await manager.get(flakyPath(failures: 2))
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(result.retryCount, 2)
        XCTAssertEqual((result.object as? [String: Any])?["attempt"] as? Int, 3)
        await recorder.flush()
        XCTAssertEqual(recorder.retryDelays, [0.2, 0.4], "exponential: scale × 2^retry")
        let times = server.requests.map(\.receivedAt)
        XCTAssertEqual(times.count, 3)
        // The server's own clock: each retry came no sooner than the delay asked for.
        XCTAssertGreaterThanOrEqual(times[1].timeIntervalSince(times[0]), 0.2)
        XCTAssertGreaterThanOrEqual(times[2].timeIntervalSince(times[1]), 0.4)
    }

    func testRetryPolicyGivesUpAfterItsLimitWithTheLastError() async throws {
        let manager = makeManager()
        manager.interceptor = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.05)
        do {
            _ = try await manager.get(flakyPath(failures: 5))
            XCTFail("two attempts, both 503")
        } catch {
            let response = (error as NSError).userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse
            XCTAssertEqual(response?.statusCode, 503)
        }
        XCTAssertEqual(server.requests.count, 2)
    }

    func testRetryAfterInSecondsAndAsAnHTTPDate() async throws {
        let manager = makeManager()
        let recorder = RecordingMonitor()
        manager.eventMonitors = [recorder]
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01, jitters: false)
        _ = try await manager.get(flakyPath(failures: 1, query: "retry_after=1"))
        _ = try await manager.get(flakyPath(failures: 1, query: "retry_after=date:2"))
        await recorder.flush()
        XCTAssertEqual(recorder.retryDelays.first, 1, "Retry-After: 1")
        let fromDate = recorder.retryDelays.last ?? 0
        XCTAssertTrue(fromDate > 0 && fromDate <= 2, "an HTTP date two seconds ahead (whole seconds): \(fromDate)")
        let times = server.requests.map(\.receivedAt)
        XCTAssertGreaterThanOrEqual(times[1].timeIntervalSince(times[0]), 1)
    }

    func testARetryAfterLongerThanTheMaximumIsNotWaitedFor() async throws {
        let manager = makeManager()
        manager.interceptor = RetryPolicy(maximumDelay: 5)
        do {
            _ = try await manager.get(flakyPath(failures: 1, query: "retry_after=3600"))
            XCTFail("an hour is not waited for")
        } catch {}
        XCTAssertEqual(server.requests.count, 1)
    }

    func testNonIdempotentPOSTIsNotRetried() async throws {
        let manager = makeManager()
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01)
        do {
            _ = try await manager.post(flakyPath(failures: 1))
            XCTFail("503 without a retry")
        } catch {}
        XCTAssertEqual(server.requests.count, 1)
    }

    /// A streamed request body is read once: its request is not sent again and the retriers are not asked, on either
    /// transport (the pipeline's own retries, on URLSession, sent the spent stream again).
    func testAStreamedRequestBodyIsNotRetried() async throws {
        let manager = makeManager()
        let asked = CallCounter()
        manager.interceptor = Interceptor(retry: { _, _ in
            asked.increment()
            return .retry
        })
        let path = flakyPath(failures: 1)
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "PUT"
        request.httpBodyStream = InputStream(data: Data("streamed once".utf8))
        do {
            _ = try await manager.perform(request)
            XCTFail("a 503, not retried")
        } catch {}
        XCTAssertEqual(asked.count, 0)
        XCTAssertEqual(server.requests.filter { $0.uri == path }.count, 1)
    }

    /// Cancelling a request while it waits to be retried ends it at once, as cancelled, on either transport (the
    /// pipeline's wait, on URLSession, ran to its end: here ten minutes).
    func testCancellingDuringARetryDelayEndsTheRequestAtOnce() async throws {
        let manager = makeManager()
        manager.interceptor = Interceptor(retry: { request, _ in
            Task {
                try? await Task.sleep(nanoseconds: 100_000_000)
                request.cancel()
            }
            return .retryAfter(600)
        })
        let path = flakyPath(failures: 5)
        let error: Error? = try await awaitCallback(timeout: 20) { done in
            Task {
                do {
                    _ = try await manager.get(path)
                    done(nil)
                } catch {
                    done(error)
                }
            }
        }
        XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(String(describing: error))")
        XCTAssertEqual(server.requests.filter { $0.uri == path }.count, 1)
    }

    func testTransportErrorsAreRetriedButRefusalsAreNot() async throws {
        let manager = makeManager(timeout: 5)
        let attempts = CallCounter()
        manager.interceptor = Interceptor(retry: { request, error in
            attempts.increment()
            return request.retryCount < 1 ? .retry : .doNotRetry
        })
        do {
            _ = try await manager.get("/fault/reset")
            XCTFail("the connection is reset every time")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .networkConnectionLost, "\(error)")
        }
        XCTAssertEqual(attempts.count, 2, "asked after each failed attempt")
        XCTAssertEqual(server.requests.count, 2)
        // The policy's own list: a reset is transient.
        let policy = makeManager(timeout: 5)
        policy.interceptor = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01)
        _ = try? await policy.get("/fault/reset")
        XCTAssertEqual(server.requests.count, 4)
    }

    func testFiveConcurrent401sCauseExactlyOneRefresh() async throws {
        let manager = makeManager()
        let authenticator = TokenAuthenticator(freshToken: "fresh")
        let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: Token(value: "stale"))
        manager.interceptor = interceptor
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<5 {
                group.addTask { try await manager.get("/bearer?token=fresh").statusCode }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(results, [200, 200, 200, 200, 200])
        let refreshes = await interceptor.refreshCount
        XCTAssertEqual(refreshes, 1)
        XCTAssertEqual(authenticator.refreshes.count, 1)
        XCTAssertEqual(server.requests.filter { $0.header("Authorization") == "Bearer fresh" }.count, 5)
    }

    func testRefreshingTooOftenFailsInsteadOfLooping() async throws {
        let manager = makeManager()
        let authenticator = TokenAuthenticator(freshToken: "still-wrong")
        manager.interceptor = AuthenticationInterceptor(
            authenticator: authenticator, credential: Token(value: "stale"),
            refreshWindow: .init(interval: 60, maximumAttempts: 2))
        do {
            _ = try await manager.get("/bearer?token=right")
            XCTFail("the server never accepts the token")
        } catch {
            XCTAssertEqual((error as NSError).domain, SessionKitError.sessionDomain)
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.excessiveRefresh.rawValue)
        }
        XCTAssertEqual(authenticator.refreshes.count, 2)
        XCTAssertEqual(server.requests.count, 3)
    }

    func testAFailedRefreshFailsTheRequestWithTheRefreshsError() async throws {
        let manager = makeManager()
        let authenticator = TokenAuthenticator(freshToken: "fresh", refusal: RefreshRefused(reason: "revoked"))
        manager.interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: Token(value: "stale"))
        do {
            _ = try await manager.get("/bearer?token=fresh")
            XCTFail("the refresh failed")
        } catch {
            // As Alamofire: the refresh's own error, not the 401's, and as the value it was thrown as.
            XCTAssertEqual(error as? RefreshRefused, RefreshRefused(reason: "revoked"), "\(error)")
        }
        XCTAssertEqual(authenticator.refreshes, ["stale"])
        XCTAssertEqual(server.requests.count, 1, "not sent again without a credential")
    }

    func testMissingCredentialSendsNothing() async throws {
        let manager = makeManager()
        manager.interceptor = AuthenticationInterceptor<TokenAuthenticator>(
            authenticator: TokenAuthenticator(freshToken: "x"))
        do {
            _ = try await manager.get("/bearer?token=x")
            XCTFail("no credential")
        } catch {
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.missingCredential.rawValue)
        }
        XCTAssertTrue(server.requests.isEmpty)
    }
}

/// A bearer token for the tests.
struct Token: AuthenticationCredential {
    let value: String
    var requiresRefresh: Bool { false }
}

/// What a refresh that the identity server refused throws.
struct RefreshRefused: Error, Equatable {
    let reason: String
}

/// Applies `Authorization: Bearer <token>`; a refresh answers `freshToken` (or throws `refusal`) and is counted.
final class TokenAuthenticator: Authenticator, @unchecked Sendable {
    // @unchecked Sendable: `refreshes` is a `LockedBox`; the rest is immutable.
    let freshToken: String
    let refusal: RefreshRefused?
    let refreshed = LockedBox<[String]>([])
    var refreshes: [String] { refreshed.wrappedValue }

    init(freshToken: String, refusal: RefreshRefused? = nil) {
        self.freshToken = freshToken
        self.refusal = refusal
    }

    func apply(_ credential: Token, to request: inout URLRequest) {
        request.setValue("Bearer \(credential.value)", forHTTPHeaderField: "Authorization")
    }

    func refresh(_ credential: Token) async throws -> Token {
        try await Task.sleep(nanoseconds: 50_000_000)  // the others arrive while this one runs
        refreshed.write { $0.append(credential.value) }
        if let refusal { throw refusal }
        return Token(value: freshToken)
    }

    func didRequest(
        _ request: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: Error
    ) -> Bool {
        response.statusCode == 401
    }

    func isRequest(_ request: URLRequest, authenticatedWith credential: Token) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(credential.value)"
    }
}
