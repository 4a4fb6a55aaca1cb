internal import CCurl
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the curl transport does with cookies: RFC 6265's storage model (5.3) for the `Set-Cookie` fields of a
/// response, and its choice of the cookies a request sends (5.4), over the configuration's `HTTPCookieStorage`.
///
/// The storage stays Foundation's (callers read and add cookies through it as with URLSession), but its parsing and
/// matching on Linux are not used: they ignore `Max-Age` (a `Max-Age=0` deletion stored an empty cookie), split a
/// value at commas, accept a `Domain` the host is not in (a cookie for `evil.com` from `www.example.com`, or for all
/// of `.com`), send a `Secure` cookie over plain HTTP, and let a cookie for `/a` go to `/ab`. Here:
/// - A `Domain` attribute must be the host or a domain the host is in, and not a public suffix (`com`, `co.uk`,
///   `github.io`, by the Public Suffix List libcurl reads through libpsl) unless it is the host itself, which then
///   sets a host-only cookie; an IP address takes no `Domain` but itself. A `Domain` ending in a dot is refused.
/// - Without a `Path`, the path is the request path's directory (`/a/b` for `/a/b/c`).
/// - A cookie that expired (`Max-Age=0`, an `Expires` in the past) deletes the stored one of the same name, domain and
///   path, and is not stored.
/// - A plain-HTTP response cannot set a `Secure` (or `__Secure-`, `__Host-`) cookie (RFC 6265bis 5.7).
/// - A request gets the cookies whose domain and path it matches, `Secure` ones only over TLS, unexpired, longest path
///   first, then oldest first; a request with a `Cookie` field of its own is sent as it is.
/// - At most `limits` cookies are kept per domain and in all (RFC 6265 6.1): past them, the expired, then the oldest
///   are deleted.
///
/// The storage's and the configuration's accept policies are honoured: `.never` stores nothing;
/// `.onlyFromMainDocumentDomain` (either of them) stores the cookies of a response whose host is the request's
/// `mainDocumentURL` host or a domain that host is in (`example.com` for `www.example.com`), and nothing from another
/// site; a request without a `mainDocumentURL` is its own main document, as with URLSession.
struct CookieJar {
    /// Schemes whose requests go over TLS.
    private static let secureSchemes: Set<String> = ["https", "wss", "https+unix"]
    private static let httpOnlyKey = HTTPCookiePropertyKey("HttpOnly")

    let storage: HTTPCookieStorage
    /// The configuration's `httpCookieAcceptPolicy`.
    var acceptPolicy: HTTPCookie.AcceptPolicy = .always
    /// The most cookies kept for one domain, and in all: RFC 6265 6.1's least limits (50, 3000), so that responses
    /// cannot grow the storage, or one domain's `Cookie` field, without bound.
    let limits: (perDomain: Int, total: Int)

    /// The jar over `storage`, accepting as `acceptPolicy` says (and as the storage's own policy says).
    init(
        storage: HTTPCookieStorage, acceptPolicy: HTTPCookie.AcceptPolicy = .always,
        limits: (perDomain: Int, total: Int) = (50, 3000)
    ) {
        self.storage = storage
        self.acceptPolicy = acceptPolicy
        self.limits = limits
    }

    /// The jar of `configuration`'s cookie storage and accept policy; nil when it sets no cookies.
    init?(_ configuration: URLSessionConfiguration) {
        guard configuration.httpShouldSetCookies, let storage = configuration.httpCookieStorage else { return nil }
        self.init(storage: storage, acceptPolicy: configuration.httpCookieAcceptPolicy)
    }

    /// Stores the cookies of a response's `Set-Cookie` field values (one cookie each), received for `url`, in a
    /// request whose main document is `mainDocumentURL` (the request's `mainDocumentURL`).
    func store(_ fieldValues: [String], from url: URL, mainDocumentURL: URL? = nil, now: Date = Date()) {
        guard !fieldValues.isEmpty, acceptPolicy != .never, storage.cookieAcceptPolicy != .never,
            let host = Self.host(of: url), accepts(from: host, mainDocumentURL: mainDocumentURL)
        else { return }
        let secure = Self.isSecure(url)
        var storedDomains = Set<String>()
        defer { if !storedDomains.isEmpty { evictBeyondLimits(of: storedDomains, now: now) } }
        for fieldValue in fieldValues {
            guard let cookie = SetCookie(fieldValue, now: now), cookie.mayBeSet(fromSecureOrigin: secure),
                let domain = Self.domain(of: cookie, host: host)
            else { continue }
            let path = cookie.path ?? Self.defaultPath(of: url)
            let stored = storage.cookies ?? []
            // A plain-HTTP response leaves a secure cookie of the same name alone where the two could meet
            // (RFC 6265bis 5.7, step 16).
            if !secure,
                stored.contains(where: {
                    $0.isSecure && $0.name == cookie.name
                        && (Self.domainMatches(domain.bare, $0.bareDomain)
                            || Self.domainMatches($0.bareDomain, domain.bare))
                        && Self.pathMatches(path, $0.path)
                })
            {
                continue
            }
            for old in stored where old.name == cookie.name && old.bareDomain == domain.bare && old.path == path {
                storage.deleteCookie(old)
            }
            if let expiry = cookie.expiry, expiry <= now { continue }
            var properties: [HTTPCookiePropertyKey: Any] = [
                .name: cookie.name, .value: cookie.value, .domain: domain.stored, .path: path,
            ]
            if let expiry = cookie.expiry { properties[.expires] = expiry } else { properties[.discard] = "TRUE" }
            if cookie.isSecure { properties[.secure] = "TRUE" }
            if cookie.isHTTPOnly { properties[Self.httpOnlyKey] = "TRUE" }
            if let made = HTTPCookie(properties: properties) {
                storage.setCookie(made)
                storedDomains.insert(domain.bare)
            }
        }
    }

    /// Keeps the storage within `limits` after cookies for `domains` (bare) were stored: expired cookies go first,
    /// then the oldest of a domain past its limit, then the oldest of all past the total (RFC 6265 5.3 step 12; the
    /// storage keeps no last-access time, so creation stands for it).
    private func evictBeyondLimits(of domains: Set<String>, now: Date) {
        guard var all = storage.cookies else { return }
        var evicted = Set<ObjectIdentifier>()
        func evict(_ cookie: HTTPCookie) {
            guard evicted.insert(ObjectIdentifier(cookie)).inserted else { return }
            storage.deleteCookie(cookie)
        }
        for cookie in all where cookie.expiresDate.map({ $0 <= now }) ?? false { evict(cookie) }
        for domain in domains {
            let ofDomain = all.filter { $0.bareDomain == domain && !evicted.contains(ObjectIdentifier($0)) }
            guard ofDomain.count > limits.perDomain else { continue }
            ofDomain.sorted { $0.created < $1.created }.dropLast(limits.perDomain).forEach(evict)
        }
        all.removeAll { evicted.contains(ObjectIdentifier($0)) }
        guard all.count > limits.total else { return }
        all.sorted { $0.created < $1.created }.dropLast(limits.total).forEach(evict)
    }

    /// The `Cookie` field a request to `url` sends, or nil when no stored cookie is for it.
    func header(for url: URL, now: Date = Date()) -> String? {
        guard let stored = storage.cookies, !stored.isEmpty, let host = Self.host(of: url) else { return nil }
        let secure = Self.isSecure(url)
        let path = Self.requestPath(of: url)
        let chosen = stored.filter { cookie in
            if let expiry = cookie.expiresDate, expiry <= now { return false }
            // A cookie the caller stored with a CR or LF would add a header line of its own: it is not sent.
            if SetCookie.hasControlCharacter(cookie.name) || SetCookie.hasControlCharacter(cookie.value) {
                return false
            }
            if cookie.isSecure && !secure { return false }
            let domain = cookie.domain.lowercased()
            let domainOK =
                domain.hasPrefix(".") ? Self.domainMatches(host, String(domain.dropFirst())) : host == domain
            return domainOK && Self.pathMatches(path, cookie.path)
        }
        guard !chosen.isEmpty else { return nil }
        let ordered = chosen.enumerated().sorted { first, second in
            let (a, b) = (first.element, second.element)
            if a.path.utf8.count != b.path.utf8.count { return a.path.utf8.count > b.path.utf8.count }
            let (createdA, createdB) = (a.created, b.created)
            return createdA != createdB ? createdA < createdB : first.offset < second.offset
        }
        return ordered.map { "\($0.element.name)=\($0.element.value)" }.joined(separator: "; ")
    }

    /// Whether a response from `host` may set cookies under the accept policies: with `.onlyFromMainDocumentDomain`,
    /// only when `host` is the main document's host or a domain it is in. A main document without a host (none
    /// given, or not an HTTP URL) leaves the response's own site as the main document.
    private func accepts(from host: String, mainDocumentURL: URL?) -> Bool {
        guard acceptPolicy == .onlyFromMainDocumentDomain || storage.cookieAcceptPolicy == .onlyFromMainDocumentDomain,
            let mainDocumentURL, let mainHost = Self.host(of: mainDocumentURL)
        else { return true }
        return Self.domainMatches(mainHost, host)
    }

    // MARK: - RFC 6265's rules

    /// The cookie's domain as stored (`.example.com` for a domain cookie, the host itself for a host-only one) and
    /// without its dot; nil when the cookie must be ignored (5.3, steps 4–6).
    private static func domain(of cookie: SetCookie, host: String) -> (stored: String, bare: String)? {
        guard let attribute = cookie.domain else { return (host, host) }
        // A name ending in a dot is no public suffix to libpsl (`co.uk.` passes where `co.uk` does not), and
        // `evil.co.uk.` is in it: such a cookie would reach every `co.uk.` site. It is refused (as libcurl refuses
        // it since CVE-2022-27779).
        if attribute.hasSuffix(".") { return nil }
        // A public suffix may be named by its own host only, and then as host-only (5.3, step 5): a response from
        // `evil.co.uk` sets no cookie for every `co.uk` site.
        if isPublicSuffix(attribute) {
            return attribute == host ? (host, host) : nil
        }
        guard domainMatches(host, attribute) else { return nil }
        return isIPAddress(host) ? (host, host) : ("." + attribute, attribute)
    }

    /// Whether `domain` is a public suffix (`com`, `co.uk`, `github.io`, an unknown top-level name) by the Public
    /// Suffix List as libpsl reads it, the list libcurl's cookie engine uses; where libpsl cannot be loaded, a name
    /// without a dot stands for one.
    static func isPublicSuffix(_ domain: String) -> Bool {
        switch sk_is_public_suffix(domain) {
        case 1: return true
        case 0: return false
        default: return !domain.contains(".")
        }
    }

    /// Whether `host` domain-matches `domain` (5.1.3): the same, or a name within it that is not an IP address.
    static func domainMatches(_ host: String, _ domain: String) -> Bool {
        if host == domain { return true }
        return host.hasSuffix("." + domain) && !isIPAddress(host)
    }

    /// Whether `requestPath` path-matches `cookiePath` (5.1.4): `/a` matches `/a` and `/a/b`, not `/ab`.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        guard requestPath.hasPrefix(cookiePath) else { return false }
        if requestPath.utf8.count == cookiePath.utf8.count || cookiePath.hasSuffix("/") { return true }
        return requestPath.utf8.dropFirst(cookiePath.utf8.count).first == UInt8(ascii: "/")
    }

    /// The default path of a cookie set by a response for `url` (5.1.4): the request path up to its last `/`, or `/`.
    static func defaultPath(of url: URL) -> String {
        let path = requestPath(of: url)
        guard let lastSlash = path.lastIndex(of: "/"), lastSlash != path.startIndex else { return "/" }
        return String(path[..<lastSlash])
    }

    /// The URL's path as it went on the wire (percent-encoded), `/` when it has none.
    private static func requestPath(of url: URL) -> String {
        let path = url.path(percentEncoded: true)
        return path.hasPrefix("/") ? path : "/"
    }

    /// The URL's host, lowercased; nil when it has none.
    private static func host(of url: URL) -> String? {
        guard let host = url.host, !host.isEmpty else { return nil }
        return host.asciiLowercased
    }

    private static func isSecure(_ url: URL) -> Bool {
        secureSchemes.contains(url.scheme?.lowercased() ?? "")
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var address = in_addr()
        return host.contains(":") || inet_pton(AF_INET, host, &address) == 1
    }
}

extension HTTPCookie {
    /// The cookie's domain, lowercased, without the leading dot of a domain cookie.
    fileprivate var bareDomain: String {
        let domain = self.domain.lowercased()
        return domain.hasPrefix(".") ? String(domain.dropFirst()) : domain
    }

    /// When the cookie was made (Foundation's `Created` property, seconds since 2001), for the order in which
    /// cookies of one path length are sent.
    fileprivate var created: Double {
        (properties?[HTTPCookiePropertyKey("Created")] as? Double) ?? 0
    }
}
