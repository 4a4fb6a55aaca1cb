import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class HTTPSessionManagerTests: LoopbackTestCase {
    func testGetSendsParametersInQueryAndDecodesJSON() async throws {
        let manager = makeManager()
        let (task, object): (URLSessionDataTask?, Any?) = try await awaitCallback { done in
            manager.get("/get", parameters: ["q": "swift linux", "page": 2], headers: ["X-Test": "1"], progress: nil,
                        success: { task, object in done((task, object)) },
                        failure: { task, error in XCTFail("\(error)"); done((task, nil)) })
        }
        let document = try echo(object)
        XCTAssertEqual(document["args"] as? [String: String], ["q": "swift linux", "page": "2"])
        XCTAssertEqual((document["headers"] as? [String: String])?["X-Test"], "1")
        XCTAssertEqual(server.requests.last?.uri, "/get?page=2&q=swift%20linux")
        XCTAssertEqual((task?.response as? HTTPURLResponse)?.statusCode, 200)
    }
}
