import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Behaviours of AFNetworking 4.0.1's `AFURLRequestSerialization.m` that SessionKit once did differently, each
/// checked by name; pure.
final class AFURLRequestSerializationParityTests: XCTestCase {
    private struct BlockError: Error, Equatable { let tag: Int }

    // AFURLRequestSerialization.m:364 builds the URL with [NSURL URLWithString:], which takes a relative string, so
    // the query-string block still runs and its error is the one returned (:491-500).
    func testRelativeURLStringRunsQueryStringBlockAndReturnsItsError() {
        let serializer = HTTPRequestSerializer()
        let calls = CallCounter()
        serializer.setQueryStringSerialization { _, _ in
            calls.increment()
            throw BlockError(tag: 7)
        }
        XCTAssertThrowsError(try serializer.request(withMethod: "GET", urlString: "url", parameters: [String: Any]())) {
            XCTAssertEqual($0 as? BlockError, BlockError(tag: 7), "\($0)")
        }
        XCTAssertEqual(calls.count, 1)
    }

    func testRelativeURLStringGivesARequestWithThatURL() throws {
        let request = try HTTPRequestSerializer().request(withMethod: "GET", urlString: "users/1", parameters: ["a": 1])
        XCTAssertEqual(request.url?.absoluteString, "users/1?a=1")
        XCTAssertNil(request.url?.scheme)
        // What [NSURL URLWithString:] refuses is still refused.
        XCTAssertThrowsError(
            try HTTPRequestSerializer().request(withMethod: "GET", urlString: "http://[::1", parameters: nil))
    }

    // AFURLRequestSerialization.m:104-108 and :156-157: a value that is not a collection is one pair whose key is
    // nil, written as "=" and the value's description, percent-escaped.
    func testNonDictionaryParametersAreEncodedAsAPairWithAnEmptyKey() throws {
        let serializer = HTTPRequestSerializer()
        let post = try serializer.request(
            withMethod: "POST", urlString: "http://h/post", parameters: "AF Networking&=?")
        XCTAssertEqual(post.httpBody.map { String(decoding: $0, as: UTF8.self) }, "=AF%20Networking%26%3D?")
        XCTAssertEqual(post.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded")

        let get = try serializer.request(withMethod: "GET", urlString: "http://h/get", parameters: 42)
        XCTAssertEqual(get.url?.absoluteString, "http://h/get?=42")
    }
}
