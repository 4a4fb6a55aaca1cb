internal import CCurl
internal import COpenSSL
import Foundation

/// The ``SecurityPolicy``'s decision on one connection's TLS handshake, taken in OpenSSL's verify callback at the leaf
/// of the chain the server sent: one per curl transfer and per stream connection (whose STARTTLS handshake uses it
/// too), so that every TLS connection SessionKit opens is judged the same way.
///
/// Used on the engine thread only (OpenSSL calls back inside libcurl's or SessionKit's own handshake there).
final class HandshakeCheck: @unchecked Sendable {
    // @unchecked Sendable: the decision is written and read on the engine thread only.

    let policy: SecurityPolicy
    /// The name the chain must be valid for (when the policy validates the domain).
    let host: String?
    /// Whether the policy was asked, and its answer; `refusal` says why it refused.
    private(set) var evaluated = false
    private(set) var accepted = false
    private(set) var refusal: SecurityPolicy.Refusal?

    init(policy: SecurityPolicy, host: String?) {
        self.policy = policy
        self.host = host
    }

    /// Why the handshake failed, as the `URLError` the task reports (`userInfo` added to the policy's own).
    func error(userInfo: [String: Any]) -> URLError {
        let refusal =
            refusal
            ?? SecurityPolicy.Refusal(reason: "The server's certificate chain does not pass the security policy.")
        return URLError(refusal.code, userInfo: userInfo.merging(refusal.userInfo(forHost: host)) { $1 })
    }

    /// Makes `sslContext`'s handshakes ask this check (libcurl's `CURLOPT_SSL_CTX_FUNCTION`, or a context of
    /// SessionKit's own for a STARTTLS upgrade). The check must outlive the context's handshakes.
    func install(on sslContext: OpaquePointer) {
        SSL_CTX_set_ex_data(sslContext, 0, Unmanaged.passUnretained(self).toOpaque())
        SSL_CTX_set_verify(sslContext, SSL_VERIFY_PEER, Self.verifyCallback)
    }

    /// libcurl's SSL context callback; its user data is an unretained ``HandshakeCheck``.
    static let sslContextCallback: sk_curl_ssl_ctx_callback = { _, context, userdata in
        guard let context, let userdata else { return CURLE_OK }
        Unmanaged<HandshakeCheck>.fromOpaque(userdata).takeUnretainedValue().install(on: OpaquePointer(context))
        return CURLE_OK
    }

    /// OpenSSL's verify callback: the policy decides, on the chain of this handshake, at the leaf.
    private static let verifyCallback: @convention(c) (Int32, OpaquePointer?) -> Int32 = { _, store in
        guard let store else { return 0 }
        if X509_STORE_CTX_get_error_depth(store) > 0 { return 1 }
        guard let sslContext = sk_ssl_ctx_of_store(store), let raw = SSL_CTX_get_ex_data(sslContext, 0) else {
            return 0
        }
        let check = Unmanaged<HandshakeCheck>.fromOpaque(raw).takeUnretainedValue()
        let refusal = check.policy.decide(ServerTrust(verifying: store), forDomain: check.host)
        check.evaluated = true
        check.accepted = refusal == nil
        check.refusal = refusal
        return refusal == nil ? 1 : 0
    }
}
