import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Behaviours of AFNetworking 4.0.1's `AFHTTPSessionManager.m` that SessionKit once did differently, each checked
/// by name, end to end on the loopback server (on the transport `SESSIONKIT_TEST_TRANSPORT` selects).
final class AFHTTPSessionManagerParityTests: LoopbackTestCase {
    private func send(
        _ start: (@escaping (URLSessionDataTask, Any?) -> Void, @escaping (URLSessionDataTask?, Error) -> Void) ->
            URLSessionDataTask?
    ) async throws -> (task: URLSessionDataTask?, object: Any?, error: Error?) {
        try await awaitCallback { done in
            _ = start({ task, object in done((task, object, nil)) }, { task, error in done((task, nil, error)) })
        }
    }

    // AFHTTPSessionManager.m:262: [NSURL URLWithString:@"" relativeToURL:baseURL] is the base URL.
    func testEmptyPathIsTheBaseURL() async throws {
        let manager = HTTPSessionManager(baseURL: server.url("/anything/v1"))
        manager.transport = Self.testTransport
        let result = try await send { success, failure in
            manager.get("", parameters: ["page": 2], headers: nil, progress: nil, success: success, failure: failure)
        }
        XCTAssertNil(result.error)
        XCTAssertEqual(server.requests.last?.uri, "/anything/v1/?page=2")
        XCTAssertEqual(
            result.task?.originalRequest?.url?.absoluteString, server.url("/anything/v1/?page=2").absoluteString)
    }

    // AFURLRequestSerialization.m:104-108, :157, through POST: a string parameter is the body "=<escaped string>".
    func testStringParametersArePostedAsAPairWithAnEmptyKey() async throws {
        let manager = makeManager()
        let result = try await send { success, failure in
            manager.post(
                "/post", parameters: "AFNetworking rocks", headers: nil, progress: nil,
                success: success, failure: failure)
        }
        XCTAssertNil(result.error)
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(String(decoding: recorded.body, as: UTF8.self), "=AFNetworking%20rocks")
        XCTAssertEqual(recorded.header("Content-Type"), "application/x-www-form-urlencoded")
    }
}
