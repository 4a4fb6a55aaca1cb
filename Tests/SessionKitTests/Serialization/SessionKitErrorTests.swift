import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SessionKitError(error)`: the errors SessionKit throws, read into a value to switch on, with the status code,
/// the response and the body; the thrown errors keep AFNetworking's domains (issue 13, Build 5).
final class SessionKitErrorTests: LoopbackTestCase {
    private func failure(_ body: () async throws -> Void) async -> Error? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }

    func testUnacceptableStatusCarriesStatusResponseAndBody() async throws {
        let manager = makeManager()
        let thrown = await failure { _ = try await manager.get("/status/404") }
        let error = SessionKitError(try XCTUnwrap(thrown))
        XCTAssertEqual(error.kind, .unacceptableStatusCode(404))
        XCTAssertEqual(error.statusCode, 404)
        XCTAssertEqual(error.response?.url?.path, "/status/404")
        XCTAssertNotNil(error.body)
        XCTAssertEqual(error.nsError.domain, SessionKitError.responseSerializationDomain, "AFNetworking's domain stays")
        XCTAssertEqual(error.nsError.code, URLError.badServerResponse.rawValue)
        XCTAssertEqual(SessionKitError(error).kind, error.kind, "reading a SessionKitError again keeps it")
    }

    func testUndecodableBodyIsAResponseSerializationFailure() async throws {
        let manager = makeManager()  // JSON serializer, octet-stream body
        let thrown = await failure { _ = try await manager.get("/bytes/10") }
        let error = SessionKitError(try XCTUnwrap(thrown))
        XCTAssertEqual(error.kind, .responseSerializationFailed(.cannotDecodeContentData))
        XCTAssertEqual(error.statusCode, 200)
        XCTAssertEqual(error.body?.count, 10)
    }

    func testTypedDecodingFailure() async throws {
        let manager = makeManager()
        let thrown = await failure { _ = try await manager.get("/get", as: [Int].self) }
        XCTAssertEqual(SessionKitError(try XCTUnwrap(thrown)).kind, .decodingFailed)
    }

    func testSessionFailure() async throws {
        let manager = makeManager()
        manager.securityPolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [])
        let refused = await failure { _ = try await manager.get("/get") }  // pins over plain http
        XCTAssertEqual(SessionKitError(try XCTUnwrap(refused)).kind, .session(.policyNotEnforceable))
    }

    func testTransportFailureKeepsItsURLErrorCode() async throws {
        let manager = makeManager()
        let task = Task { try await manager.get("/delay/5") }
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        let thrown = await failure { _ = try await task.value }
        XCTAssertEqual(SessionKitError(try XCTUnwrap(thrown)).kind, .transport(.cancelled))
    }

    func testClosureFormFailureReadsTheSame() async throws {
        let manager = makeManager()
        let error: Error = try await awaitCallback { done in
            manager.get(
                "/status/500", parameters: nil, headers: nil, progress: nil,
                success: { _, _ in XCTFail("a 500 must fail") }, failure: { _, error in done(error) })
        }
        XCTAssertEqual(SessionKitError(error).kind, .unacceptableStatusCode(500))
    }
}
