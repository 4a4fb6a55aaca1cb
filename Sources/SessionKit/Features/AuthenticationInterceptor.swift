import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A credential an ``AuthenticationInterceptor`` applies: an OAuth token, an API key with an expiry.
public protocol AuthenticationCredential: Sendable {
    /// Whether the credential must be refreshed before it is used (it expires soon, say).
    var requiresRefresh: Bool { get }
}

/// What an ``AuthenticationInterceptor`` needs to know about one kind of credential.
public protocol Authenticator: Sendable {
    /// The credential this authenticator applies and refreshes.
    associatedtype Credential: AuthenticationCredential

    /// Puts `credential` on `request` (an `Authorization` header, say).
    func apply(_ credential: Credential, to request: inout URLRequest)
    /// A fresh credential for `credential` (a token refresh against the identity server).
    func refresh(_ credential: Credential) async throws -> Credential
    /// Whether the failure of `request` with `response` means the credential was refused (usually a 401).
    func didRequest(
        _ request: URLRequest, with response: HTTPURLResponse, failDueToAuthenticationError error: Error
    ) -> Bool
    /// Whether `request` carries `credential` (false means it was sent with an older one).
    func isRequest(_ request: URLRequest, authenticatedWith credential: Credential) -> Bool
}

/// Applies a credential to every request, refreshes it when it says so or when the server refuses it, and sends the
/// refused requests again with the fresh one.
///
/// Several requests refused at the same time cause one refresh: the others wait for it, and a request that was
/// sent with an older credential than the current one is simply sent again. More than
/// ``RefreshWindow/maximumAttempts`` refreshes within ``RefreshWindow/interval`` fail the requests with
/// `SessionKitError.Code.excessiveRefresh` instead of refreshing forever.
public final class AuthenticationInterceptor<A: Authenticator>: RequestInterceptor, Sendable {
    // Sendable, checked by the compiler: the mutable state is in `store`, an actor.

    /// How many refreshes are allowed within how long.
    public struct RefreshWindow: Sendable {
        /// The window, in seconds.
        public let interval: TimeInterval
        /// The refreshes allowed within it.
        public let maximumAttempts: Int

        /// A window of `maximumAttempts` refreshes per `interval` seconds (default 5 per 30 s).
        public init(interval: TimeInterval = 30, maximumAttempts: Int = 5) {
            self.interval = interval
            self.maximumAttempts = maximumAttempts
        }
    }

    /// Applies and refreshes the credential.
    public let authenticator: A
    private let store: CredentialStore<A>

    /// An interceptor for `authenticator`, starting with `credential` (nil: requests fail with
    /// `SessionKitError.Code.missingCredential` until one is set).
    public init(authenticator: A, credential: A.Credential? = nil, refreshWindow: RefreshWindow = RefreshWindow()) {
        self.authenticator = authenticator
        self.store = CredentialStore(credential: credential, window: refreshWindow)
    }

    /// The credential in use.
    public var credential: A.Credential? {
        get async { await store.credential }
    }

    /// Replaces the credential (after a new login, say).
    public func setCredential(_ credential: A.Credential?) async {
        await store.set(credential)
    }

    /// How many refreshes ran so far.
    public var refreshCount: Int {
        get async { await store.refreshCount }
    }

    /// Applies the current credential to the request, refreshing it first when it needs refresh.
    public func adapt(_ request: URLRequest, for sessionRequest: SessionRequest) async throws -> URLRequest {
        // While a refresh runs, requests wait for its credential instead of going out with the refused one.
        guard var credential = try await store.settledCredential() else {
            throw SessionKitError.session(
                .missingCredential, "There is no credential to authenticate the request with.")
        }
        if credential.requiresRefresh {
            credential = try await store.refresh(from: credential, with: authenticator)
        }
        var request = request
        authenticator.apply(credential, to: &request)
        return request
    }

    /// Refreshes the credential and retries when the authenticator says the request failed because of it; when the
    /// refresh fails, the request fails with the refresh's error (as in Alamofire), not with the refused response's.
    public func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision {
        guard let request = sessionRequest.request, let response = sessionRequest.response,
            authenticator.didRequest(request, with: response, failDueToAuthenticationError: error),
            let credential = await store.credential
        else { return .doNotRetry }
        // Sent with an older credential than the current one: another request already refreshed it.
        guard authenticator.isRequest(request, authenticatedWith: credential) else { return .retry }
        do {
            _ = try await store.refresh(from: credential, with: authenticator)
            return .retry
        } catch {
            // The refresh's own error, as thrown: bridged to `NSError`, Linux would lose its type.
            return .doNotRetryWithError(error)
        }
    }
}

/// The credential and its refreshes: one refresh at a time, the others wait for it.
private actor CredentialStore<A: Authenticator> {
    private(set) var credential: A.Credential?
    private(set) var refreshCount = 0
    private var refreshing: Task<A.Credential, Error>?
    private var refreshTimes: [Date] = []
    private let window: AuthenticationInterceptor<A>.RefreshWindow

    init(credential: A.Credential?, window: AuthenticationInterceptor<A>.RefreshWindow) {
        self.credential = credential
        self.window = window
    }

    func set(_ credential: A.Credential?) {
        self.credential = credential
    }

    /// The credential once no refresh is running: the refresh's result when one is in flight.
    func settledCredential() async throws -> A.Credential? {
        if let refreshing { return try await refreshing.value }
        return credential
    }

    /// A fresh credential: the refresh in flight, or a new one (if the window allows).
    func refresh(from stale: A.Credential, with authenticator: A) async throws -> A.Credential {
        if let refreshing { return try await refreshing.value }
        let now = Date()
        refreshTimes = refreshTimes.filter { now.timeIntervalSince($0) < window.interval }
        guard refreshTimes.count < window.maximumAttempts else {
            throw SessionKitError.session(
                .excessiveRefresh,
                "The credential was refreshed \(refreshTimes.count) times in \(window.interval) s; not refreshing again."
            )
        }
        refreshTimes.append(now)
        refreshCount += 1
        let task = Task { try await authenticator.refresh(stale) }
        refreshing = task
        defer { refreshing = nil }
        let fresh = try await task.value
        credential = fresh
        return fresh
    }
}
