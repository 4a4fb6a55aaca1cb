import COpenSSL
import XCTest

@testable import SessionKit

/// What the curl transport installs on the TLS context of each connection it opens, without I/O.
final class HandshakeCheckTests: XCTestCase {
    /// The policy's check holds the context's callbacks, unretained, for the transfer that opened the connection; a
    /// later transfer may reuse the connection after that check is gone. A renegotiation would call back into it, so
    /// the context refuses one.
    func testTheContextRefusesARenegotiation() throws {
        let context = try XCTUnwrap(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(context) }
        XCTAssertEqual(sk_ssl_ctx_refuses_renegotiation(context), 0, "OpenSSL's default allows one")
        let check = HandshakeCheck(policy: .default, host: "localhost", identity: nil)
        XCTAssertTrue(check.install(on: context))
        XCTAssertEqual(sk_ssl_ctx_refuses_renegotiation(context), 1)
    }

    /// The stream tasks' own TLS contexts refuse one too.
    func testAStreamTasksContextRefusesARenegotiation() throws {
        let context = try XCTUnwrap(sk_ssl_client_context(TLS1_2_VERSION, 0))
        defer { SSL_CTX_free(context) }
        XCTAssertEqual(sk_ssl_ctx_refuses_renegotiation(context), 1)
    }
}
