import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension SecurityPolicy {
    /// A policy that trusts the test root (`root-ca.pem`) through a certificate pin and checks the host name: what the
    /// loopback servers' certificates pass when the name they were issued for is the one asked for.
    static func trustingTheTestRoot() throws -> SecurityPolicy {
        let policy = SecurityPolicy(
            pinningMode: .certificate,
            pinnedCertificates: [try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)])
        policy.allowInvalidCertificates = true
        return policy
    }
}

/// Runs `body`, which must throw a `URLError` of `code`, and returns it (nil, with a test failure, otherwise).
func expectURLError(
    _ code: URLError.Code, file: StaticString = #filePath, line: UInt = #line, _ body: () async throws -> Void
) async -> URLError? {
    do {
        try await body()
        XCTFail("expected \(code)", file: file, line: line)
    } catch let error as URLError {
        XCTAssertEqual(error.code, code, error.localizedDescription, file: file, line: line)
        return error
    } catch {
        XCTFail("unexpected \(error)", file: file, line: line)
    }
    return nil
}
