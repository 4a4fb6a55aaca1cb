import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Error domains and `userInfo` keys of the errors SessionKit creates itself.
///
/// Serialization errors keep AFNetworking's shape: an `NSError` in one of the two serialization domains with a
/// `URLError` code (`-1011` for an unacceptable status, `-1016` for an unacceptable content type or a body that
/// cannot be decoded), the failing response under ``failingURLResponseKey`` and its body under
/// ``failingURLResponseDataKey``. Transport failures are `URLError`s with their real codes.
public enum SessionKitError {
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
    public enum Code: Int {
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
        /// A request's method is not a token, or a header's name is not a token or its value holds CR, LF or NUL
        /// (RFC 9110): the request was not sent.
        case invalidRequestField = 7
    }

    /// Builds an error of ``sessionDomain``.
    static func session(_ code: Code, _ reason: String, underlying: Error? = nil) -> NSError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: reason, NSLocalizedFailureReasonErrorKey: reason]
        if let underlying { userInfo[NSUnderlyingErrorKey] = underlying }
        return NSError(domain: sessionDomain, code: code.rawValue, userInfo: userInfo)
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
