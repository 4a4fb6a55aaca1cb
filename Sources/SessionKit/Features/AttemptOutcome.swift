import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one attempt ended, as OpenTelemetry's HTTP client conventions record it.
struct AttemptOutcome {
    /// `http.response.status_code`, when a response arrived.
    var statusCode: Int?
    /// `network.protocol.version` (`1.1`, `2`), when the transport knows it.
    var protocolVersion: String?
    /// The error that ended the attempt, if any.
    var error: Error?
    /// Bytes of the request body sent and of the response body received, when known.
    var requestBodySize: Int64?
    var responseBodySize: Int64?

    /// `error.type`: a short name of the error (`timed_out`, `cannot_connect_to_host`, the error's type name), or the
    /// status code of a response of 400 or more; nil for a success.
    var errorType: String? {
        if let error { return Self.name(of: error) }
        if let statusCode, statusCode >= 400 { return String(statusCode) }
        return nil
    }

    /// The protocol version of a status line's `HTTP/x` (`HTTP/1.1` → `1.1`, `HTTP/2` → `2`).
    static func protocolVersion(fromStatusLineVersion version: String) -> String? {
        guard version.hasPrefix("HTTP/"), version.count > 5 else { return nil }
        let number = version.dropFirst(5)
        return number == "2.0" ? "2" : String(number)
    }

    /// A low-cardinality name for `error`.
    static func name(of error: Error) -> String {
        guard let urlError = error as? URLError else { return String(reflecting: type(of: error)) }
        switch urlError.code {
        case .cancelled: return "cancelled"
        case .timedOut: return "timed_out"
        case .cannotConnectToHost: return "cannot_connect_to_host"
        case .cannotFindHost: return "cannot_find_host"
        case .dnsLookupFailed: return "dns_lookup_failed"
        case .networkConnectionLost: return "network_connection_lost"
        case .notConnectedToInternet: return "not_connected_to_internet"
        case .badServerResponse: return "bad_server_response"
        case .badURL, .unsupportedURL: return "bad_url"
        case .secureConnectionFailed: return "secure_connection_failed"
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot:
            return "server_certificate_invalid"
        case .dataLengthExceedsMaximum: return "data_length_exceeds_maximum"
        case .httpTooManyRedirects: return "too_many_redirects"
        case .userAuthenticationRequired: return "user_authentication_required"
        default: return "url_error_\(urlError.code.rawValue)"
        }
    }
}
