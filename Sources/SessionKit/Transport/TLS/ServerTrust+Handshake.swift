internal import COpenSSL
import Foundation

extension ServerTrust {
    /// The chain a server presented in the handshake OpenSSL is verifying, from its verify callback's store: the
    /// leaf, then the other certificates the server sent (deduplicated).
    init(verifying store: OpaquePointer) {
        var chain: [Data] = []
        if let leaf = X509_STORE_CTX_get0_cert(store), let der = Certificate.der(of: leaf) {
            chain.append(der)
        }
        if let untrusted = X509_STORE_CTX_get0_untrusted(store) {
            for index in 0..<sk_x509_stack_count(untrusted) {
                if let x509 = sk_x509_stack_value(untrusted, index), let der = Certificate.der(of: x509),
                    !chain.contains(der)
                {
                    chain.append(der)
                }
            }
        }
        self.init(certificateChain: chain)
    }
}
