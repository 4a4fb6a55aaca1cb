import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The TLS versions a connection may negotiate. TLS 1.2 is the floor by default (starting decision 8); Linux's
/// `URLSessionConfiguration` has no `tlsMinimumSupportedProtocolVersion`, so the manager carries the range.
struct TLSVersionRange: Hashable, Sendable {
    /// The oldest version accepted.
    var minimum: tls_protocol_version_t = .TLSv12
    /// The newest version offered; nil for the newest libcurl and OpenSSL know.
    var maximum: tls_protocol_version_t?

    /// The value of libcurl's `CURLOPT_SSLVERSION`: the minimum in the low bits, the maximum shifted by 16.
    var curlValue: Int {
        func version(_ value: tls_protocol_version_t) -> Int {
            switch value {
            case .TLSv10: return 4  // CURL_SSLVERSION_TLSv1_0
            case .TLSv11: return 5
            case .TLSv12: return 6
            case .TLSv13: return 7
            default: return 6  // DTLS has no meaning for HTTP over TCP: the default floor
            }
        }
        return version(minimum) | (maximum.map { version($0) << 16 } ?? 0)
    }

    /// The range as OpenSSL's protocol versions (`TLS1_2_VERSION`…), for a handshake of SessionKit's own; the
    /// maximum is 0 when there is none.
    var openSSLValues: (minimum: Int32, maximum: Int32) {
        func version(_ value: tls_protocol_version_t) -> Int32 {
            switch value {
            case .TLSv10: return 0x0301
            case .TLSv11: return 0x0302
            case .TLSv12: return 0x0303
            case .TLSv13: return 0x0304
            default: return 0x0303
            }
        }
        return (version(minimum), maximum.map(version) ?? 0)
    }
}
