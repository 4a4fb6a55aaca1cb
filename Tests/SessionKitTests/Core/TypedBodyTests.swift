import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Typed bodies and results: an `Encodable` body sent as JSON, a `Decodable` result, nothing through `Any`.
final class TypedBodyTests: LoopbackTestCase {
    private struct NewUser: Codable, Equatable, Sendable { let name: String; let languages: [String] }
    private struct Echo: Decodable, Sendable {
        let json: NewUser
        let headers: [String: String]
    }

    func testEncodableBodyIsSentAsJSONAndTheResultDecoded() async throws {
        let manager = makeManager()
        let sent = NewUser(name: "Ada", languages: ["Swift"])
        let echo = try await manager.post("/post", body: sent, headers: ["X-Trace": "1"], as: Echo.self)
        XCTAssertEqual(echo.json, sent)
        XCTAssertEqual(echo.headers["Content-Type"], "application/json")
        XCTAssertEqual(echo.headers["X-Trace"], "1")
        let put = try await manager.request("PUT", "/put", body: sent, as: Echo.self)
        XCTAssertEqual(put.json, sent)
    }

    func testAFailingStatusThrowsBeforeDecoding() async throws {
        let manager = makeManager()
        do {
            _ = try await manager.post("/status/422", body: NewUser(name: "", languages: []), as: Echo.self)
            XCTFail("a 422 must throw")
        } catch {
            XCTAssertEqual(SessionKitError(error).kind, .unacceptableStatusCode(422))
        }
    }
}
