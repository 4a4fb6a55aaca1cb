@testable import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP cache's rules without I/O: `Cache-Control` parsing, HTTP dates, what may be stored, freshness and age
/// (RFC 9111), selection by `Vary`, what a 304 changes.
final class CacheRulesTests: XCTestCase {
    private let url = URL(string: "http://example.test/resource?q=1")!

    private func response(_ fields: [String: String], status: Int = 200) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
    }

    private func entry(
        _ fields: [String: String], request: URLRequest? = nil, receivedAt: Date = Date(), status: Int = 200
    ) -> CacheEntry {
        CacheEntry(
            response: response(fields, status: status), data: Data("body".utf8),
            request: request ?? URLRequest(url: url),
            requestTime: receivedAt, responseTime: receivedAt, policyKey: nil)
    }

    /// 20,000 stored responses with random values in every field the rules read (seeded, so a failure repeats): the
    /// rules answer, never trap, and never call a response fresh for longer than its lifetime allows.
    func testRandomFieldValuesNeverTrap() {
        var generator = SeededGenerator(seed: 0x5E55_1011)
        let alphabet = Array("0123456789 ,-:=\"abcdefghijklmnopqrstuvwxyzMGTNOVSunJa*\t;/+.")
        let names = ["Date", "Expires", "Age", "Last-Modified", "Cache-Control", "Vary", "ETag", "Pragma"]
        func randomValue() -> String {
            if Int.random(in: 0..<4, using: &generator) == 0 {
                return [
                    "max-age=99999999999999999999", "Sun, 06 Nov 999999999999 08:49:37 GMT", "-1", "1e308",
                    "max-age=-5, s-maxage=\"", "Age: 18446744073709551616",
                ].randomElement(using: &generator)!
            }
            return String(
                (0..<Int.random(in: 0..<40, using: &generator)).map { _ in
                    alphabet.randomElement(using: &generator)!
                })
        }
        let now = Date()
        for _ in 0..<20_000 {
            var fields: [String: String] = [:]
            for name in names where Bool.random(using: &generator) { fields[name] = randomValue() }
            var request = URLRequest(url: url)
            if Bool.random(using: &generator) { request.setValue(randomValue(), forHTTPHeaderField: "Cache-Control") }
            let stored = entry(
                fields, receivedAt: now.addingTimeInterval(-Double(Int.random(in: 0..<100_000, using: &generator))))
            let lifetime = stored.freshnessLifetime
            let age = stored.currentAge(at: now)
            XCTAssertFalse(lifetime.isNaN || age.isNaN)
            XCTAssertGreaterThanOrEqual(age, 0)
            if stored.isUsableWithoutValidation(under: CacheEntry.requestControl(of: request), at: now) {
                XCTAssertTrue(lifetime > age || CacheEntry.requestControl(of: request).maxStale != nil, "\(fields)")
            }
            _ = stored.matches(request)
            _ = CacheEntry.refusalToStore(stored.response, for: request, authenticated: Bool.random(using: &generator))
        }
    }

    func testCacheControlDirectives() {
        let control = CacheControl(#"public, MAX-AGE=60, s-maxage="120", no-cache="Set-Cookie, X-A", must-revalidate"#)
        XCTAssertEqual(control.maxAge, 60)
        XCTAssertEqual(control.sharedMaxAge, 120)
        XCTAssertTrue(control.isPublic)
        XCTAssertTrue(control.noCache)
        XCTAssertTrue(control.mustRevalidate)
        XCTAssertFalse(control.noStore)
        XCTAssertEqual(CacheControl("max-age=abc").maxAge, 0, "an invalid max-age means stale")
        XCTAssertEqual(CacheControl("max-age=10, max-age=20").maxAge, 10, "the first one counts")
        XCTAssertEqual(CacheControl("max-stale").maxStale, .infinity)
        XCTAssertEqual(CacheControl("max-age=99999999999999").maxAge, 2_147_483_648)
        XCTAssertTrue(CacheControl("").isEmpty)
        XCTAssertTrue(CacheControl("community=\"UCI\"").isEmpty, "unknown directives are ignored")
    }

    func testHTTPDateFormats() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), expected)
        XCTAssertEqual(HTTPDate.parse("Thu, 29 Feb 2024 23:59:59 GMT"), Date(timeIntervalSince1970: 1_709_251_199))
        XCTAssertNil(HTTPDate.parse("0"))
        XCTAssertNil(HTTPDate.parse("yesterday"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT"))
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 999999999999 08:49:37 GMT"), "a hostile year is refused, not trapped")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 9223372036854775807 08:49:37 GMT"))
        XCTAssertNotNil(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT"))
        let in2026 = Date(timeIntervalSince1970: 1_790_000_000)
        XCTAssertEqual(
            HTTPDate.parse("Tuesday, 01-Jan-80 00:00:00 GMT", now: in2026), Date(timeIntervalSince1970: 315_532_800),
            "2080 would be more than 50 years ahead: 1980")
        XCTAssertEqual(
            HTTPDate.parse("Saturday, 01-Jan-50 00:00:00 GMT", now: in2026),
            HTTPDate.parse("Sat, 01 Jan 2050 00:00:00 GMT"))
    }

    /// RFC 9110 5.6.7: the three forms (in any case, RFC 9111 4.2); RFC 9111 5.3: anything else in `Expires` means
    /// already expired.
    func testOnlyTheRFC9110DateFormsAreDatesAndAnInvalidExpiresIsExpired() {
        let notDates = [
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37", "Sun 06 Nov 1994 08:49:37 GMT", "Sun,  06 Nov 1994 08:49:37 GMT",
            "Sun, 06  Nov 1994 08:49:37 GMT", "Sun, 06-Nov-1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sum, 06 Nov 1994 08:49:37 GMT",
            "Sundae, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", " Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 UTC", "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 1994 GMT",
            "Sat, 31 Nov 1994 08:49:37 GMT", "Tue, 29 Feb 2023 00:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:37 GMT", "Sun, 06 Nov 1994 08:49:60 GMT", "Sun, 06 Nov 1994 08-49-37 GMT",
            "Sun, 06 Nov 1994 08:49:37GMT", "Sun,06 Nov 1994 08:49:37 GMT", "0", "-1", "", "Sun, 06 Nov 1994",
        ]
        for text in notDates {
            XCTAssertNil(HTTPDate.parse(text), text.debugDescription)
            let stored = entry(["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Expires": text])
            XCTAssertEqual(stored.freshnessLifetime, 0, "Expires: \(text.debugDescription) is already expired")
        }
        XCTAssertEqual(
            HTTPDate.parse("Sun Nov 06 08:49:37 1994"), Date(timeIntervalSince1970: 784_111_777),
            "asctime's day is 2DIGIT or SP DIGIT")
        // RFC 9111 4.2: a cache matches dates without regard to case; a day name that is not the date's is the
        // sender's slip (browsers read such dates too, http-tests/cache-tests `freshness-expires-*`).
        for text in [
            "sun, 06 nov 1994 08:49:37 gmt", "SUN, 06 NOV 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 gMT",
            "SUNDAY, 06-nov-94 08:49:37 Gmt", "sun NOV  6 08:49:37 1994", "Mon, 06 Nov 1994 08:49:37 GMT",
            "Thursday, 06-Nov-94 08:49:37 GMT", "Wed Nov  6 08:49:37 1994",
        ] {
            XCTAssertEqual(HTTPDate.parse(text), Date(timeIntervalSince1970: 784_111_777), text.debugDescription)
        }
        let fresh = entry(["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Expires": "Sun, 06 Nov 1994 08:59:37 GMT"])
        XCTAssertEqual(fresh.freshnessLifetime, 600)
    }

    /// Every date accepted prints back as the IMF-fixdate it names; every IMF-fixdate printed is read back.
    func testAcceptedDatesPrintBackAsIMFFixdate() {
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT")
        var generator = SeededGenerator(seed: 0xDA7E)
        for _ in 0..<5_000 {
            let date = Date(timeIntervalSince1970: TimeInterval(Int.random(in: 0..<253_402_300_800, using: &generator)))
            let text = HTTPDate.format(date)
            XCTAssertEqual(HTTPDate.parse(text), date, text)
        }
        for text in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Thu, 29 Feb 2024 23:59:59 GMT"] {
            let date = HTTPDate.parse(text)
            XCTAssertEqual(date.map(HTTPDate.format).flatMap { HTTPDate.parse($0) }, date, text)
        }
    }

    /// RFC 9111 5.1: a list-based `Age` uses its first member; an invalid one is ignored.
    func testAgeWithSeveralValuesUsesTheFirst() {
        let now = Date()
        let date = HTTPDate.format(now)
        XCTAssertEqual(entry(["Date": date, "Age": "100, 200"], receivedAt: now).currentAge(at: now), 100, accuracy: 1)
        XCTAssertEqual(entry(["Date": date, "Age": "100,200"], receivedAt: now).currentAge(at: now), 100, accuracy: 1)
        XCTAssertEqual(entry(["Date": date, "Age": "abc"], receivedAt: now).currentAge(at: now), 0, accuracy: 1)
        let stale = entry(["Date": date, "Age": "120, 5", "Cache-Control": "max-age=60"], receivedAt: now)
        XCTAssertFalse(stale.isUsableWithoutValidation(under: CacheControl(), at: now), "120 counts, not 5")
    }

    /// RFC 9111 3.1: the hop-by-hop fields and those `Connection` names are not stored (nor replayed).
    func testHopByHopFieldsAreNotStored() {
        let stored = entry([
            "Cache-Control": "max-age=60", "Connection": "keep-alive, X-Hop", "X-Hop": "1", "Keep-Alive": "timeout=5",
            "TE": "trailers", "Transfer-Encoding": "chunked", "Upgrade": "h2c", "Proxy-Authenticate": "Basic",
            "Proxy-Authorization": "Basic eA==", "X-End-To-End": "kept",
        ])
        for name in [
            "Connection", "X-Hop", "Keep-Alive", "TE", "Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
            "Proxy-Authorization",
        ] {
            XCTAssertNil(stored.response.value(forHTTPHeaderField: name), name)
        }
        XCTAssertEqual(stored.response.value(forHTTPHeaderField: "X-End-To-End"), "kept")
        XCTAssertEqual(stored.response.value(forHTTPHeaderField: "Cache-Control"), "max-age=60")
        let revalidated = stored.revalidated(
            by: response(["Connection": "X-New", "X-New": "hop", "ETag": "\"2\""], status: 304), requestTime: Date(),
            responseTime: Date())
        XCTAssertNil(revalidated?.response.value(forHTTPHeaderField: "X-New"), "a 304's hop-by-hop fields neither")
        XCTAssertEqual(revalidated?.response.value(forHTTPHeaderField: "ETag"), "\"2\"")
    }

    /// RFC 9111 4: a response served from the cache carries its current age.
    func testServedResponseCarriesItsAge() {
        let now = Date()
        let stored = entry(
            ["Date": HTTPDate.format(now), "Age": "30", "Cache-Control": "max-age=600"],
            receivedAt: now.addingTimeInterval(-12))
        let served = stored.servedResponse(at: now)
        XCTAssertEqual(served.value(forHTTPHeaderField: "Age").flatMap(Int.init), 42)
        XCTAssertEqual(served.statusCode, 200)
        XCTAssertEqual(served.value(forHTTPHeaderField: "Cache-Control"), "max-age=600")
    }

    /// RFC 5861 3: within its window a stale response may be served while it is revalidated, unless a directive asks
    /// for a validated answer.
    func testStaleWhileRevalidateWindow() {
        let now = Date()
        func stored(_ control: String, age: Int) -> CacheEntry {
            entry(["Date": HTTPDate.format(now), "Age": "\(age)", "Cache-Control": control], receivedAt: now)
        }
        let window = "max-age=10, stale-while-revalidate=60"
        XCTAssertTrue(stored(window, age: 30).mayServeWhileRevalidating(under: CacheControl(), at: now))
        XCTAssertTrue(stored(window, age: 70).mayServeWhileRevalidating(under: CacheControl(), at: now))
        XCTAssertFalse(stored(window, age: 71).mayServeWhileRevalidating(under: CacheControl(), at: now))
        XCTAssertFalse(stored("max-age=10", age: 30).mayServeWhileRevalidating(under: CacheControl(), at: now))
        XCTAssertFalse(
            stored(window + ", must-revalidate", age: 30).mayServeWhileRevalidating(under: CacheControl(), at: now))
        XCTAssertFalse(stored(window, age: 30).mayServeWhileRevalidating(under: CacheControl("no-cache"), at: now))
        XCTAssertFalse(stored(window, age: 30).mayServeWhileRevalidating(under: CacheControl("max-age=0"), at: now))
        XCTAssertEqual(CacheControl("stale-while-revalidate=\"5\"").staleWhileRevalidate, 5)
        let onError = "max-age=10, stale-if-error=60"
        XCTAssertTrue(stored(onError, age: 70).mayServeAfterError(at: now))
        XCTAssertFalse(stored(onError, age: 71).mayServeAfterError(at: now))
        XCTAssertFalse(stored(onError + ", must-revalidate", age: 30).mayServeAfterError(at: now))
        XCTAssertFalse(stored(onError + ", no-cache", age: 30).mayServeAfterError(at: now))
        XCTAssertFalse(stored("max-age=10", age: 30).mayServeAfterError(at: now))
        XCTAssertTrue(CacheControl("private=\"Set-Cookie\"").isPrivate)
        XCTAssertFalse(CacheControl("proxy-revalidate").mustRevalidate, "a shared cache's directive")
    }

    /// RFC 9110 14.2 and RFC 9111 3.4: one satisfiable byte range of a complete stored 200 is answered with a 206.
    func testARangeIsCutFromACompleteStoredResponse() throws {
        let stored = CacheEntry(
            response: response(["Cache-Control": "max-age=60", "Content-Length": "10"]), data: Data("0123456789".utf8),
            request: URLRequest(url: url), requestTime: Date(), responseTime: Date(), policyKey: nil)
        let cases: [(String, String, String)] = [
            ("bytes=0-3", "0123", "bytes 0-3/10"), ("bytes=5-", "56789", "bytes 5-9/10"),
            ("bytes=-2", "89", "bytes 8-9/10"), ("bytes=7-100", "789", "bytes 7-9/10"),
            ("bytes=-50", "0123456789", "bytes 0-9/10"),
            (" bytes=2-2", "2", "bytes 2-2/10"),
        ]
        for (range, body, contentRange) in cases {
            let partial = try XCTUnwrap(stored.partial(for: range), range)
            XCTAssertEqual(partial.response.statusCode, 206)
            XCTAssertEqual(String(decoding: partial.data, as: UTF8.self), body, range)
            XCTAssertEqual(partial.response.value(forHTTPHeaderField: "Content-Range"), contentRange, range)
            XCTAssertEqual(partial.response.value(forHTTPHeaderField: "Content-Length"), "\(body.utf8.count)")
        }
        for range in ["bytes=10-", "bytes=5-2", "bytes=0-1,3-4", "items=0-1", "bytes=-0", "bytes=a-b", "bytes="] {
            XCTAssertNil(stored.partial(for: range), range)
        }
        let coded = entry(["Cache-Control": "max-age=60", "Content-Encoding": "gzip"])
        XCTAssertNil(coded.partial(for: "bytes=0-1"), "ranges count coded bytes; the stored ones are decoded")
        XCTAssertNil(entry(["Cache-Control": "max-age=60"], status: 203).partial(for: "bytes=0-1"))
    }

    /// A response stored for one principal (credentials, cookies) is served to that principal only; one stored for
    /// nobody in particular is served to anyone unless it is `private` or sets a cookie.
    func testPrincipalsDecideWhoIsServed() {
        var alice = URLRequest(url: url)
        alice.setValue("session=alice", forHTTPHeaderField: "Cookie")
        var bob = URLRequest(url: url)
        bob.setValue("session=bob", forHTTPHeaderField: "Cookie")
        let forAlice = entry(["Cache-Control": "max-age=60"], request: alice)
        XCTAssertTrue(forAlice.mayServe(principal: CachePrincipal.of(alice)))
        XCTAssertFalse(forAlice.mayServe(principal: CachePrincipal.of(bob)))
        XCTAssertFalse(forAlice.mayServe(principal: nil))
        let anonymous = entry(["Cache-Control": "max-age=60"])
        XCTAssertTrue(anonymous.mayServe(principal: CachePrincipal.of(alice)), "what the server gave anyone")
        XCTAssertFalse(entry(["Cache-Control": "private, max-age=60"]).mayServe(principal: CachePrincipal.of(bob)))
        XCTAssertFalse(entry(["Cache-Control": "max-age=60", "Set-Cookie": "a=1"]).mayServe(principal: "x"))
        let withCredential = CachePrincipal.asSent(URLRequest(url: url), credential: "1 alice:secret")
        let otherCredential = CachePrincipal.asSent(URLRequest(url: url), credential: "1 bob:secret")
        XCTAssertNotEqual(CachePrincipal.of(withCredential), CachePrincipal.of(otherCredential))
        let stored = entry(["Cache-Control": "max-age=60", "Vary": "Authorization"], request: withCredential)
        XCTAssertFalse(
            stored.cachedURLResponse.userInfo.map { "\($0)" }?.contains("secret") ?? true, "no secret is kept")
        XCTAssertTrue(stored.matches(withCredential))
        XCTAssertFalse(stored.matches(otherCredential))
        XCTAssertFalse(stored.matches(URLRequest(url: url)))
    }

    func testHostileDateFieldsInAStoredResponseDoNotTrap() {
        let hostile = "Sun, 06 Nov 999999999999 08:49:37 GMT"
        let stored = entry(["Date": hostile, "Expires": hostile, "Last-Modified": hostile, "Cache-Control": "public"])
        XCTAssertEqual(stored.freshnessLifetime, 0)
        XCTAssertGreaterThanOrEqual(stored.currentAge(at: Date()), 0)
    }

    func testWhatMayBeStored() {
        let get = URLRequest(url: url)
        XCTAssertNil(
            CacheEntry.refusalToStore(response(["Cache-Control": "max-age=60"]), for: get, authenticated: false))
        XCTAssertNil(CacheEntry.refusalToStore(response(["ETag": "\"a\""]), for: get, authenticated: false))
        XCTAssertNotNil(CacheEntry.refusalToStore(response([:]), for: get, authenticated: false), "nothing to go on")
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["Cache-Control": "no-store, max-age=9"]), for: get, authenticated: false))
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["Cache-Control": "max-age=9", "Vary": "*"]), for: get, authenticated: false)
        )
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["ETag": "\"a\""], status: 302), for: get, authenticated: false),
            "302 is not heuristically cacheable and has no explicit freshness")
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["Cache-Control": "max-age=9"], status: 206), for: get, authenticated: false))
        var post = get
        post.httpMethod = "POST"
        XCTAssertNotNil(
            CacheEntry.refusalToStore(response(["Cache-Control": "max-age=9"]), for: post, authenticated: false))
        for permission in ["public, max-age=9", "max-age=9, must-revalidate", "s-maxage=9"] {
            XCTAssertNil(
                CacheEntry.refusalToStore(response(["Cache-Control": permission]), for: get, authenticated: true),
                permission)
        }
        XCTAssertNotNil(
            CacheEntry.refusalToStore(response(["Cache-Control": "private, max-age=9"]), for: get, authenticated: true))
    }

    func testFreshnessLifetimeAndAge() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let date = "Tue, 14 Nov 2023 22:13:20 GMT"  // = now
        XCTAssertEqual(HTTPDate.parse(date), now)
        XCTAssertEqual(entry(["Cache-Control": "max-age=60, s-maxage=600"]).freshnessLifetime, 60)
        XCTAssertEqual(
            entry(["Cache-Control": "s-maxage=600"]).freshnessLifetime, 0, "a private cache ignores s-maxage")
        XCTAssertEqual(
            entry(["Date": date, "Expires": "Tue, 14 Nov 2023 22:23:20 GMT"], receivedAt: now).freshnessLifetime, 600)
        XCTAssertEqual(entry(["Date": date, "Expires": "0"], receivedAt: now).freshnessLifetime, 0)
        XCTAssertEqual(
            entry(["Date": date, "Last-Modified": "Sat, 04 Nov 2023 22:13:20 GMT"], receivedAt: now).freshnessLifetime,
            86_400, "a tenth of ten days")
        XCTAssertEqual(
            entry(["Date": date, "Last-Modified": "Tue, 14 Nov 2023 21:13:20 GMT"], receivedAt: now).freshnessLifetime,
            360)
        XCTAssertEqual(
            entry(["Date": date, "Last-Modified": "Sat, 04 Nov 2023 22:13:20 GMT"], receivedAt: now, status: 302)
                .freshnessLifetime, 0, "no heuristic for a status that is not heuristically cacheable")
        let aged = entry(["Cache-Control": "max-age=60", "Age": "30", "Date": date], receivedAt: now)
        XCTAssertEqual(aged.currentAge(at: now.addingTimeInterval(10)), 40)
        XCTAssertTrue(aged.isUsableWithoutValidation(under: CacheControl(), at: now.addingTimeInterval(10)))
        XCTAssertFalse(aged.isUsableWithoutValidation(under: CacheControl(), at: now.addingTimeInterval(31)))
        var wantsFresh = URLRequest(url: url)
        wantsFresh.setValue("min-fresh=25", forHTTPHeaderField: "Cache-Control")
        XCTAssertFalse(
            aged.isUsableWithoutValidation(
                under: CacheEntry.requestControl(of: wantsFresh), at: now.addingTimeInterval(10)))
    }

    func testVaryAndURLSelectTheEntry() {
        var english = URLRequest(url: url)
        english.setValue("en", forHTTPHeaderField: "Accept-Language")
        let stored = entry(["Cache-Control": "max-age=60", "Vary": "accept-language"], request: english)
        XCTAssertTrue(stored.matches(english))
        var french = english
        french.setValue("fr", forHTTPHeaderField: "Accept-Language")
        XCTAssertFalse(stored.matches(french))
        XCTAssertFalse(stored.matches(URLRequest(url: url)), "an absent field differs from a present one")
        XCTAssertFalse(
            entry(["Cache-Control": "max-age=60"]).matches(
                URLRequest(url: URL(string: "http://example.test/resource")!)),
            "another query")
        XCTAssertTrue(
            entry(["Cache-Control": "max-age=60"]).matches(
                URLRequest(url: URL(string: "http://example.test/resource?q=1#part")!)), "the fragment does not count")
    }

    func testA304UpdatesFieldsButNotTheBodyOrItsLength() throws {
        let stored = entry(["ETag": "\"a\"", "Content-Length": "4", "X-Old": "1", "Cache-Control": "no-cache"])
        let notModified = response(["ETag": "\"a\"", "Content-Length": "0", "X-New": "2", "Cache-Control": "max-age=5"])
        let updated = try XCTUnwrap(stored.revalidated(by: notModified, requestTime: Date(), responseTime: Date()))
        XCTAssertEqual(updated.response.statusCode, 200)
        XCTAssertEqual(updated.data, stored.data)
        XCTAssertEqual(updated.response.value(forHTTPHeaderField: "Content-Length"), "4")
        XCTAssertEqual(updated.response.value(forHTTPHeaderField: "X-Old"), "1")
        XCTAssertEqual(updated.response.value(forHTTPHeaderField: "X-New"), "2")
        XCTAssertEqual(updated.response.value(forHTTPHeaderField: "Cache-Control"), "max-age=5")
        let aged = entry(["ETag": "\"a\"", "Age": "500", "Cache-Control": "max-age=600"])
        let refreshed = try XCTUnwrap(
            aged.revalidated(by: response(["ETag": "\"a\""], status: 304), requestTime: Date(), responseTime: Date()))
        XCTAssertNil(refreshed.response.value(forHTTPHeaderField: "Age"), "the old Age went with the old response")
        XCTAssertTrue(refreshed.isUsableWithoutValidation(under: CacheControl(), at: Date()))
        let conditional = try XCTUnwrap(stored.conditionalRequest(for: URLRequest(url: url)))
        XCTAssertEqual(conditional.value(forHTTPHeaderField: "If-None-Match"), "\"a\"")
        XCTAssertNil(entry(["Cache-Control": "max-age=5"]).conditionalRequest(for: URLRequest(url: url)))
    }

    /// RFC 9111 4.3.4: a 304 freshens a stored response whose lifetime is heuristic (its new `Date` restarts it), so
    /// the updated entry is written again; one with no lifetime at all changes nothing worth a write.
    func testA304FreshensAHeuristicLifetime() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let stored = entry(
            ["Date": HTTPDate.format(now), "Last-Modified": HTTPDate.format(now - 100), "ETag": "\"x\""],
            receivedAt: now)
        XCTAssertEqual(stored.freshnessLifetime, 10)
        let later = now + 15
        XCTAssertFalse(stored.isUsableWithoutValidation(under: CacheControl(), at: later))
        let notModified = response(["Date": HTTPDate.format(later), "ETag": "\"x\""], status: 304)
        let updated = try XCTUnwrap(stored.revalidated(by: notModified, requestTime: later, responseTime: later))
        XCTAssertTrue(updated.differs(from: stored), "the renewed lifetime is worth storing")
        XCTAssertTrue(updated.isUsableWithoutValidation(under: CacheControl(), at: later + 1))
        let validatorOnly = entry(["ETag": "\"x\""], receivedAt: now)
        let same = try XCTUnwrap(
            validatorOnly.revalidated(
                by: response(["ETag": "\"x\""], status: 304), requestTime: later, responseTime: later))
        XCTAssertFalse(same.differs(from: validatorOnly), "nothing a later request would see changed")
        let noCache = entry(
            ["Date": HTTPDate.format(now), "Last-Modified": HTTPDate.format(now - 100), "Cache-Control": "no-cache"],
            receivedAt: now)
        let revalidatedNoCache = try XCTUnwrap(
            noCache.revalidated(
                by: response(["Date": HTTPDate.format(later)], status: 304), requestTime: later, responseTime: later))
        XCTAssertFalse(revalidatedNoCache.differs(from: noCache), "no-cache: revalidated each time anyway")
    }

    /// The guard of the copy into a `URLCache`'s memory of a response read from its disk: a read made before someone
    /// stored or dropped the URL's response is out of date and is not copied (it would replace the newer response in
    /// memory); a current read is copied once a minute at most, and never the object stored last.
    func testAReadOutOfDateIsNotBroughtIntoMemory() {
        let store = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, diskPath: nil)
        let index = ResponseCache.Index.shared(for: store)
        let key = "http://example.test/kept"
        func cached(_ body: String) -> CachedURLResponse {
            CachedURLResponse(response: response(["ETag": "\"\(body)\""]), data: Data(body.utf8))
        }
        let (read, newer) = (cached("read"), cached("newer"))
        let readAt = index.generation(of: key)
        index.serializingStores { index.markPresent(key, storing: newer) }  // stored between the read and the copy
        index.serializingStores {
            XCTAssertFalse(index.shouldKeepInMemory(read, key: key, readAt: readAt), "the read is out of date")
            XCTAssertFalse(
                index.shouldKeepInMemory(newer, key: key, readAt: index.generation(of: key)), "the object stored last")
            XCTAssertTrue(index.shouldKeepInMemory(read, key: key, readAt: index.generation(of: key)), "a current read")
            XCTAssertFalse(
                index.shouldKeepInMemory(read, key: key, readAt: index.generation(of: key)), "once a minute at most")
        }
        let other = "http://example.test/dropped"
        let readBeforeTheDrop = index.generation(of: other)
        index.serializingStores { index.markAbsent(other) }  // dropped between the read and the copy
        index.serializingStores {
            XCTAssertFalse(index.shouldKeepInMemory(read, key: other, readAt: readBeforeTheDrop), "dropped since")
            XCTAssertTrue(index.shouldKeepInMemory(read, key: other, readAt: index.generation(of: other)))
        }
    }

    /// RFC 9111 4.3.4: a 304's entity tag selects the stored response with the same tag (compared weakly); a strong
    /// tag does not select a stored response that has none.
    func testA304SelectsByItsValidator() {
        func contradicts(_ stored: String?, _ new: String?) -> Bool {
            entry(stored.map { ["ETag": $0] } ?? ["Last-Modified": "Sat, 04 Nov 2023 22:13:20 GMT"])
                .isContradicted(by: response(new.map { ["ETag": $0] } ?? [:], status: 304))
        }
        XCTAssertFalse(contradicts("\"a\"", "\"a\""))
        XCTAssertTrue(contradicts("\"a\"", "\"b\""))
        XCTAssertFalse(contradicts("W/\"a\"", "W/\"a\""), "weak against weak")
        XCTAssertFalse(contradicts("\"a\"", "W/\"a\""), "a weak tag matches weakly")
        XCTAssertFalse(contradicts("W/\"a\"", "\"a\""), "nginx's compressed 200 is weak, its 304 strong")
        XCTAssertTrue(contradicts(nil, "\"a\""), "a strong tag, and none stored")
        XCTAssertFalse(contradicts(nil, "W/\"a\""))
        XCTAssertFalse(contradicts("\"a\"", nil), "a 304 without a tag is taken for the entry")
    }

    /// `must-understand` (RFC 9111 5.2.2.3): stored only for a status this cache implements, then despite `no-store`.
    /// The cache's own 304 to a caller's validators that may not reach the server (RFC 9110 13.1.2, 13.1.3, 13.2.1,
    /// 15.4.5; RFC 9111 4.3.2).
    func testTheCachesOwn304() throws {
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let (before, after) = ("Sat, 05 Nov 1994 08:49:37 GMT", "Mon, 07 Nov 1994 08:49:37 GMT")
        let stored = entry([
            "ETag": "W/\"v1\"", "Last-Modified": modified, "Date": after, "Content-Type": "text/plain",
            "Content-Length": "4", "Cache-Control": "max-age=60", "X-Other": "1",
        ])
        func status(_ ifNoneMatch: String?, _ ifModifiedSince: String?, of entry: CacheEntry? = nil) -> Int? {
            (entry ?? stored).notModified(ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince)?.response
                .statusCode
        }
        XCTAssertEqual(status("\"v1\"", nil), 304, "weak comparison")
        XCTAssertEqual(status(" , \"x\",, W/\"v1\" ", nil), 304, "empty elements are ignored")
        XCTAssertEqual(status("\"a,b\", \"v1\"", nil), 304, "a comma inside quotes")
        XCTAssertEqual(status("*", nil), 304)
        XCTAssertEqual(status("*", nil, of: entry([:])), 304, "* names a stored response without a tag too")
        for notNaming in ["\"v2\"", "\"v1\" junk", "\"v1", "v1", "\"v 1\"", "w/\"v1\"", "\"v1\"\u{301}", ""] {
            XCTAssertNil(status(notNaming, nil), notNaming)
        }
        XCTAssertNil(status("\"v1\"", nil, of: entry([:])), "no stored tag")
        XCTAssertEqual(status(nil, modified), 304)
        XCTAssertEqual(status(nil, "  \(after) "), 304)
        XCTAssertNil(status(nil, before))
        XCTAssertNil(status(nil, "yesterday"), "not an HTTP-date: ignored")
        XCTAssertNil(status("\"v2\"", after), "If-None-Match decides, If-Modified-Since is not looked at")
        // Without Last-Modified: the stored Date, else the arrival when known.
        XCTAssertEqual(status(nil, after, of: entry(["Date": after])), 304)
        XCTAssertNil(status(nil, modified, of: entry(["Date": after])))
        let arrival = Date(timeIntervalSince1970: 1_000_000_000)
        let since = HTTPDate.format(arrival.addingTimeInterval(60))
        XCTAssertEqual(status(nil, since, of: entry([:], receivedAt: arrival)), 304)
        XCTAssertNil(status(nil, since, of: entry([:], receivedAt: .distantPast)), "no known arrival")
        // Only a 2xx is evaluated (RFC 9110 13.2.1).
        XCTAssertNil(status("\"v1\"", nil, of: entry(["ETag": "\"v1\""], status: 404)))
        XCTAssertNil(status(nil, after, of: entry(["Date": modified], status: 404)))
        XCTAssertNil(status("*", nil, of: entry([:], status: 301)))
        let made = try XCTUnwrap(stored.notModified(ifNoneMatch: "\"v1\"", ifModifiedSince: nil))
        XCTAssertTrue(made.data.isEmpty)
        XCTAssertEqual(
            Set(made.response.allHeaderFields.keys.compactMap { ($0 as? String)?.lowercased() }),
            ["etag", "last-modified", "date", "cache-control"], "what a 304 carries, no representation metadata")
    }

    func testMustUnderstand() {
        let get = URLRequest(url: url)
        let understood = response(["Cache-Control": "max-age=3600, must-understand, no-store"])
        XCTAssertNil(CacheEntry.refusalToStore(understood, for: get, authenticated: false))
        XCTAssertTrue(
            entry(["Cache-Control": "max-age=3600, must-understand, no-store"])
                .isUsableWithoutValidation(under: CacheControl(), at: Date()))
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["Cache-Control": "max-age=3600, must-understand"], status: 599), for: get,
                authenticated: false))
        XCTAssertNotNil(
            CacheEntry.refusalToStore(
                response(["Cache-Control": "max-age=3600, must-understand"], status: 299), for: get,
                authenticated: false))
        let noStore = entry(["Cache-Control": "max-age=3600, no-store"])
        XCTAssertFalse(
            noStore.isUsableWithoutValidation(under: CacheControl(), at: Date()), "a no-store response is never used")
    }

    /// RFC 9110 5.6.4: a backslash in a quoted string escapes the quote after it.
    func testEscapedQuotesStayInTheirQuotedString() {
        XCTAssertEqual(CacheControl(#"ext="\", max-age=3600, x=\"", max-age=1"#).maxAge, 1)
        XCTAssertEqual(CacheControl(#"ext="a\\", max-age=7"#).maxAge, 7, "an escaped backslash ends nothing")
    }
}

/// A deterministic generator (SplitMix64), so that a random test repeats exactly.
private struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
