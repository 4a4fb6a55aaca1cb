import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HTTP authentication challenges on both transports: a 401 (or 407) that names a scheme reaches the manager's
/// challenge closures, every disposition ends the task, and nothing is retried without end.
final class AuthenticationChallengeTests: LoopbackTestCase {
    /// The outcome of one data task.
    private struct Outcome {
        let response: HTTPURLResponse?
        let object: Any?
        let error: Error?
    }

    private func run(_ manager: URLSessionManager, _ path: String, timeout: TimeInterval = 20) async throws -> Outcome {
        let request = URLRequest(url: server.url(path))
        return try await run(manager, request, timeout: timeout)
    }

    private func run(
        _ manager: URLSessionManager, _ request: URLRequest, timeout: TimeInterval = 20
    ) async throws -> Outcome {
        let completions = CallCounter()
        let outcome: Outcome = try await awaitCallback(timeout: timeout) { done in
            manager.dataTask(
                with: request,
                completionHandler: { response, object, error in
                    completions.increment()
                    done(Outcome(response: response as? HTTPURLResponse, object: object, error: error))
                }
            ).resume()
        }
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(completions.count, 1, "exactly one completion")
        return outcome
    }

    /// Asserts that `outcome` is the 401 (or `status`) delivered as the result: -1011 with the response.
    private func assertDeliveredChallenge(
        _ outcome: Outcome, status: Int = 401, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertEqual(outcome.response?.statusCode, status, file: file, line: line)
        let error = outcome.error as NSError?
        XCTAssertEqual(
            error?.domain, SessionKitError.responseSerializationDomain, "\(String(describing: error))",
            file: file, line: line)
        XCTAssertEqual(error?.code, URLError.badServerResponse.rawValue, file: file, line: line)
        let failing = error?.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse
        XCTAssertEqual(failing?.statusCode, status, "the error carries the response", file: file, line: line)
        XCTAssertNotNil(
            error?.userInfo[SessionKitError.failingURLResponseDataKey], "and its body", file: file, line: line)
    }

    // MARK: - The hang, and the default handling

    func testStatus401WithAChallengeEndsWithTheValidationError() async throws {
        // httpbin's /status/401: `WWW-Authenticate: Basic realm="Fake Realm"` and no body. It used to never end.
        let manager = makeManager(timeout: 5)
        let outcome = try await run(manager, "/status/401")
        assertDeliveredChallenge(outcome)
        XCTAssertEqual(outcome.response?.value(forHTTPHeaderField: "WWW-Authenticate"), "Basic realm=\"Fake Realm\"")
        XCTAssertEqual(server.requests.count, 1)
    }

    func testDefaultHandlingWithoutACredentialDeliversThe401AndItsBody() async throws {
        let manager = makeManager(timeout: 5)
        let challenges = CallCounter()
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            challenges.increment()
            return (.performDefaultHandling, nil)
        }
        let outcome = try await run(manager, "/auth-redirect-to/user/pass")
        assertDeliveredChallenge(outcome)
        let body = (outcome.error as NSError?)?.userInfo[SessionKitError.failingURLResponseDataKey] as? Data
        XCTAssertEqual(
            try JSONSerialization.jsonObject(with: body ?? Data()) as? [String: Bool], ["authenticated": false])
        XCTAssertEqual(challenges.count, 1)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testAsyncFormEndsOnA401() async throws {
        let manager = makeManager(timeout: 5)
        do {
            _ = try await manager.get("/basic-auth/user/pass")
            XCTFail("a 401 is a failure")
        } catch {
            XCTAssertEqual((error as NSError).code, URLError.badServerResponse.rawValue, "\(error)")
        }
    }

    func testChallengeCarriesProtectionSpaceFailureCountAndResponse() async throws {
        let manager = makeManager(timeout: 5)
        let seen = LockedBox<[URLAuthenticationChallenge]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            seen.write { $0.append(challenge) }
            return (.performDefaultHandling, nil)
        }
        _ = try await run(manager, "/basic-auth/user/pass")
        let challenge = try XCTUnwrap(seen.wrappedValue.first)
        XCTAssertEqual(seen.wrappedValue.count, 1)
        XCTAssertEqual(challenge.protectionSpace.realm, "Fake Realm")
        XCTAssertEqual(challenge.protectionSpace.authenticationMethod, NSURLAuthenticationMethodHTTPBasic)
        XCTAssertEqual(challenge.protectionSpace.host, "127.0.0.1")
        XCTAssertEqual(challenge.protectionSpace.port, server.port)
        XCTAssertFalse(challenge.protectionSpace.isProxy())
        XCTAssertEqual(challenge.previousFailureCount, 0)
        XCTAssertEqual((challenge.failureResponse as? HTTPURLResponse)?.statusCode, 401)
        XCTAssertNil(challenge.proposedCredential)
    }

    // MARK: - Every disposition

    func testUseCredentialRetriesWithBasic() async throws {
        let manager = makeManager(timeout: 5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in
            (.useCredential, URLCredential(user: "user", password: "pass", persistence: .forSession))
        }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        XCTAssertNil(outcome.error)
        XCTAssertEqual(outcome.response?.statusCode, 200)
        XCTAssertEqual((outcome.object as? [String: Any])?["authenticated"] as? Bool, true)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertNil(server.requests.first?.header("Authorization"))
        XCTAssertEqual(
            server.requests.last?.header("Authorization"), "Basic " + Data("user:pass".utf8).base64EncodedString())
    }

    func testUseCredentialAnswersDigest() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport == .foundation,
            "URLSession on Linux raises no challenge for a Digest field with qop, nonce and opaque")
        let manager = makeManager(timeout: 5)
        let challenges = LockedBox<[String]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            challenges.write { $0.append(challenge.protectionSpace.authenticationMethod) }
            return (.useCredential, URLCredential(user: "user", password: "pass", persistence: .forSession))
        }
        let outcome = try await run(manager, "/digest-auth/auth/user/pass")
        XCTAssertNil(outcome.error, "\(String(describing: outcome.error))")
        XCTAssertEqual(outcome.response?.statusCode, 200)
        XCTAssertEqual(challenges.wrappedValue, [NSURLAuthenticationMethodHTTPDigest])
        XCTAssertTrue(server.requests.last?.header("Authorization")?.hasPrefix("Digest ") == true)
    }

    func testCancelAuthenticationChallengeCancelsTheTask() async throws {
        let manager = makeManager(timeout: 5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in (.cancelAuthenticationChallenge, nil) }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        XCTAssertEqual((outcome.error as NSError?)?.domain, NSURLErrorDomain, "\(String(describing: outcome.error))")
        XCTAssertEqual((outcome.error as NSError?)?.code, NSURLErrorCancelled)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testRejectProtectionSpaceDeliversTheResponse() async throws {
        let manager = makeManager(timeout: 5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in (.rejectProtectionSpace, nil) }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        assertDeliveredChallenge(outcome)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testUseCredentialWithoutACredentialIsTheDefaultHandling() async throws {
        let manager = makeManager(timeout: 5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in (.useCredential, nil) }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        assertDeliveredChallenge(outcome)
    }

    func testSessionLevelClosureAnswersWhenThereIsNoTaskLevelOne() async throws {
        let manager = makeManager(timeout: 5)
        manager.sessionDidReceiveAuthenticationChallenge = { _, _ in
            (.useCredential, URLCredential(user: "user", password: "pass", persistence: .forSession))
        }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        XCTAssertEqual(outcome.response?.statusCode, 200)
        XCTAssertNil(outcome.error)
    }

    // MARK: - Credential storage, failures, origins

    func testDefaultHandlingUsesTheConfigurationsCredentialStorage() async throws {
        let storage = URLCredentialStorage()
        let space = URLProtectionSpace(
            host: "127.0.0.1", port: server.port, protocol: "http", realm: "Fake Realm",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        let stored = URLCredential(user: "stored", password: "secret", persistence: .forSession)
        storage.set(stored, for: space)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCredentialStorage = storage
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        let proposed = LockedBox<[String?]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            proposed.write { $0.append(challenge.proposedCredential?.user) }
            return (.performDefaultHandling, nil)
        }
        let outcome = try await run(manager, "/basic-auth/stored/secret")
        XCTAssertNil(outcome.error, "\(String(describing: outcome.error))")
        XCTAssertEqual(outcome.response?.statusCode, 200)
        XCTAssertEqual(proposed.wrappedValue, ["stored"])
        // A stored credential the server refuses is not proposed again: the 401 is delivered.
        let refused = try await run(manager, "/basic-auth/stored/other")
        assertDeliveredChallenge(refused)
        XCTAssertEqual(proposed.wrappedValue, ["stored", "stored", nil])
    }

    func testAWrongCredentialEndsAfterTheFailureLimit() async throws {
        let manager = makeManager(timeout: 5)
        let counts = LockedBox<[Int]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            counts.write { $0.append(challenge.previousFailureCount) }
            return (.useCredential, URLCredential(user: "user", password: "wrong", persistence: .none))
        }
        let outcome = try await run(manager, "/basic-auth/user/pass")
        assertDeliveredChallenge(outcome)
        XCTAssertEqual(
            counts.wrappedValue, [0, 1, 2], "the failure count goes up, then the closure is not asked again")
        XCTAssertEqual(server.requests.count, 4, "the first request and three answers")
    }

    func testACredentialIsNeverSentToAnotherOriginAfterARedirect() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport == .foundation,
            "URLSession on Linux sends the authenticated request again on every redirect (-1007)")
        let other = try await LoopbackServer.start()
        defer { Task { try? await other.shutdown() } }
        let manager = makeManager(timeout: 5)
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in
            (.useCredential, URLCredential(user: "user", password: "pass", persistence: .forSession))
        }
        let target = other.url("/headers").absoluteString
        let outcome = try await run(
            manager, "/auth-redirect-to/user/pass?url=\(HTTPRequestSerializer.percentEscapedString(target))")
        XCTAssertNil(outcome.error, "\(String(describing: outcome.error))")
        XCTAssertEqual(outcome.response?.url?.port, other.port)
        XCTAssertEqual(other.requests.count, 1)
        XCTAssertNil(other.requests.first?.header("Authorization"), "the credential stays with its origin")
        XCTAssertNotNil(server.requests.last?.header("Authorization"))
    }

    func testProxyChallengeIsAnsweredWithProxyCredentials() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession on Linux raises no proxy challenge: its 407 arrives as the response")
        // The loopback server plays the proxy (it serves absolute-form requests itself).
        let configuration = URLSessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = [
            "HTTPEnable": true, "HTTPProxy": "127.0.0.1", "HTTPPort": server.port,
        ]
        let manager = HTTPSessionManager(sessionConfiguration: configuration)
        manager.transport = .curl
        let spaces = LockedBox<[URLProtectionSpace]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            spaces.write { $0.append(challenge.protectionSpace) }
            return (.useCredential, URLCredential(user: "proxy", password: "secret", persistence: .forSession))
        }
        let outcome = try await run(
            manager, URLRequest(url: URL(string: "http://origin.invalid/proxy-auth/proxy/secret")!))
        XCTAssertNil(outcome.error, "\(String(describing: outcome.error))")
        XCTAssertEqual(outcome.response?.statusCode, 200)
        let space = try XCTUnwrap(spaces.wrappedValue.first)
        XCTAssertTrue(space.isProxy())
        XCTAssertEqual(space.host, "127.0.0.1")
        XCTAssertEqual(space.port, server.port)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(
            server.requests.last?.header("Proxy-Authorization"),
            "Basic " + Data("proxy:secret".utf8).base64EncodedString())
        XCTAssertNil(server.requests.last?.header("Authorization"))
    }

    /// A 407 from the proxy libcurl took from the environment is that proxy's challenge: its protection space names the
    /// proxy (not the origin, whose credential would otherwise be offered to the proxy), and the answer goes to it.
    func testAProxyChallengeFromTheEnvironmentsProxyIsTheProxys() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession on Linux raises no proxy challenge: its 407 arrives as the response")
        let manager = HTTPSessionManager(sessionConfiguration: .ephemeral)
        manager.transport = .curl
        let spaces = LockedBox<[URLProtectionSpace]>([])
        manager.taskDidReceiveAuthenticationChallenge = { _, _, challenge in
            spaces.write { $0.append(challenge.protectionSpace) }
            return (.useCredential, URLCredential(user: "proxy", password: "secret", persistence: .forSession))
        }
        let outcome = try await withProxyEnvironment(["http_proxy": "127.0.0.1:\(server.port)"]) {
            try await run(manager, URLRequest(url: URL(string: "http://origin.invalid/proxy-auth/proxy/secret")!))
        }
        XCTAssertNil(outcome.error, "\(String(describing: outcome.error))")
        XCTAssertEqual(outcome.response?.statusCode, 200)
        let space = try XCTUnwrap(spaces.wrappedValue.first)
        XCTAssertTrue(space.isProxy(), "the origin's space: \(space.host):\(space.port)")
        XCTAssertEqual(space.host, "127.0.0.1")
        XCTAssertEqual(space.port, server.port)
        XCTAssertEqual(
            server.requests.last?.header("Proxy-Authorization"),
            "Basic " + Data("proxy:secret".utf8).base64EncodedString())
    }

    func testAnUnansweredProxyChallengeDeliversThe407() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = [
            "HTTPEnable": true, "HTTPProxy": "127.0.0.1", "HTTPPort": server.port,
        ]
        let manager = HTTPSessionManager(sessionConfiguration: configuration)
        manager.transport = .curl
        let outcome = try await run(
            manager, URLRequest(url: URL(string: "http://origin.invalid/proxy-auth/proxy/secret")!))
        assertDeliveredChallenge(outcome, status: 407)
    }

    // MARK: - Interceptors on a real challenge

    func testFiveConcurrent401ChallengesCauseExactlyOneRefreshThenSucceed() async throws {
        let manager = makeManager(timeout: 10)
        let authenticator = BasicPasswordAuthenticator(user: "user", freshPassword: "fresh")
        let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: Password(value: "stale"))
        manager.interceptor = interceptor
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<5 {
                group.addTask { try await manager.get("/basic-auth/user/fresh").statusCode }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, [200, 200, 200, 200, 200])
        XCTAssertEqual(authenticator.refreshes.wrappedValue, 1)
        let fresh = "Basic " + Data("user:fresh".utf8).base64EncodedString()
        let sent = server.requests.filter { $0.uri == "/basic-auth/user/fresh" }
        XCTAssertEqual(
            sent.filter { $0.header("Authorization") == fresh }.count, 5, "each request succeeded once, fresh")
        // Requests adapted while the refresh ran waited for it instead of going out with the refused password.
        XCTAssertTrue((1...5).contains(sent.count - 5), "\(sent.count - 5) refused")
    }

    func testRetryPolicyDoesNotRetryA401ButRetriesA503() async throws {
        let manager = makeManager(timeout: 5)
        manager.interceptor = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01)
        do {
            _ = try await manager.get("/status/401")
            XCTFail("a 401 fails")
        } catch {
            XCTAssertEqual((error as NSError).code, URLError.badServerResponse.rawValue, "\(error)")
        }
        XCTAssertEqual(server.requests.count, 1, "a 401 is not a retryable status")
        _ = try? await manager.get("/status/503")
        XCTAssertEqual(server.requests.count, 4, "a 503 is retried twice")
    }
}

/// A password that the test's server accepts only in its fresh form.
struct Password: AuthenticationCredential {
    let value: String
    var requiresRefresh: Bool { false }
}

/// Applies Basic credentials; a refresh answers `freshPassword` and is counted.
final class BasicPasswordAuthenticator: Authenticator, @unchecked Sendable {
    // @unchecked Sendable: `refreshes` is a `LockedBox`; the rest is immutable.
    let user: String
    let freshPassword: String
    let refreshes = LockedBox(0)

    init(user: String, freshPassword: String) {
        self.user = user
        self.freshPassword = freshPassword
    }

    func apply(_ credential: Password, to request: inout URLRequest) {
        request.setValue(header(credential), forHTTPHeaderField: "Authorization")
    }

    func refresh(_ credential: Password) async throws -> Password {
        try await Task.sleep(nanoseconds: 50_000_000)  // the other requests are refused while this one runs
        refreshes.write { $0 += 1 }
        return Password(value: freshPassword)
    }

    func didRequest(
        _ request: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: Error
    ) -> Bool {
        response.statusCode == 401
    }

    func isRequest(_ request: URLRequest, authenticatedWith credential: Password) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == header(credential)
    }

    private func header(_ credential: Password) -> String {
        "Basic " + Data("\(user):\(credential.value)".utf8).base64EncodedString()
    }
}
