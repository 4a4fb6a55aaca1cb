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
