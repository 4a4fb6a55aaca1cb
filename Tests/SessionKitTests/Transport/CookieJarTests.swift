import XCTest

import CCurl
@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RFC 6265's cookie rules as the curl transport applies them: parsing (5.2), dates (5.1.1), the storage model (5.3)
/// and the choice of cookies to send (5.4), without I/O; then through a loopback server.
final class CookieJarTests: LoopbackTestCase {
    private let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func freshJar() -> CookieJar {
        CookieJar(storage: makeOwnCookieStorage())
    }

    private func url(_ string: String) throws -> URL { try XCTUnwrap(URL(string: string)) }

    // MARK: - Parsing

    func testSetCookieIsReadAsUserAgentsReadIt() {
        let cases: [(String, (String, String)?)] = [
            ("a=b", ("a", "b")),
            ("  A  = BC  ;foo;;;   bar", ("A", "BC")),
            ("A=== BC", ("A", "== BC")),
            ("z=y, a=b", ("z", "y, a=b")),  // a comma is the value's
            ("aBc=\"zz;pp\" ; ;", ("aBc", "\"zz")),
            ("x=", ("x", "")),
            ("foo", nil),  // no `=`
            ("=x", nil),  // no name
            ("", nil),
            ("a=b\u{1}c", nil),  // a control character
            ("a=b; Path=/\u{1}", nil),  // one in an attribute too (RFC 6265bis 5.6)
            ("a=b; x=\u{7F}", nil),
        ]
        for (field, expected) in cases {
            let cookie = SetCookie(field, now: now)
            XCTAssertEqual(cookie.map { [$0.name, $0.value] }, expected.map { [$0.0, $0.1] }, field)
        }
        // 4096 bytes of name and value at most.
        XCTAssertEqual(SetCookie("a=" + String(repeating: "v", count: 4095), now: now)?.value.utf8.count, 4095)
        XCTAssertNil(SetCookie("a=" + String(repeating: "v", count: 4096), now: now))
    }

    func testAttributes() throws {
        let cookie = try XCTUnwrap(
            SetCookie(
                "a=b; Path=/qux; Path=/; DOMAIN=.Example.COM; seCURe; HttpOnly; SameSite=Lax; Secure=whatever; x=y",
                now: now))
        XCTAssertEqual(cookie.path, "/", "the last Path wins")
        XCTAssertEqual(cookie.domain, "example.com", "lowercased, without its dot")
        XCTAssertTrue(cookie.isSecure)
        XCTAssertTrue(cookie.isHTTPOnly)
        XCTAssertEqual(cookie.sameSite, "Lax")
        XCTAssertNil(try XCTUnwrap(SetCookie("a=b; Path=/qux; Path=", now: now)).path, "an empty Path: the default")
        XCTAssertNil(try XCTUnwrap(SetCookie("a=b; Path=qux", now: now)).path, "a Path not starting with /")
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; Domain=example.org; Domain=", now: now)).domain, "example.org",
            "an empty Domain is ignored")
        XCTAssertFalse(try XCTUnwrap(SetCookie("a=b; \"Secure\"", now: now)).isSecure)
        XCTAssertNil(
            try XCTUnwrap(SetCookie("a=b; Domain=example.org; Domain=.", now: now)).domain,
            "a Domain of only a dot: host-only")
        let long = String(repeating: "x", count: 1100)
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; Path=/ok; Path=/\(long)", now: now)).path, "/ok",
            "an attribute value over 1024 bytes is ignored")
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; Domain=\(long).com", now: now)).domain, nil,
            "an over-long Domain is ignored, not the cookie")
    }

    func testMaxAgeWinsOverExpiresAndZeroDeletes() throws {
        let future = "Expires=Wed, 09 Jun 2121 10:18:14 GMT"
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; Max-Age=60; \(future)", now: now)).expiry, now.addingTimeInterval(60))
        XCTAssertEqual(try XCTUnwrap(SetCookie("a=b; \(future); max-age=0", now: now)).expiry, .distantPast)
        XCTAssertEqual(try XCTUnwrap(SetCookie("a=b; Max-Age=-5", now: now)).expiry, .distantPast)
        // Not a number: ignored, so Expires applies, capped at 400 days (RFC 6265bis 5.6.1).
        let latest = now.addingTimeInterval(400 * 86_400)
        XCTAssertEqual(try XCTUnwrap(SetCookie("a=b; Max-Age=50,399; \(future)", now: now)).expiry, latest)
        XCTAssertNil(try XCTUnwrap(SetCookie("a=b; Max-Age=+5", now: now)).expiry)
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; Max-Age=99999999999999999999999", now: now)).expiry, latest,
            "too long: as far as the cap")
        let nearer = "Expires=" + HTTPDate.format(now.addingTimeInterval(86_400))
        XCTAssertEqual(
            try XCTUnwrap(SetCookie("a=b; \(nearer)", now: now)).expiry, now.addingTimeInterval(86_400),
            "within the cap: as sent")
    }

    func testCookieDates() {
        let expected = Date(timeIntervalSince1970: 4_778_907_494)  // 2121-06-09 10:18:14 UTC
        for text in [
            "Wed, 09 Jun 2121 10:18:14 GMT", "Wed, 09-Jun-2121 10:18:14 GMT", "Wed Jun 9 10:18:14 2121",
            "9 jun 2121 10:18:14", "JUNE 09 2121 10:18:14", "2121 Jun 09 10:18:14 UTC+1",
        ] {
            XCTAssertEqual(CookieDate.parse(text), expected, text)
        }
        XCTAssertEqual(
            CookieDate.parse("Thu, 10 Apr 80 22:00:00 GMT"), Date(timeIntervalSince1970: 324_252_000), "80 is 1980")
        XCTAssertEqual(
            CookieDate.parse("Thu, 10 Apr 30 22:00:00 GMT"), Date(timeIntervalSince1970: 1_902_088_800), "30 is 2030")
        for text in [
            "", "Wed, 09 Jun 2121", "Wed, 31 Jun 2121 10:18:14 GMT", "Wed, 09 Jun 1600 10:18:14 GMT",
            "Wed, 09 Jun 2121 24:00:00 GMT", "Wed, 09 Jux 2121 10:18:14 GMT", "Wed, 09 Jun 2121 10:18 GMT",
            "Wed, 009 Jun 2121 10:18:14 GMT",
        ] {
            XCTAssertNil(CookieDate.parse(text), text)
        }
    }

    // MARK: - The storage model

    func testADomainTheHostIsNotInIsRefused() throws {
        let jar = freshJar()
        let origin = try url("http://www.example.com/a/b/c")
        jar.store(
            [
                "evil=1; Domain=evil.com", "tld=1; Domain=com", "dotted=1; Domain=.com",
                "sibling=1; Domain=other.example.com",
                "parent=1; Domain=example.com", "self=1; Domain=www.example.com",
            ], from: origin, now: now)
        XCTAssertEqual(
            Set(jar.storage.cookies?.map(\.name) ?? []), ["parent", "self"], "only the host and the domains it is in")
        XCTAssertEqual(jar.header(for: try url("http://example.com/a/b/"), now: now), "parent=1")
        XCTAssertNil(jar.header(for: try url("http://evil.com/"), now: now))
        XCTAssertNil(jar.header(for: try url("http://foo.com/"), now: now))
        // An IP address is a host of its own: a Domain names it exactly, or the cookie is refused.
        let ip = try url("http://127.0.0.1/")
        jar.store(["ipself=1; Domain=127.0.0.1", "ipother=1; Domain=0.0.1"], from: ip, now: now)
        XCTAssertEqual(jar.header(for: ip, now: now), "ipself=1")
        XCTAssertNil(jar.header(for: try url("http://1.127.0.0.1/"), now: now))
    }

    /// RFC 6265 5.3 step 5: a `Domain` that is a public suffix is refused, unless it is the host itself, which then
    /// sets a host-only cookie. Multi-label suffixes (`co.uk`) and the list's private section (`github.io`) count, by
    /// the Public Suffix List libcurl reads (libpsl).
    func testAPublicSuffixDomainIsRefused() throws {
        try XCTSkipIf(sk_is_public_suffix("co.uk") < 0, "libpsl (libcurl's dependency) cannot be loaded here")
        XCTAssertTrue(CookieJar.isPublicSuffix("co.uk"))
        XCTAssertTrue(CookieJar.isPublicSuffix("github.io"))
        XCTAssertFalse(CookieJar.isPublicSuffix("example.co.uk"))
        let jar = freshJar()
        jar.store(
            ["suffix=1; Domain=co.uk", "site=1; Domain=example.co.uk"], from: try url("http://www.example.co.uk/"),
            now: now)
        XCTAssertEqual(jar.storage.cookies?.map(\.name), ["site"])
        XCTAssertNil(jar.header(for: try url("http://other.co.uk/"), now: now), "nothing for another co.uk site")
        jar.store(["pages=1; Domain=github.io"], from: try url("https://evil.github.io/"), now: now)
        XCTAssertNil(jar.header(for: try url("https://victim.github.io/"), now: now))
        // The suffix's own host may name it, as a host-only cookie.
        let own = try url("http://co.uk/")
        jar.store(["own=1; Domain=co.uk"], from: own, now: now)
        XCTAssertEqual(jar.header(for: own, now: now), "own=1")
        XCTAssertNil(jar.header(for: try url("http://www.co.uk/"), now: now), "host-only")
    }

    /// A `Domain` ending in a dot escapes the public-suffix list (libpsl: `co.uk.` is not a suffix) and domain-matches
    /// `evil.co.uk.`: it is refused, or every `co.uk.` site would get the cookie (libcurl's CVE-2022-27779).
    func testADomainEndingInADotIsRefused() throws {
        let jar = freshJar()
        jar.store(["x=1; Domain=co.uk."], from: try url("http://evil.co.uk./"), now: now)
        jar.store(["y=1; Domain=github.io."], from: try url("https://evil.github.io./"), now: now)
        jar.store(["z=1; Domain=example.com."], from: try url("http://www.example.com./"), now: now)
        XCTAssertEqual(jar.storage.cookies?.count ?? 0, 0)
        XCTAssertNil(jar.header(for: try url("http://victim.co.uk./"), now: now))
        XCTAssertNil(jar.header(for: try url("https://victim.github.io./"), now: now))
        jar.store(["host=1"], from: try url("http://www.example.com./"), now: now)
        XCTAssertEqual(
            jar.header(for: try url("http://www.example.com./"), now: now), "host=1", "host-only still works")
    }

    /// Responses cannot grow the storage without bound (RFC 6265 6.1): past the limit per domain, then in all, the
    /// expired and then the oldest cookies are deleted, and the newest stay.
    func testTheStorageKeepsItsLimitsPerDomainAndInAll() throws {
        let jar = CookieJar(storage: makeOwnCookieStorage(), limits: (perDomain: 5, total: 8))
        let site = try url("http://a.example/")
        for index in 0..<3 {
            jar.store(["gone\(index)=1; Max-Age=1"], from: site, now: now)
        }
        let later = now.addingTimeInterval(10)
        for index in 0..<7 {
            jar.store(["a\(index)=\(index)"], from: site, now: later.addingTimeInterval(Double(index)))
        }
        let kept = Set(jar.storage.cookies?.map(\.name) ?? [])
        XCTAssertEqual(kept.count, 5, "\(kept)")
        XCTAssertTrue(kept.isDisjoint(with: ["gone0", "gone1", "gone2"]), "the expired went first: \(kept)")
        XCTAssertTrue(kept.contains("a6"), "the newest stays: \(kept)")
        for (host, count) in [("b.example", 2), ("c.example", 2)] {
            for index in 0..<count {
                jar.store(["\(host.prefix(1))\(index)=1"], from: try url("http://\(host)/"), now: later)
            }
        }
        XCTAssertEqual(jar.storage.cookies?.count, 8, "the total")
        XCTAssertEqual(jar.header(for: try url("http://c.example/"), now: later), "c0=1; c1=1", "the newest stay")
    }

    func testHostOnlyCookiesStayOnTheirHost() throws {
        let jar = freshJar()
        jar.store(["host=1"], from: try url("http://example.com/"), now: now)
        XCTAssertEqual(jar.header(for: try url("http://example.com/x"), now: now), "host=1")
        XCTAssertEqual(jar.header(for: try url("http://EXAMPLE.com/x"), now: now), "host=1")
        XCTAssertNil(jar.header(for: try url("http://sub.example.com/"), now: now), "not a domain cookie")
    }

    func testDefaultPathAndPathMatch() throws {
        XCTAssertEqual(CookieJar.defaultPath(of: try url("http://h/a/b/c")), "/a/b")
        XCTAssertEqual(CookieJar.defaultPath(of: try url("http://h/a")), "/")
        XCTAssertEqual(CookieJar.defaultPath(of: try url("http://h")), "/")
        XCTAssertEqual(CookieJar.defaultPath(of: try url("http://h/a/?q=/x/y")), "/a")
        XCTAssertTrue(CookieJar.pathMatches("/a", "/a"))
        XCTAssertTrue(CookieJar.pathMatches("/a/b", "/a"))
        XCTAssertTrue(CookieJar.pathMatches("/a/b", "/a/"))
        XCTAssertFalse(CookieJar.pathMatches("/ab", "/a"))
        XCTAssertFalse(CookieJar.pathMatches("/", "/a"))

        let jar = freshJar()
        jar.store(["dir=1", "a=1; Path=/a"], from: try url("http://h.test/a/b/c"), now: now)
        XCTAssertEqual(jar.header(for: try url("http://h.test/a/b/d"), now: now), "dir=1; a=1", "longest path first")
        XCTAssertEqual(jar.header(for: try url("http://h.test/a"), now: now), "a=1")
        XCTAssertNil(jar.header(for: try url("http://h.test/ab"), now: now))
    }

    func testExpiredCookiesDeleteTheStoredOne() throws {
        let jar = freshJar()
        let origin = try url("http://h.test/")
        jar.store(["a=1", "b=2", "c=3; Path=/"], from: origin, now: now)
        XCTAssertEqual(jar.storage.cookies?.count, 3)
        jar.store(
            ["a=; Max-Age=0", "b=2; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "c=3; Path=/other; Max-Age=0"],
            from: origin, now: now)
        XCTAssertEqual(jar.header(for: origin, now: now), "c=3", "another path is another cookie")
        XCTAssertEqual(jar.storage.cookies?.map(\.name), ["c"], "deleted, not stored empty")
        jar.store(["d=4; Max-Age=60"], from: origin, now: now)
        XCTAssertNil(jar.header(for: origin, now: now.addingTimeInterval(61))?.range(of: "d=4"), "expired by then")
    }

    func testSecureCookiesNeedTLSBothWays() throws {
        let jar = freshJar()
        let plain = try url("http://h.test/")
        let secure = try url("https://h.test/")
        jar.store(["s=1; Secure", "__Secure-a=1", "__Host-b=1; Secure; Path=/"], from: plain, now: now)
        XCTAssertNil(jar.storage.cookies?.first, "a plain-HTTP response sets no secure cookie")
        jar.store(
            ["s=1; Secure", "__Secure-a=1; Secure", "__Host-b=1; Secure; Path=/", "__Host-c=1; Secure; Domain=h.test"],
            from: secure, now: now)
        XCTAssertEqual(Set(jar.storage.cookies?.map(\.name) ?? []), ["s", "__Secure-a", "__Host-b"])
        XCTAssertNil(jar.header(for: plain, now: now), "secure cookies go over TLS only")
        XCTAssertNotNil(jar.header(for: try url("wss://h.test/"), now: now))
        // Plain HTTP cannot shadow or replace a secure cookie of the same name.
        jar.store(["s=plain"], from: plain, now: now)
        XCTAssertEqual(jar.storage.cookies?.first(where: { $0.name == "s" })?.value, "1")
        XCTAssertNil(jar.header(for: plain, now: now))
        // The prefixes in any case (RFC 6265bis 5.6, steps 20 and 21).
        XCTAssertFalse(try XCTUnwrap(SetCookie("__SECURE-sid=x", now: now)).mayBeSet(fromSecureOrigin: true))
        XCTAssertFalse(
            try XCTUnwrap(SetCookie("__host-sid=x; Secure; Path=/; Domain=h.test", now: now))
                .mayBeSet(fromSecureOrigin: true))
        XCTAssertTrue(
            try XCTUnwrap(SetCookie("__host-sid=x; Secure; Path=/", now: now)).mayBeSet(fromSecureOrigin: true))
    }

    /// A cookie the caller stored with a line break in its value is not sent: it would add a header line of its own.
    func testAStoredCookieWithALineBreakIsNotSent() throws {
        let jar = freshJar()
        let origin = try url("http://h.test/")
        let injected = try XCTUnwrap(
            HTTPCookie(properties: [.name: "a", .value: "1\r\nX-Injected: yes", .domain: "h.test", .path: "/"]))
        jar.storage.setCookie(injected)
        jar.store(["b=2"], from: origin, now: now)
        XCTAssertEqual(jar.header(for: origin, now: now), "b=2")
    }

    func testNeverAcceptingStoresNothing() throws {
        let storage = makeOwnCookieStorage()
        CookieJar(storage: storage, acceptPolicy: .never).store(["a=1"], from: try url("http://h.test/"), now: now)
        XCTAssertEqual(storage.cookies?.count, 0)
    }

    func testOnlyFromTheMainDocumentDomainStoresNoThirdPartyCookie() throws {
        let main = try url("https://www.example.com/page")
        let cases: [(from: String, mainDocument: URL?, stored: Bool)] = [
            ("https://www.example.com/x", main, true),  // the main document's own host
            ("https://example.com/x", main, true),  // a domain the main document's host is in
            ("https://EXAMPLE.com/x", main, true),
            ("https://api.example.com/x", main, false),  // a sibling: another host
            ("https://tracker.test/x", main, false),
            ("https://ample.com/x", try url("https://example.com/"), false),  // a suffix of the name is not a domain
            ("https://tracker.test/x", nil, true),  // no main document: the request is its own
        ]
        for (from, mainDocument, stored) in cases {
            for policies in [
                (HTTPCookie.AcceptPolicy.onlyFromMainDocumentDomain, HTTPCookie.AcceptPolicy.always),
                (.always, .onlyFromMainDocumentDomain),
            ] {
                let storage = makeOwnCookieStorage()
                storage.cookieAcceptPolicy = policies.1
                CookieJar(storage: storage, acceptPolicy: policies.0)
                    .store(["a=1"], from: try url(from), mainDocumentURL: mainDocument, now: now)
                XCTAssertEqual(
                    storage.cookies?.count, stored ? 1 : 0, "\(from) in \(mainDocument?.absoluteString ?? "-")")
            }
        }
        let storage = makeOwnCookieStorage()
        CookieJar(storage: storage, acceptPolicy: .always)
            .store(["a=1"], from: try url("https://tracker.test/x"), mainDocumentURL: main, now: now)
        XCTAssertEqual(storage.cookies?.count, 1, "accepting always: a third party's cookie too")
    }

    // MARK: - Live

    /// Through the curl transport: several `Set-Cookie` lines of one response, a comma inside a value, a deletion by
    /// `Max-Age=0`, and a cookie for another domain.
    func testTheCurlTransportFollowsTheStorageModel() async throws {
        let manager = makeCurlManagerWithOwnCookies()
        func cookieHeader(after setCookies: [String]) async throws -> String? {
            var components = try XCTUnwrap(
                URLComponents(url: server.url("/response-headers"), resolvingAgainstBaseURL: false))
            components.queryItems = setCookies.map { URLQueryItem(name: "Set-Cookie", value: $0) }
            _ = try await manager.perform(URLRequest(url: try XCTUnwrap(components.url)))
            _ = try await manager.perform(URLRequest(url: server.url("/cookies")))
            return server.requests.last?.header("Cookie")
        }
        let first = try await cookieHeader(after: ["a=1; Path=/", "list=x, y; Path=/", "evil=1; Domain=evil.test"])
        XCTAssertEqual(first, "a=1; list=x, y")
        let second = try await cookieHeader(after: ["a=; Path=/; Max-Age=0"])
        XCTAssertEqual(second, "list=x, y", "the deletion deleted")
        XCTAssertEqual(manager.sessionConfiguration.httpCookieStorage?.cookies?.map(\.name), ["list"])
    }

    /// The configuration's default accept policy, `.onlyFromMainDocumentDomain`, through the curl transport: a response
    /// to a request whose main document is another site stores nothing; one whose main document is its own site does.
    func testTheCurlTransportStoresNoCookieFromAThirdPartyResponse() async throws {
        let manager = makeCurlManagerWithOwnCookies()
        XCTAssertEqual(manager.sessionConfiguration.httpCookieAcceptPolicy, .onlyFromMainDocumentDomain)
        let storage = try XCTUnwrap(manager.sessionConfiguration.httpCookieStorage)
        func setCookie(_ value: String, mainDocument: URL?) async throws {
            var components = try XCTUnwrap(
                URLComponents(url: server.url("/response-headers"), resolvingAgainstBaseURL: false))
            components.queryItems = [URLQueryItem(name: "Set-Cookie", value: value)]
            var request = URLRequest(url: try XCTUnwrap(components.url))
            request.mainDocumentURL = mainDocument
            _ = try await manager.perform(request)
        }
        try await setCookie("third=1; Path=/", mainDocument: URL(string: "https://news.test/article"))
        XCTAssertEqual(storage.cookies?.count, 0, "a third party's cookie")
        try await setCookie("first=1; Path=/", mainDocument: server.url("/page"))
        try await setCookie("own=1; Path=/", mainDocument: nil)
        XCTAssertEqual(Set(storage.cookies?.map(\.name) ?? []), ["first", "own"])
    }
}
