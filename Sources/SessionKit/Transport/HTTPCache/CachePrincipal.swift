internal import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Who a request speaks for, as the HTTP cache tells users apart: the credentials and cookies it carries on the wire.
///
/// Every manager made from `.default` shares `URLCache.shared`, so a "private" cache is not one user's. A response
/// stored for a request with credentials or cookies, or one marked `private` or setting a cookie, is kept with its
/// principal and served only to a request with the same one (``CacheEntry/mayServe(principal:)``). What the cache
/// keeps is a keyed digest, never the secret: the key is made for this process, so nothing written to disk can be
/// traced back to a password or a cookie, and entries that an earlier process stored for a principal match no one.
enum CachePrincipal {
    /// The value the cache puts in `Authorization` for a credential the transport adds itself (a challenge's), so that
    /// `Vary: Authorization` and the principal see the request as it went on the wire.
    static let credentialScheme = "SessionKit-Credential"

    /// The principal of `request` (as sent: with the `Authorization` a challenge credential adds, ``asSent(_:credential:)``),
    /// or nil for a request without credentials or cookies.
    static func of(_ request: URLRequest) -> String? {
        let authorization = request.value(forHTTPHeaderField: "Authorization")
        let cookie = request.value(forHTTPHeaderField: "Cookie")
        let user = request.url?.user
        guard authorization != nil || cookie != nil || user != nil else { return nil }
        let password = request.url?.password ?? ""
        return digest("a=\(authorization ?? "")\u{0}c=\(cookie ?? "")\u{0}u=\(user ?? ""):\(password)")
    }

    /// `request` as the transport sends it: with an `Authorization` standing for `credential` (a challenge's, which
    /// libcurl adds) when the request has none of its own.
    static func asSent(_ request: URLRequest, credential: String?) -> URLRequest {
        guard let credential, request.value(forHTTPHeaderField: "Authorization") == nil else { return request }
        var request = request
        request.setValue("\(credentialScheme) \(digest(credential))", forHTTPHeaderField: "Authorization")
        return request
    }

    /// HMAC-SHA256 of `secret` under this process's key, in hex.
    static func digest(_ secret: String) -> String {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let bytes = Array(secret.utf8)
        _ = key.withUnsafeBufferPointer { key in
            HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), bytes, bytes.count, &output, &length)
        }
        return output.prefix(Int(length)).map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }
            .joined()
    }

    /// This process's key, from the system's random source.
    private static let key: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }()
}
