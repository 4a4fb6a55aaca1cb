@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The rules behind challenges and retries, without I/O: what each disposition leads to, how a challenge header is
/// read, and when `RetryPolicy` retries.
final class ChallengeAndRetryRulesTests: XCTestCase {
    private let credential = URLCredential(user: "u", password: "p", persistence: .none)
    private let stored = URLCredential(user: "stored", password: "p", persistence: .forSession)

    func testEveryDispositionHasOneAction() {
        XCTAssertEqual(
            ChallengeResolver.action(for: .useCredential, credential: credential, proposed: stored), .retry(credential))
        XCTAssertEqual(ChallengeResolver.action(for: .useCredential, credential: nil, proposed: stored), .retry(stored))
        XCTAssertEqual(ChallengeResolver.action(for: .useCredential, credential: nil, proposed: nil), .deliverResponse)
        XCTAssertEqual(
            ChallengeResolver.action(for: .performDefaultHandling, credential: credential, proposed: nil),
            .deliverResponse, "the default handling ignores a credential it was not proposed")
        XCTAssertEqual(
            ChallengeResolver.action(for: .performDefaultHandling, credential: nil, proposed: stored), .retry(stored))
        XCTAssertEqual(
            ChallengeResolver.action(for: .rejectProtectionSpace, credential: credential, proposed: stored),
            .deliverResponse)
        XCTAssertEqual(
            ChallengeResolver.action(for: .cancelAuthenticationChallenge, credential: credential, proposed: stored),
            .cancel)
    }

    func testAStoredCredentialIsFoundByTheFieldsOfItsSpaceAndProposedOnce() throws {
        let storage = URLCredentialStorage()
        storage.set(
            stored,
            for: URLProtectionSpace(
                host: "h", port: 8080, protocol: "http", realm: "R",
                authenticationMethod: NSURLAuthenticationMethodHTTPBasic))
        let space = URLProtectionSpace(
            host: "h", port: 8080, protocol: "http", realm: "R",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        func challenge(failures: Int) -> URLAuthenticationChallenge {
            URLAuthenticationChallenge(
                protectionSpace: space, proposedCredential: nil, previousFailureCount: failures,
                failureResponse: nil, error: nil, sender: ChallengeSender())
        }
        XCTAssertEqual(
            ChallengeResolver.proposingStoredCredential(challenge(failures: 0), from: storage).proposedCredential?.user,
            "stored")
        XCTAssertNil(
            ChallengeResolver.proposingStoredCredential(challenge(failures: 1), from: storage).proposedCredential,
            "after a refusal the stored credential is not proposed again")
        let otherRealm = URLProtectionSpace(
            host: "h", port: 8080, protocol: "http", realm: "Other",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        XCTAssertNil(ChallengeResolver.storedCredential(for: otherRealm, in: storage))
    }

    /// Several challenges in one field (or several fields joined with commas, RFC 9110 11.6.1), in the manner of
    /// greenbytes' httpauth test cases: the first one libcurl answers is chosen, with its own realm; commas and
    /// tokens inside quoted strings, auth-params and a token68 start no challenge.
    func testTheChallengeLibcurlAnswersIsChosenAmongSeveral() throws {
        let cases: [(String, String, String?)] = [
            ("Basic realm=\"basic\", Newauth realm=\"newauth\"", "Basic", "basic"),
            ("Newauth realm=\"newauth\", Basic realm=\"basic\"", "Basic", "basic"),
            ("Bearer realm=\"api\", error=\"invalid_token\", Digest realm=\"site\", nonce=\"n, o\"", "Digest", "site"),
            (
                "Newauth realm=\"apps\", type=1, title=\"Login to \\\"apps\\\", Basic realm=x\", Basic realm=\"simple\"",
                "Basic",
                "simple"
            ),
            ("Negotiate abc==, Basic realm=\"b\"", "Basic", "b"),  // the one the transport answers
            ("NTLM, Negotiate", "NTLM", nil),
            ("Basic, Newauth", "Basic", nil),
            ("Newauth realm=\"a\", Other", "Newauth", "a"),
            ("Bearer realm = \"x\" , Basic  realm=\"y\"", "Basic", "y"),
        ]
        for (field, scheme, realm) in cases {
            let parsed = try XCTUnwrap(AuthenticationChallengeHeader(fieldValue: field, isProxy: false), field)
            XCTAssertEqual(parsed.scheme, scheme, field)
            XCTAssertEqual(parsed.realm, realm, field)
        }
        XCTAssertNil(AuthenticationChallengeHeader(fieldValue: "realm=\"no scheme\"", isProxy: false))
    }

    func testChallengeHeadersAreParsed() throws {
        let basic = try XCTUnwrap(
            AuthenticationChallengeHeader(fieldValue: "Basic realm=\"Fake Realm\"", isProxy: false))
        XCTAssertEqual(basic.scheme, "Basic")
        XCTAssertEqual(basic.realm, "Fake Realm")
        XCTAssertEqual(basic.authenticationMethod, NSURLAuthenticationMethodHTTPBasic)
        let digest = try XCTUnwrap(
            AuthenticationChallengeHeader(
                fieldValue: "Digest qop=\"auth\", realm=\"a \\\"quoted\\\" realm\", nonce=abc", isProxy: true))
        XCTAssertEqual(digest.realm, "a \"quoted\" realm")
        XCTAssertEqual(digest.authenticationMethod, NSURLAuthenticationMethodHTTPDigest)
        XCTAssertTrue(digest.isProxy)
        XCTAssertNil(try XCTUnwrap(AuthenticationChallengeHeader(fieldValue: "Bearer", isProxy: false)).realm)
        XCTAssertEqual(
            AuthenticationChallengeHeader(fieldValue: "Bearer", isProxy: false)?.authenticationMethod,
            NSURLAuthenticationMethodDefault)
        XCTAssertNil(AuthenticationChallengeHeader(fieldValue: "  ", isProxy: false))
        let url = try XCTUnwrap(URL(string: "http://example.com/x"))
        let response = try XCTUnwrap(
            HTTPURLResponse(
                url: url, statusCode: 403, httpVersion: nil,
                headerFields: ["WWW-Authenticate": "Basic realm=x"]))
        XCTAssertNil(AuthenticationChallengeHeader(response: response), "only a 401 or 407 challenges")
    }

    func testRetryPolicyRetriesARetryableStatusWhateverErrorCameWithIt() throws {
        let policy = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0, retryableURLErrorCodes: [])
        let request = URLRequest(url: try XCTUnwrap(URL(string: "http://example.com/")))
        let unavailable = HTTPURLResponse(
            url: try XCTUnwrap(request.url), statusCode: 503, httpVersion: nil, headerFields: nil)
        let unauthorized = HTTPURLResponse(
            url: try XCTUnwrap(request.url), statusCode: 401, httpVersion: nil, headerFields: nil)
        XCTAssertEqual(
            policy.decision(
                for: request, response: unavailable, retryCount: 0, error: URLError(.networkConnectionLost)),
            .retry, "a 503 whose body was cut is retried, as Alamofire retries it")
        XCTAssertEqual(
            policy.decision(
                for: request, response: unavailable, retryCount: 2, error: URLError(.networkConnectionLost)),
            .doNotRetry, "within the limit")
        XCTAssertEqual(
            policy.decision(
                for: request, response: unauthorized, retryCount: 0, error: URLError(.networkConnectionLost)),
            .doNotRetry)
        XCTAssertEqual(
            RetryPolicy().decision(
                for: request, response: nil, retryCount: 0,
                error: URLError(.serverCertificateHasBadDate)),
            .doNotRetry, "certificate refusals are not retried (a difference from Alamofire, on purpose)")
    }

    /// `Retry-After` as RFC 9110 10.2.3 writes it: delay-seconds are digits only (no sign), and a number too large to
    /// hold is longer than any wait, not a value to ignore (it fell back to the short backoff).
    func testRetryAfterIsDigitsOrAnHTTPDate() throws {
        let now = Date(timeIntervalSince1970: 1_000_000_000)
        XCTAssertEqual(RetryPolicy.retryAfterDelay("120", now: now), 120)
        XCTAssertEqual(RetryPolicy.retryAfterDelay(" 0 ", now: now), 0)
        XCTAssertEqual(RetryPolicy.retryAfterDelay("99999999999999999999", now: now), .infinity)
        for malformed in ["+5", "-0", "-1", "1.5", "5s", "", " "] {
            XCTAssertNil(RetryPolicy.retryAfterDelay(malformed, now: now), malformed)
        }
        XCTAssertEqual(RetryPolicy.retryAfterDelay(HTTPDate.format(now.addingTimeInterval(30)), now: now), 30)
        XCTAssertEqual(RetryPolicy.retryAfterDelay(HTTPDate.format(now.addingTimeInterval(-30)), now: now), 0)
        let request = URLRequest(url: try XCTUnwrap(URL(string: "http://example.com/")))
        let huge = HTTPURLResponse(
            url: try XCTUnwrap(request.url), statusCode: 503, httpVersion: nil,
            headerFields: ["Retry-After": "99999999999999999999"])
        XCTAssertEqual(
            RetryPolicy(exponentialBackoffScale: 0.5).decision(
                for: request, response: huge, retryCount: 0, error: URLError(.badServerResponse)),
            .doNotRetry, "longer than the maximum delay")
    }
}
