import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An error of SessionKit to switch on, and the error domains and `userInfo` keys of the errors SessionKit creates.
///
/// SessionKit throws and passes AFNetworking's errors, so that AFNetworking-style code keeps working: serialization
/// errors are `NSError`s in one of the two serialization domains with a `URLError` code (`-1011` for an unacceptable
/// status, `-1016` for an unacceptable content type or a body that cannot be decoded), the failing response under
/// ``failingURLResponseKey`` and its body under ``failingURLResponseDataKey``; transport failures are `URLError`s
/// with their real codes. `SessionKitError(error)` reads any of them into a value with a ``kind`` to switch on, the
/// ``statusCode``, the ``response`` and the ``body``; ``nsError`` is the error as it was thrown.
///
/// ```swift
/// do {
///     let user = try await manager.get("users/1", as: User.self)
/// } catch {
///     switch SessionKitError(error).kind {
///     case .unacceptableStatusCode(404): print("no such user")
///     case .transport(.timedOut): print("try again later")
///     default: throw error
///     }
/// }
/// ```
public struct SessionKitError: Error, @unchecked Sendable {
    // @unchecked Sendable: every field is a `let`; `nsError` (whose `userInfo` may hold a serializer's object) is
    // never mutated after it was made.

    /// What went wrong.
    public enum Kind: Equatable, Sendable {
        /// The response's status code failed validation (`-1011` in ``responseSerializationDomain``).
        case unacceptableStatusCode(Int)
        /// The response could not be serialized: an unacceptable content type or a body that cannot be decoded
        /// (`-1016` in ``responseSerializationDomain``), or another response-serialization code.
        case responseSerializationFailed(URLError.Code)
        /// A typed result (`as: T.self`) could not be decoded from the body.
        case decodingFailed
        /// The request could not be built from its parameters (``requestSerializationDomain``).
        case requestSerializationFailed(URLError.Code)
        /// The manager refused or failed the task itself (``sessionDomain``).
        case session(Code)
        /// The transport failed: a `URLError` with its real code (TLS refusals and cancellation included).
        case transport(URLError.Code)
        /// An error SessionKit did not make (an interceptor's, say).
        case other
    }

    /// What went wrong, to switch on.
    public let kind: Kind
    /// The error as SessionKit threw it, with AFNetworking's domain, code and `userInfo` keys.
    public let nsError: NSError
    /// The response that failed validation or serialization, when there was one.
    public let response: HTTPURLResponse?
    /// The body of that response, when there was one.
    public let body: Data?

    /// The status code of ``response``.
    public var statusCode: Int? { response?.statusCode }

    /// Reads `error` (any error SessionKit threw or passed to a closure) into a value to switch on.
    public init(_ error: Error) {
        if let error = error as? SessionKitError {
            self = error
            return
        }
        let nsError = error as NSError
        self.nsError = nsError
        response = Self.firstInChain(nsError) { $0.userInfo[Self.failingURLResponseKey] as? HTTPURLResponse }
        body = Self.firstInChain(nsError) { $0.userInfo[Self.failingURLResponseDataKey] as? Data }
        let code = URLError.Code(rawValue: nsError.code) ?? .unknown
        switch nsError.domain {
        case Self.responseSerializationDomain where code == .badServerResponse:
            kind = .unacceptableStatusCode(response?.statusCode ?? 0)
        case Self.responseSerializationDomain
        where Self.firstInChain(nsError, { $0.userInfo[NSUnderlyingErrorKey] as? DecodingError }) != nil:
            kind = .decodingFailed
        case Self.responseSerializationDomain:
            kind = .responseSerializationFailed(code)
        case Self.requestSerializationDomain:
            kind = .requestSerializationFailed(code)
        case Self.sessionDomain:
            kind = Code(rawValue: nsError.code).map(Kind.session) ?? .other
        case NSURLErrorDomain:
            kind = .transport(code)
        default:
            kind = error is DecodingError ? .decodingFailed : .other
        }
    }

    /// The first value `read` finds in `error` or its chain of `NSUnderlyingErrorKey`s (16 links at most).
    private static func firstInChain<T>(_ error: NSError, _ read: (NSError) -> T?) -> T? {
        var current: NSError? = error
        for _ in 0..<16 {
            guard let nsError = current else { return nil }
            if let value = read(nsError) { return value }
            current = nsError.userInfo[NSUnderlyingErrorKey] as? NSError
        }
        return nil
    }

    /// The domain of errors raised while a request is built from its parameters.
    public static let requestSerializationDomain = "com.sessionkit.error.serialization.request"
    /// The domain of errors raised while a response is validated or decoded.
    public static let responseSerializationDomain = "com.sessionkit.error.serialization.response"
    /// The domain of errors raised by a manager itself (see ``SessionKitError/Code``).
    public static let sessionDomain = "com.sessionkit.error.session"

    /// `userInfo` key of the `HTTPURLResponse` that failed validation or decoding.
    public static let failingURLResponseKey = "com.sessionkit.serialization.response.error.response"
    /// `userInfo` key of the body `Data` of the response that failed validation or decoding.
    public static let failingURLResponseDataKey = "com.sessionkit.serialization.response.error.data"
    /// `userInfo` key of the object a serializer still made of a body whose status failed validation (the `Data`,
    /// the decoded JSON or property list, the `XMLParser`): AFNetworking returns that object next to the error, and a
    /// task's completion handler gets it the same way.
    public static let failingResponseObjectKey = "com.sessionkit.serialization.response.error.object"

    /// Codes of errors in ``sessionDomain``.
    public enum Code: Int, Sendable {
        /// A task was requested from a manager whose session was invalidated without a reset.
        case sessionInvalidated = 1
        /// Resume data that SessionKit cannot use on the current transport, or that is not SessionKit's.
        case resumeDataUnavailable = 2
        /// A downloaded file could not be moved to the destination the caller chose.
        case cannotMoveDownloadedFile = 3
        /// The manager's security policy cannot be enforced for this request (Foundation transport, or plain http
        /// with pins).
        case policyNotEnforceable = 4
        /// An ``AuthenticationInterceptor`` has no credential to apply.
        case missingCredential = 5
        /// An ``AuthenticationInterceptor`` refreshed its credential too often within its refresh window.
        case excessiveRefresh = 6
        /// A request's method is not a token, or a header's (or a multipart part's header's) name is not a token or
        /// its value holds CR, LF or NUL (RFC 9110): the request was not sent.
        case invalidRequestField = 7
        /// A streamed request body (``HTTPRequestBody/stream(length:_:)``) was needed again — by a redirect that keeps
        /// the body (307, 308), an authentication round or a retry — or written after its closure returned: it is
        /// written once and never replayed.
        case streamedBodyUnavailable = 8
        /// A streamed request body's trailers could not be sent, so the request fails rather than drop them:
        /// libcurl sends request trailers only after a chunked HTTP/1.1 body, and the request went over HTTP/2 or its
        /// body had a length (sent with `Content-Length`, no chunked framing); URLSession on Linux sends none.
        case requestTrailersNotSent = 9
        /// The request needs what the manager's ``Transport`` cannot do, so it was not sent rather than sent without
        /// it: on the Foundation transport, a client certificate (``URLSessionManager/clientIdentity``, which
        /// URLSession on Linux cannot present), ``URLSessionManager/resolvedAddresses``,
        /// ``URLSessionManager/localAddress``, ``URLSessionManager/timeoutIntervalForResponseHead`` or a SOCKS proxy.
        case unsupportedByTransport = 10
    }

    /// Builds an error of ``sessionDomain``.
    static func session(_ code: Code, _ reason: String, underlying: Error? = nil) -> NSError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: reason, NSLocalizedFailureReasonErrorKey: reason]
        if let underlying { userInfo[NSUnderlyingErrorKey] = underlying }
        return NSError(domain: sessionDomain, code: code.rawValue, userInfo: userInfo)
    }

    /// The `URLError` a request fails with when its streamed body's trailers cannot be sent, with `reason` and a
    /// ``Code/requestTrailersNotSent`` error under `NSUnderlyingErrorKey`.
    static func trailersNotSent(_ reason: String, url: URL?) -> URLError {
        let refusal = session(.requestTrailersNotSent, reason)
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: reason, NSUnderlyingErrorKey: refusal]
        if let url { userInfo[NSURLErrorFailingURLErrorKey] = url }
        return URLError(.unknown, userInfo: userInfo)
    }

    /// Builds a request-serialization error with a `URLError` code.
    static func requestSerialization(_ code: URLError.Code, _ reason: String, underlying: Error? = nil) -> NSError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: reason, NSLocalizedFailureReasonErrorKey: reason]
        if let underlying { userInfo[NSUnderlyingErrorKey] = underlying }
        return NSError(domain: requestSerializationDomain, code: code.rawValue, userInfo: userInfo)
    }

    /// Whether `error`, or an error in its chain of `NSUnderlyingErrorKey`s, has `code` in `domain` (AFNetworking's
    /// `AFErrorOrUnderlyingErrorHasCodeInDomain`). The walk stops after 16 links.
    static func hasCode(_ code: URLError.Code, in domain: String, _ error: Error?) -> Bool {
        var current = error.map { $0 as NSError }
        for _ in 0..<16 {
            guard let nsError = current else { return false }
            if nsError.domain == domain && nsError.code == code.rawValue { return true }
            current = nsError.userInfo[NSUnderlyingErrorKey] as? NSError
        }
        return false
    }

    /// `validationError` with `object` under ``failingResponseObjectKey``: a status failure that still produced an
    /// object.
    static func carrying(_ object: Any?, in validationError: Error) -> NSError {
        let nsError = validationError as NSError
        guard let object else { return nsError }
        var userInfo = nsError.userInfo
        userInfo[failingResponseObjectKey] = object
        return NSError(domain: nsError.domain, code: nsError.code, userInfo: userInfo)
    }

    /// Builds a response-serialization error carrying the failing response, its body and its URL, chaining
    /// `underlying` (an earlier validation error, for example).
    static func responseSerialization(
        _ code: URLError.Code,
        _ reason: String,
        response: URLResponse?,
        data: Data?,
        underlying: Error? = nil
    ) -> NSError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: reason, NSLocalizedFailureReasonErrorKey: reason]
        if let response { userInfo[failingURLResponseKey] = response }
        if let data { userInfo[failingURLResponseDataKey] = data }
        if let url = response?.url {
            userInfo[NSURLErrorFailingURLErrorKey] = url
            userInfo[failingURLStringErrorKey] = url.absoluteString
        }
        if let underlying { userInfo[NSUnderlyingErrorKey] = underlying }
        return NSError(domain: responseSerializationDomain, code: code.rawValue, userInfo: userInfo)
    }
}

/// The value of Foundation's `NSURLErrorFailingURLStringErrorKey` ("NSErrorFailingURLStringKey"), which Foundation
/// deprecates but AFNetworking-style code still reads; spelled out so that the library builds without warnings.
let failingURLStringErrorKey = "NSErrorFailingURLStringKey"
