internal import COpenSSL
import Foundation

/// An X.509 certificate, parsed by OpenSSL: what pinning needs to know about it.
///
/// ```swift
/// let pem = try String(contentsOfFile: "/etc/ssl/server.pem", encoding: .utf8)
/// for certificate in try Certificate.certificates(fromPEM: Data(pem.utf8)) {
///     print(certificate.subject, certificate.dnsNames, certificate.publicKeyPin)  // "sha256/…"
/// }
/// ```
///
/// The value keeps the DER bytes only; OpenSSL objects live for the duration of one call and are freed on every
/// path.
public struct Certificate: Hashable, Sendable {
    /// The DER encoding.
    public let der: Data
    /// The subject, as OpenSSL prints it on one line (`/CN=localhost`).
    public let subject: String
    /// The DNS names of the subjectAltName extension.
    public let dnsNames: [String]
    /// The IP addresses of the subjectAltName extension, as text.
    public let ipAddresses: [String]
    /// The start of the validity period.
    public let notBefore: Date
    /// The end of the validity period.
    public let notAfter: Date
    /// The DER encoding of the SubjectPublicKeyInfo.
    public let subjectPublicKeyInfo: Data

    /// Why bytes are not a certificate.
    public struct ParseError: Error, CustomStringConvertible {
        /// What is wrong.
        public let description: String
    }

    /// Parses a DER certificate.
    /// - Throws: ``ParseError`` for bytes that are not one certificate.
    public init(der: Data) throws {
        guard !der.isEmpty, der.count < 1 << 20 else { throw ParseError(description: "not a DER certificate") }
        let x509: OpaquePointer? = der.withUnsafeBytes { raw in
            var pointer = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_X509(nil, &pointer, raw.count)
        }
        guard let x509 else {
            ERR_clear_error()
            throw ParseError(description: "not a DER certificate")
        }
        defer { X509_free(x509) }
        try self.init(x509: x509)
    }

    /// Reads the fields of an OpenSSL certificate (not freed here).
    /// The DER encoding of an OpenSSL certificate, without reading its fields (the handshake needs only that).
    static func der(of x509: OpaquePointer) -> Data? {
        var derPointer: UnsafeMutablePointer<UInt8>?
        let derLength = i2d_X509(x509, &derPointer)
        guard derLength > 0, let derPointer else { return nil }
        defer { sk_openssl_free(derPointer) }
        return Data(bytes: derPointer, count: Int(derLength))
    }

    init(x509: OpaquePointer) throws {
        guard let der = Self.der(of: x509) else { throw ParseError(description: "cannot encode the certificate") }
        self.der = der

        if let line = X509_NAME_oneline(X509_get_subject_name(x509), nil, 0) {
            subject = String(cString: line)
            sk_openssl_free(line)
        } else {
            subject = ""
        }

        var dns: [String] = []
        var ips: [String] = []
        if let names = sk_x509_subject_alt_names(x509) {
            for line in String(cString: names).split(separator: "\n") {
                if line.hasPrefix("DNS:") { dns.append(String(line.dropFirst(4))) }
                if line.hasPrefix("IP:") { ips.append(String(line.dropFirst(3))) }
            }
            sk_openssl_free(names)
        }
        dnsNames = dns
        ipAddresses = ips

        guard let start = Self.date(X509_get0_notBefore(x509)), let end = Self.date(X509_get0_notAfter(x509)) else {
            throw ParseError(description: "bad validity dates")
        }
        notBefore = start
        notAfter = end

        var spkiPointer: UnsafeMutablePointer<UInt8>?
        let spkiLength = sk_x509_spki_der(x509, &spkiPointer)
        guard spkiLength > 0, let spkiPointer else { throw ParseError(description: "no public key") }
        subjectPublicKeyInfo = Data(bytes: spkiPointer, count: Int(spkiLength))
        sk_openssl_free(spkiPointer)
    }

    /// Every certificate of a PEM text (`-----BEGIN CERTIFICATE-----` blocks), in order.
    /// - Throws: ``ParseError`` when there is none.
    public static func certificates(fromPEM pem: Data) throws -> [Certificate] {
        guard pem.count < 16 << 20 else { throw ParseError(description: "PEM text too large") }
        let bio: OpaquePointer? = pem.withUnsafeBytes { raw in BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) }
        guard let bio else { throw ParseError(description: "cannot read PEM") }
        defer { BIO_free(bio) }
        var certificates: [Certificate] = []
        // BIO_new_mem_buf reads the bytes in place: they must stay alive while it is used.
        try withExtendedLifetime(pem) {
            while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
                defer { X509_free(x509) }
                certificates.append(try Certificate(x509: x509))
            }
        }
        ERR_clear_error()
        guard !certificates.isEmpty else { throw ParseError(description: "no certificate in the PEM text") }
        return certificates
    }

    /// The certificates in `data`, PEM or DER.
    public static func certificates(from data: Data) throws -> [Certificate] {
        if data.range(of: Data("-----BEGIN CERTIFICATE-----".utf8)) != nil { return try certificates(fromPEM: data) }
        return [try Certificate(der: data)]
    }

    /// SHA-256 of the SubjectPublicKeyInfo.
    public var publicKeySHA256: Data {
        Self.sha256(subjectPublicKeyInfo)
    }

    /// The public-key pin as HPKP, OkHttp and curl write it: `sha256/<base64 of the SPKI digest>`.
    public var publicKeyPin: String {
        "sha256/" + publicKeySHA256.base64EncodedString()
    }

    /// SHA-256 of `data`, by OpenSSL.
    static func sha256(_ data: Data) -> Data {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = data.withUnsafeBytes { raw in
            EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil)
        }
        return Data(digest.prefix(Int(length)))
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}
