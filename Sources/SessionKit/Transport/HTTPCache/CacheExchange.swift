import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One task's dealings with the ``ResponseCache``, transfer by transfer: the plan before a request goes out, the
/// stored response a 304 confirmed, the response being kept to store once its body has arrived.
///
/// Used by ``CurlTaskDriver`` on the manager's delegate queue (and for the task's first request, before any event
/// exists), like the rest of its conversation.
struct CacheExchange {
    /// What the task does before a transfer.
    enum Start {
        /// Send this request (the original, or made conditional).
        case send(URLRequest)
        /// Answer with this stored response; no transfer.
        case serve(CacheEntry)
        /// Answer with this stale stored response, and send this request (conditional when the response has
        /// validators) in the background to bring the stored response up to date (`stale-while-revalidate`).
        case serveStaleAndRevalidate(CacheEntry, URLRequest)
        /// Nothing stored, and the request's policy may not use the network: it fails.
        case unavailable
        /// Nothing stored that may answer, and the request's `only-if-cached` forbids the network: answer 504.
        case unsatisfiable
        /// The `URLCache` must be read, which may read its disk: start again on the delegate queue.
        case readStoreFirst
    }

    /// A response about to be stored, waiting for the manager's approval (`dataTaskWillCacheResponse`).
    struct Proposal {
        let response: CachedURLResponse
        let request: URLRequest
    }

    let cache: ResponseCache
    /// The configuration key of the task's policy, computed when first needed.
    private let policy: SecurityPolicy
    private var policyKey: String?

    /// The stored response being revalidated by the running transfer.
    private var candidate: CacheEntry?
    /// A 304 confirmed `candidate`: its body goes to the task when the transfer ends.
    private(set) var confirmed: CacheEntry?
    /// Whether the running transfer's response may be stored.
    private var storesResponse = false
    private var requestTime = Date()
    /// The URL an unsafe method (POST, PUT, DELETE…) targets: a successful response invalidates what is stored for it.
    private var unsafeTarget: URL?
    /// A stored response a 304 updated, to store again once approved.
    private var proposal: Proposal?
    /// The response being kept for the cache, with its body so far.
    private var kept: (request: URLRequest, response: HTTPURLResponse, responseTime: Date, body: Data)?
    /// The running transfer's request as it goes on the wire (with the credential the transport adds): what the
    /// cache judges, keys `Vary` by and takes the principal of.
    private var sent: URLRequest?
    /// Whether the running transfer's request carries conditional fields the cache added (its revalidation), which
    /// never follow a redirect or a challenge's next round.
    private var addedConditionals = false

    init(cache: ResponseCache, policy: SecurityPolicy) {
        self.cache = cache
        self.policy = policy
    }

    private mutating func key() -> String {
        if let policyKey { return policyKey }
        let key = policy.configurationKey
        policyKey = key
        return key
    }

    /// Plans the transfer of `request` (the task's first, or the next after a redirect or a challenge).
    ///
    /// - Parameters:
    ///   - request:      The request as the task built it (cookies included).
    ///   - credential:   The challenge credential the transport will add to it, as one string; nil without one.
    ///   - mayReadStore: Whether this thread may read the `URLCache` (the delegate queue may; the thread that called
    ///     `resume()` may not).
    mutating func start(_ request: URLRequest, credential: String?, mayReadStore: Bool) -> Start {
        (candidate, confirmed, kept, storesResponse, requestTime) = (nil, nil, nil, false, Date())
        addedConditionals = false
        let sent = CachePrincipal.asSent(request, credential: credential)
        self.sent = sent
        if let method = request.httpMethod, method != "GET",
            !Self.safeMethods.contains(where: method.equalsIgnoringASCIICase)
        {
            unsafeTarget = request.url
        } else {
            unsafeTarget = nil
        }
        let cache = self.cache
        let plan = cache.plan(for: sent, principal: { CachePrincipal.of(sent) }, mayReadStore: mayReadStore) { key() }
        switch plan {
        case .bypass:
            return .send(request)
        case .network:
            storesResponse = true
            return .send(request)
        case .networkPastRemoteCaches:
            storesResponse = true
            var request = request
            if request.value(forHTTPHeaderField: "Cache-Control") == nil {
                request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                request.setValue("no-cache", forHTTPHeaderField: "Pragma")
            }
            return .send(request)
        case .serve(let entry):
            return .serve(entry)
        case .revalidate(let entry):
            storesResponse = true
            // Built from the request itself: the credential stands in `sent` only for the cache's judgement.
            candidate = entry
            guard let conditional = entry.conditionalRequest(for: request) else { return .send(request) }
            addedConditionals = true
            return .send(conditional)
        case .serveStaleAndRevalidate(let entry):
            guard let url = request.url, cache.beginBackgroundRevalidation(of: url) else { return .serve(entry) }
            return .serveStaleAndRevalidate(entry, entry.conditionalRequest(for: request) ?? request)
        case .unavailable:
            return .unavailable
        case .unsatisfiable:
            return .unsatisfiable
        case .readStoreFirst:
            return .readStoreFirst
        }
    }

    /// Whether the cache needs to see the final response whose fields are `fields`: one being revalidated, or one
    /// that may be storable (most API responses have none of the fields that make it so: one look at their names).
    func wantsResponse(withFields fields: [(String, String)]) -> Bool {
        candidate != nil || (storesResponse && fields.contains(where: { Self.makesStorable($0.0) }))
    }

    /// `request` without the conditional fields the cache added to it: what a redirect or a challenge's next round
    /// starts from (the cache's validators never go to another origin, and a caller gets a 304 only for a conditional
    /// request of its own).
    func removingOwnFields(from request: URLRequest) -> URLRequest {
        guard addedConditionals else { return request }
        var request = request
        request.setValue(nil, forHTTPHeaderField: "If-None-Match")
        request.setValue(nil, forHTTPHeaderField: "If-Modified-Since")
        return request
    }

    /// The final response head of the running transfer arrived (and ``wantsResponse(withFields:)`` said so): the
    /// response the task delivers (a 304 to its own revalidation becomes the stored response, updated); a storable one
    /// starts being kept. `request`: the request the transfer sent.
    ///
    /// A 304 whose entity tag names another representation than the stored one (RFC 9111 4.3.4: it MUST NOT update
    /// it) delivers the stored response unchanged, which is then dropped from the store.
    mutating func received(_ response: HTTPURLResponse, for request: URLRequest) -> HTTPURLResponse {
        let request = sent ?? request
        // Credentials as sent: the request's own, a challenge's (in `sent`), or the URL's user.
        let authenticated = request.value(forHTTPHeaderField: "Authorization") != nil || request.url?.user != nil
        let now = Date()
        if [500, 502, 503, 504].contains(response.statusCode), let candidate, candidate.mayServeAfterError(at: now) {
            // stale-if-error: the stored response answers instead, and the error's body is dropped like a 304's.
            (confirmed, storesResponse) = (candidate, false)
            return candidate.servedResponse(at: now)
        }
        if response.statusCode == 304, let candidate, addedConditionals, candidate.isContradicted(by: response),
            let url = request.url
        {
            // RFC 9111 4.3.4: it updates nothing. The stored response answers as it is (the server said the one asked
            // about is current, as browsers read it), and is dropped, so that the next request gets the whole one.
            cache.invalidate(url)
            (confirmed, storesResponse) = (candidate, false)
            return candidate.servedResponse(at: now)
        }
        if response.statusCode == 304, let candidate, addedConditionals,
            let updated = candidate.revalidated(by: response, requestTime: requestTime, responseTime: now)
        {
            confirmed = updated
            if CacheEntry.refusalToStore(updated.response, for: request, authenticated: authenticated) != nil {
                // Nothing of this exchange is stored (a `no-store` in the request or the 304, RFC 9111 5.2): the
                // updated response answers this request only. A 304 that says `no-store` also drops the stored
                // response it would have updated: the server no longer lets caches keep it.
                if updated.control.forbidsStoring, let url = request.url { cache.invalidate(url) }
            } else if updated.differs(from: candidate) {
                proposal = Proposal(response: updated.cachedURLResponse, request: request)
            }
            return updated.response
        }
        if storesResponse, CacheEntry.refusalToStore(response, for: request, authenticated: authenticated) == nil,
            response.expectedContentLength <= Int64(cache.maximumBodySize)
        {
            kept = (request, response, now, Data())
        }
        return response
    }

    /// The running transfer failed before its response head: the stale stored response that may answer instead
    /// (`stale-if-error`), or nil.
    mutating func staleAfterError() -> CacheEntry? {
        defer { (kept, candidate, unsafeTarget) = (nil, nil, nil) }
        guard let candidate, candidate.mayServeAfterError(at: Date()) else { return nil }
        return candidate
    }

    /// Body bytes of the running transfer (not those of a 304).
    mutating func receivedBody(_ data: Data) {
        guard kept != nil else { return }
        if (kept?.body.count ?? 0) + data.count > cache.maximumBodySize {
            kept = nil  // too large to be worth a twentieth of the cache
        } else {
            kept?.body.append(data)
        }
    }

    /// Whether the end of the running transfer concerns the cache: a response to store, a stored body to deliver, a
    /// stored response to invalidate.
    var hasWorkAtEnd: Bool { kept != nil || confirmed != nil || unsafeTarget != nil }

    /// The running transfer ended: drops what an unsafe method with a successful response changed (RFC 9111 4.4),
    /// and returns the response kept for the cache, if it ended well, for the manager to approve (``store(_:for:)``).
    mutating func ended(response: URLResponse?, failed: Bool) -> Proposal? {
        defer { (kept, candidate, unsafeTarget) = (nil, nil, nil) }
        guard !failed else { return nil }
        if let unsafeTarget, let status = (response as? HTTPURLResponse)?.statusCode, (200..<400).contains(status) {
            cache.invalidate(unsafeTarget)
        }
        guard let kept else { return nil }
        let entry = CacheEntry(
            response: kept.response, data: kept.body, request: kept.request, requestTime: requestTime,
            responseTime: kept.responseTime, policyKey: key())
        // A server that ignored the conditional request and sent the same response again: nothing to write.
        if let candidate, !entry.differs(from: candidate) { return nil }
        return Proposal(response: entry.cachedURLResponse, request: kept.request)
    }

    /// The stored response a 304 just updated, to store again once the manager approves it.
    mutating func takeProposal() -> Proposal? {
        defer { proposal = nil }
        return proposal
    }

    /// Stores what the manager approved of `proposal` (its response, or another one, which keeps the proposal's
    /// metadata).
    func store(_ approved: CachedURLResponse, for proposal: Proposal) {
        cache.save(CacheEntry.keepingMetadata(of: proposal.response, in: approved), for: proposal.request)
    }

    /// A redirect ended the running transfer: a redirect (a non-error status) after an unsafe method invalidates
    /// its target too (RFC 9111 4.4), POST-redirect-GET included.
    mutating func redirected(by response: HTTPURLResponse) {
        if let unsafeTarget, response.statusCode < 400 { cache.invalidate(unsafeTarget) }
        (kept, candidate, unsafeTarget) = (nil, nil, nil)
    }

    /// Prepares this exchange to take the answer to a background revalidation of `entry` (served stale), sent as
    /// `request` with `credential` (``start(_:credential:mayReadStore:)``).
    mutating func prepareBackgroundRevalidation(of entry: CacheEntry, request: URLRequest, credential: String?) {
        (candidate, confirmed, kept, storesResponse, requestTime) = (entry, nil, nil, true, Date())
        sent = CachePrincipal.asSent(request, credential: credential)
        addedConditionals = entry.hasValidators
    }

    /// The background revalidation's answer arrived whole (`response` nil: it failed): stores what it brings (a 304's
    /// updated fields, or a new storable response), without asking the manager (no task asked for it), and lets a
    /// later stale use revalidate again.
    mutating func endBackgroundRevalidation(response: HTTPURLResponse?, body: Data) {
        defer {
            if let url = sent?.url { cache.endBackgroundRevalidation(of: url) }
        }
        guard let response, let request = sent else { return }
        _ = received(response, for: request)
        if let proposal = takeProposal() { store(proposal.response, for: proposal) }
        if response.statusCode != 304 { receivedBody(body) }
        if let proposal = ended(response: response, failed: false) { store(proposal.response, for: proposal) }
    }

    /// Methods that change nothing on the server (RFC 9110 9.2.1): their responses invalidate nothing.
    private static let safeMethods = ["GET", "HEAD", "OPTIONS", "TRACE"]

    /// Whether a field named `name` can make a response storable: explicit freshness, a validator, `public`.
    private static func makesStorable(_ name: String) -> Bool {
        // Their names start with c, e or l: most fields are ruled out by their first byte.
        guard let first = name.utf8.first, [0x63, 0x65, 0x6C].contains(first | 0x20) else { return false }
        return name.equalsIgnoringASCIICase("Cache-Control") || name.equalsIgnoringASCIICase("Expires")
            || name.equalsIgnoringASCIICase("ETag") || name.equalsIgnoringASCIICase("Last-Modified")
    }
}
