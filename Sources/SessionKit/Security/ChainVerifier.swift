internal import COpenSSL
import Foundation

/// Verifies a certificate chain with OpenSSL: against the system trust store or given anchors, at a given date,
/// optionally for a host name or IP address (OpenSSL's own matching, wildcards included).
enum ChainVerifier {
    /// The outcome of one verification.
    struct Outcome: Equatable {
        /// Whether the chain verified.
        let isTrusted: Bool
        /// OpenSSL's `X509_V_ERR_…` code, 0 when trusted.
        let code: Int32
        /// The chain OpenSSL built, leaf first, up to the anchor (DER); empty when verification failed.
        var builtChain: [Data] = []
        /// OpenSSL's text for the code.
        var reason: String {
            code == 0 ? "ok" : String(cString: X509_verify_cert_error_string(Int(code)))
        }
    }

    /// Verifies `chain` (DER, leaf first).
    ///
    /// - Parameters:
    ///   - anchors: DER certificates to trust instead of the system store; they need not be self-signed (a pinned
    ///     intermediate or leaf is a valid anchor).
    ///   - domain: A host name or IP address the leaf must match, or nil to check only the chain.
    ///   - date: The time the certificates must be valid at.
    ///   - checksTime: False to leave validity dates out (to tell whether a chain leads to an anchor at all).
    ///   - checksStrength: False to accept weak signatures and keys (a certificate pinned exactly, invalid
    ///     certificates allowed: the caller trusts those bytes, whatever signed them).
    static func verify(
        chain: [Data], anchors: [Data]?, domain: String?, date: Date, checksTime: Bool = true,
        checksStrength: Bool = true
    ) -> Outcome {
        let failure = Outcome(isTrusted: false, code: Int32(X509_V_ERR_UNSPECIFIED))
        let certificates = chain.compactMap(parse)
        guard let leaf = certificates.first, certificates.count == chain.count else {
            certificates.forEach { X509_free($0) }
            return failure
        }
        defer { certificates.forEach { X509_free($0) } }

        let store: OpaquePointer
        if let anchors {
            guard let anchorStore = X509_STORE_new() else { return failure }
            for anchor in anchors {
                guard let x509 = parse(anchor) else { continue }
                X509_STORE_add_cert(anchorStore, x509)
                X509_free(x509)
            }
            // A pinned intermediate or leaf is a trust anchor of its own.
            X509_STORE_set_flags(anchorStore, UInt(X509_V_FLAG_PARTIAL_CHAIN))
            store = anchorStore
        } else {
            guard let shared = SystemTrustStore.shared.store, X509_STORE_up_ref(shared) == 1 else { return failure }
            store = shared
        }
        defer { X509_STORE_free(store) }

        guard let untrusted = sk_x509_stack_new() else { return failure }
        defer { sk_x509_stack_free(untrusted) }
        for intermediate in certificates.dropFirst() { _ = sk_x509_stack_push(untrusted, intermediate) }

        guard let context = X509_STORE_CTX_new() else { return failure }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, leaf, untrusted) == 1 else { return failure }
        X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_SERVER)
        // On the context, not the store: the system store is shared by every verification.
        if let parameters = X509_STORE_CTX_get0_param(context) {
            // No SHA-1 or MD5 signature, no RSA key under 2048 bits, as OpenSSL's TLS handshake refuses them.
            X509_VERIFY_PARAM_set_auth_level(parameters, checksStrength ? Self.authenticationLevel : 0)
            if !checksTime { X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_NO_CHECK_TIME)) }
        }
        // A set time takes precedence over X509_V_FLAG_NO_CHECK_TIME in OpenSSL: set it only when dates count.
        if checksTime { X509_STORE_CTX_set_time(context, 0, time_t(date.timeIntervalSince1970)) }
        if let domain, let parameters = X509_STORE_CTX_get0_param(context) {
            let (name, isIP) = Self.matchedName(domain)
            let accepted =
                isIP
                ? X509_VERIFY_PARAM_set1_ip_asc(parameters, name)
                : X509_VERIFY_PARAM_set1_host(parameters, name, 0)
            guard accepted == 1 else { return failure }
            if !isIP { X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT)) }
        }
        let verified = X509_verify_cert(context) == 1
        let code = X509_STORE_CTX_get_error(context)
        var built: [Data] = []
        if verified, let stack = X509_STORE_CTX_get1_chain(context) {
            for index in 0..<sk_x509_stack_count(stack) {
                if let x509 = sk_x509_stack_value(stack, index), let certificate = try? Certificate(x509: x509) {
                    built.append(certificate.der)
                }
            }
            sk_x509_stack_free(stack)
        }
        ERR_clear_error()
        return Outcome(isTrusted: verified, code: verified ? 0 : code, builtChain: built)
    }

    /// Whether the leaf of `chain` (DER, leaf first) is valid for `domain` (a host name or an IP address), by name
    /// alone: its chain, dates and keys are not looked at. An `Outcome` with OpenSSL's host (62) or IP (64) mismatch
    /// code when it is not.
    static func leaf(of chain: [Data], matches domain: String) -> Outcome {
        guard let der = chain.first, let leaf = parse(der) else {
            return Outcome(isTrusted: false, code: Int32(X509_V_ERR_UNSPECIFIED))
        }
        defer { X509_free(leaf) }
        let (name, isIP) = matchedName(domain)
        let matched =
            isIP
            ? X509_check_ip_asc(leaf, name, 0) == 1
            : X509_check_host(leaf, name, name.utf8.count, UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT), nil) == 1
        ERR_clear_error()
        if matched { return Outcome(isTrusted: true, code: 0) }
        return Outcome(
            isTrusted: false, code: Int32(isIP ? X509_V_ERR_IP_ADDRESS_MISMATCH : X509_V_ERR_HOSTNAME_MISMATCH))
    }

    /// `domain` as a certificate names it: an IPv6 address without its brackets, an IPv4 address in a short or
    /// numeric form (`127.1`, `2130706433`, `0x7f.1`) as the dotted quad libcurl connects to, a host name without the
    /// trailing dot of an absolute name (`localhost.` is `localhost`); and whether it is an IP address.
    private static func matchedName(_ domain: String) -> (name: String, isIP: Bool) {
        var name = domain.hasPrefix("[") && domain.hasSuffix("]") ? String(domain.dropFirst().dropLast()) : domain
        let isIP = name.withCString { text in
            var buffer = [UInt8](repeating: 0, count: 16)
            return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
        }
        if isIP { return (name, true) }
        if let quad = dottedQuad(name) { return (quad, true) }
        if name.count > 1, name.hasSuffix(".") { name.removeLast() }
        return (name, false)
    }

    /// The dotted quad of an IPv4 address written another way (`inet_aton`'s forms, which URL parsers and libcurl
    /// read as the same address), or nil for anything else (a name with a letter that is not a hex digit after `0x`).
    private static func dottedQuad(_ host: String) -> String? {
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || $0.isHexDigitOrX }) else { return nil }
        var address = in_addr()
        guard host.withCString({ inet_aton($0, &address) }) == 1 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The security level chains are verified at: the system's TLS default (Debian's `openssl.cnf` sets 2), never
    /// below 2 (112 bits: no SHA-1 or MD5 signature, RSA and DH keys of 2048 bits at least, EC keys of 224).
    private static let authenticationLevel: Int32 = {
        guard let context = SSL_CTX_new(TLS_method()) else { return 2 }
        defer { SSL_CTX_free(context) }
        return max(2, SSL_CTX_get_security_level(context))
    }()

    /// The system's trust store (OpenSSL's default paths: Debian's bundle of about 140 certificates), loaded once.
    /// Loading it cost more than the rest of a TLS handshake, and it was loaded for every handshake; OpenSSL locks a
    /// store internally, so verifications on any thread share it read-only.
    private final class SystemTrustStore: @unchecked Sendable {
        // @unchecked Sendable: `store` is set once in `init` and never changed; OpenSSL guards its own lookups.
        static let shared = SystemTrustStore()
        let store: OpaquePointer?

        private init() {
            let store = X509_STORE_new()
            if let store { X509_STORE_set_default_paths(store) }
            ERR_clear_error()
            self.store = store
        }
    }

    /// An OpenSSL certificate from DER, owned by the caller (a reference of its own); nil for bad bytes.
    ///
    /// Parsing is the dearest part of a verification with OpenSSL 3 (`d2i_X509` decodes the public key through its
    /// provider machinery: about a million instructions a certificate), and the same chains and pins come back at
    /// every handshake, so parsed certificates are kept in a small cache keyed by their bytes.
    private static func parse(_ der: Data) -> OpaquePointer? {
        if let cached = ParsedCertificates.shared.certificate(for: der) { return cached }
        let x509: OpaquePointer? = der.withUnsafeBytes { raw in
            var pointer = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_X509(nil, &pointer, raw.count)
        }
        guard let x509 else {
            ERR_clear_error()
            return nil
        }
        ParsedCertificates.shared.keep(x509, for: der)
        return x509
    }

    /// Certificates parsed lately, by their DER bytes; each entry holds a reference of its own.
    private final class ParsedCertificates: @unchecked Sendable {
        // @unchecked Sendable: `entries` is a `Protected` box; OpenSSL's X509 reference counts are atomic.
        static let shared = ParsedCertificates()
        private static let capacity = 64
        private let entries = Protected<[Data: OpaquePointer]>([:])

        /// The certificate for `der` with a new reference for the caller, if it is cached.
        func certificate(for der: Data) -> OpaquePointer? {
            entries.read { entries in
                guard let x509 = entries[der], X509_up_ref(x509) == 1 else { return nil }
                return x509
            }
        }

        /// Keeps `x509` (the caller keeps its own reference); the cache is emptied when full.
        func keep(_ x509: OpaquePointer, for der: Data) {
            guard X509_up_ref(x509) == 1 else { return }
            let evicted = entries.write { entries -> [OpaquePointer] in
                var evicted: [OpaquePointer] = []
                if entries.count >= Self.capacity {
                    evicted = Array(entries.values)
                    entries.removeAll()
                }
                if let previous = entries.updateValue(x509, forKey: der) { evicted.append(previous) }
                return evicted
            }
            evicted.forEach { X509_free($0) }
        }
    }
}

extension UInt8 {
    /// An ASCII hexadecimal digit, or the `x`/`X` of a `0x` prefix.
    fileprivate var isHexDigitOrX: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) || self == 0x78
            || self == 0x58
    }
}
