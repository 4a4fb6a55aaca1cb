import Foundation
import NIOSSL

/// The certificates made by `Scripts/make-test-certificates.sh` and shipped with this target.
public enum TestCertificates {
    /// A server's certificate chain and private key, as PEM files.
    public struct Identity: Sendable {
        /// The PEM file holding the leaf first, then its issuers.
        public let chainFile: URL
        /// The PEM file of the private key.
        public let keyFile: URL

        /// NIOSSL's server configuration for this identity.
        func serverConfiguration() throws -> TLSConfiguration {
            let chain = try NIOSSLCertificate.fromPEMFile(chainFile.path).map {
                NIOSSLCertificateSource.certificate($0)
            }
            let key = try NIOSSLPrivateKey(file: keyFile.path, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(key))
            // Clients that keep connections open would otherwise hold the server's shutdown for 5 s.
            configuration.shutdownTimeout = .milliseconds(100)
            return configuration
        }

        /// NIOSSL's server configuration for this identity, requiring a client certificate issued under the PEM
        /// roots `clientCertificateRoots` when they are given (mutual TLS).
        func serverConfiguration(clientCertificateRoots: URL?) throws -> TLSConfiguration {
            var configuration = try serverConfiguration()
            if let clientCertificateRoots {
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .file(clientCertificateRoots.path)
            }
            return configuration
        }
    }

    /// The folder of the certificate files.
    public static var directory: URL {
        Bundle.module.resourceURL?.appendingPathComponent("Certificates")
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Certificates")
    }

    /// The test root CA certificate (PEM), to trust in a client.
    public static var rootCAFile: URL { directory.appendingPathComponent("root-ca.pem") }

    /// A leaf for `localhost`, `127.0.0.1` and `::1`, served with the root CA after it.
    public static var localhost: Identity {
        Identity(
            chainFile: directory.appendingPathComponent("localhost-chain.pem"),
            keyFile: directory.appendingPathComponent("localhost.key"))
    }

    /// A chain made by the script for the live TLS tests, `<name>-chain.pem`, with the key of its leaf: one of
    /// `intermediate-localhost`, `wrong-host`, `expired`, `not-yet-valid`, `self-signed`, `untrusted-leaf`, and
    /// `missing-intermediate` (the intermediate-localhost leaf served with the root but without its intermediate).
    public static func served(_ name: String) -> Identity {
        let key = name == "missing-intermediate" ? "intermediate-localhost" : name
        return Identity(
            chainFile: directory.appendingPathComponent("\(name)-chain.pem"),
            keyFile: directory.appendingPathComponent("\(key).key"))
    }

    /// A client certificate file made by the script for mutual TLS: `client-alice.p12` (password ``alicePassword``,
    /// alice's key and certificate under the root, and the root), `client-alice.pem`, `client-alice.key`,
    /// `client-bob-chain.pem` (bob's certificate under the intermediate, then the intermediate) and
    /// `client-bob-encrypted.key` (PKCS#8, password ``bobPassword``).
    public static func client(_ file: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(file))
    }

    /// The password of `client-alice.p12`.
    public static let alicePassword = "alice-secret"
    /// The password of `client-bob-encrypted.key`.
    public static let bobPassword = "bob-secret"

    /// The DER bytes of the first certificate in a PEM file.
    public static func derCertificate(at pemFile: URL) throws -> Data {
        let text = try String(contentsOf: pemFile, encoding: .utf8)
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        guard let start = text.range(of: begin),
            let stop = text.range(of: end, range: start.upperBound..<text.endIndex),
            let der = Data(
                base64Encoded: String(text[start.upperBound..<stop.lowerBound]), options: .ignoreUnknownCharacters)
        else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return der
    }
}
