import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

/// `ClientIdentity` reads PKCS#12 and PEM identities with OpenSSL and refuses bad ones at construction.
final class ClientIdentityTests: XCTestCase {
    private func loadError(_ make: () throws -> ClientIdentity) -> ClientIdentity.LoadError? {
        do {
            _ = try make()
            XCTFail("the identity was accepted")
            return nil
        } catch let error as ClientIdentity.LoadError {
            return error
        } catch {
            XCTFail("unexpected error \(error)")
            return nil
        }
    }

    func testPKCS12WithItsPasswordGivesTheCertificateAndItsIssuers() throws {
        let identity = try ClientIdentity(
            pkcs12: TestCertificates.client("client-alice.p12"), password: TestCertificates.alicePassword)
        XCTAssertEqual(identity.certificate.subject, "/CN=SessionKit Test Client alice")
        XCTAssertEqual(identity.intermediateCertificates.map(\.subject), ["/CN=SessionKit Test Root CA"])
        XCTAssertEqual(identity.description, "ClientIdentity(/CN=SessionKit Test Client alice)")
    }

    func testPEMChainWithAnEncryptedKeyAndItsPassword() throws {
        let identity = try ClientIdentity(
            certificateChainPEM: TestCertificates.client("client-bob-chain.pem"),
            privateKeyPEM: TestCertificates.client("client-bob-encrypted.key"), password: TestCertificates.bobPassword)
        XCTAssertEqual(identity.certificate.subject, "/CN=SessionKit Test Client bob")
        XCTAssertEqual(identity.intermediateCertificates.map(\.subject), ["/CN=SessionKit Test Intermediate CA"])
        // A key that is not encrypted needs no password.
        let alice = try ClientIdentity(
            certificateChainPEM: TestCertificates.client("client-alice.pem"),
            privateKeyPEM: TestCertificates.client("client-alice.key"))
        XCTAssertEqual(alice.certificate.subject, "/CN=SessionKit Test Client alice")
        XCTAssertTrue(alice.intermediateCertificates.isEmpty)
    }

    func testAWrongPasswordFailsAtConstruction() throws {
        let p12 = try TestCertificates.client("client-alice.p12")
        XCTAssertEqual(loadError { try ClientIdentity(pkcs12: p12, password: "wrong") }?.kind, .wrongPassword)
        XCTAssertEqual(loadError { try ClientIdentity(pkcs12: p12, password: "") }?.kind, .wrongPassword)
        let chain = try TestCertificates.client("client-bob-chain.pem")
        let key = try TestCertificates.client("client-bob-encrypted.key")
        let wrong = loadError { try ClientIdentity(certificateChainPEM: chain, privateKeyPEM: key, password: "wrong") }
        XCTAssertEqual(wrong?.kind, .wrongPassword)
        // An encrypted key without a password is refused, never asked for on the terminal.
        let none = loadError { try ClientIdentity(certificateChainPEM: chain, privateKeyPEM: key) }
        XCTAssertEqual(none?.kind, .wrongPassword)
        XCTAssertEqual(none?.description, "The private key is encrypted and no password was given.")
    }

    func testAKeyThatDoesNotMatchTheCertificateFailsAtConstruction() throws {
        let error = loadError {
            try ClientIdentity(
                certificateChainPEM: TestCertificates.client("client-alice.pem"),
                privateKeyPEM: TestCertificates.client("client-bob-encrypted.key"),
                password: TestCertificates.bobPassword)
        }
        XCTAssertEqual(error?.kind, .keyDoesNotMatchCertificate)
        XCTAssertTrue(
            error?.description.contains("SessionKit Test Client alice") == true, "\(String(describing: error))")
    }

    func testBytesThatAreNoIdentityAreUnreadable() throws {
        let garbage = Data("not a certificate".utf8)
        XCTAssertEqual(loadError { try ClientIdentity(pkcs12: garbage, password: "x") }?.kind, .unreadableData)
        XCTAssertEqual(loadError { try ClientIdentity(pkcs12: Data(), password: "x") }?.kind, .unreadableData)
        let key = try TestCertificates.client("client-alice.key")
        XCTAssertEqual(
            loadError { try ClientIdentity(certificateChainPEM: garbage, privateKeyPEM: key) }?.kind, .unreadableData)
        let chain = try TestCertificates.client("client-alice.pem")
        XCTAssertEqual(
            loadError { try ClientIdentity(certificateChainPEM: chain, privateKeyPEM: garbage) }?.kind,
            .unreadableData)
        // A PEM chain given as the key: a certificate is no key.
        XCTAssertEqual(
            loadError { try ClientIdentity(certificateChainPEM: chain, privateKeyPEM: chain) }?.kind, .unreadableData)
    }
}
