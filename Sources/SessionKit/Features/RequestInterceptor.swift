import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Changes or refuses a request before its task is created: adds a token, signs it, rewrites its URL.
///
/// Adapters run for every attempt of a ``SessionRequest`` (a retry is adapted again, so a refreshed credential is
/// applied). A thrown error ends the request with that error; no task is created and nothing is sent.
public protocol RequestAdapter: Sendable {
    /// Returns the request to send instead of `request`, or throws to refuse it.
    /// - Parameters:
    ///   - request: The request as built by the serializer (or by the previous adapter).
    ///   - sessionRequest: The request's life so far (its attempt number is ``SessionRequest/retryCount``).
    func adapt(_ request: URLRequest, for sessionRequest: SessionRequest) async throws -> URLRequest
}

/// What a ``RequestRetrier`` decides after an attempt failed.
public enum RetryDecision: Sendable, Equatable {
    /// Send the request again now (adapted again).
    case retry
    /// Send it again after this many seconds.
    case retryAfter(TimeInterval)
    /// Fail with the attempt's error.
    case doNotRetry
    /// Fail with another error, thrown to the caller as it is here (an ``AuthenticationInterceptor`` gives the error
    /// of the refresh that failed).
    case doNotRetryWithError(any Error)

    /// Whether the request is sent again.
    public var retries: Bool {
        switch self {
        case .retry, .retryAfter: return true
        case .doNotRetry, .doNotRetryWithError: return false
        }
    }

    /// Whether two decisions are the same; two errors are the same when their `NSError` forms are equal (domain,
    /// code and `userInfo`).
    public static func == (lhs: RetryDecision, rhs: RetryDecision) -> Bool {
        switch (lhs, rhs) {
        case (.retry, .retry), (.doNotRetry, .doNotRetry):
            return true
        case (.retryAfter(let left), .retryAfter(let right)):
            return left == right
        case (.doNotRetryWithError(let left), .doNotRetryWithError(let right)):
            return (left as NSError).isEqual(right as NSError)
        default:
            return false
        }
    }
}

/// Decides, after an attempt failed (a transport error, or a status or body the response serializer refused),
/// whether the request is sent again.
public protocol RequestRetrier: Sendable {
    /// The decision for `sessionRequest`, whose last attempt failed with `error`.
    /// - Parameters:
    ///   - sessionRequest: The request; ``SessionRequest/response`` is the failed attempt's response, if any.
    ///   - error: The attempt's error (a `URLError`, or a response-serialization `NSError` with the response).
    func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision
}

/// Both an adapter and a retrier. Either half may keep its default: pass the request through, never retry.
public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

extension RequestInterceptor {
    /// Passes the request through unchanged.
    public func adapt(_ request: URLRequest, for sessionRequest: SessionRequest) async throws -> URLRequest { request }
    /// Never retries.
    public func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision { .doNotRetry }
}

/// Several adapters and retriers as one interceptor: adapters run in order, each on the previous one's result; the
/// first retrier that does not answer ``RetryDecision/doNotRetry`` decides.
///
/// A manager's ``URLSessionManager/interceptor`` and a call's own interceptor are combined this way, the manager's
/// first.
public struct Interceptor: RequestInterceptor {
    /// The adapters, in the order they run.
    public let adapters: [any RequestAdapter]
    /// The retriers, in the order they are asked.
    public let retriers: [any RequestRetrier]

    /// Composes adapters and retriers.
    public init(adapters: [any RequestAdapter] = [], retriers: [any RequestRetrier] = []) {
        self.adapters = adapters
        self.retriers = retriers
    }

    /// Composes whole interceptors: each one's adapter and retrier, in order.
    public init(interceptors: [any RequestInterceptor]) {
        self.init(adapters: interceptors, retriers: interceptors)
    }

    /// An interceptor from closures.
    /// - Parameters:
    ///   - adapt: Changes or refuses the request (`nil`: pass it through).
    ///   - retry: Decides after a failure (`nil`: never retry).
    public init(
        adapt: (@Sendable (URLRequest, SessionRequest) async throws -> URLRequest)? = nil,
        retry: (@Sendable (SessionRequest, Error) async -> RetryDecision)? = nil
    ) {
        self.init(
            adapters: adapt.map { [ClosureAdapter(body: $0)] } ?? [],
            retriers: retry.map { [ClosureRetrier(body: $0)] } ?? [])
    }

    /// Runs the adapters in order, each on the previous one's result.
    public func adapt(_ request: URLRequest, for sessionRequest: SessionRequest) async throws -> URLRequest {
        var request = request
        for adapter in adapters {
            request = try await adapter.adapt(request, for: sessionRequest)
        }
        return request
    }

    /// Asks the retriers in order; the first decision other than not retrying wins.
    public func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision {
        for retrier in retriers {
            let decision = await retrier.retry(sessionRequest, dueTo: error)
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }
}

/// An adapter made of a closure.
private struct ClosureAdapter: RequestAdapter {
    let body: @Sendable (URLRequest, SessionRequest) async throws -> URLRequest

    func adapt(_ request: URLRequest, for sessionRequest: SessionRequest) async throws -> URLRequest {
        try await body(request, sessionRequest)
    }
}

/// A retrier made of a closure.
private struct ClosureRetrier: RequestRetrier {
    let body: @Sendable (SessionRequest, Error) async -> RetryDecision

    func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision {
        await body(sessionRequest, error)
    }
}
