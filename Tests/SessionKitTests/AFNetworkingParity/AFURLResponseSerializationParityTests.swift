import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Behaviours of AFNetworking 4.0.1's `AFURLResponseSerialization.m` that SessionKit once did differently, each
/// checked by name. The pure ones build responses by hand; the teapot ones ask the loopback server's `/status/418`.
final class AFURLResponseSerializationParityTests: LoopbackTestCase {
    private func response(_ status: Int, _ type: String?) -> HTTPURLResponse {
        HTTPURLResponse(
            url: URL(string: "http://h/x")!, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: type.map { ["Content-Type": $0] } ?? [:])!
    }

    /// The status error, with the content-type error as its underlying error, and nothing else.
    private func assertStatusErrorWithContentTypeUnderlying(
        _ error: Error, file: StaticString = #filePath, line: UInt = #line
    ) {
        let nsError = error as NSError
        XCTAssertEqual(nsError.domain, SessionKitError.responseSerializationDomain, file: file, line: line)
        XCTAssertEqual(nsError.code, URLError.badServerResponse.rawValue, "\(nsError)", file: file, line: line)
        let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError
        XCTAssertEqual(underlying?.domain, SessionKitError.responseSerializationDomain, file: file, line: line)
        XCTAssertEqual(underlying?.code, URLError.cannotDecodeContentData.rawValue, file: file, line: line)
        XCTAssertNil(underlying?.userInfo[NSUnderlyingErrorKey], "no decoding was attempted", file: file, line: line)
        XCTAssertNil(nsError.userInfo[SessionKitError.failingResponseObjectKey], file: file, line: line)
    }

    // AFURLResponseSerialization.m:63-88 (AFJSONObjectByRemovingKeysWithNullValues), :66-67 for arrays.
    func testRemovesNullElementsInsideArrays() throws {
        let serializer = JSONResponseSerializer()
        serializer.removesKeysWithNullValues = true
        let body = Data(#"{"list":[1,null,{"a":null,"b":2},[null,"x"]],"gone":null,"top":[null]}"#.utf8)
        let object = try XCTUnwrap(
            try serializer.responseObject(for: response(200, "application/json"), data: body)
                as? [String: Any])
        XCTAssertEqual(Set(object.keys), ["list", "top"])
        let list = try XCTUnwrap(object["list"] as? [Any])
        XCTAssertEqual(list.count, 3, "\(list)")
        XCTAssertEqual(list[0] as? Int, 1)
        XCTAssertEqual((list[1] as? [String: Int]) ?? [:], ["b": 2])
        XCTAssertEqual(list[2] as? [String], ["x"])
        XCTAssertEqual((object["top"] as? [Any])?.count, 0)

        let array = try serializer.responseObject(
            for: response(200, "application/json"), data: Data("[null,3,null]".utf8))
        XCTAssertEqual(array as? [Int], [3])
    }

    // AFURLResponseSerialization.m:239-243 (AFErrorOrUnderlyingErrorHasCodeInDomain at :53-61).
    func testStatusErrorWinsOverDecodingWhenBothValidationsFailForJSON() {
        let serializer = JSONResponseSerializer()
        let page = Data("<html><body>Not Found</body></html>".utf8)
        XCTAssertThrowsError(try serializer.responseObject(for: response(404, "text/html"), data: page)) {
            assertStatusErrorWithContentTypeUnderlying($0)
        }
    }

    // AFURLResponseSerialization.m:468-472.
    func testStatusErrorWinsOverDecodingWhenBothValidationsFailForPropertyList() {
        let serializer = PropertyListResponseSerializer()
        XCTAssertThrowsError(
            try serializer.responseObject(for: response(500, "text/html"), data: Data("<p>oops</p>".utf8))
        ) {
            assertStatusErrorWithContentTypeUnderlying($0)
        }
    }

    // The same rule for SessionKit's Decodable serializer, validating with the JSON content types.
    func testStatusErrorWinsOverDecodingWhenBothValidationsFailForDecodable() {
        struct Item: Decodable { let id: Int }
        let serializer = DecodableResponseSerializer(Item.self, validator: JSONResponseSerializer())
        XCTAssertThrowsError(
            try serializer.responseObject(for: response(502, "text/html"), data: Data("<p>bad gateway</p>".utf8))
        ) {
            assertStatusErrorWithContentTypeUnderlying($0)
        }
    }

    // AFURLResponseSerialization.m:163-170 and AFURLSessionManager.m:220-238: the HTTP serializer returns the body
    // next to the status error, and the manager hands both to the completion handler. The ninth behaviour of issue 15,
    // found with httpbin's /status/418 (a teapot drawing, no Content-Type).
    func testTeapotBodyReachesCompletionHandlerWithTheStatusError() async throws {
        let manager = makeManager()
        manager.responseSerializer = HTTPResponseSerializer()
        let request = URLRequest(url: server.url("/status/418"))
        let outcome: (response: URLResponse?, object: Any?, error: Error?) = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: request, completionHandler: { done(($0, $1, $2)) }))
        }
        let http = try XCTUnwrap(outcome.response as? HTTPURLResponse)
        XCTAssertEqual(http.statusCode, 418)
        XCTAssertNil(http.mimeType, "httpbin's teapot has no Content-Type")
        XCTAssertEqual(http.value(forHTTPHeaderField: "x-more-info"), "http://tools.ietf.org/html/rfc2324")
        let error = try XCTUnwrap(outcome.error as NSError?)
        XCTAssertEqual(error.code, URLError.badServerResponse.rawValue)
        let body = try XCTUnwrap(outcome.object as? Data, "the body comes with the error")
        XCTAssertTrue(String(decoding: body, as: UTF8.self).contains("teapot"))
        XCTAssertEqual(error.userInfo[SessionKitError.failingURLResponseDataKey] as? Data, body)
    }

    // The same teapot through the default JSON serializer: no Content-Type and a status failure give the status error
    // with the content-type error under it (AFURLResponseSerialization.m:117-151, :239-243), and no object.
    func testTeapotWithJSONSerializerFailsWithTheStatusError() async throws {
        let manager = makeManager()
        let request = URLRequest(url: server.url("/status/418"))
        let outcome: (response: URLResponse?, object: Any?, error: Error?) = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: request, completionHandler: { done(($0, $1, $2)) }))
        }
        XCTAssertNil(outcome.object)
        assertStatusErrorWithContentTypeUnderlying(try XCTUnwrap(outcome.error))
    }

    // AFURLResponseSerialization.m:239-269: a status failure alone still decodes the body, and the object goes with
    // the error to the completion handler and to the task-did-complete notification.
    func testDecodedErrorDocumentReachesCompletionHandlerWithTheStatusError() async throws {
        let manager = makeManager()
        let request = URLRequest(url: server.url("/flaky/\(UUID().uuidString)?failures=1&status=422"))
        let notified = expectation(forNotification: .sessionKitTaskDidComplete, object: nil) { note in
            (note.userInfo?[SessionKitNotificationKey.serializedResponse] as? [String: Any])?["attempt"] != nil
        }
        let outcome: (response: URLResponse?, object: Any?, error: Error?) = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: request, completionHandler: { done(($0, $1, $2)) }))
        }
        XCTAssertEqual((outcome.error as NSError?)?.code, URLError.badServerResponse.rawValue)
        let document = try XCTUnwrap(outcome.object as? [String: Any], "\(String(describing: outcome.object))")
        XCTAssertNotNil(document["attempt"])
        await fulfillment(of: [notified], timeout: 10)
    }
}
