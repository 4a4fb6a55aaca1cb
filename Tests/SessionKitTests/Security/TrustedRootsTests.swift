import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SecurityPolicy(trustingRootCertificates:)`: a private CA as the only anchors, the domain checked, no
/// `allowInvalidCertificates` (issue 13, Build 6); offline, then in the curl transport's handshake.
final class TrustedRootsTests: XCTestCase {
    private func der(_ name: String) throws -> Data {
        try TestCertificates.derCertificate(at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
    }

    /// A trust whose own anchors are the system store: the policy's roots must replace them.
    private func systemTrust(_ chain: [Data], date: Date = Date()) -> ServerTrust {
        ServerTrust(certificateChain: chain, anchors: nil, verificationDate: date)
    }

    func testPrivateRootIsTheOnlyAnchorAndTheDomainIsChecked() throws {
        let chain = [try der("intermediate-localhost"), try der("intermediate-ca")]
        let policy = SecurityPolicy(trustingRootCertificates: [try der("root-ca")])
        XCTAssertEqual(policy.pinningMode, .none)
        XCTAssertFalse(policy.allowInvalidCertificates)
        XCTAssertTrue(policy.evaluate(systemTrust(chain), forDomain: "localhost"))
        XCTAssertFalse(policy.evaluate(systemTrust(chain), forDomain: "wrong.example"), "the domain is checked")
        XCTAssertFalse(
            policy.evaluate(
                systemTrust([try der("untrusted-leaf"), try der("untrusted-root")]),
                forDomain: "localhost"), "another root is not trusted")
        XCTAssertFalse(policy.evaluate(systemTrust([try der("self-signed")]), forDomain: "localhost"))
        XCTAssertFalse(
            policy.evaluate(
                systemTrust(chain, date: Date().addingTimeInterval(86_400 * 365 * 20)),
                forDomain: "localhost"), "expired")
    }

    func testPEMRootsAreAcceptedAndAnEmptySetTrustsNothing() throws {
        let pem = try Data(contentsOf: TestCertificates.rootCAFile)
        let chain = [try der("intermediate-localhost"), try der("intermediate-ca")]
        XCTAssertTrue(
            SecurityPolicy(trustingRootCertificates: [pem]).evaluate(systemTrust(chain), forDomain: "localhost"))
        XCTAssertEqual(SecurityPolicy(trustingRootCertificates: [pem]).trustedRootCertificates, [try der("root-ca")])
        XCTAssertNil(SecurityPolicy.default.trustedRootCertificates)
        XCTAssertFalse(
            SecurityPolicy(trustingRootCertificates: []).evaluate(systemTrust(chain), forDomain: "localhost"))
    }

    func testArchiveAndCopyKeepTheRoots() throws {
        let policy = SecurityPolicy(trustingRootCertificates: [try der("root-ca")])
        let copy = try XCTUnwrap(policy.copy() as? SecurityPolicy)
        XCTAssertEqual(copy.trustedRootCertificates, policy.trustedRootCertificates)
        let archive = try NSKeyedArchiver.archivedData(withRootObject: policy, requiringSecureCoding: true)
        let restored = try XCTUnwrap(
            try NSKeyedUnarchiver.unarchivedObject(ofClass: SecurityPolicy.self, from: archive))
        XCTAssertEqual(restored.trustedRootCertificates, policy.trustedRootCertificates)
        let chain = [try der("intermediate-localhost"), try der("intermediate-ca")]
        XCTAssertTrue(restored.evaluate(systemTrust(chain), forDomain: "localhost"))
    }

    func testCurlTransportTrustsAPrivateCAInTheHandshake() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        manager.securityPolicy = SecurityPolicy(trustingRootCertificates: [try der("root-ca")])
        let result = try await manager.get("/get")
        XCTAssertEqual(result.statusCode, 200)

        let other = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        other.transport = .curl
        other.securityPolicy = SecurityPolicy(trustingRootCertificates: [try der("untrusted-root")])
        do {
            _ = try await other.get("/get")
            XCTFail("a server under another root must be refused")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .serverCertificateHasUnknownRoot)
        }
        XCTAssertEqual(server.requests.count, 1, "the refused request never reached the server")
    }

    func testFoundationTransportRefusesThePolicyItCannotEnforce() async throws {
        let manager = HTTPSessionManager(baseURL: URL(string: "https://127.0.0.1:1"))
        manager.transport = .foundation
        manager.securityPolicy = SecurityPolicy(trustingRootCertificates: [try der("root-ca")])
        do {
            _ = try await manager.get("/get")
            XCTFail("the Foundation transport cannot enforce the policy")
        } catch {
            XCTAssertEqual((error as NSError).domain, SessionKitError.sessionDomain)
        }
    }

    func testPinningOnAnUntrustedChainSaysHowToFixThePolicy() async throws {
        let server = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await server.shutdown() } }
        let manager = HTTPSessionManager(baseURL: server.baseURL)
        manager.transport = .curl
        manager.securityPolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der("root-ca")])
        do {
            _ = try await manager.get("/get")
            XCTFail("the test root is not a system root")
        } catch let error as URLError {
            let reason = (error as NSError).localizedFailureReason ?? ""
            XCTAssertTrue(reason.contains("trustingRootCertificates"), reason)
            XCTAssertTrue(reason.contains("allowInvalidCertificates"), reason)
        }
    }
}
