@testable import SessionKit
import SessionKitTestSupport
import XCTest

/// The policy's configuration key, which engines and the HTTP cache compare at every request: computed once, and a
/// new one after any change of what the policy decides.
final class SecurityPolicyKeyTests: XCTestCase {
    func testTheKeyFollowsEveryChangeOfThePolicy() throws {
        let policy = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAA"])
        var seen = [policy.configurationKey]
        XCTAssertEqual(policy.configurationKey, seen[0], "asked twice, the same key")
        policy.allowInvalidCertificates = true
        seen.append(policy.configurationKey)
        policy.validatesDomainName = false
        seen.append(policy.configurationKey)
        policy.reportsOnly = true
        seen.append(policy.configurationKey)
        policy.pinnedCertificates = [try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)]
        seen.append(policy.configurationKey)
        XCTAssertEqual(Set(seen).count, seen.count, "each change gives another key: \(seen)")
        let copy = try XCTUnwrap(policy.copy() as? SecurityPolicy)
        XCTAssertEqual(copy.configurationKey, policy.configurationKey, "a copy decides alike")
        copy.reportsOnly = false
        XCTAssertNotEqual(copy.configurationKey, policy.configurationKey, "and changes on its own")
    }
}
