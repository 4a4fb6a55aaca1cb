internal import COpenSSL
import Foundation

/// A client certificate and its private key, for mutual TLS: the curl transport presents it in the TLS handshake
/// when a server asks for one.
///
/// Made from a PKCS#12 file (`.p12`, `.pfx`) and its password, or from a PEM certificate chain and a PEM private key
/// (optionally encrypted). Everything is read and checked here, once: a wrong password, bytes that are not a
/// certificate or a key, and a key that does not belong to the certificate are errors now (``LoadError``), not in
/// a handshake later.
///
/// ```swift
/// let p12 = try Data(contentsOf: URL(fileURLWithPath: "/etc/myapp/client.p12"))
/// manager.clientIdentity = try ClientIdentity(pkcs12: p12, password: secret)   // every https request
///
/// // Or from PEM files, the key encrypted or not:
/// let identity = try ClientIdentity(
///     certificateChainPEM: Data(contentsOf: chainURL), privateKeyPEM: Data(contentsOf: keyURL), password: secret)
/// manager.setClientIdentity(identity, for: task)                                // this task only
/// ```
///
/// An identity is a secret: it lives in memory only. A manager's archive never contains it, it is never logged, and
/// its `description` names the certificate's subject only. The Foundation transport cannot present one (URLSession on
/// Linux has no client certificates): a request made there while an identity is set fails with
/// ``SessionKitError/Code/unsupportedByTransport``.
public struct ClientIdentity: Sendable, CustomStringConvertible {
    /// The client's certificate (the one the key belongs to).
    public let certificate: Certificate
    /// The certificates sent after ``certificate`` so that the server can reach its root: the intermediates, in the
    /// order given (a PKCS#12's other certificates, or the PEM chain after its first certificate).
    public let intermediateCertificates: [Certificate]
    /// The OpenSSL objects, shared by the copies of this value.
    let storage: Storage

    /// Why an identity could not be made.
    public struct LoadError: Error, Equatable, CustomStringConvertible {
        /// What went wrong, to switch on.
        public enum Kind: Sendable, Equatable {
            /// The password does not open the PKCS#12 or the encrypted key (or none was given for an encrypted key).
            case wrongPassword
            /// The bytes are not a PKCS#12, a PEM certificate chain or a PEM private key, or hold no certificate or
            /// no key.
            case unreadableData
            /// The private key does not belong to the certificate.
            case keyDoesNotMatchCertificate
        }

        /// What went wrong.
        public let kind: Kind
        /// A sentence saying what went wrong (it never contains the password or the key).
        public let description: String
    }

    /// Reads a PKCS#12 file (`.p12`, `.pfx`): the certificate, its private key, and the other certificates as the
    /// intermediates to send.
    ///
    /// - Parameters:
    ///   - pkcs12: The DER bytes of the PKCS#12.
    ///   - password: Its password (empty for none).
    /// - Throws: ``LoadError``: `.wrongPassword`, `.unreadableData` (also for a PKCS#12 encrypted with a legacy
    ///   algorithm such as RC2, which OpenSSL 3 no longer reads: export it again with AES), or
    ///   `.keyDoesNotMatchCertificate`.
    public init(pkcs12: Data, password: String) throws {
        try self.init(storage: Storage(pkcs12: pkcs12, password: password))
    }

    /// Reads a PEM certificate chain (the client's certificate first, then its intermediates) and a PEM private key,
    /// encrypted (`ENCRYPTED PRIVATE KEY`, or a traditional key with `Proc-Type: 4,ENCRYPTED`) or not.
    ///
    /// - Parameters:
    ///   - certificateChainPEM: One or more `CERTIFICATE` blocks, the client's own first.
    ///   - privateKeyPEM: The private key of the first certificate.
    ///   - password: The key's password; nil for a key that is not encrypted.
    /// - Throws: ``LoadError``: `.wrongPassword` (also an encrypted key without a password), `.unreadableData`, or
    ///   `.keyDoesNotMatchCertificate`.
    public init(certificateChainPEM: Data, privateKeyPEM: Data, password: String? = nil) throws {
        let storage = try Storage(
            certificateChainPEM: certificateChainPEM, privateKeyPEM: privateKeyPEM, password: password)
        try self.init(storage: storage)
    }

    private init(storage: Storage) throws {
        guard let leaf = Certificate.der(of: storage.certificate).flatMap({ try? Certificate(der: $0) }) else {
            throw LoadError(kind: .unreadableData, description: "The client certificate cannot be read.")
        }
        var intermediates: [Certificate] = []
        for x509 in storage.chain {
            guard let certificate = Certificate.der(of: x509).flatMap({ try? Certificate(der: $0) }) else {
                throw LoadError(kind: .unreadableData, description: "A certificate of the chain cannot be read.")
            }
            intermediates.append(certificate)
        }
        self.certificate = leaf
        self.intermediateCertificates = intermediates
        self.storage = storage
    }

    /// The certificate's subject, never the key.
    public var description: String { "ClientIdentity(\(certificate.subject))" }

    /// Equal for two identities that present the same certificates (and so the same key): connections made with one
    /// may carry the requests of the other, and of no other.
    var connectionKey: String {
        let chain = ([certificate] + intermediateCertificates).map { Certificate.sha256($0.der).base64EncodedString() }
        return chain.joined(separator: ",")
    }

    /// Makes the handshakes of `sslContext` present this identity when the server asks for a certificate.
    /// False when OpenSSL refused it (the handshake then goes on without one, and a server that requires one fails it).
    func install(on sslContext: OpaquePointer) -> Bool {
        guard SSL_CTX_use_certificate(sslContext, storage.certificate) == 1,
            SSL_CTX_use_PrivateKey(sslContext, storage.privateKey) == 1
        else {
            ERR_clear_error()
            return false
        }
        for x509 in storage.chain where sk_ssl_ctx_add1_chain_cert(sslContext, x509) != 1 {
            ERR_clear_error()
            return false
        }
        return true
    }

    /// The parsed OpenSSL objects: never changed after `init` and freed with the last copy of the identity.
    final class Storage: @unchecked Sendable {
        // @unchecked Sendable: the certificates and the key are read-only after `init`; OpenSSL's reference counts
        // are atomic, and a handshake only takes a reference of its own (`SSL_CTX_use_certificate`…).
        let certificate: OpaquePointer
        let chain: [OpaquePointer]
        let privateKey: OpaquePointer

        /// Takes ownership of one reference of each object, checking that the key belongs to the certificate.
        private init(certificate: OpaquePointer, chain: [OpaquePointer], privateKey: OpaquePointer) throws {
            self.certificate = certificate
            self.chain = chain
            self.privateKey = privateKey
            guard X509_check_private_key(certificate, privateKey) == 1 else {
                ERR_clear_error()
                throw LoadError(
                    kind: .keyDoesNotMatchCertificate,
                    description: "The private key does not belong to the client certificate "
                        + "(\(Self.subject(of: certificate))).")
            }
        }

        deinit {
            X509_free(certificate)
            chain.forEach { X509_free($0) }
            EVP_PKEY_free(privateKey)
        }

        private static let maximumSize = 1 << 20

        convenience init(pkcs12: Data, password: String) throws {
            defer { ERR_clear_error() }
            guard !pkcs12.isEmpty, pkcs12.count < Self.maximumSize else { throw Self.unreadable("PKCS#12") }
            let p12: OpaquePointer? = pkcs12.withUnsafeBytes { raw in
                var pointer = raw.bindMemory(to: UInt8.self).baseAddress
                return d2i_PKCS12(nil, &pointer, raw.count)
            }
            guard let p12 else { throw Self.unreadable("PKCS#12") }
            defer { PKCS12_free(p12) }
            // An empty password is written either as "" or as none at all: try both, as OpenSSL's own tools do.
            let candidates: [String?] = password.isEmpty ? ["", nil] : [password]
            var chosen: String??
            if PKCS12_mac_present(p12) == 1 {
                chosen = candidates.first { candidate in
                    candidate.map { PKCS12_verify_mac(p12, $0, Int32($0.utf8.count)) == 1 }
                        ?? (PKCS12_verify_mac(p12, nil, 0) == 1)
                }
                guard chosen != nil else {
                    throw LoadError(kind: .wrongPassword, description: "The password does not open the PKCS#12.")
                }
            } else {
                chosen = candidates.first
            }
            var key: OpaquePointer?
            var leaf: OpaquePointer?
            var others: OpaquePointer?
            let parsed: Int32 =
                switch chosen ?? nil {
                case let text?: PKCS12_parse(p12, text, &key, &leaf, &others)
                case nil: PKCS12_parse(p12, nil, &key, &leaf, &others)
                }
            var chain: [OpaquePointer] = []
            if let others {
                for index in 0..<sk_x509_stack_count(others) {
                    if let x509 = sk_x509_stack_value(others, index), X509_up_ref(x509) == 1 { chain.append(x509) }
                }
                sk_x509_stack_free(others)
            }
            guard parsed == 1, let key, let leaf else {
                if let key { EVP_PKEY_free(key) }
                if let leaf { X509_free(leaf) }
                chain.forEach { X509_free($0) }
                throw LoadError(
                    kind: .unreadableData,
                    description:
                        "The PKCS#12 holds no certificate and key that OpenSSL can read (\(Self.lastError())); "
                        + "one encrypted with a legacy algorithm (RC2, 3DES) must be exported again with AES.")
            }
            try self.init(certificate: leaf, chain: chain, privateKey: key)
        }

        convenience init(certificateChainPEM: Data, privateKeyPEM: Data, password: String?) throws {
            defer { ERR_clear_error() }
            guard certificateChainPEM.count < Self.maximumSize, privateKeyPEM.count < Self.maximumSize else {
                throw Self.unreadable("PEM")
            }
            var certificates: [OpaquePointer] = []
            Self.withBIO(certificateChainPEM) { bio in
                while let x509 = PEM_read_bio_X509(bio, nil, Self.passwordCallback, nil) { certificates.append(x509) }
            }
            guard let leaf = certificates.first else {
                throw LoadError(kind: .unreadableData, description: "The PEM chain holds no certificate.")
            }
            let request = PasswordRequest(password: password)
            let key: OpaquePointer? = Self.withBIO(privateKeyPEM) { bio in
                withExtendedLifetime(request) {
                    PEM_read_bio_PrivateKey(
                        bio, nil, Self.passwordCallback, Unmanaged.passUnretained(request).toOpaque())
                }
            }
            guard let key else {
                certificates.forEach { X509_free($0) }
                if request.asked {
                    throw LoadError(
                        kind: .wrongPassword,
                        description: password == nil
                            ? "The private key is encrypted and no password was given."
                            : "The password does not decrypt the private key.")
                }
                throw LoadError(
                    kind: .unreadableData, description: "The PEM key holds no private key (\(Self.lastError())).")
            }
            try self.init(certificate: leaf, chain: Array(certificates.dropFirst()), privateKey: key)
        }

        /// Runs `body` with a memory BIO over `data`'s bytes (read in place, so only inside this call).
        private static func withBIO<T>(_ data: Data, _ body: (OpaquePointer?) -> T) -> T {
            data.withUnsafeBytes { raw in
                let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count))
                defer { if let bio { BIO_free(bio) } }
                return body(bio)
            }
        }

        /// The password OpenSSL asks for while it reads a PEM key, and whether it asked.
        private final class PasswordRequest {
            let password: [UInt8]?
            var asked = false
            init(password: String?) { self.password = password.map { Array($0.utf8) } }
        }

        /// OpenSSL's PEM password callback: the request's password, or a failure (never OpenSSL's default, which
        /// would prompt on the terminal).
        private static let passwordCallback:
            @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = {
                buffer, size, _, userdata in
                guard let buffer, let userdata else { return -1 }
                let request = Unmanaged<PasswordRequest>.fromOpaque(userdata).takeUnretainedValue()
                request.asked = true
                guard let password = request.password, password.count <= Int(size) else { return -1 }
                password.withUnsafeBytes { raw in
                    UnsafeMutableRawPointer(buffer).copyMemory(
                        from: raw.baseAddress ?? UnsafeRawPointer(buffer), byteCount: raw.count)
                }
                return Int32(password.count)
            }

        private static func unreadable(_ format: String) -> LoadError {
            LoadError(kind: .unreadableData, description: "The data is not a readable \(format) (at most 1 MiB).")
        }

        /// OpenSSL's last error on this thread, as text.
        private static func lastError() -> String {
            let code = ERR_peek_last_error()
            guard code != 0 else { return "no detail" }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        private static func subject(of x509: OpaquePointer) -> String {
            guard let line = X509_NAME_oneline(X509_get_subject_name(x509), nil, 0) else { return "" }
            defer { sk_openssl_free(line) }
            return String(cString: line)
        }
    }
}
