import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

/// Certificates over OpenSSL and `SecurityPolicy.evaluate` with AFNetworking's rules, offline, on the certificates
/// of `Scripts/make-test-certificates.sh`.
final class SecurityPolicyTests: XCTestCase {
    private func der(_ name: String) throws -> Data {
        try TestCertificates.derCertificate(at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
    }

    private lazy var root = try! der("root-ca")
    private lazy var intermediate = try! der("intermediate-ca")
    private lazy var leaf = try! der("intermediate-localhost")
    private lazy var wrongHost = try! der("wrong-host")
    private lazy var wildcard = try! der("wildcard")
    private lazy var selfSigned = try! der("self-signed")
    private lazy var untrustedRoot = try! der("untrusted-root")
    private lazy var untrustedLeaf = try! der("untrusted-leaf")

    // MARK: - Certificates

    func testParsesSubjectNamesDatesAndPin() throws {
        let certificate = try Certificate(der: leaf)
        XCTAssertTrue(certificate.subject.contains("CN=intermediate-localhost"), certificate.subject)
        XCTAssertEqual(certificate.dnsNames, ["localhost"])
        XCTAssertEqual(certificate.ipAddresses, ["127.0.0.1"])
        XCTAssertLessThan(certificate.notBefore, Date())
        XCTAssertGreaterThan(certificate.notAfter, Date().addingTimeInterval(86_400 * 365))
        XCTAssertTrue(certificate.publicKeyPin.hasPrefix("sha256/"))
        XCTAssertEqual(Data(base64Encoded: String(certificate.publicKeyPin.dropFirst(7)))?.count, 32)
        // The same pin `openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary` gives.
        XCTAssertEqual(certificate.publicKeySHA256.count, 32)
        let pem = try Data(contentsOf: TestCertificates.localhost.chainFile)
        XCTAssertEqual(try Certificate.certificates(fromPEM: pem).count, 2)
    }

    func testBadBytesAreErrors() {
        XCTAssertThrowsError(try Certificate(der: Data()))
        XCTAssertThrowsError(try Certificate(der: Data("not a certificate".utf8)))
        XCTAssertThrowsError(try Certificate(der: leaf.prefix(leaf.count / 2)))
        XCTAssertThrowsError(
            try Certificate.certificates(
                fromPEM: Data("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)))
        for length in stride(from: 1, to: leaf.count, by: 97) {
            var damaged = leaf
            damaged[length] ^= 0xFF
            _ = try? Certificate(der: damaged)  // an error or a certificate, never a crash
        }
    }

    // MARK: - Rules, case by case

    private var chain: [Data] { [leaf, intermediate] }

    private func trust(_ chain: [Data], date: Date = Date(), system: Bool = false) -> ServerTrust {
        ServerTrust(certificateChain: chain, anchors: system ? nil : [root], verificationDate: date)
    }

    func testModeNone() {
        let policy = SecurityPolicy.default
        XCTAssertTrue(policy.evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertTrue(policy.evaluate(trust(chain), forDomain: "127.0.0.1"))
        XCTAssertFalse(policy.evaluate(trust(chain), forDomain: "wrong.example"), "domain mismatch")
        XCTAssertFalse(policy.evaluate(trust([leaf]), forDomain: "localhost"), "a server that omits its intermediate")
        XCTAssertFalse(
            policy.evaluate(trust(chain, system: true), forDomain: "localhost"), "the test root is not a system root")
        XCTAssertFalse(policy.evaluate(trust([selfSigned]), forDomain: "localhost"))
        XCTAssertFalse(policy.evaluate(trust([untrustedLeaf, untrustedRoot]), forDomain: "localhost"))
        XCTAssertFalse(
            policy.evaluate(trust(chain, date: Date().addingTimeInterval(86_400 * 365 * 20)), forDomain: "localhost"),
            "expired")
        XCTAssertFalse(
            policy.evaluate(trust(chain, date: Date().addingTimeInterval(-86_400 * 30)), forDomain: "localhost"),
            "not yet valid")
        XCTAssertTrue(policy.evaluate(trust([wildcard, intermediate]), forDomain: "api.example.test"))
        XCTAssertFalse(policy.evaluate(trust([wildcard, intermediate]), forDomain: "deep.api.example.test"))
        policy.validatesDomainName = false
        XCTAssertTrue(
            policy.evaluate(trust([wrongHost, intermediate]), forDomain: "localhost"), "only the chain is checked")
        policy.allowInvalidCertificates = true
        XCTAssertTrue(policy.evaluate(trust([selfSigned]), forDomain: "localhost"))
    }

    func testAllowInvalidWithDomainValidationAndNoPinsRefusesEverything() {
        let policy = SecurityPolicy.default
        policy.allowInvalidCertificates = true
        XCTAssertFalse(policy.evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertTrue(policy.evaluate(trust(chain), forDomain: nil), "without a domain the rule does not apply")
    }

    func testCertificatePinning() {
        for (pin, expected) in [
            (leaf, true), (intermediate, true), (root, true), (untrustedRoot, false), (selfSigned, false),
        ] {
            let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pin])
            XCTAssertEqual(
                policy.evaluate(trust(chain), forDomain: "localhost"), expected,
                "pin \(try! Certificate(der: pin).subject)")
        }
        // A self-signed server pinned exactly: untrusted by the anchors, so invalid certificates must be allowed.
        let selfPinned = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [selfSigned])
        XCTAssertFalse(selfPinned.evaluate(trust([selfSigned]), forDomain: "localhost"))
        selfPinned.allowInvalidCertificates = true
        XCTAssertTrue(selfPinned.evaluate(trust([selfSigned]), forDomain: "localhost"))
        XCTAssertFalse(selfPinned.evaluate(trust([selfSigned]), forDomain: "wrong.example"), "the domain still counts")
        XCTAssertFalse(
            SecurityPolicy(pinningMode: .certificate, pinnedCertificates: []).evaluate(
                trust(chain), forDomain: "localhost"))
    }

    func testPublicKeyPinningAndHashes() throws {
        let leafPin = try Certificate(der: leaf).publicKeyPin
        let rootPin = try Certificate(der: root).publicKeyPin
        let unrelatedPin = try Certificate(der: untrustedRoot).publicKeyPin
        XCTAssertTrue(SecurityPolicy(pinnedPublicKeyHashes: [leafPin]).evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertTrue(SecurityPolicy(pinnedPublicKeyHashes: [rootPin]).evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertTrue(
            SecurityPolicy(pinnedPublicKeyHashes: [unrelatedPin, leafPin]).evaluate(
                trust(chain), forDomain: "localhost"),
            "a backup pin next to the current one")
        XCTAssertFalse(
            SecurityPolicy(pinnedPublicKeyHashes: [unrelatedPin]).evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertFalse(
            SecurityPolicy(pinnedPublicKeyHashes: []).evaluate(trust(chain), forDomain: "localhost"), "empty pin set")
        XCTAssertFalse(
            SecurityPolicy(pinnedPublicKeyHashes: [leafPin]).evaluate(trust(chain), forDomain: "wrong.example"))
        let byCertificate = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [intermediate])
        XCTAssertTrue(byCertificate.evaluate(trust(chain), forDomain: "localhost"))
    }

    /// Found by a badssl-style probe: chains OpenSSL's TLS handshake refuses at security level 2, and a certificate
    /// that names its host only in the CN, were trusted by the policy's own verification; a key pin with invalid
    /// certificates allowed skipped the name.
    func testWeakAndCNOnlyLeavesAreRefusedAndKeyPinsCheckTheName() throws {
        let policy = SecurityPolicy(trustingRootCertificates: [root])
        XCTAssertTrue(policy.evaluate(ServerTrust(certificateChain: chain), forDomain: "localhost"), "the control")
        XCTAssertTrue(
            policy.evaluate(ServerTrust(certificateChain: chain), forDomain: "localhost."),
            "an absolute name is the same host")
        // 127.0.0.1 written as URL parsers and libcurl also read it: the address libcurl connects to.
        for address in ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1"] {
            XCTAssertTrue(policy.evaluate(ServerTrust(certificateChain: chain), forDomain: address), address)
        }
        XCTAssertFalse(policy.evaluate(ServerTrust(certificateChain: chain), forDomain: "127.2"))
        for weak in ["weak-sha1", "weak-rsa1024", "weak-cn-only"] {
            let weakChain = [try der(weak), intermediate]
            XCTAssertFalse(policy.evaluate(ServerTrust(certificateChain: weakChain), forDomain: "localhost"), weak)
            XCTAssertFalse(policy.evaluate(ServerTrust(certificateChain: weakChain), forDomain: "127.0.0.1"), weak)
        }
        // A certificate pinned exactly, invalid certificates allowed, is trusted as it is, however weakly keyed (a
        // device's own certificate); without the flag, the chain must pass the strength check first.
        let weakLeaf = try der("weak-rsa1024")
        let pinnedWeak = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [weakLeaf])
        XCTAssertFalse(pinnedWeak.evaluate(trust([weakLeaf, intermediate]), forDomain: "localhost"))
        pinnedWeak.allowInvalidCertificates = true
        XCTAssertTrue(pinnedWeak.evaluate(trust([weakLeaf, intermediate]), forDomain: "localhost"))
        XCTAssertFalse(pinnedWeak.evaluate(trust([weakLeaf, intermediate]), forDomain: "wrong.example"), "the name")
        // A key pinned on the intermediate, invalid certificates allowed: a certificate it issued for another host is
        // not valid for this one while validatesDomainName holds.
        let intermediatePin = try Certificate(der: intermediate).publicKeyPin
        let pinned = SecurityPolicy(pinnedPublicKeyHashes: [intermediatePin])
        pinned.allowInvalidCertificates = true
        XCTAssertTrue(pinned.evaluate(trust(chain), forDomain: "localhost"))
        XCTAssertTrue(pinned.evaluate(trust(chain), forDomain: "127.0.0.1"))
        XCTAssertFalse(pinned.evaluate(trust([wrongHost, intermediate]), forDomain: "localhost"))
        XCTAssertFalse(pinned.evaluate(trust([wrongHost, intermediate]), forDomain: "127.0.0.1"))
        pinned.validatesDomainName = false
        XCTAssertTrue(pinned.evaluate(trust([wrongHost, intermediate]), forDomain: "localhost"), "names not checked")
    }

    func testPEMPinsAreConvertedAndGarbageDropped() throws {
        let pem = try Data(contentsOf: TestCertificates.directory.appendingPathComponent("intermediate-localhost.pem"))
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pem, Data("junk".utf8)])
        XCTAssertEqual(policy.pinnedCertificates, [leaf])
    }

    // MARK: - The whole matrix

    /// The rules of the documentation, written out as facts about this chain, compared with `evaluate`.
    func testEvaluationMatrix() throws {
        enum Pin: CaseIterable { case leaf, intermediate, root, unrelated, none }
        let pins: [Pin: Data] = [.leaf: leaf, .intermediate: intermediate, .root: root, .unrelated: untrustedRoot]
        let domains: [String?] = ["localhost", "127.0.0.1", "wrong.example", nil]
        var checked = 0
        for mode in SSLPinningMode.allCases {
            for allowInvalid in [false, true] {
                for validatesDomain in [false, true] {
                    for pin in Pin.allCases {
                        for domain in domains {
                            let pinned: Set<Data> = pins[pin].map { [$0] } ?? []
                            let policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinned)
                            policy.allowInvalidCertificates = allowInvalid
                            policy.validatesDomainName = validatesDomain
                            // Facts about this chain (leaf for localhost/127.0.0.1 under the intermediate under the root).
                            let domainMatches = domain != "wrong.example"
                            let trusted = !validatesDomain || domainMatches
                            let hasPins = pin != .none
                            let pinInChain = pin == .leaf || pin == .intermediate || pin == .root
                            var expected: Bool
                            if domain != nil && allowInvalid && validatesDomain && (mode == .none || !hasPins) {
                                expected = false
                            } else if mode == .none {
                                expected = allowInvalid || trusted
                            } else if !allowInvalid && !trusted {
                                expected = false
                            } else {
                                // The domain rule applies in both modes, invalid certificates allowed or not (in
                                // public-key mode AFNetworking skips it; SessionKit does not).
                                expected = hasPins && pinInChain && trusted
                            }
                            let actual = policy.evaluate(trust(chain), forDomain: domain)
                            XCTAssertEqual(
                                actual, expected,
                                "mode \(mode) allowInvalid \(allowInvalid) validatesDomain \(validatesDomain) pin \(pin) domain \(domain ?? "nil")"
                            )
                            checked += 1
                        }
                    }
                }
            }
        }
        XCTAssertEqual(checked, 3 * 2 * 2 * 5 * 4)
    }

    func testPolicyArchivesAndCopies() throws {
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [leaf, intermediate])
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false
        let decoded = try SecureArchive.unarchive(SecurityPolicy.self, from: try SecureArchive.archive(policy))
        XCTAssertEqual(decoded.pinningMode, .certificate)
        XCTAssertEqual(decoded.pinnedCertificates, [leaf, intermediate])
        XCTAssertTrue(decoded.allowInvalidCertificates)
        XCTAssertFalse(decoded.validatesDomainName)
        let hashes = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAA", "sha256/BBBB"])
        let decodedHashes = try SecureArchive.unarchive(SecurityPolicy.self, from: try SecureArchive.archive(hashes))
        XCTAssertEqual(decodedHashes.pinnedPublicKeyHashes, ["sha256/AAAA", "sha256/BBBB"])
        let copy = try XCTUnwrap(policy.copy() as? SecurityPolicy)
        copy.validatesDomainName = true
        XCTAssertFalse(policy.validatesDomainName, "copies diverge")
        XCTAssertEqual(copy.pinnedCertificates, policy.pinnedCertificates)
    }
}
