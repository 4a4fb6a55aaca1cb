internal import CCurl
internal import COpenSSL
import Foundation

/// The ``SecurityPolicy``'s decision on one connection's TLS handshake, taken in OpenSSL's verify callback at the leaf
/// of the chain the server sent: one per curl transfer and per stream connection (whose STARTTLS handshake uses it
/// too), so that every TLS connection SessionKit opens is judged the same way.
///
/// Used on the engine thread only (OpenSSL calls back inside libcurl's or SessionKit's own handshake there; the
/// callbacks check it, ``EngineThread``).
final class HandshakeCheck: @unchecked Sendable {
    // @unchecked Sendable: the decision is written and read on the engine thread only.

    let policy: SecurityPolicy
    /// The name the chain must be valid for (when the policy validates the domain).
    let host: String?
    /// Whether the policy was asked, and its answer; `refusal` says why it refused.
    private(set) var evaluated = false
    private(set) var accepted = false
    private(set) var refusal: SecurityPolicy.Refusal?
    /// The chain the policy decided on.
    private var decidedChain: [Data]?
    /// The certificate and key presented when the server asks for one (mutual TLS).
    let identity: ClientIdentity?
    /// Whether the server asked for a client certificate in a handshake of this check.
    private(set) var certificateRequested = false
    /// Told of a pin mismatch that the policy only reports (``SecurityPolicy/reportsOnly``), on the engine thread.
    var onPinningReport: ((PinningReport) -> Void)?

    init(policy: SecurityPolicy, host: String?, identity: ClientIdentity? = nil) {
        self.policy = policy
        self.host = host
        self.identity = identity
    }

    /// Why a handshake the server ended over the client certificate failed: nil unless the server asked for one.
    /// Without an identity that is `.clientCertificateRequired`; with one, the server refused it
    /// (`.clientCertificateRejected`). `detail` is OpenSSL's message (the server's alert).
    func clientCertificateError(detail: String, userInfo: [String: Any]) -> URLError? {
        guard certificateRequested else { return nil }
        let reason =
            identity.map {
                "The server refused the client certificate \($0.certificate.subject) (\(detail)): check that it "
                    + "trusts its issuer and that the chain includes the intermediates."
            }
            ?? "The server requires a client certificate (mutual TLS) and none is set: give the manager a "
            + "clientIdentity, or the task one with setClientIdentity(_:for:) (\(detail))."
        return URLError(
            identity == nil ? .clientCertificateRequired : .clientCertificateRejected,
            userInfo: userInfo.merging([NSLocalizedDescriptionKey: reason, NSLocalizedFailureReasonErrorKey: reason]) {
                $1
            })
    }

    /// Why the handshake failed, as the `URLError` the task reports (`userInfo` added to the policy's own).
    func error(userInfo: [String: Any]) -> URLError {
        let refusal =
            refusal
            ?? SecurityPolicy.Refusal(reason: "The server's certificate chain does not pass the security policy.")
        return URLError(refusal.code, userInfo: userInfo.merging(refusal.userInfo(forHost: host)) { $1 })
    }

    /// Makes `sslContext`'s handshakes ask this check (libcurl's `CURLOPT_SSL_CTX_FUNCTION`, or a context of
    /// SessionKit's own for a STARTTLS upgrade), and present the ``identity`` when the server asks for a certificate.
    /// The check must outlive the context's handshakes. False when OpenSSL refused the identity: the connection must
    /// not go on without it.
    func install(on sslContext: OpaquePointer) -> Bool {
        let me = Unmanaged.passUnretained(self).toOpaque()
        SSL_CTX_set_ex_data(sslContext, 0, me)
        SSL_CTX_set_verify(sslContext, SSL_VERIFY_PEER, Self.verifyCallback)
        SSL_CTX_set_cert_cb(sslContext, Self.certificateRequestCallback, me)
        // The callbacks above hold this check unretained, and the connection outlives its first transfer in the
        // engine's cache: a renegotiation on a reused connection would call back into a check that is gone (and
        // present a certificate after the one the policy accepted). The server's request for one is refused.
        sk_ssl_ctx_refuse_renegotiation(sslContext)
        return identity?.install(on: sslContext) ?? true
    }

    /// libcurl's SSL context callback; its user data is an unretained ``HandshakeCheck``.
    static let sslContextCallback: sk_curl_ssl_ctx_callback = { _, context, userdata in
        guard let context, let userdata else { return CURLE_OK }
        let installed = Unmanaged<HandshakeCheck>.fromOpaque(userdata).takeUnretainedValue()
            .install(on: OpaquePointer(context))
        return installed ? CURLE_OK : CURLE_SSL_CERTPROBLEM
    }

    /// OpenSSL's certificate callback: on a client, called when the server asks for a certificate.
    private static let certificateRequestCallback: CertificateCallback = { _, userdata in
        guard let userdata else { return 1 }
        EngineThread.check("HandshakeCheck's certificate callback")
        Unmanaged<HandshakeCheck>.fromOpaque(userdata).takeUnretainedValue().certificateRequested = true
        return 1
    }
    private typealias CertificateCallback = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Int32

    /// OpenSSL's verify callback: the policy decides, on the chain of this handshake, at the leaf.
    private static let verifyCallback: @convention(c) (Int32, OpaquePointer?) -> Int32 = { _, store in
        guard let store else { return 0 }
        if X509_STORE_CTX_get_error_depth(store) > 0 { return 1 }
        guard let sslContext = sk_ssl_ctx_of_store(store), let raw = SSL_CTX_get_ex_data(sslContext, 0) else {
            return 0
        }
        let check = Unmanaged<HandshakeCheck>.fromOpaque(raw).takeUnretainedValue()
        EngineThread.check("HandshakeCheck's verify callback")
        let trust = ServerTrust(verifying: store)
        // OpenSSL calls back at the leaf once for each error it finds there (no issuer in its store, a name that does
        // not match) and once more when it checks the leaf's signature: the policy decides once per chain (each
        // decision verifies the chain again, and a report-only pin mismatch is reported once).
        if check.evaluated, check.decidedChain == trust.certificateChain { return check.accepted ? 1 : 0 }
        var refusal = check.policy.decide(trust, forDomain: check.host)
        if let mismatch = refusal, mismatch.isPinMismatch, check.policy.reportsOnly {
            // Report-only pins: the connection goes on, and the request's monitors hear of it.
            refusal = nil
            let (host, chain) = (check.host ?? "", trust.certificateChain)
            check.onPinningReport?(PinningReport(host: host, certificateChain: chain, reason: mismatch.reason))
        }
        check.evaluated = true
        check.decidedChain = trust.certificateChain
        check.accepted = refusal == nil
        check.refusal = refusal
        return refusal == nil ? 1 : 0
    }
}
