import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response as the HTTP cache keeps it in the configuration's `URLCache`, with what RFC 9111 needs to judge it:
/// when it was requested and received, the request fields its `Vary` names, and the ``SecurityPolicy`` it passed.
/// Pure rules, no I/O: storable or not, fresh or stale, how to revalidate, what a 304 changes.
struct CacheEntry {
    let response: HTTPURLResponse
    let data: Data
    /// When the request that produced the response was sent, and when the response arrived (RFC 9111 4.2.3).
    let requestTime: Date
    let responseTime: Date
    /// The request's values of the fields the response's `Vary` names (lower-cased names); nil when unknown (an
    /// entry stored by someone else), which matches only a response without `Vary`.
    let varyValues: [String: String]?
    /// The configuration key of the policy whose handshake delivered the response; nil when unknown.
    let policyKey: String?
    /// The ``CachePrincipal`` of the request that stored the response; nil for one without credentials or cookies (or
    /// stored by someone else).
    let principal: String?

    private enum Key {
        static let requestTime = "SessionKitCacheRequestTime"
        static let responseTime = "SessionKitCacheResponseTime"
        static let vary = "SessionKitCacheVary"
        static let policy = "SessionKitCachePolicy"
        static let principal = "SessionKitCachePrincipal"
    }

    /// The entry for `response` to `request` (the request as sent, ``CachePrincipal/asSent(_:credential:)``), without
    /// the fields a cache never stores (RFC 9111 3.1).
    init(
        response: HTTPURLResponse, data: Data, request: URLRequest, requestTime: Date, responseTime: Date,
        policyKey: String?
    ) {
        var values: [String: String] = [:]
        for name in Self.varyNames(of: response) {
            values[name] = Self.normalized(request.value(forHTTPHeaderField: name), of: name)
        }
        self.init(
            response: Self.withoutHopByHopFields(response), data: data, requestTime: requestTime,
            responseTime: responseTime, varyValues: values, policyKey: policyKey, principal: CachePrincipal.of(request))
    }

    /// An entry read back from the `URLCache`; nil when it holds no HTTP response.
    init?(_ cached: CachedURLResponse) {
        guard let response = cached.response as? HTTPURLResponse else { return nil }
        let info = cached.userInfo ?? [:]
        let received = (info[Key.responseTime] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) }
        let sent = (info[Key.requestTime] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) }
        // Stored by someone else: the response's own Date is the best guess of when it arrived.
        let fallback = response.value(forHTTPHeaderField: "Date").flatMap { HTTPDate.parse($0) } ?? Date.distantPast
        self.response = response
        self.data = cached.data
        self.responseTime = received ?? fallback
        self.requestTime = sent ?? received ?? fallback
        self.varyValues = info[Key.vary] as? [String: String]
        self.policyKey = info[Key.policy] as? String
        self.principal = info[Key.principal] as? String
    }

    /// `approved` (what the manager's `dataTaskWillCacheResponse` made of `proposed`, this entry's
    /// ``cachedURLResponse``) with the entry's metadata added to its `userInfo` where it lacks it, so that a replaced
    /// response still carries its times, its `Vary` values and its policy.
    static func keepingMetadata(of proposed: CachedURLResponse, in approved: CachedURLResponse) -> CachedURLResponse {
        if approved === proposed { return approved }
        var info = approved.userInfo ?? [:]
        for (key, value) in proposed.userInfo ?? [:] where info[key] == nil { info[key] = value }
        return CachedURLResponse(
            response: approved.response, data: approved.data, userInfo: info, storagePolicy: approved.storagePolicy)
    }

    /// The entry as the `URLCache` stores it.
    var cachedURLResponse: CachedURLResponse {
        var info: [AnyHashable: Any] = [
            Key.requestTime: NSNumber(value: requestTime.timeIntervalSince1970),
            Key.responseTime: NSNumber(value: responseTime.timeIntervalSince1970),
        ]
        if let varyValues { info[Key.vary] = varyValues }
        if let policyKey { info[Key.policy] = policyKey }
        if let principal { info[Key.principal] = principal }
        return CachedURLResponse(response: response, data: data, userInfo: info, storagePolicy: .allowed)
    }

    // MARK: - Storing (RFC 9111 3)

    /// Status codes a cache may give a heuristic lifetime (RFC 9110 15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Status codes whose caching rules this cache implements, for `must-understand` (RFC 9111 5.2.2.3): the final
    /// statuses it stores and serves as they came (a 206 is never stored; a 304 updates a stored response).
    static let understoodStatuses: Set<Int> = heuristicallyCacheable.subtracting([206]).union([302, 303, 307])

    /// Why `response` to `request` may not be stored, or nil when it may. `authenticated`: the request carried
    /// credentials (an `Authorization` field, a challenge's credential or the URL's user).
    static func refusalToStore(
        _ response: HTTPURLResponse, for request: URLRequest, authenticated: Bool
    ) -> String? {
        guard request.httpMethod?.uppercased() ?? "GET" == "GET" else { return "not a GET" }
        let status = response.statusCode
        guard status >= 200, status != 206, status != 304 else { return "status \(status)" }
        if CacheControl(request.value(forHTTPHeaderField: "Cache-Control")).noStore { return "request no-store" }
        let control = CacheControl(response.value(forHTTPHeaderField: "Cache-Control"))
        if control.mustUnderstand, !understoodStatuses.contains(status) {
            return "must-understand with status \(status)"
        }
        if control.forbidsStoring { return "response no-store" }
        if varyNames(of: response).contains("*") { return "Vary: *" }
        if authenticated, !(control.isPublic || control.mustRevalidate || control.sharedMaxAge != nil) {
            return "authenticated request"  // RFC 9111 3.5: only when the response says it may be
        }
        let explicit =
            control.maxAge != nil || control.sharedMaxAge != nil
            || response.value(forHTTPHeaderField: "Expires") != nil
        let validated =
            response.value(forHTTPHeaderField: "ETag") != nil
            || response.value(forHTTPHeaderField: "Last-Modified") != nil
        guard explicit || control.isPublic || heuristicallyCacheable.contains(status) else {
            return "status \(status) without explicit freshness"
        }
        // Storing a response that can be neither fresh nor revalidated would only evict useful ones.
        return explicit || validated ? nil : "neither freshness nor validators"
    }

    // MARK: - Freshness (RFC 9111 4.2)

    var control: CacheControl { CacheControl(response.value(forHTTPHeaderField: "Cache-Control")) }

    /// How long the response stays fresh from its generation: `max-age` (a private cache ignores `s-maxage`), then
    /// `Expires` minus `Date`, then, only for a heuristically cacheable response without explicit expiration, 10 %
    /// of the time since `Last-Modified` (at most a day).
    var freshnessLifetime: TimeInterval {
        let control = self.control
        if let maxAge = control.maxAge { return maxAge }
        let date = response.value(forHTTPHeaderField: "Date").flatMap { HTTPDate.parse($0) } ?? responseTime
        if let expires = response.value(forHTTPHeaderField: "Expires") {
            // An invalid Expires (such as "0") means already expired (RFC 9111 5.3).
            return HTTPDate.parse(expires).map { max(0, $0.timeIntervalSince(date)) } ?? 0
        }
        guard control.isPublic || Self.heuristicallyCacheable.contains(response.statusCode),
            let lastModified = response.value(forHTTPHeaderField: "Last-Modified").flatMap({ HTTPDate.parse($0) })
        else { return 0 }
        return min(max(0, date.timeIntervalSince(lastModified)) / 10, 86_400)
    }

    /// The response's age at `now` (RFC 9111 4.2.3).
    func currentAge(at now: Date) -> TimeInterval {
        let date = response.value(forHTTPHeaderField: "Date").flatMap { HTTPDate.parse($0) } ?? responseTime
        // Several values (or lines, joined): the first counts; one that is not delta-seconds is ignored (RFC 9111 5.1).
        let ageValue =
            response.value(forHTTPHeaderField: "Age").flatMap { value in
                value.split(separator: ",", omittingEmptySubsequences: false).first.flatMap {
                    CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces))
                }
            } ?? 0
        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = max(0, responseTime.timeIntervalSince(requestTime))
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        return correctedInitialAge + max(0, now.timeIntervalSince(responseTime))
    }

    /// Whether the response may be used without asking the server, for a request whose directives are
    /// `requestControl` (``requestControl(of:)``): fresh enough for both the response's and the request's directives,
    /// and the response does not require a revalidation each time.
    func isUsableWithoutValidation(under requestControl: CacheControl, at now: Date) -> Bool {
        let responseControl = control
        // A stored `no-store` response is never used (none is stored but under `must-understand`; this guards the rule
        // where it is applied).
        if responseControl.noCache || requestControl.noCache || responseControl.forbidsStoring { return false }
        let age = currentAge(at: now)
        var lifetime = freshnessLifetime
        if let maxAge = requestControl.maxAge { lifetime = min(lifetime, maxAge) }
        let needed = age + (requestControl.minFresh ?? 0)
        if lifetime > needed { return true }
        // Stale: a request's max-stale allows it, unless the response must be revalidated.
        guard let maxStale = requestControl.maxStale, !responseControl.mustRevalidate else { return false }
        return needed - lifetime <= maxStale
    }

    /// Whether the stale response may be served at once while a revalidation runs in the background
    /// (`stale-while-revalidate`, RFC 5861 3): stale by no more than its window, and nothing in the response or the
    /// request (`no-cache`, `must-revalidate`, a request's `max-age` or `min-fresh`) asks for a validated answer.
    func mayServeWhileRevalidating(under requestControl: CacheControl, at now: Date) -> Bool {
        let responseControl = control
        guard let window = responseControl.staleWhileRevalidate, !responseControl.noCache,
            !responseControl.mustRevalidate, !requestControl.noCache, requestControl.maxAge == nil,
            requestControl.minFresh == nil
        else { return false }
        return currentAge(at: now) - freshnessLifetime <= window
    }

    /// Whether the stale response may answer in place of an error met while revalidating it (`stale-if-error`, RFC 5861
    /// 4): stale by no more than its window, and not `no-cache` or `must-revalidate` (RFC 9111 4.2.4).
    func mayServeAfterError(at now: Date) -> Bool {
        let control = self.control
        guard let window = control.staleIfError, !control.noCache, !control.mustRevalidate else { return false }
        return currentAge(at: now) - freshnessLifetime <= window
    }

    /// Whether this entry may answer a request whose principal is `principal` (``CachePrincipal``): one stored for the
    /// same principal, or one stored for a request without credentials or cookies that is neither `private` nor sets a
    /// cookie (what the server gave anyone).
    func mayServe(principal requester: String?) -> Bool {
        if principal == requester { return true }
        guard principal == nil else { return false }
        return !control.isPrivate && response.value(forHTTPHeaderField: "Set-Cookie") == nil
    }

    /// The response as served from the cache at `now`: with an `Age` field of its current age (RFC 9111 4, 5.1).
    func servedResponse(at now: Date) -> HTTPURLResponse {
        var fields = Self.stringFields(of: response).filter { !$0.key.equalsIgnoringASCIICase("Age") }
        fields["Age"] = String(Int(min(max(0, currentAge(at: now)), 2_147_483_648)))
        guard let url = response.url else { return response }
        return HTTPURLResponse(
            url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1", headerFields: fields) ?? response
    }

    /// The stored complete response cut to the one byte range `range` (a `Range` field value) names, as a 206 (RFC
    /// 9110 14.2, RFC 9111 3.4), or nil when this entry cannot answer it: not a 200, a coded body (ranges count the
    /// coded bytes, and the stored ones are decoded), or not one satisfiable `bytes` range.
    func partial(for range: String) -> CacheEntry? {
        guard response.statusCode == 200, let url = response.url,
            (response.value(forHTTPHeaderField: "Content-Encoding") ?? "identity").equalsIgnoringASCIICase("identity"),
            let bounds = Self.byteRange(range, length: data.count)
        else { return nil }
        var fields = Self.stringFields(of: response).filter {
            !["content-length", "content-range"].contains($0.key.lowercased())
        }
        fields["Content-Range"] = "bytes \(bounds.lowerBound)-\(bounds.upperBound)/\(data.count)"
        fields["Content-Length"] = String(bounds.count)
        guard let partial = HTTPURLResponse(url: url, statusCode: 206, httpVersion: "HTTP/1.1", headerFields: fields)
        else { return nil }
        let start = data.startIndex
        return CacheEntry(
            response: partial, data: data[start + bounds.lowerBound...start + bounds.upperBound],
            requestTime: requestTime, responseTime: responseTime, varyValues: varyValues, policyKey: policyKey,
            principal: principal)
    }

    /// The fields a cache's 304 carries from the stored response: those RFC 9110 15.4.5 asks of a 304 (what a 200
    /// would have sent) and `Last-Modified`, a validator; no other representation metadata (`Content-Type`, ...).
    private static let notModifiedFields: Set<String> = [
        "cache-control", "content-location", "date", "etag", "expires", "last-modified", "vary",
    ]

    /// The cache's 304 to a request whose own validators name this stored response, or nil when they do not (RFC 9111
    /// 4.3.2, RFC 9110 13.2.2). Only a stored 200 (or the 206 cut from it) is evaluated: preconditions are ignored
    /// when the response would not be a 2xx (RFC 9110 13.2.1). `If-None-Match` when present: `*`, or one of its tags
    /// equal to the stored `ETag`, compared weakly (13.1.2). Else `If-Modified-Since` (a valid HTTP-date, else ignored)
    /// no earlier than the stored `Last-Modified`, else its `Date`, else the time it arrived when known (13.1.3). The
    /// 304 carries ``notModifiedFields`` and no body.
    func notModified(ifNoneMatch: String?, ifModifiedSince: String?) -> CacheEntry? {
        guard response.statusCode == 200 || response.statusCode == 206 else { return nil }
        if let ifNoneMatch {
            guard Self.anyTag(in: ifNoneMatch, matches: response.value(forHTTPHeaderField: "ETag")) else { return nil }
        } else {
            func date(_ value: String?) -> Date? {
                value.flatMap { HTTPDate.parse($0.trimmingCharacters(in: .whitespaces)) }
            }
            // An entry another client stored without a `Date` has no known arrival (`Date.distantPast`).
            let arrival = responseTime == .distantPast ? nil : responseTime
            guard let since = date(ifModifiedSince),
                let modified = date(response.value(forHTTPHeaderField: "Last-Modified"))
                    ?? date(response.value(forHTTPHeaderField: "Date")) ?? arrival,
                modified <= since
            else { return nil }
        }
        guard let url = response.url,
            let notModified = HTTPURLResponse(
                url: url, statusCode: 304, httpVersion: "HTTP/1.1",
                headerFields: Self.stringFields(of: response).filter {
                    Self.notModifiedFields.contains($0.key.lowercased())
                })
        else { return nil }
        return CacheEntry(
            response: notModified, data: Data(), requestTime: requestTime, responseTime: responseTime,
            varyValues: varyValues, policyKey: policyKey, principal: principal)
    }

    /// Whether an `If-None-Match` value names a stored response whose `ETag` is `etag`: `*` names any (the stored
    /// response is a current representation, with a tag or without); otherwise one of the value's entity tags has the
    /// stored tag's opaque part, byte for byte (the weak comparison, RFC 9110 8.8.3.2). A value that is not a list of
    /// entity tags (``entityTags(in:)``), or a stored `ETag` that is not one tag, names nothing.
    static func anyTag(in ifNoneMatch: String, matches etag: String?) -> Bool {
        if ifNoneMatch.trimmingCharacters(in: .whitespaces) == "*" { return true }
        guard let etag, let stored = entityTags(in: etag), stored.count == 1, let asked = entityTags(in: ifNoneMatch)
        else { return false }
        return asked.contains { $0.elementsEqual(stored[0]) }
    }

    /// The opaque parts (quotes included, `W/` left out) of a list of entity tags (`"a", W/"b"`; RFC 9110 8.8.3:
    /// `etagc` is `!`, `#` to `~` or obs-text, so a comma may sit inside the quotes; empty elements are ignored,
    /// 5.6.1.2), or nil when the value is not such a list or names none.
    static func entityTags(in value: String) -> [ArraySlice<UInt8>]? {
        let bytes = Array(value.utf8)
        var tags: [ArraySlice<UInt8>] = []
        var index = 0
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        while true {
            while index < bytes.count, isSpace(bytes[index]) || bytes[index] == UInt8(ascii: ",") { index += 1 }
            guard index < bytes.count else { return tags.isEmpty ? nil : tags }
            if bytes[index] == UInt8(ascii: "W"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "/") {
                index += 2
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            let start = index
            index += 1
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                let byte = bytes[index]
                guard byte == 0x21 || (0x23...0x7E).contains(byte) || byte >= 0x80 else { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            index += 1
            tags.append(bytes[start..<index])
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
            guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else { return nil }
        }
    }

    /// The bytes one `Range` value selects of a representation of `length` bytes (`bytes=a-b`, `bytes=a-`,
    /// `bytes=-n`), or nil for anything else: another unit, several ranges, or none satisfiable.
    static func byteRange(_ value: String, length: Int) -> ClosedRange<Int>? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard length > 0, trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes=" else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        func number(_ text: Substring) -> Int? {
            let text = text.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, text.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return nil
            }
            return Int(text)
        }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.trimmingCharacters(in: .whitespaces).isEmpty {
            guard let suffix = number(last), suffix > 0 else { return nil }
            return max(0, length - suffix)...(length - 1)
        }
        guard let start = number(first), start < length else { return nil }
        if last.trimmingCharacters(in: .whitespaces).isEmpty { return start...(length - 1) }
        guard let end = number(last), end >= start else { return nil }
        return start...min(end, length - 1)
    }

    /// A request's `Cache-Control`, with HTTP/1.0's `Pragma: no-cache` read as `no-cache` (RFC 9111 5.4).
    static func requestControl(of request: URLRequest) -> CacheControl {
        requestControl(
            cacheControl: request.value(forHTTPHeaderField: "Cache-Control"),
            pragma: request.value(forHTTPHeaderField: "Pragma"))
    }

    /// The same, from the values of the two fields.
    static func requestControl(cacheControl: String?, pragma: String?) -> CacheControl {
        var control = CacheControl(cacheControl)
        if control.isEmpty, pragma?.lowercased().contains("no-cache") == true { control.noCache = true }
        return control
    }

    /// Fields that change with every answer and say nothing about the resource.
    private static let volatileFields: Set<String> = ["date", "age", "connection", "keep-alive", "server"]

    /// Whether storing this entry in place of `stored` changes anything later requests would see: a lifetime that
    /// starts again (explicit or heuristic freshness: RFC 9111 4.3.4 freshens a stored response with the 304's
    /// `Date`), other fields than the volatile ones, or another body. A revalidation that changes nothing is not
    /// written again (each write of Linux's `URLCache` archives the response and lists its disk directory).
    func differs(from stored: CacheEntry) -> Bool {
        let control = self.control
        if control.maxAge != nil || response.value(forHTTPHeaderField: "Expires") != nil { return true }
        if !control.noCache, freshnessLifetime > 0 { return true }
        if data != stored.data || response.statusCode != stored.response.statusCode { return true }
        func material(_ response: HTTPURLResponse) -> [String: String] {
            var fields: [String: String] = [:]
            for (name, value) in Self.stringFields(of: response) where !Self.volatileFields.contains(name.lowercased())
            {
                fields[name.lowercased()] = value
            }
            return fields
        }
        return material(response) != material(stored.response)
    }

    /// A response's fields as strings (`allHeaderFields` is `[AnyHashable: Any]`).
    private static func stringFields(of response: HTTPURLResponse) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        return fields
    }

    // MARK: - Selecting and revalidating (RFC 9111 4.1, 4.3)

    /// Whether this entry answers `request`: the same URL (the `URLCache` of Linux keys entries by host, port and
    /// path only) and, for each field its `Vary` names, the same value.
    func matches(_ request: URLRequest) -> Bool {
        guard let url = request.url, let stored = response.url,
            Self.withoutFragment(url) == Self.withoutFragment(stored)
        else { return false }
        let names = Self.varyNames(of: response)
        if names.isEmpty { return true }
        guard let varyValues, !names.contains("*") else { return false }
        return names.allSatisfy { varyValues[$0] == Self.normalized(request.value(forHTTPHeaderField: $0), of: $0) }
    }

    /// Whether the response has a validator (`ETag`, `Last-Modified`) to revalidate it with.
    var hasValidators: Bool {
        response.value(forHTTPHeaderField: "ETag") != nil || response.value(forHTTPHeaderField: "Last-Modified") != nil
    }

    /// Whether a 304 to this entry's revalidation names another representation (RFC 9111 4.3.4): its entity tag is
    /// not the stored one, compared weakly (RFC 9110 8.8.3.2), or it carries a strong tag and the stored response none.
    /// A 304 without a tag is taken for this entry: servers often leave validators out, and a `Last-Modified` alone
    /// differs between the nodes of one origin. A strong tag on the 304 of a stored weak one is taken too, though
    /// 4.3.4 would not: nginx weakens the tag of the responses it compresses, not of their 304s, so every
    /// revalidation of a compressed response would drop it.
    func isContradicted(by notModified: HTTPURLResponse) -> Bool {
        func tag(_ value: String?) -> (weak: Bool, opaque: Substring)? {
            guard let value else { return nil }
            let trimmed = value.trimmingCharacters(in: .whitespaces)[...]
            return trimmed.hasPrefix("W/") ? (true, trimmed.dropFirst(2)) : (false, trimmed)
        }
        guard let new = tag(notModified.value(forHTTPHeaderField: "ETag")) else { return false }
        guard let stored = tag(response.value(forHTTPHeaderField: "ETag")) else { return !new.weak }
        return new.opaque != stored.opaque
    }

    /// `request` made conditional on this entry's validators, or nil when it has none.
    func conditionalRequest(for request: URLRequest) -> URLRequest? {
        let etag = response.value(forHTTPHeaderField: "ETag")
        let lastModified = response.value(forHTTPHeaderField: "Last-Modified")
        guard etag != nil || lastModified != nil else { return nil }
        var conditional = request
        if let etag { conditional.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        if let lastModified { conditional.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since") }
        return conditional
    }

    /// Fields a 304 never changes in the stored response (RFC 9111 3.2).
    private static let keptOn304: Set<String> = [
        "content-length", "content-encoding", "transfer-encoding", "content-range", "connection", "keep-alive",
    ]

    /// The entry after a 304: the stored status and body, its fields updated by the 304's, the new times.
    func revalidated(by notModified: HTTPURLResponse, requestTime: Date, responseTime: Date) -> CacheEntry? {
        // The stored Age described the old response; the 304's own (if any) replaces it below.
        var fields = Self.stringFields(of: response).filter { !$0.key.equalsIgnoringASCIICase("Age") }
        // The 304's own hop-by-hop fields (and those its Connection names) describe its connection only.
        for (name, value) in Self.stringFields(of: Self.withoutHopByHopFields(notModified))
        where !Self.keptOn304.contains(name.lowercased()) {
            if let existing = fields.keys.first(where: { $0.equalsIgnoringASCIICase(name) }) {
                fields[existing] = nil
            }
            fields[name] = value
        }
        guard let url = response.url,
            let updated = HTTPURLResponse(
                url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
        else { return nil }
        return CacheEntry(
            response: Self.withoutHopByHopFields(updated), data: data, requestTime: requestTime,
            responseTime: responseTime, varyValues: varyValues, policyKey: policyKey, principal: principal)
    }

    private init(
        response: HTTPURLResponse, data: Data, requestTime: Date, responseTime: Date, varyValues: [String: String]?,
        policyKey: String?, principal: String?
    ) {
        self.response = response
        self.data = data
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.varyValues = varyValues
        self.policyKey = policyKey
        self.principal = principal
    }

    /// Fields that describe one connection, not the response (RFC 9110 7.6.1), and those of the client's proxy
    /// (RFC 9111 3.1): a cache neither stores nor replays them, nor the fields `Connection` names.
    private static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "proxy-authenticate",
        "proxy-authorization", "proxy-authentication-info", "trailer",
    ]

    /// `response` without its hop-by-hop fields (itself when it has none and is Foundation's own class: the
    /// `URLCache` archives what it stores, so a subclass such as ``WireHTTPURLResponse`` is always rebuilt).
    static func withoutHopByHopFields(_ response: HTTPURLResponse) -> HTTPURLResponse {
        let fields = stringFields(of: response)
        var dropped = hopByHopFields
        for (name, value) in fields where name.equalsIgnoringASCIICase("Connection") {
            for listed in value.split(separator: ",") {
                dropped.insert(listed.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        let hasHopByHop = fields.keys.contains { dropped.contains($0.lowercased()) }
        guard hasHopByHop || type(of: response) != HTTPURLResponse.self, let url = response.url else {
            return response
        }
        return HTTPURLResponse(
            url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
            headerFields: fields.filter { !dropped.contains($0.key.lowercased()) }) ?? response
    }

    // MARK: - Helpers

    /// The lower-cased field names of a response's `Vary`.
    static func varyNames(of response: HTTPURLResponse) -> [String] {
        guard let vary = response.value(forHTTPHeaderField: "Vary") else { return [] }
        return vary.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    /// Fields whose values are secrets: the entry keeps a ``CachePrincipal/digest(_:)`` of them, never the value.
    private static let secretFields: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// A field value as `Vary` compares it: whitespace around commas ignored; an absent field is ""; a secret's
    /// digest.
    private static func normalized(_ value: String?, of name: String) -> String {
        let value = (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: ",")
        return secretFields.contains(name) && !value.isEmpty ? CachePrincipal.digest(value) : value
    }

    /// The URL as the cache keys it: without its fragment (found byte-wise: a `Character` search costs more than
    /// the rest of a cache miss).
    static func withoutFragment(_ url: URL) -> String {
        var text = url.absoluteString
        let hasFragment =
            text.withUTF8 { bytes in bytes.baseAddress.map { memchr($0, 0x23, bytes.count) != nil } ?? false }
        guard hasFragment, let hash = text.utf8.firstIndex(of: UInt8(ascii: "#")) else { return text }
        return String(text[..<hash])
    }
}
