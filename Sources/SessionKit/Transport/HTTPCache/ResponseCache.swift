import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The curl transport's HTTP cache: RFC 9111's private cache over the session configuration's `URLCache`.
///
/// For each request it plans (``plan(for:principal:mayReadStore:policyKey:)``): answer from a stored response,
/// revalidate one, serve a stale one while revalidating it in the background, or go to the network; it stores what may
/// be stored and drops what an unsafe method changed. Only GET requests take part; a request that carries its own
/// conditional fields is the caller's business and passes untouched, and one with a `Range` is answered from a fresh
/// complete stored response or passes untouched. A stored response is served only to the user it may be served to
/// (``CacheEntry/mayServe(principal:)``).
///
/// The `URLCache` of Linux answers a miss by listing its disk directory, which would cost more than a whole small
/// GET. So the cache remembers, per `URLCache` and for a few seconds, the URLs it found nothing for under the default
/// policy: a request to a URL nothing is stored for costs a dictionary lookup. When the `URLCache` must be read, the
/// plan says so (``Plan/readStoreFirst``) to a caller that may not read it (the thread that called `resume()`).
final class ResponseCache: @unchecked Sendable {
    // @unchecked Sendable: `store` is Foundation's thread-safe `URLCache`; `index` is a lock-protected box shared by
    // every `ResponseCache` of that `URLCache`; the rest is immutable.

    /// What to do with a request.
    enum Plan {
        /// Go to the network; store the response if it may be.
        case network
        /// Go to the network with `Cache-Control: no-cache` for the caches on the way
        /// (`.reloadIgnoringLocalAndRemoteCacheData`); store the response if it may be.
        case networkPastRemoteCaches
        /// Neither read nor store: not a GET, or the request is conditional or partial on its own.
        case bypass
        /// Answer with this stored response, without the network.
        case serve(CacheEntry)
        /// Send the request made conditional on this stored response; a 304 answers with it, updated.
        case revalidate(CacheEntry)
        /// Answer with this stale stored response at once, and revalidate it in the background
        /// (`stale-while-revalidate`).
        case serveStaleAndRevalidate(CacheEntry)
        /// Nothing stored and the policy forbids the network (`.returnCacheDataDontLoad`): the request fails.
        case unavailable
        /// Nothing stored that may answer, and the request's `only-if-cached` forbids the network: the cache answers
        /// 504 (Gateway Timeout), as RFC 9111 5.2.1.7 says it should (and as OkHttp and Squid do).
        case unsatisfiable
        /// The `URLCache` must be read and the caller may not (it may read its disk): plan again where it may.
        case readStoreFirst

        /// Whether the plan sends the request (stale-while-revalidate in the background).
        var usesNetwork: Bool {
            switch self {
            case .network, .networkPastRemoteCaches, .bypass, .revalidate, .serveStaleAndRevalidate: return true
            case .serve, .unavailable, .unsatisfiable, .readStoreFirst: return false
            }
        }
    }

    let store: URLCache
    /// The configuration's `requestCachePolicy`, for requests that leave theirs at `.useProtocolCachePolicy`.
    let defaultPolicy: URLRequest.CachePolicy
    private let index: Index

    /// The cache of `configuration`, or nil when it has no `URLCache`.
    init?(configuration: URLSessionConfiguration) {
        guard let store = configuration.urlCache else { return nil }
        self.store = store
        self.defaultPolicy = configuration.requestCachePolicy
        self.index = Index.shared(for: store)
    }

    /// Preconditions, for the origin server alone to evaluate (RFC 9111 4.3.2): a request with one is passed on as it
    /// is, and never answered from the store (an `If-Range` answered from another version would splice two).
    private static let preconditionFields = ["If-Range", "If-Match", "If-Unmodified-Since"]

    /// What to do with `request` (as it goes on the wire, ``CachePrincipal/asSent(_:credential:)``), whose principal
    /// `principal` gives (computed only when a stored response is found). `policyKey` gives the configuration key of
    /// the task's ``SecurityPolicy``: an https response is only used again under the policy whose handshake delivered
    /// it.
    func plan(
        for request: URLRequest, principal: () -> String?, mayReadStore: Bool, policyKey: () -> String
    ) -> Plan {
        let method = request.httpMethod
        guard method == nil || method == "GET", let url = request.url else { return .bypass }
        // One pass over the request's fields (each `value(forHTTPHeaderField:)` scans them all).
        var (cacheControl, pragma, range): (String?, String?, String?) = (nil, nil, nil)
        var (ifNoneMatch, ifModifiedSince): (String?, String?) = (nil, nil)
        var preconditioned = false
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            // The fields that matter start with r, i, c or p: most are ruled out by their first byte.
            guard let first = name.utf8.first, [0x72, 0x69, 0x63, 0x70].contains(first | 0x20) else { continue }
            if name.equalsIgnoringASCIICase("If-None-Match") {
                ifNoneMatch = value
            } else if name.equalsIgnoringASCIICase("If-Modified-Since") {
                ifModifiedSince = value
            } else if Self.preconditionFields.contains(where: name.equalsIgnoringASCIICase) {
                preconditioned = true
            } else if name.equalsIgnoringASCIICase("Range") {
                range = value
            } else if name.equalsIgnoringASCIICase("Cache-Control") {
                cacheControl = value
            } else if name.equalsIgnoringASCIICase("Pragma") {
                pragma = value
            }
        }
        let requestControl = CacheEntry.requestControl(cacheControl: cacheControl, pragma: pragma)
        let policy = request.cachePolicy == .useProtocolCachePolicy ? defaultPolicy : request.cachePolicy
        let forbidsNetwork = policy == .returnCacheDataDontLoad || requestControl.onlyIfCached
        if preconditioned && forbidsNetwork { return refusal(under: policy) }
        let plan = self.plan(
            for: request, url: url, range: range, validators: (ifNoneMatch, ifModifiedSince),
            preconditioned: preconditioned, requestControl: requestControl, policy: policy,
            forbidsNetwork: forbidsNetwork, principal: principal, mayReadStore: mayReadStore, policyKey: policyKey)
        // `only-if-cached` keeps every request off the network, whatever the policy (RFC 9111 5.2.1.7).
        if requestControl.onlyIfCached && plan.usesNetwork { return .unsatisfiable }
        return plan
    }

    /// ``plan(for:principal:mayReadStore:policyKey:)`` once the request's fields are read.
    private func plan(
        for request: URLRequest, url: URL, range: String?, validators: (ifNoneMatch: String?, ifModifiedSince: String?),
        preconditioned: Bool, requestControl: CacheControl, policy: URLRequest.CachePolicy, forbidsNetwork: Bool,
        principal: () -> String?, mayReadStore: Bool, policyKey: () -> String
    ) -> Plan {
        let conditional = preconditioned || validators.ifNoneMatch != nil || validators.ifModifiedSince != nil
        switch policy {
        case .reloadIgnoringLocalCacheData: return range == nil && !conditional ? .network : .bypass
        case .reloadIgnoringLocalAndRemoteCacheData:
            return range == nil && !conditional ? .networkPastRemoteCaches : .bypass
        default: break
        }
        // A caller's own conditional request goes out as it is, unless it may not go out at all: then it is answered
        // as any other, from what is stored (a 304 made from it when the request's validators name it).
        if conditional && !forbidsNetwork { return .bypass }
        let plan = storedPlan(
            for: request, url: url, principal: principal, requestControl: requestControl, policy: policy,
            mayReadStore: mayReadStore, policyKey: policyKey)
        // The caller's own validators, answered from the store: a 304 when they name the stored response, before any
        // range is cut (RFC 9110 13.2.2 evaluates them first); else the stored response, or its range, as below.
        if conditional, case .serve(let entry) = plan,
            let notModified = entry.notModified(
                ifNoneMatch: validators.ifNoneMatch, ifModifiedSince: validators.ifModifiedSince)
        {
            return .serve(notModified)
        }
        guard let range else { return plan }
        // A partial request: answered by cutting a stored complete response that needs no validation, else sent as it
        // is (a 206 is not stored), unless the policy or `only-if-cached` forbids the network.
        switch plan {
        case .serve(let entry):
            return entry.partial(for: range).map(Plan.serve) ?? (forbidsNetwork ? refusal(under: policy) : .bypass)
        case .unavailable, .unsatisfiable, .readStoreFirst: return plan
        default: return .bypass
        }
    }

    /// What the stored responses make of `request` under `policy` (neither reload policy).
    private func storedPlan(
        for request: URLRequest, url: URL, principal: () -> String?, requestControl: CacheControl,
        policy: URLRequest.CachePolicy, mayReadStore: Bool, policyKey: () -> String
    ) -> Plan {
        let key = CacheEntry.withoutFragment(url)
        // Under the default policy a URL known to have nothing stored skips the URLCache (see the type's notes).
        let consultStore = policy != .useProtocolCachePolicy || index.mayHold(key)
        var entry: CacheEntry?
        if consultStore {
            guard mayReadStore else { return .readStoreFirst }
            let generation = index.generation(of: key)
            let stored = store.cachedResponse(for: request)
            entry = stored.flatMap(CacheEntry.init).flatMap { entry in
                guard entry.matches(request), entry.mayServe(principal: principal()) else { return nil }
                if ["https", "https+unix"].contains(url.scheme?.lowercased() ?? ""), entry.policyKey != policyKey() {
                    return nil
                }
                return entry
            }
            // Only when nothing at all is stored under the URL's key (another query or variant may be).
            if stored == nil, policy == .useProtocolCachePolicy { index.markAbsent(key) }
            if let stored, entry != nil { keepInMemory(stored, for: request, key: key, readAt: generation) }
        }
        let now = Date()
        switch (policy, entry) {
        case (.returnCacheDataDontLoad, let entry?):
            return .serve(entry)
        case (.returnCacheDataDontLoad, nil):
            return .unavailable
        case (.returnCacheDataElseLoad, let entry?):
            // Whatever its age, except a response that must be revalidated: each time (`no-cache`, RFC 9111 5.2.2.4),
            // or once stale (`must-revalidate`, 5.2.2.2).
            let control = entry.control
            if control.noCache || (control.mustRevalidate && entry.currentAge(at: now) >= entry.freshnessLifetime) {
                return revalidation(of: entry, for: request)
            }
            return .serve(entry)
        case (.reloadRevalidatingCacheData, let entry?):
            return revalidation(of: entry, for: request)
        case (_, let entry?):
            if entry.isUsableWithoutValidation(under: requestControl, at: now) { return .serve(entry) }
            if entry.mayServeWhileRevalidating(under: requestControl, at: now) {
                return .serveStaleAndRevalidate(entry)
            }
            return revalidation(of: entry, for: request)
        case (_, nil):
            return .network
        }
    }

    /// What a request that may not use the network and that nothing stored answers gets: an error under
    /// `.returnCacheDataDontLoad` (as URLSession fails it), a 504 under the request's `only-if-cached`.
    private func refusal(under policy: URLRequest.CachePolicy) -> Plan {
        policy == .returnCacheDataDontLoad ? .unavailable : .unsatisfiable
    }

    private func revalidation(of entry: CacheEntry, for request: URLRequest) -> Plan {
        // Without validators the request goes out as it is, the entry kept in case of an error (stale-if-error).
        entry.hasValidators || entry.control.staleIfError != nil ? .revalidate(entry) : .network
    }

    /// Claims the one background revalidation of `url` (`stale-while-revalidate` revalidates once, however many
    /// requests are served stale meanwhile); false when one is running.
    func beginBackgroundRevalidation(of url: URL) -> Bool {
        index.beginRevalidation(CacheEntry.withoutFragment(url))
    }

    /// The background revalidation of `url` ended.
    func endBackgroundRevalidation(of url: URL) {
        index.endRevalidation(CacheEntry.withoutFragment(url))
    }

    /// The largest body stored: a twentieth of the cache, as Apple's URLSession does.
    var maximumBodySize: Int { max(store.memoryCapacity, store.diskCapacity) / 20 }

    /// Stores `response` (a ``CacheEntry``'s, or what the manager's `dataTaskWillCacheResponse` made of it) as the
    /// answer to `request`.
    func save(_ response: CachedURLResponse, for request: URLRequest) {
        guard let url = request.url else { return }
        // Linux's URLCache appends a key to its eviction order on every store, and its eviction force-unwraps each
        // key it meets: a key stored twice (a response stored again, another query of the same path) crashes the
        // process once memory runs short. Removing first keeps one occurrence; stores of one URLCache are serialized.
        let key = CacheEntry.withoutFragment(url)
        index.serializingStores {
            store.removeCachedResponse(for: request)
            store.storeCachedResponse(response, for: request)
            index.markPresent(key, storing: response)
        }
    }

    /// Stores again, once in a while, a stored response that Linux's `URLCache` read from its disk, so that its
    /// memory answers the next requests for it.
    ///
    /// Its memory holds what was stored in this process only: a response stored by an earlier run, or one its memory
    /// let go, is read from disk at every request (its directory listed, the file read, the archive decoded: over a
    /// millisecond, more the more it holds), and a revalidation that brings the same response again writes nothing.
    /// Its memory returns the very object it was given, so an object the caches of this `URLCache` did not store came
    /// from disk, or from someone else's store (told apart by reading again). It goes into memory only (the disk
    /// holds it already), without the removal a store does first, so readers never find the URL empty in between:
    /// the memory does not hold the URL, and nothing was stored or dropped for it since it was read (`readAt`),
    /// checked under the stores' lock, so an older response never replaces a newer one or comes back after an
    /// invalidation.
    private func keepInMemory(_ stored: CachedURLResponse, for request: URLRequest, key: String, readAt generation: Int)
    {
        guard stored.data.count + 4096 < store.memoryCapacity else { return }
        index.serializingStores {
            guard index.shouldKeepInMemory(stored, key: key, readAt: generation) else { return }
            // Read once more: its memory returns the same object each time, its disk a new one. A response its
            // memory holds (someone else stored it there) is left alone: stored again without a removal, its key
            // would stand twice in the eviction order.
            guard let again = store.cachedResponse(for: request), again !== stored else { return }
            let inMemory = CachedURLResponse(
                response: stored.response, data: stored.data, userInfo: stored.userInfo,
                storagePolicy: .allowedInMemoryOnly)
            store.storeCachedResponse(inMemory, for: request)
            index.markPresent(key, storing: inMemory)
        }
    }

    /// Drops what is stored for `url` after an unsafe method changed it (RFC 9111 4.4), unless the URL was found
    /// empty a moment ago (removing lists the `URLCache`'s disk directory).
    func invalidate(_ url: URL) {
        let key = CacheEntry.withoutFragment(url)
        guard index.mayHold(key) else { return }
        index.serializingStores {
            store.removeCachedResponse(for: URLRequest(url: url))
            index.markAbsent(key)
        }
    }

    /// What the caches of one `URLCache` know of its contents: the URLs found empty, each until a few seconds later
    /// (so that an entry someone else stores is found soon after); a URL stored is forgotten.
    final class Index: @unchecked Sendable {
        // @unchecked Sendable: `emptyUntil`, `stored` and `revalidating` are `Protected` boxes; `store` is only
        // compared.

        private static let absentFor: TimeInterval = 5
        private static let keptFor: TimeInterval = 60
        private static let capacity = 4096
        private static let indexes = Protected<[ObjectIdentifier: Index]>([:])

        private weak var store: URLCache?
        private let emptyUntil = Protected<[String: Date]>([:])
        /// What is known of each URL stored or dropped: the object stored (what the `URLCache`'s memory returns
        /// while it holds it), when it was last brought back into memory, and a count of its stores and removals.
        private let stored = Protected<[String: Stored]>([:])
        private let storeLock = NSLock()
        /// The URLs being revalidated in the background.
        private let revalidating = Protected<Set<String>>([])

        private init(store: URLCache) { self.store = store }

        /// The index of `store`, shared by every manager that uses it.
        static func shared(for store: URLCache) -> Index {
            indexes.write { indexes in
                let id = ObjectIdentifier(store)
                if let index = indexes[id], index.store === store { return index }
                indexes = indexes.filter { $0.value.store != nil }  // forget caches that are gone
                let index = Index(store: store)
                indexes[id] = index
                return index
            }
        }

        /// False only when the URL was found empty a moment ago.
        func mayHold(_ key: String) -> Bool {
            emptyUntil.read { $0[key] }.map { $0 < Date() } ?? true
        }

        /// Runs `body` (a store into the `URLCache`) while no other cache of this `URLCache` stores.
        func serializingStores(_ body: () -> Void) {
            storeLock.lock()
            defer { storeLock.unlock() }
            body()
        }

        /// What is known of one URL's stored response.
        struct Stored {
            /// The response stored last; nil once the `URLCache` let it go (or it was dropped).
            weak var object: CachedURLResponse?
            /// When it was last brought back into memory.
            var keptAt: Date?
            /// How many times it was stored or dropped: a read that saw another count is out of date.
            var generation = 0
        }

        /// The URL was found empty, or its stored response dropped.
        func markAbsent(_ key: String) {
            let until = Date().addingTimeInterval(Self.absentFor)
            emptyUntil.write { emptyUntil in
                if emptyUntil.count >= Self.capacity, emptyUntil[key] == nil { emptyUntil.removeAll() }
                emptyUntil[key] = until
            }
            update(key) { $0.object = nil }
        }

        /// `response` was stored for `key`.
        func markPresent(_ key: String, storing response: CachedURLResponse) {
            emptyUntil.write { _ = $0.removeValue(forKey: key) }
            update(key) { $0.object = response }
        }

        /// How many times a response was stored or dropped for `key` (compared before and after a read).
        func generation(of key: String) -> Int { stored.read { $0[key]?.generation ?? 0 } }

        /// Whether `response`, read for `key` when its ``generation(of:)`` was `generation`, should be stored again to
        /// bring it into the `URLCache`'s memory: nothing was stored or dropped for it since, it is not the object
        /// stored last (which the memory returns while it holds it), and it was not brought back in the last minute
        /// (a memory too small for the URLs in use would otherwise have every read followed by a write). Called
        /// under ``serializingStores(_:)``.
        func shouldKeepInMemory(_ response: CachedURLResponse, key: String, readAt generation: Int) -> Bool {
            let now = Date()
            return stored.write { stored in
                let known = stored[key] ?? Stored()
                guard known.generation == generation, known.object !== response else { return false }
                if let keptAt = known.keptAt, now.timeIntervalSince(keptAt) < Self.keptFor { return false }
                if stored.count >= Self.capacity, stored[key] == nil { stored.removeAll() }
                stored[key] = Stored(object: known.object, keptAt: now, generation: known.generation)
                return true
            }
        }

        /// Changes what is known of `key`, and counts the change.
        private func update(_ key: String, _ change: (inout Stored) -> Void) {
            stored.write { stored in
                if stored.count >= Self.capacity, stored[key] == nil { stored.removeAll() }
                var known = stored[key] ?? Stored()
                change(&known)
                known.generation += 1
                stored[key] = known
            }
        }

        func beginRevalidation(_ key: String) -> Bool { revalidating.write { $0.insert(key).inserted } }

        func endRevalidation(_ key: String) { _ = revalidating.write { $0.remove(key) } }
    }
}
