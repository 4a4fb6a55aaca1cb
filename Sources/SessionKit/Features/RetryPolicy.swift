import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A ready retrier: retries idempotent requests that failed for a transient reason, with exponential backoff and
/// jitter, honouring the server's `Retry-After`.
///
/// A failed attempt is retried when all of these hold: fewer than ``retryLimit`` retries so far; the method is in
/// ``retryableHTTPMethods``; and either the response's status is in ``retryableHTTPStatusCodes`` (whatever error came
/// with it, as Alamofire decides) or the transport error's code is in ``retryableURLErrorCodes``. The delay is the response's `Retry-After` (seconds or an HTTP date)
/// when it has one, else `exponentialBackoffScale × exponentialBackoffBase ^ retryCount`, jittered into
/// [½, 1] of that when ``jitters``. A delay above ``maximumDelay`` is not waited for: the request fails.
///
/// ```swift
/// manager.interceptor = RetryPolicy(retryLimit: 3)
/// ```
public struct RetryPolicy: RequestInterceptor {
    /// Retries at most this many times (so `retryLimit + 1` attempts). Default 2.
    public let retryLimit: Int
    /// The base of the exponential backoff. Default 2.
    public let exponentialBackoffBase: Double
    /// The first delay, in seconds. Default 0.5.
    public let exponentialBackoffScale: TimeInterval
    /// Whether a backoff delay is spread at random over [½, 1] of itself (clients that failed together then do not
    /// retry together). Default true. A `Retry-After` is never jittered.
    public let jitters: Bool
    /// The longest delay the policy waits, `Retry-After` included; a longer one fails the request. Default 60 s.
    public let maximumDelay: TimeInterval
    /// The methods that are safe to send again. Default: the idempotent ones.
    public let retryableHTTPMethods: Set<String>
    /// The statuses worth another try. Default 408, 500, 502, 503, 504.
    public let retryableHTTPStatusCodes: Set<Int>
    /// The transport errors worth another try (never a certificate refusal or a cancellation: unlike Alamofire,
    /// whose list also has `.secureConnectionFailed`, `.serverCertificateHasBadDate` and
    /// `.serverCertificateNotYetValid`, a TLS refusal is not retried, because it is a policy decision, not a glitch).
    public let retryableURLErrorCodes: Set<URLError.Code>

    /// The idempotent methods of RFC 9110.
    public static let defaultRetryableHTTPMethods: Set<String> = ["DELETE", "GET", "HEAD", "OPTIONS", "PUT", "TRACE"]
    /// 408 Request Timeout, 500, 502, 503, 504.
    public static let defaultRetryableHTTPStatusCodes: Set<Int> = [408, 500, 502, 503, 504]
    /// The transient transport errors.
    public static let defaultRetryableURLErrorCodes: Set<URLError.Code> = [
        .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .networkConnectionLost, .notConnectedToInternet,
        .timedOut, .badServerResponse, .cannotLoadFromNetwork,
    ]

    /// A policy; every parameter has the default documented on its property.
    public init(
        retryLimit: Int = 2,
        exponentialBackoffBase: Double = 2,
        exponentialBackoffScale: TimeInterval = 0.5,
        jitters: Bool = true,
        maximumDelay: TimeInterval = 60,
        retryableHTTPMethods: Set<String> = RetryPolicy.defaultRetryableHTTPMethods,
        retryableHTTPStatusCodes: Set<Int> = RetryPolicy.defaultRetryableHTTPStatusCodes,
        retryableURLErrorCodes: Set<URLError.Code> = RetryPolicy.defaultRetryableURLErrorCodes
    ) {
        self.retryLimit = max(0, retryLimit)
        self.exponentialBackoffBase = max(1, exponentialBackoffBase)
        self.exponentialBackoffScale = max(0, exponentialBackoffScale)
        self.jitters = jitters
        self.maximumDelay = maximumDelay
        self.retryableHTTPMethods = Set(retryableHTTPMethods.map { $0.uppercased() })
        self.retryableHTTPStatusCodes = retryableHTTPStatusCodes
        self.retryableURLErrorCodes = retryableURLErrorCodes
    }

    /// Decides whether the failed attempt of `sessionRequest` is sent again, and when (see the type's rules).
    public func retry(_ sessionRequest: SessionRequest, dueTo error: Error) async -> RetryDecision {
        decision(
            for: sessionRequest.request ?? sessionRequest.initialRequest, response: sessionRequest.response,
            retryCount: sessionRequest.retryCount, error: error)
    }

    /// The decision for an attempt of `request` that failed with `error` after `retryCount` retries.
    func decision(
        for request: URLRequest, response: HTTPURLResponse?, retryCount: Int, error: Error,
        now: Date = Date()
    ) -> RetryDecision {
        guard retryCount < retryLimit, retryableHTTPMethods.contains((request.httpMethod ?? "GET").uppercased())
        else { return .doNotRetry }
        let transportCode =
            (error as? URLError)?.code
            ?? ((error as NSError).domain == NSURLErrorDomain ? URLError.Code(rawValue: (error as NSError).code) : nil)
        // As Alamofire: a retryable status is retried whatever error came with it (a serialization error, or a
        // transport error after the head arrived); otherwise the transport error decides.
        let retryableStatus = response.map { retryableHTTPStatusCodes.contains($0.statusCode) } ?? false
        guard retryableStatus || transportCode.map(retryableURLErrorCodes.contains) == true else { return .doNotRetry }
        var delay: TimeInterval
        if retryableStatus, let retryAfter = response?.value(forHTTPHeaderField: "Retry-After"),
            let asked = Self.retryAfterDelay(retryAfter, now: now)
        {
            delay = asked
        } else {
            delay = exponentialBackoffScale * pow(exponentialBackoffBase, Double(retryCount))
            if jitters && delay > 0 { delay *= Double.random(in: 0.5...1) }
        }
        guard delay <= maximumDelay else { return .doNotRetry }
        return delay > 0 ? .retryAfter(delay) : .retry
    }

    /// The seconds a `Retry-After` value asks for: delay-seconds (`1*DIGIT`, RFC 9110 10.2.3: no sign; a number too
    /// large for an `Int` is longer than any wait), or an HTTP date (IMF-fixdate, RFC 850 or asctime); nil when it is
    /// neither.
    static func retryAfterDelay(_ value: String, now: Date = Date()) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            return Int(trimmed).map(TimeInterval.init) ?? .infinity
        }
        if let date = HTTPDate.parse(trimmed) { return max(0, date.timeIntervalSince(now)) }
        return nil
    }
}
