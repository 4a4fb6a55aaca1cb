import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RFC 9111 caching on the curl transport, with the configuration's `URLCache` as the store: each rule checked by what
/// the loopback server received (how many requests, which conditional fields) and which body came back (every body of
/// the caching endpoints carries a serial number).
final class HTTPCachingTests: LoopbackTestCase {
    private struct Answer {
        let response: HTTPURLResponse
        let serial: Int?
        let object: [String: Any]
        /// The body, when the manager's serializer hands it over as it came (`HTTPResponseSerializer`).
        let body: Data?
    }

    /// A curl manager whose configuration has a URLCache of its own (in memory, or on disk in `directory`).
    private func cachingManager(
        policy: URLRequest.CachePolicy = .useProtocolCachePolicy, directory: URL? = nil,
        securityPolicy: SecurityPolicy? = nil, baseURL: URL? = nil, memoryCapacity: Int = 4 << 20,
        sharing shared: URLCache? = nil
    ) -> (HTTPSessionManager, URLCache) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let path = (directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("sk-cache-\(UUID())"))
        let cache =
            shared
            ?? URLCache(
                memoryCapacity: memoryCapacity, diskCapacity: directory == nil ? 0 : 8 << 20, diskPath: path.path)
        configuration.urlCache = cache
        configuration.requestCachePolicy = policy
        let manager = HTTPSessionManager(baseURL: baseURL ?? server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        if let securityPolicy { manager.securityPolicy = securityPolicy }
        return (manager, cache)
    }

    /// One GET through the manager's data task; throws its error.
    private func get(
        _ manager: URLSessionManager, _ url: URL, headers: [String: String] = [:],
        policy: URLRequest.CachePolicy = .useProtocolCachePolicy, method: String = "GET",
        file: StaticString = #filePath, line: UInt = #line
    ) async throws -> Answer {
        var request = URLRequest(url: url, cachePolicy: policy)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (response, object, error): (URLResponse?, Any?, Error?) = try await awaitCallback(
            file: file, line: line
        ) { done in
            manager.dataTask(with: request) { done(($0, $1, $2)) }.resume()
        }
        if let error { throw error }
        let http = try XCTUnwrap(response as? HTTPURLResponse, file: file, line: line)
        let json = object as? [String: Any] ?? [:]
        return Answer(response: http, serial: json["serial"] as? Int, object: json, body: object as? Data)
    }

    /// Counts the responses `manager` proposes to store (each one approved as proposed).
    private func countingWrites(of manager: URLSessionManager) -> CallCounter {
        let written = CallCounter()
        manager.dataTaskWillCacheResponse = { _, _, proposed in
            written.increment()
            return proposed
        }
        return written
    }

    /// The requests the server received for `path` (query included), in order.
    private func received(_ path: String) -> [RecordedRequest] {
        server.requests.filter { $0.uri == path }
    }

    private func header(_ name: String, of request: RecordedRequest) -> String? {
        request.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    private static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    private func query(_ pairs: [(String, String)]) -> String {
        var components = URLComponents()
        components.queryItems = pairs.map { URLQueryItem(name: $0.0, value: $0.1) }
        let encoded = components.percentEncodedQuery ?? ""
        return "/cacheable?" + encoded.replacingOccurrences(of: "+", with: "%2B")
    }

    // MARK: - Freshness

    func testFreshResponseIsServedWithoutAskingTheServer() async throws {
        let (manager, cache) = cachingManager()
        let first = try await get(manager, server.url("/cache/60"))
        let second = try await get(manager, server.url("/cache/60"))
        XCTAssertEqual(received("/cache/60").count, 1, "max-age=60: the second GET is answered from the cache")
        XCTAssertEqual(second.response.statusCode, 200)
        XCTAssertEqual(first.serial, second.serial, "the stored body")
        let stored = try XCTUnwrap(cache.cachedResponse(for: URLRequest(url: server.url("/cache/60")))?.response)
        XCTAssertTrue(
            type(of: stored) == HTTPURLResponse.self, "the URLCache archives what it keeps: Foundation's class only")
        let other = try await get(manager, server.url("/cache/60?other"))
        XCTAssertNotEqual(other.serial, first.serial, "another query is another resource")
        XCTAssertEqual(received("/cache/60?other").count, 1)
    }

    func testSharedMaxAgeAloneGivesAPrivateCacheNoFreshness() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "s-maxage=600")])
        _ = try await get(manager, server.url(path))
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 2, "s-maxage is a shared cache's lifetime")
        let both = query([("Cache-Control", "s-maxage=0, max-age=600")])
        _ = try await get(manager, server.url(both))
        _ = try await get(manager, server.url(both))
        XCTAssertEqual(received(both).count, 1, "max-age is the private cache's")
    }

    func testExpiresAgainstDateDecidesFreshness() async throws {
        let (manager, _) = cachingManager()
        let now = Date()
        let fresh = query([("Date", Self.httpDate(now)), ("Expires", Self.httpDate(now.addingTimeInterval(600)))])
        let expired = query([("Date", Self.httpDate(now)), ("Expires", Self.httpDate(now.addingTimeInterval(-60)))])
        let invalid = query([("Date", Self.httpDate(now)), ("Expires", "0")])
        for path in [fresh, expired, invalid] {
            _ = try await get(manager, server.url(path))
            _ = try await get(manager, server.url(path))
        }
        XCTAssertEqual(received(fresh).count, 1, "Expires ten minutes after Date: fresh")
        XCTAssertEqual(received(expired).count, 2, "Expires before Date: stale, and nothing to revalidate with")
        XCTAssertEqual(received(invalid).count, 2, "an invalid Expires means already expired")
    }

    func testMaxAgeWinsOverExpires() async throws {
        let (manager, _) = cachingManager()
        let now = Date()
        let path = query([
            ("Cache-Control", "max-age=0"), ("Date", Self.httpDate(now)),
            ("Expires", Self.httpDate(now.addingTimeInterval(600))),
        ])
        _ = try await get(manager, server.url(path))
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 2)
    }

    func testHeuristicFreshnessOnlyFromLastModified() async throws {
        let (manager, _) = cachingManager()
        let now = Date()
        let heuristic = query([
            ("Date", Self.httpDate(now)), ("Last-Modified", Self.httpDate(now.addingTimeInterval(-10 * 86_400))),
        ])
        let nothing = query([("Date", Self.httpDate(now)), ("X-Plain", "1")])
        for path in [heuristic, nothing] {
            _ = try await get(manager, server.url(path))
            _ = try await get(manager, server.url(path))
        }
        XCTAssertEqual(received(heuristic).count, 1, "modified ten days ago: fresh for a tenth of that")
        XCTAssertEqual(received(nothing).count, 2, "no explicit or heuristic freshness: never fresh")
    }

    func testAgeAndRequestMaxStaleAndMustRevalidate() async throws {
        let (manager, _) = cachingManager()
        let stale = query([("Cache-Control", "max-age=60"), ("Age", "100")])
        let mustRevalidate = query([("Cache-Control", "max-age=60, must-revalidate"), ("Age", "100")])
        for path in [stale, mustRevalidate] {
            _ = try await get(manager, server.url(path))
            _ = try await get(manager, server.url(path))
            _ = try await get(manager, server.url(path), headers: ["Cache-Control": "max-stale=120"])
        }
        XCTAssertEqual(received(stale).count, 2, "Age 100 > max-age 60: stale; max-stale=120 accepts it")
        XCTAssertEqual(received(mustRevalidate).count, 3, "must-revalidate: never used stale, max-stale or not")
    }

    func testRequestNoCacheAndMaxAgeAskTheServer() async throws {
        let (manager, _) = cachingManager()
        _ = try await get(manager, server.url("/cache/60"))
        _ = try await get(manager, server.url("/cache/60"), headers: ["Cache-Control": "no-cache"])
        _ = try await get(manager, server.url("/cache/60"), headers: ["Pragma": "no-cache"])
        _ = try await get(manager, server.url("/cache/60"), headers: ["Cache-Control": "max-age=0"])
        XCTAssertEqual(received("/cache/60").count, 4)
        _ = try await get(manager, server.url("/cache/60"))
        XCTAssertEqual(received("/cache/60").count, 4, "without those directives, the stored response is used")
    }

    // MARK: - Revalidation

    func testETagRevalidationWith304ServesTheStoredBodyAndUpdatesItsFields() async throws {
        let (manager, cache) = cachingManager()
        let path = query([("Cache-Control", "no-cache"), ("ETag", "\"v1\"")])
        let first = try await get(manager, server.url(path))
        let second = try await get(manager, server.url(path))
        let requests = received(path)
        XCTAssertEqual(requests.count, 2, "no-cache: revalidated on each use")
        XCTAssertNil(header("If-None-Match", of: requests[0]))
        XCTAssertEqual(header("If-None-Match", of: requests[1]), "\"v1\"")
        XCTAssertEqual(second.response.statusCode, 200, "the 304 is answered with the stored response")
        XCTAssertEqual(second.serial, first.serial, "the stored body, not the 304's empty one")
        XCTAssertNotNil(second.serial)
        let stored = try XCTUnwrap(cache.cachedResponse(for: URLRequest(url: server.url(path)))?.response)
        XCTAssertNotNil((stored as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Revalidation"))
        XCTAssertEqual(
            second.response.value(forHTTPHeaderField: "X-Revalidation"),
            (stored as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Revalidation"),
            "the 304's fields update the stored response and the delivered one")
    }

    func testLastModifiedRevalidationSendsIfModifiedSince() async throws {
        let (manager, _) = cachingManager()
        let modified = "Sat, 01 Jan 2000 00:00:00 GMT"
        let path = query([("Cache-Control", "max-age=0"), ("Last-Modified", modified)])
        let first = try await get(manager, server.url(path))
        let second = try await get(manager, server.url(path))
        let requests = received(path)
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(header("If-Modified-Since", of: requests[1]), modified)
        XCTAssertEqual(second.serial, first.serial)
    }

    func testHTTPBinCacheEndpointsFollowTheRules() async throws {
        let (manager, _) = cachingManager()
        let first = try await get(manager, server.url("/cache"))
        let heuristic = try await get(manager, server.url("/cache"))
        XCTAssertEqual(received("/cache").count, 1, "Last-Modified in 2000, no Date: fresh for a day by heuristic")
        XCTAssertEqual(first.serial, heuristic.serial)
        _ = try await get(manager, server.url("/cache"), policy: .reloadRevalidatingCacheData)
        XCTAssertNotNil(header("If-None-Match", of: received("/cache")[1]))
        XCTAssertNotNil(header("If-Modified-Since", of: received("/cache")[1]))
        let tagged = try await get(manager, server.url("/etag/one"))
        let again = try await get(manager, server.url("/etag/one"))
        XCTAssertEqual(received("/etag/one").count, 2, "an entity tag and no freshness: revalidated each time")
        XCTAssertEqual(tagged.serial, again.serial, "a matching entity tag: 304, the stored body")
    }

    func testCallersOwnConditionalRequestGetsThe304() async throws {
        let (manager, _) = cachingManager()
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(200..<400)
        manager.responseSerializer = serializer
        _ = try await get(manager, server.url("/etag/mine"))
        let answer = try await get(manager, server.url("/etag/mine"), headers: ["If-None-Match": "\"mine\""])
        XCTAssertEqual(answer.response.statusCode, 304, "a request conditional on its own passes untouched")
    }

    /// A caller's own conditional request that may not use the network is answered from the store like any other,
    /// and fails (nothing sent) when nothing is stored.
    func testCallersOwnConditionalRequestIsNotSentWhenThePolicyForbidsTheNetwork() async throws {
        let (manager, _) = cachingManager()
        let path = "/cache/60"
        let first = try await get(manager, server.url(path))
        let conditional = ["If-None-Match": "\"other\""]
        let stored = try await get(
            manager, server.url(path), headers: conditional, policy: .returnCacheDataDontLoad)
        XCTAssertEqual(stored.response.statusCode, 200)
        XCTAssertEqual(stored.serial, first.serial, "answered from the store")
        let onlyIfCached = try await get(
            manager, server.url(path), headers: conditional.merging(["Cache-Control": "only-if-cached"]) { $1 })
        XCTAssertEqual(onlyIfCached.serial, first.serial, "answered from the store")
        XCTAssertEqual(received(path).count, 1, "nothing more was sent")
        do {
            _ = try await get(
                manager, server.url("/cache/60?never"), headers: conditional, policy: .returnCacheDataDontLoad)
            XCTFail("nothing stored and no loading")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable, "\(error)")
        }
        XCTAssertEqual(received("/cache/60?never").count, 0)
    }

    /// `only-if-cached` keeps the request off the network under every cache policy, and a precondition (`If-Range`,
    /// `If-Match`, `If-Unmodified-Since`) that may not reach the server is not answered from the store (RFC 9111
    /// 4.3.2: the origin evaluates it): a 504 under `only-if-cached`, the error under `.returnCacheDataDontLoad`.
    func testOnlyIfCachedAndPreconditionsKeepEveryPolicyOffTheNetwork() async throws {
        let (manager, _) = cachingManager()
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(200..<600)
        manager.responseSerializer = serializer
        let path = "/cache/60"
        _ = try await get(manager, server.url(path))
        let onlyIfCached = ["Cache-Control": "only-if-cached"]
        let policies: [URLRequest.CachePolicy] = [
            .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData, .reloadRevalidatingCacheData,
        ]
        for policy in policies {
            let answer = try await get(manager, server.url(path), headers: onlyIfCached, policy: policy)
            XCTAssertEqual(answer.response.statusCode, 504, "\(policy)")
            let conditional = try await get(
                manager, server.url(path), headers: onlyIfCached.merging(["If-None-Match": "\"x\""]) { $1 },
                policy: policy)
            XCTAssertEqual(conditional.response.statusCode, 504, "\(policy), conditional")
        }
        for precondition in [
            ["If-Range": "\"other\"", "Range": "bytes=0-1"], ["If-Match": "\"other\""],
            ["If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"],
        ] {
            let answer = try await get(
                manager, server.url(path), headers: onlyIfCached.merging(precondition) { $1 })
            XCTAssertEqual(answer.response.statusCode, 504, "\(precondition)")
            do {
                _ = try await get(manager, server.url(path), headers: precondition, policy: .returnCacheDataDontLoad)
                XCTFail("\(precondition) was answered from the store")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable, "\(precondition): \(error)")
            }
        }
        XCTAssertEqual(received(path).count, 1, "nothing more was sent")
    }

    /// A caller's own validators that may not reach the server are evaluated against the stored response, before any
    /// range (RFC 9111 4.3.2, RFC 9110 13.2.2): a 304 with its validators and caching fields and no body when they name
    /// it, else the stored 200, or the range cut from it.
    func testCallersOwnValidatorsNamingTheStoredResponseGetA304WhenTheNetworkIsForbidden() async throws {
        let (manager, _) = cachingManager()
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(200..<600)
        manager.responseSerializer = serializer
        let lastModified = Self.httpDate(Date(timeIntervalSinceNow: -3600))
        let path = query([("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("Last-Modified", lastModified)])
        let first = try await get(manager, server.url(path))
        XCTAssertEqual(first.response.statusCode, 200)
        XCTAssertFalse(first.body?.isEmpty ?? true)
        let earlier = Self.httpDate(Date(timeIntervalSinceNow: -7200))
        let later = Self.httpDate(Date(timeIntervalSinceNow: -60))
        let cases: [([String: String], Int)] = [
            (["If-None-Match": "\"v1\""], 304),
            (["If-None-Match": "W/\"v1\""], 304),
            (["If-None-Match": "\"a,b\", W/\"v1\""], 304),
            (["If-None-Match": "*"], 304),
            (["If-None-Match": "\"v2\""], 200),
            (["If-None-Match": "\"v1"], 200),
            (["If-Modified-Since": lastModified], 304),
            (["If-Modified-Since": later], 304),
            (["If-Modified-Since": earlier], 200),
            (["If-Modified-Since": "not a date"], 200),
            // If-None-Match decides when both are present.
            (["If-None-Match": "\"v2\"", "If-Modified-Since": later], 200),
            (["If-None-Match": "\"v1\"", "If-Modified-Since": earlier], 304),
            // Validators before the range (RFC 9110 13.2.2): a 304 even where no range could be cut.
            (["If-None-Match": "\"v1\"", "Range": "bytes=0-3"], 304),
            (["If-None-Match": "\"v1\"", "Range": "bytes=0-1,3-4"], 304),
            (["If-None-Match": "\"v2\"", "Range": "bytes=0-3"], 206),
        ]
        for (headers, status) in cases {
            for (policy, extra) in [
                (URLRequest.CachePolicy.returnCacheDataDontLoad, [:]),
                (.useProtocolCachePolicy, ["Cache-Control": "only-if-cached"]),
            ] {
                let answer = try await get(
                    manager, server.url(path), headers: headers.merging(extra) { $1 }, policy: policy)
                XCTAssertEqual(answer.response.statusCode, status, "\(headers) \(policy)")
                XCTAssertEqual(answer.response.value(forHTTPHeaderField: "ETag"), "\"v1\"", "\(headers)")
                switch status {
                case 304:
                    XCTAssertNil(answer.response.value(forHTTPHeaderField: "Content-Length"), "\(headers)")
                    XCTAssertNil(answer.response.value(forHTTPHeaderField: "Content-Type"), "\(headers)")
                    XCTAssertEqual(answer.body?.count ?? 0, 0, "no body: \(headers)")
                case 206: XCTAssertEqual(answer.body, first.body?.prefix(4), "the stored response's range: \(headers)")
                default: XCTAssertEqual(answer.body, first.body, "the stored response: \(headers)")
                }
            }
        }
        XCTAssertEqual(received(path).count, 1, "nothing more was sent")
    }

    /// `only-if-cached` with nothing stored that may answer gets the cache's own empty 504 (RFC 9111 5.2.1.7), and
    /// nothing is sent; a stored response that needs validation does not answer it either.
    func testOnlyIfCachedWithNothingToServeIsAnswered504() async throws {
        let (manager, _) = cachingManager()
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(200..<600)
        manager.responseSerializer = serializer
        let onlyIfCached = ["Cache-Control": "only-if-cached"]
        let never = try await get(manager, server.url("/cache/60?never"), headers: onlyIfCached)
        XCTAssertEqual(never.response.statusCode, 504)
        XCTAssertEqual(never.response.value(forHTTPHeaderField: "Content-Length"), "0")
        XCTAssertEqual(received("/cache/60?never").count, 0, "nothing was sent")
        let stale = query([("Cache-Control", "max-age=60"), ("Age", "3600")])
        _ = try await get(manager, server.url(stale))
        let staleAnswer = try await get(manager, server.url(stale), headers: onlyIfCached)
        XCTAssertEqual(staleAnswer.response.statusCode, 504, "a stale response needs the network")
        XCTAssertEqual(received(stale).count, 1)
        let fresh = try await get(manager, server.url("/cache/60?fresh"))
        let freshAnswer = try await get(manager, server.url("/cache/60?fresh"), headers: onlyIfCached)
        XCTAssertEqual(freshAnswer.response.statusCode, 200)
        XCTAssertEqual(freshAnswer.serial, fresh.serial)
        XCTAssertEqual(received("/cache/60?fresh").count, 1)
    }

    // MARK: - Vary, authentication, unsafe methods, policy

    func testVarySelectsByTheNamedRequestFields() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")])
        let english = try await get(manager, server.url(path), headers: ["Accept-Language": "en"])
        let englishAgain = try await get(manager, server.url(path), headers: ["Accept-Language": "en"])
        let french = try await get(manager, server.url(path), headers: ["Accept-Language": "fr"])
        XCTAssertEqual(received(path).count, 2)
        XCTAssertEqual(english.serial, englishAgain.serial)
        XCTAssertEqual(french.object["Accept-Language"] as? String, "fr")
        let star = query([("Cache-Control", "max-age=60"), ("Vary", "*")])
        _ = try await get(manager, server.url(star))
        _ = try await get(manager, server.url(star))
        XCTAssertEqual(received(star).count, 2, "Vary: * is never stored")
    }

    func testAuthenticatedResponseIsStoredOnlyWhenItSaysSo() async throws {
        let (manager, _) = cachingManager()
        let plain = query([("Cache-Control", "max-age=60")])
        let publicOne = query([("Cache-Control", "public, max-age=60")])
        for path in [plain, publicOne] {
            _ = try await get(manager, server.url(path), headers: ["Authorization": "Bearer secret"])
            _ = try await get(manager, server.url(path), headers: ["Authorization": "Bearer secret"])
        }
        XCTAssertEqual(received(plain).count, 2, "a response to an authenticated request is not stored by default")
        XCTAssertEqual(received(publicOne).count, 1, "public says it may be")
    }

    func testNoStoreIsNeverStored() async throws {
        let (manager, cache) = cachingManager()
        let path = query([("Cache-Control", "no-store, max-age=60")])
        _ = try await get(manager, server.url(path))
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 2)
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: server.url(path))))
        _ = try await get(manager, server.url("/cache/60"), headers: ["Cache-Control": "no-store"])
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: server.url("/cache/60"))), "request no-store")
    }

    func testUnsafeMethodInvalidatesTheStoredResponse() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "max-age=60")])
        _ = try await get(manager, server.url(path))
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 1)
        _ = try await get(manager, server.url(path), method: "POST")
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 3, "after a successful POST the GET goes to the server")
    }

    func testResponseRefusedByTheSecurityPolicyIsNotStoredAndPoliciesDoNotShare() async throws {
        let tlsServer = try await LoopbackServer.start(tls: TestCertificates.served("intermediate-localhost"))
        defer { Task { try? await tlsServer.shutdown() } }
        let root = try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)
        let baseURL = try XCTUnwrap(URL(string: "https://localhost:\(tlsServer.port)"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cache-tls-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let unrelated = try TestCertificates.derCertificate(
            at: TestCertificates.directory.appendingPathComponent("wrong-host.pem"))
        let url = baseURL.appendingPathComponent("cache/60")

        /// AFNetworking's rule for a private CA: the pins alone decide.
        func pinning(_ certificate: Data) -> SecurityPolicy {
            let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [certificate])
            policy.allowInvalidCertificates = true
            return policy
        }
        let (refused, cache) = cachingManager(
            directory: directory, securityPolicy: pinning(unrelated), baseURL: baseURL)
        do {
            _ = try await get(refused, url)
            XCTFail("the pin does not match")
        } catch {}
        XCTAssertEqual(tlsServer.requestCount, 0)
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: url)))

        let (pinned, _) = cachingManager(
            directory: directory,
            securityPolicy: pinning(root), baseURL: baseURL)
        _ = try await get(pinned, url)
        _ = try await get(pinned, url)
        XCTAssertEqual(tlsServer.requestCount, 1, "stored under the pinning policy, served under it")

        let (other, _) = cachingManager(
            directory: directory, securityPolicy: SecurityPolicy(trustingRootCertificates: [root]), baseURL: baseURL)
        _ = try await get(other, url)
        XCTAssertEqual(tlsServer.requestCount, 2, "another policy does not take a response another handshake checked")
    }

    // MARK: - URLRequest.CachePolicy

    func testReloadPoliciesIgnoreTheStoredResponse() async throws {
        let (manager, _) = cachingManager()
        _ = try await get(manager, server.url("/cache/60"))
        _ = try await get(manager, server.url("/cache/60"), policy: .reloadIgnoringLocalCacheData)
        _ = try await get(manager, server.url("/cache/60"), policy: .reloadIgnoringLocalAndRemoteCacheData)
        let requests = received("/cache/60")
        XCTAssertEqual(requests.count, 3)
        XCTAssertNil(header("If-None-Match", of: requests[1]))
        XCTAssertNil(header("Cache-Control", of: requests[1]))
        XCTAssertEqual(header("Cache-Control", of: requests[2]), "no-cache", "and the caches on the way too")
    }

    func testReloadRevalidatingRevalidatesEvenAFreshResponse() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "max-age=600"), ("ETag", "\"r\"")])
        let first = try await get(manager, server.url(path))
        let second = try await get(manager, server.url(path), policy: .reloadRevalidatingCacheData)
        XCTAssertEqual(received(path).count, 2)
        XCTAssertEqual(header("If-None-Match", of: received(path)[1]), "\"r\"")
        XCTAssertEqual(first.serial, second.serial)
    }

    func testReturnCacheDataPoliciesUseAStaleResponseAndDontLoadFailsWhenNothingIsStored() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "max-age=60"), ("Age", "3600")])
        let first = try await get(manager, server.url(path))
        let elseLoad = try await get(manager, server.url(path), policy: .returnCacheDataElseLoad)
        let dontLoad = try await get(manager, server.url(path), policy: .returnCacheDataDontLoad)
        XCTAssertEqual(received(path).count, 1, "stale, but these policies take it")
        XCTAssertEqual(elseLoad.serial, first.serial)
        XCTAssertEqual(dontLoad.serial, first.serial)
        _ = try await get(manager, server.url("/cache/60?new"), policy: .returnCacheDataElseLoad)
        XCTAssertEqual(received("/cache/60?new").count, 1, "nothing stored: loaded")
        do {
            _ = try await get(manager, server.url("/cache/60?never"), policy: .returnCacheDataDontLoad)
            XCTFail("nothing stored and no loading")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable, "\(error)")
        }
        XCTAssertEqual(received("/cache/60?never").count, 0)
    }

    func testConfigurationPolicyAppliesToRequestsThatKeepTheDefault() async throws {
        let (manager, _) = cachingManager(policy: .reloadIgnoringLocalCacheData)
        _ = try await get(manager, server.url("/cache/60"))
        _ = try await get(manager, server.url("/cache/60"))
        XCTAssertEqual(received("/cache/60").count, 2)
        _ = try await get(manager, server.url("/cache/60"), policy: .returnCacheDataDontLoad)
        XCTAssertEqual(received("/cache/60").count, 2, "the request's own policy wins")
    }

    func testStoredOnDiskIsFoundByAnotherCacheOnTheSameDirectory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cache-disk-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (writer, _) = cachingManager(directory: directory)
        let path = query([("Cache-Control", "max-age=600"), ("Vary", "Accept-Language")])
        let first = try await get(writer, server.url(path), headers: ["Accept-Language": "en"])
        let (reader, _) = cachingManager(directory: directory)
        let again = try await get(reader, server.url(path), headers: ["Accept-Language": "en"])
        XCTAssertEqual(received(path).count, 1, "the entry and what it was stored with survive the disk")
        XCTAssertEqual(first.serial, again.serial)
    }

    /// A response that Linux's `URLCache` reads from disk (stored by an earlier run) is brought into its memory, so
    /// that later requests do not read the disk again: fresh, or confirmed by a revalidation that writes nothing.
    func testAResponseReadFromDiskIsKeptInMemoryAfterwards() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cache-disk-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (writer, _) = cachingManager(directory: directory)
        let fresh = "/cache/600?memory"
        let revalidated = "/bytes/100"  // an entity tag, no freshness, and the same 200 again to a conditional request
        let first = try await get(writer, server.url(fresh))
        writer.responseSerializer = HTTPResponseSerializer()
        _ = try await get(writer, server.url(revalidated))
        for path in [fresh, revalidated] {
            // A new URLCache on the directory, as in a new process: its memory is empty.
            let (reader, cache) = cachingManager(directory: directory)
            if path == revalidated { reader.responseSerializer = HTTPResponseSerializer() }
            XCTAssertEqual(cache.currentMemoryUsage, 0)
            let answer = try await get(reader, server.url(path))
            XCTAssertGreaterThan(cache.currentMemoryUsage, 0, "\(path): read from disk, kept in memory")
            if path == fresh { XCTAssertEqual(answer.serial, first.serial, "served from the store") }
        }
        XCTAssertEqual(received(fresh).count, 1)
        XCTAssertEqual(received(revalidated).count, 2, "revalidated")
    }

    func testDownloadTaskIsAnsweredFromTheCacheIntoItsFile() async throws {
        let (manager, _) = cachingManager()
        var contents: [Data] = []
        for _ in 0..<2 {
            let destination = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cache-dl-\(UUID())")
            defer { try? FileManager.default.removeItem(at: destination) }
            let (response, file, error): (URLResponse?, URL?, Error?) = try await awaitCallback { done in
                manager.downloadTask(
                    with: URLRequest(url: server.url("/cache/60?download")), destination: { _, _ in destination }
                ) { done(($0, $1, $2)) }.resume()
            }
            XCTAssertNil(error)
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
            contents.append(try Data(contentsOf: try XCTUnwrap(file)))
        }
        XCTAssertEqual(received("/cache/60?download").count, 1)
        XCTAssertEqual(contents[0], contents[1])
        XCTAssertFalse(contents[0].isEmpty)
    }

    func testWillCacheResponseOverrideDecidesWhatIsStored() async throws {
        let (manager, _) = cachingManager()
        let asked = CallCounter()
        manager.dataTaskWillCacheResponse = { _, _, proposed in
            asked.increment()
            return (proposed.response.url?.query ?? "").contains("refuse") ? nil : proposed
        }
        _ = try await get(manager, server.url("/cache/60?refuse"))
        _ = try await get(manager, server.url("/cache/60?refuse"))
        _ = try await get(manager, server.url("/cache/60?keep"))
        _ = try await get(manager, server.url("/cache/60?keep"))
        XCTAssertEqual(asked.count, 3, "asked for each response about to be stored")
        XCTAssertEqual(received("/cache/60?refuse").count, 2, "nil: nothing stored")
        XCTAssertEqual(received("/cache/60?keep").count, 1)
    }

    func testPostRedirectedToAGetInvalidatesThePostTarget() async throws {
        let (manager, _) = cachingManager()
        let path = query([("Cache-Control", "max-age=60"), ("Location", "/get"), ("post_status", "303")])
        _ = try await get(manager, server.url(path))
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 1)
        // POST-redirect-GET: the POST is answered by 303 See Other, followed with a GET elsewhere.
        _ = try await get(manager, server.url(path), method: "POST")
        XCTAssertEqual(received(path).map(\.method), ["GET", "POST"])
        XCTAssertEqual(received("/get").count, 1, "the 303 was followed")
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).map(\.method), ["GET", "POST", "GET"], "the POST's target was invalidated")
    }

    func testRevalidationIsAlsoSubmittedToWillCacheResponse() async throws {
        let (manager, cache) = cachingManager()
        let proposals = LockedBox<[Int]>([])
        manager.dataTaskWillCacheResponse = { _, _, proposed in
            proposals.write { $0.append((proposed.response as? HTTPURLResponse)?.statusCode ?? 0) }
            // A new object without SessionKit's metadata: the stored entry keeps working all the same.
            return CachedURLResponse(response: proposed.response, data: proposed.data)
        }
        let path = query([("Cache-Control", "max-age=0"), ("ETag", "\"w\""), ("Vary", "Accept-Language")])
        let first = try await get(manager, server.url(path), headers: ["Accept-Language": "en"])
        let second = try await get(manager, server.url(path), headers: ["Accept-Language": "en"])
        XCTAssertEqual(proposals.wrappedValue, [200, 200], "the first response and the one a 304 updated")
        XCTAssertEqual(header("If-None-Match", of: received(path)[1]), "\"w\"", "the Vary values survived")
        XCTAssertEqual(first.serial, second.serial)
        XCTAssertNotNil(
            (cache.cachedResponse(for: URLRequest(url: server.url(path)))?.response as? HTTPURLResponse)?
                .value(forHTTPHeaderField: "X-Revalidation"), "the approved update was stored")
        manager.dataTaskWillCacheResponse = { _, _, _ in nil }
        _ = try await get(manager, server.url(path), headers: ["Accept-Language": "en"])
        let kept = (cache.cachedResponse(for: URLRequest(url: server.url(path)))?.response as? HTTPURLResponse)?
            .value(forHTTPHeaderField: "X-Revalidation")
        XCTAssertEqual(
            kept, second.response.value(forHTTPHeaderField: "X-Revalidation"), "a refused update is not stored")
    }

    /// Linux's URLCache crashes (a force unwrap in its eviction) once a key stored twice is evicted; its key is host,
    /// port and path, so two queries of one path, or a response stored again, are such keys.
    func testStoringOnePathTwiceThenEvictingDoesNotCrashLinuxURLCache() async throws {
        let (manager, small) = cachingManager(memoryCapacity: 8 << 10)
        for path in [
            "/cache/60?a", "/cache/60?b", "/cache/60?a", "/cache/61", "/cache/62", "/cache/63", "/cache/64",
            "/cache/65", "/cache/66",
        ] {
            _ = try await get(manager, server.url(path))
        }
        XCTAssertNotNil(small.cachedResponse(for: URLRequest(url: server.url("/cache/66"))), "the newest is stored")
    }

    func testARevalidationThatChangesNothingIsNotWrittenAgain() async throws {
        let (manager, _) = cachingManager()
        let asked = countingWrites(of: manager)
        for _ in 0..<4 { _ = try await get(manager, server.url("/etag/quiet")) }
        XCTAssertEqual(received("/etag/quiet").count, 4, "an entity tag and no freshness: revalidated each time")
        XCTAssertEqual(asked.count, 1, "the 304s changed nothing: the first response is the only one written")
        // A server that ignores If-None-Match and sends the same entity again: not written again either.
        manager.responseSerializer = HTTPResponseSerializer()
        for _ in 0..<3 { _ = try await get(manager, server.url("/bytes/64?seed=3")) }
        XCTAssertEqual(asked.count, 2)
    }

    /// RFC 9111 4.3.4: a 304 freshens a response whose lifetime is heuristic (a tenth of its age at `Date`): it is
    /// stored again, and the next request is answered from the cache.
    func testA304FreshensAHeuristicLifetime() async throws {
        let (manager, _) = cachingManager()
        let written = countingWrites(of: manager)
        // Modified 20 s before it was sent: fresh for about 2 s.
        let path = query([("ETag", "\"h\""), ("Last-Modified", Self.httpDate(Date() - 20))])
        let first = try await get(manager, server.url(path))
        try await Task.sleep(nanoseconds: 2_600_000_000)
        let revalidated = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 2, "stale: revalidated")
        XCTAssertEqual(revalidated.serial, first.serial, "the 304 confirmed the stored body")
        XCTAssertEqual(written.count, 2, "the freshened response is written again")
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 2, "fresh again: answered from the cache")
    }

    /// RFC 9111 5.2.1.5: a request's `no-store` stores nothing of its exchange, a 304's update included.
    func testARequestsNoStoreStoresNothingOfItsRevalidation() async throws {
        let (manager, _) = cachingManager()
        let written = countingWrites(of: manager)
        let path = query([("ETag", "\"n\""), ("Cache-Control", "max-age=0")])
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(written.count, 1)
        _ = try await get(manager, server.url(path), headers: ["Cache-Control": "no-store"])
        XCTAssertEqual(received(path).count, 2)
        XCTAssertEqual(written.count, 1, "the 304's update is not stored")
        _ = try await get(manager, server.url(path))
        XCTAssertEqual(written.count, 2, "without no-store, the update is stored")
    }

    // MARK: - Across users (one URLCache, several managers)

    /// A manager answering every challenge with `user`'s credential, on the cache `shared`.
    private func manager(sharing shared: URLCache, user: String?, password: String = "pass") -> HTTPSessionManager {
        let (manager, _) = cachingManager(sharing: shared)
        manager.responseSerializer = JSONResponseSerializer()
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in
            guard let user else { return (.rejectProtectionSpace, nil) }
            return (.useCredential, URLCredential(user: user, password: password, persistence: .forSession))
        }
        return manager
    }

    /// The outcome of a GET: its answer, or its error.
    private func attempt(_ manager: URLSessionManager, _ url: URL) async throws -> Result<Answer, Error> {
        do { return .success(try await get(manager, url)) } catch { return .failure(error) }
    }

    func testChallengeCredentialResponseIsNotServedToAnotherUserOrToNoUser() async throws {
        let (_, shared) = cachingManager()
        let path = "/basic-auth/user/pass?Cache-Control=public,%20max-age%3D300&Vary=Authorization"
        let url = server.url(path)
        let alice = manager(sharing: shared, user: "user")
        let first = try await get(alice, url)
        let afterAlice = received(path).count
        XCTAssertEqual(afterAlice, 2, "the challenge, then the answer")
        let mallory = manager(sharing: shared, user: "user", password: "wrong")
        let stranger = manager(sharing: shared, user: nil)
        for other in [mallory, stranger] {
            let before = received(path).count
            let outcome = try await attempt(other, url)
            XCTAssertGreaterThan(received(path).count, before, "the server decides, not the cache")
            if case .success(let answer) = outcome {
                XCTAssertNotEqual(answer.serial, first.serial, "another user's stored response")
            }
        }
        let again = try await get(alice, url)
        XCTAssertEqual(again.serial, first.serial, "the user it was stored for is served from the cache")
    }

    func testPrivateResponseForOneUsersCookieIsNotServedToAnotherOrToNone() async throws {
        let (_, shared) = cachingManager()
        let path = query([("Cache-Control", "private, max-age=300")])
        let alice = manager(sharing: shared, user: nil)
        let bob = manager(sharing: shared, user: nil)
        let first = try await get(alice, server.url(path), headers: ["Cookie": "session=alice"])
        let again = try await get(alice, server.url(path), headers: ["Cookie": "session=alice"])
        XCTAssertEqual(again.serial, first.serial, "the same user is served from the cache")
        XCTAssertEqual(received(path).count, 1)
        let other = try await get(bob, server.url(path), headers: ["Cookie": "session=bob"])
        XCTAssertNotEqual(other.serial, first.serial)
        XCTAssertEqual(received(path).count, 2, "another user's cookie goes to the server")
        let none = try await get(bob, server.url(path))
        XCTAssertNotEqual(none.serial, first.serial)
        XCTAssertEqual(received(path).count, 3, "no cookie goes to the server")
        // A response made for anyone (no credentials, no cookie, not private) is served to anyone.
        let open = query([("Cache-Control", "max-age=300")])
        let anyone = try await get(bob, server.url(open))
        let forAlice = try await get(alice, server.url(open), headers: ["Cookie": "session=alice"])
        XCTAssertEqual(forAlice.serial, anyone.serial)
        XCTAssertEqual(received(open).count, 1)
    }

    // MARK: - Validators, Age, hop-by-hop fields, stale-while-revalidate, ranges

    func testCacheValidatorsDoNotFollowARedirectToAnotherOrigin() async throws {
        let target = server.url("/etag/moved")
        let origin = try await RawFaultServer.start { request in
            request.index == 0
                ? .respond(
                    RawFaultServer.response(body: "first", headers: ["ETag: \"moved\"", "Cache-Control: max-age=0"]))
                : .respond(
                    RawFaultServer.response(status: 302, body: "", headers: ["Location: \(target.absoluteString)"]))
        }
        defer { Task { try? await origin.shutdown() } }
        let (manager, _) = cachingManager()
        manager.responseSerializer = HTTPResponseSerializer()
        _ = try await get(manager, origin.url("/resource"))
        let answer = try await get(manager, origin.url("/resource"))
        XCTAssertTrue(
            String(decoding: origin.requests[1].bytes, as: UTF8.self).contains("If-None-Match: \"moved\""),
            "the stored response is revalidated at its origin")
        let atTarget = try XCTUnwrap(received("/etag/moved").first)
        XCTAssertNil(header("If-None-Match", of: atTarget), "the cache's validator stays with its origin")
        XCTAssertNil(header("If-Modified-Since", of: atTarget))
        XCTAssertEqual(answer.response.statusCode, 200, "a 304 only for a conditional request of the caller's own")
    }

    func testA304ForAnotherRepresentationUpdatesNothing() async throws {
        // RFC 9111 4.3.4: a 304 whose validator matches no stored response MUST NOT update one (found by
        // http-tests/cache-tests' engine against SessionKit; the suite cannot see it). The stored response answers as
        // it is, as browsers do, and is dropped.
        for (stored, answered, matches) in [
            ("ETag: \"a\"", "ETag: \"b\"", false), ("ETag: \"a\"", "ETag: W/\"a\"", true),
            // A Last-Modified alone differs between the nodes of one origin: taken for the stored response.
            ("Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT", "Last-Modified: Mon, 07 Nov 1994 08:49:37 GMT", true),
            ("ETag: \"a\"", "X-No-Validator: 1", true),
        ] {
            let origin = try await RawFaultServer.start { request in
                switch request.index {
                case 0:
                    return .respond(
                        RawFaultServer.response(body: "first", headers: [stored, "Cache-Control: max-age=0"]))
                case 1: return .respond(RawFaultServer.response(status: 304, body: "", headers: [answered, "X-V: 2"]))
                default: return .respond(RawFaultServer.response(body: "second", headers: ["Cache-Control: no-store"]))
                }
            }
            defer { Task { try? await origin.shutdown() } }
            let (manager, _) = cachingManager()
            manager.responseSerializer = HTTPResponseSerializer()
            _ = try await get(manager, origin.url("/resource"))
            let revalidated = try await data(manager, origin.url("/resource"))
            XCTAssertEqual(origin.requests.count, 2)
            let conditional = String(decoding: origin.requests[1].bytes, as: UTF8.self)
            XCTAssertTrue(conditional.contains("If-None-Match") || conditional.contains("If-Modified-Since"))
            XCTAssertEqual(revalidated.response.statusCode, 200, answered)
            XCTAssertEqual(revalidated.body, Data("first".utf8), "the stored body")
            if matches {
                XCTAssertEqual(
                    revalidated.response.value(forHTTPHeaderField: "X-V"), "2", "the stored response, updated")
                continue
            }
            XCTAssertNil(revalidated.response.value(forHTTPHeaderField: "X-V"), "the stored response, not updated")
            XCTAssertEqual(revalidated.response.value(forHTTPHeaderField: "ETag"), "\"a\"")
            // Dropped, not updated: the next request goes whole, unconditional.
            let again = try await data(manager, origin.url("/resource"))
            XCTAssertEqual(again.body, Data("second".utf8))
            XCTAssertEqual(origin.requests.count, 3)
            let third = String(decoding: origin.requests[2].bytes, as: UTF8.self)
            XCTAssertFalse(third.contains("If-None-Match") || third.contains("If-Modified-Since"), third)
        }
    }

    /// One GET through a data task, with its body as bytes.
    private func data(_ manager: URLSessionManager, _ url: URL) async throws -> (response: HTTPURLResponse, body: Data)
    {
        let (response, body, error): (URLResponse?, Any?, Error?) = try await awaitCallback { done in
            manager.dataTask(with: URLRequest(url: url)) { done(($0, $1, $2)) }.resume()
        }
        if let error { throw error }
        return (try XCTUnwrap(response as? HTTPURLResponse), body as? Data ?? Data())
    }

    func testServedFromTheCacheCarriesAnAgeField() async throws {
        let (manager, _) = cachingManager()
        _ = try await get(manager, server.url("/cache/60"))
        let stored = try await get(manager, server.url("/cache/60"))
        XCTAssertEqual(received("/cache/60").count, 1)
        let age = try XCTUnwrap(stored.response.value(forHTTPHeaderField: "Age"), "RFC 9111 4: Age on a stored answer")
        XCTAssertNotNil(Int(age))
    }

    func testHopByHopFieldsAreNotReplayedFromTheCache() async throws {
        let (manager, _) = cachingManager()
        let path = query([
            ("Cache-Control", "max-age=60"), ("X-Hop", "1"), ("Connection", "X-Hop"), ("Keep-Alive", "timeout=5"),
            ("X-End-To-End", "2"), ("Proxy-Authentication-Info", "nextnonce=\"abc\""),
        ])
        _ = try await get(manager, server.url(path))
        let stored = try await get(manager, server.url(path))
        XCTAssertEqual(received(path).count, 1)
        XCTAssertNil(stored.response.value(forHTTPHeaderField: "X-Hop"))
        XCTAssertNil(stored.response.value(forHTTPHeaderField: "Keep-Alive"))
        XCTAssertNil(
            stored.response.value(forHTTPHeaderField: "Proxy-Authentication-Info"),
            "the client's proxy's (RFC 9111 3.1)")
        XCTAssertEqual(stored.response.value(forHTTPHeaderField: "X-End-To-End"), "2")
    }

    func testStaleWhileRevalidateServesAtOnceAndRevalidatesInTheBackgroundOnce() async throws {
        let (manager, cache) = cachingManager()
        let path = query([
            ("Cache-Control", "max-age=1, stale-while-revalidate=600"), ("Age", "30"), ("ETag", "\"swr\""),
        ])
        let first = try await get(manager, server.url(path))
        let stale = try await get(manager, server.url(path))
        XCTAssertEqual(stale.serial, first.serial, "the stale response")
        XCTAssertNil(
            stale.response.value(forHTTPHeaderField: "X-Revalidation"),
            "served as stored, before the revalidation's 304 (which adds X-Revalidation) came back")
        // The background revalidation reaches the server and updates the stored response (bounded wait).
        func updated() -> Bool {
            let stored = cache.cachedResponse(for: URLRequest(url: server.url(path)))?.response as? HTTPURLResponse
            return stored?.value(forHTTPHeaderField: "X-Revalidation") != nil
        }
        for _ in 0..<250 where !updated() { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertTrue(updated(), "the 304's fields are stored")
        let requests = received(path)
        XCTAssertEqual(requests.count, 2, "one background revalidation")
        XCTAssertEqual(requests.last.flatMap { header("If-None-Match", of: $0) }, "\"swr\"")
        let beyond = query([("Cache-Control", "max-age=1, stale-while-revalidate=5"), ("Age", "30")])
        _ = try await get(manager, server.url(beyond))
        _ = try await get(manager, server.url(beyond))
        XCTAssertEqual(received(beyond).count, 2, "stale beyond the window: the server answers the request itself")
    }

    func testStaleIfErrorAnswersA5xxOrAFailedConnectionWithTheStoredResponse() async throws {
        let origin = try await RawFaultServer.start { request in
            let control = request.target == "/plain" ? "max-age=0" : "max-age=0, stale-if-error=600"
            switch request.index % 100 {
            case 0: return .respond(RawFaultServer.response(body: "stored", headers: ["Cache-Control: \(control)"]))
            case 1: return .respond(RawFaultServer.response(status: 503, body: "down"))
            default: return .reset
            }
        }
        defer { Task { try? await origin.shutdown() } }
        let (manager, _) = cachingManager()
        manager.responseSerializer = HTTPResponseSerializer()
        var outcomes: [(Int?, String?)] = []
        for _ in 0..<3 {
            let (response, data, _): (URLResponse?, Any?, Error?) = try await awaitCallback { done in
                manager.dataTask(with: URLRequest(url: origin.url("/resource"))) { done(($0, $1, $2)) }.resume()
            }
            outcomes.append(
                (
                    (response as? HTTPURLResponse)?.statusCode,
                    (data as? Data).map { String(decoding: $0, as: UTF8.self) }
                ))
        }
        XCTAssertEqual(outcomes[0].0, 200)
        XCTAssertEqual(outcomes[1].0, 200, "a 503 to the revalidation: the stale response answers")
        XCTAssertEqual(outcomes[1].1, "stored")
        XCTAssertEqual(outcomes[2].0, 200, "no answer at all: the stale response answers")
        XCTAssertEqual(outcomes[2].1, "stored")
    }

    func testRangeRequestIsAnsweredFromACompleteStoredResponse() async throws {
        let (manager, _) = cachingManager()
        manager.responseSerializer = HTTPResponseSerializer()
        let path = "/cache/60"
        _ = try await get(manager, server.url(path))
        var request = URLRequest(url: server.url(path))
        request.setValue("bytes=0-4", forHTTPHeaderField: "Range")
        let (response, data, error): (URLResponse?, Any?, Error?) = try await awaitCallback { done in
            manager.dataTask(with: request) { done(($0, $1, $2)) }.resume()
        }
        XCTAssertNil(error)
        let partial = try XCTUnwrap(response as? HTTPURLResponse)
        XCTAssertEqual(partial.statusCode, 206)
        XCTAssertEqual((data as? Data)?.count, 5)
        XCTAssertTrue(partial.value(forHTTPHeaderField: "Content-Range")?.hasPrefix("bytes 0-4/") == true)
        XCTAssertEqual(received(path).count, 1, "answered from the stored response")
    }

    /// A range the stored response cannot answer (several ranges) goes to the server, unless the policy or
    /// `only-if-cached` forbids the network: then nothing is sent (the policy fails it, `only-if-cached` gets a 504).
    func testARangeTheStoreCannotAnswerIsNotSentWhenTheNetworkIsForbidden() async throws {
        let (manager, _) = cachingManager()
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet(200..<300).union(IndexSet(integer: 504))
        manager.responseSerializer = serializer
        let path = "/cache/60"
        _ = try await get(manager, server.url(path))
        do {
            _ = try await get(
                manager, server.url(path), headers: ["Range": "bytes=0-1,3-4"], policy: .returnCacheDataDontLoad)
            XCTFail("a range the store cannot answer was answered under .returnCacheDataDontLoad")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable, "\(error)")
        }
        let onlyIfCached = try await get(
            manager, server.url(path), headers: ["Range": "bytes=0-1,3-4", "Cache-Control": "only-if-cached"])
        XCTAssertEqual(onlyIfCached.response.statusCode, 504)
        XCTAssertEqual(received(path).count, 1, "nothing more was sent")
        _ = try? await get(manager, server.url(path), headers: ["Range": "bytes=0-1,3-4"])
        XCTAssertEqual(received(path).count, 2, "allowed to load: sent as it is")
    }

    func testWithoutAURLCacheEveryRequestGoesOut() async throws {
        let manager = makeManager(transport: .curl)
        _ = try await get(manager, server.url("/cache/60"))
        _ = try await get(manager, server.url("/cache/60"))
        XCTAssertEqual(received("/cache/60").count, 2)
    }
}
