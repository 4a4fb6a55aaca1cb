import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// AFNetworking's query and form encoding, headers and request properties; pure, no network.
final class HTTPRequestSerializerTests: XCTestCase {
    private let serializer = HTTPRequestSerializer()

    func testQueryPairsAreSortedAndNested() throws {
        let query = HTTPRequestSerializer.queryString(from: [
            "b": "2", "a": "1", "nested": ["y": "2", "x": "1"], "list": ["p", "q"],
        ])
        XCTAssertEqual(query, "a=1&b=2&list%5B%5D=p&list%5B%5D=q&nested%5Bx%5D=1&nested%5By%5D=2")
    }

    func testNullBoolAndNumbers() {
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["n": NSNull()]), "n")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["t": true, "f": false]), "f=0&t=1")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["i": 42, "d": 2.5]), "d=2.5&i=42")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["one": 1]), "one=1", "1 is a number, not true")
    }

    /// AFNetworking reads every value through Objective-C: a floating-point number is `NSNumber`'s `description`.
    func testFloatingPointNumbersReadAsNSNumberWritesThem() {
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["price": 10.0]), "price=10")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["x": 0.1 + 0.2]), "x=0.3")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["f": Float(0.1)]), "f=0.1")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["n": NSNumber(value: 10.0)]), "n=10")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["big": 1e20]), "big=1e%2B20")
        XCTAssertEqual(
            HTTPRequestSerializer.queryString(from: ["d": Decimal(string: "0.1000000000000000055511")!]),
            "d=0.1000000000000000055511", "a Decimal keeps its digits")
    }

    /// AFNetworking sorts keys with `NSString`'s `compare:`: an accented letter sorts with its base letter.
    func testKeysSortAsNSStringComparesThem() {
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["z": "1", "é": "2"]), "%C3%A9=2&z=1")
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["a": "1", "B": "2", "_": "3"]), "B=2&_=3&a=1")
    }

    func testSetsGiveSortedMembersUnderTheSameKey() {
        XCTAssertEqual(HTTPRequestSerializer.queryString(from: ["s": Set(["c", "a", "b"])]), "s=a&s=b&s=c")
    }

    func testPercentEscapingKeepsQuestionMarkAndSlash() {
        XCTAssertEqual(HTTPRequestSerializer.percentEscapedString("a b/c?d"), "a%20b/c?d")
        XCTAssertEqual(
            HTTPRequestSerializer.percentEscapedString(":#[]@!$&'()*+,;="),
            "%3A%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D")
    }

    func testEscapingNeverSplitsEmoji() throws {
        let emoji = String(repeating: "👴🏿👷🏻‍♀️🇳🇿", count: 40)
        let escaped = HTTPRequestSerializer.percentEscapedString(emoji)
        XCTAssertEqual(escaped.removingPercentEncoding, emoji)
    }

    func testGETPutsParametersInTheQueryAfterAnExistingOne() throws {
        let request = try serializer.request(withMethod: "GET", urlString: "http://h/p?x=1", parameters: ["a": "b"])
        XCTAssertEqual(request.url?.absoluteString, "http://h/p?x=1&a=b")
        XCTAssertNil(request.httpBody)
        let empty = try serializer.request(withMethod: "GET", urlString: "http://h/p", parameters: [String: Any]())
        XCTAssertEqual(empty.url?.absoluteString, "http://h/p", "no '?' for an empty query")
    }

    func testPOSTPutsParametersInAFormBody() throws {
        let request = try serializer.request(withMethod: "POST", urlString: "http://h/p", parameters: ["a": "b c"])
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/x-www-form-urlencoded")
        XCTAssertEqual(request.httpBody, Data("a=b%20c".utf8))
        let none = try serializer.request(withMethod: "POST", urlString: "http://h/p", parameters: nil)
        XCTAssertEqual(none.httpBody, Data(), "nil parameters give an empty, non-nil body")
    }

    func testExistingHeadersAreNeverOverwritten() throws {
        serializer.setValue("serializer", forHTTPHeaderField: "X-A")
        var request = URLRequest(url: URL(string: "http://h/")!)
        request.setValue("request", forHTTPHeaderField: "x-a")
        let serialized = try serializer.request(bySerializingRequest: request, withParameters: nil)
        XCTAssertEqual(serialized.value(forHTTPHeaderField: "X-A"), "request")
    }

    func testDefaultHeaders() {
        let agent = serializer.value(forHTTPHeaderField: "User-Agent") ?? ""
        XCTAssertTrue(agent.contains("(Linux "), agent)
        XCTAssertTrue(agent.hasSuffix("SessionKit/\(SessionKitVersion.current)"), agent)
    }

    func testAcceptLanguageHasFallingQValues() throws {
        guard let header = serializer.value(forHTTPHeaderField: "Accept-Language") else {
            XCTAssertTrue(Locale.preferredLanguages.isEmpty, "a preferred language must give the header")
            return
        }
        let entries = header.components(separatedBy: ", ")
        XCTAssertLessThanOrEqual(entries.count, 6)
        for (index, entry) in entries.enumerated() {
            let q = index == 0 ? "1" : String(format: "%.1f", 1 - Double(index) * 0.1)
            XCTAssertTrue(entry.hasSuffix(";q=\(q)"), header)
        }
        XCTAssertEqual(entries.first, Locale.preferredLanguages.first.map { "\($0);q=1" })
    }

    func testBasicAuthorization() {
        serializer.setAuthorizationHeaderField(username: "user", password: "pass")
        XCTAssertEqual(serializer.value(forHTTPHeaderField: "authorization"), "Basic dXNlcjpwYXNz")
        serializer.clearAuthorizationHeader()
        XCTAssertNil(serializer.value(forHTTPHeaderField: "Authorization"))
    }

    func testCustomQueryStringClosureAndItsError() throws {
        serializer.setQueryStringSerialization { _, _ in "custom=1" }
        let request = try serializer.request(withMethod: "GET", urlString: "http://h/", parameters: ["a": "b"])
        XCTAssertEqual(request.url?.query, "custom=1")
        struct Refused: Error {}
        serializer.setQueryStringSerialization { _, _ in throw Refused() }
        XCTAssertThrowsError(try serializer.request(withMethod: "GET", urlString: "http://h/", parameters: ["a": "b"]))
        {
            XCTAssertTrue($0 is Refused)
        }
    }

    func testRequestPropertiesAppliedOnlyWhenSet() throws {
        let plain = try serializer.request(withMethod: "GET", urlString: "http://h/", parameters: nil)
        XCTAssertEqual(plain.timeoutInterval, URLRequest(url: URL(string: "http://h/")!).timeoutInterval)
        serializer.timeoutInterval = 7
        serializer.cachePolicy = .reloadIgnoringLocalCacheData
        serializer.httpShouldHandleCookies = false
        let configured = try serializer.request(withMethod: "GET", urlString: "http://h/", parameters: nil)
        XCTAssertEqual(configured.timeoutInterval, 7)
        XCTAssertEqual(configured.cachePolicy, .reloadIgnoringLocalCacheData)
        XCTAssertFalse(configured.httpShouldHandleCookies)
    }

    func testInvalidURLFailsInTheRequestSerializationDomain() {
        // A string `URL(string:)` refuses (a relative reference is accepted, as AFNetworking accepts it).
        XCTAssertThrowsError(try serializer.request(withMethod: "GET", urlString: "http://[::1", parameters: nil)) {
            XCTAssertEqual(($0 as NSError).domain, SessionKitError.requestSerializationDomain)
        }
    }

    func testJSONSerializerRefusesInvalidJSON() throws {
        let json = JSONRequestSerializer()
        let request = try json.request(withMethod: "POST", urlString: "http://h/", parameters: ["a": [1, 2]])
        XCTAssertEqual(request.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertEqual(
            try JSONSerialization.jsonObject(with: request.httpBody ?? Data()) as? NSDictionary, ["a": [1, 2]])
        XCTAssertThrowsError(try json.request(withMethod: "POST", urlString: "http://h/", parameters: ["d": Date()])) {
            let error = $0 as NSError
            XCTAssertEqual(error.domain, SessionKitError.requestSerializationDomain)
            XCTAssertEqual(error.code, URLError.cannotDecodeContentData.rawValue)
            XCTAssertTrue(error.localizedDescription.contains("not valid JSON"))
        }
        let get = try json.request(withMethod: "GET", urlString: "http://h/", parameters: ["a": "b"])
        XCTAssertEqual(get.url?.query, "a=b", "URI methods still use the query string")
    }
}

/// Validation and JSON decoding of responses; pure, no network.
final class ResponseSerializerTests: XCTestCase {
    private func response(_ status: Int, _ type: String? = "application/json") -> HTTPURLResponse {
        HTTPURLResponse(
            url: URL(string: "http://h/x")!, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: type.map { ["Content-Type": $0] } ?? [:])!
    }

    func testEveryStatusAgainstTheDefaultSet() {
        let serializer = HTTPResponseSerializer()
        for status in 100...599 {
            let passes = (try? serializer.validate(response: response(status), data: Data("x".utf8))) != nil
            XCTAssertEqual(passes, (200..<300).contains(status), "status \(status)")
        }
    }

    func testStatusFailureCarriesEvidence() {
        let data = Data("{\"error\":\"nope\"}".utf8)
        XCTAssertThrowsError(try JSONResponseSerializer().responseObject(for: response(404), data: data)) {
            let error = $0 as NSError
            XCTAssertEqual(error.code, URLError.badServerResponse.rawValue)
            XCTAssertEqual(error.userInfo[SessionKitError.failingURLResponseDataKey] as? Data, data)
            XCTAssertNotNil(error.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)
            XCTAssertEqual(error.userInfo[NSURLErrorFailingURLErrorKey] as? URL, URL(string: "http://h/x"))
            XCTAssertEqual(
                (error.userInfo[JSONResponseSerializer.failingResponseObjectKey] as? [String: String])?["error"], "nope"
            )
        }
    }

    func testContentTypeCheckedOnlyWithABody() throws {
        let serializer = JSONResponseSerializer()
        XCTAssertNil(try serializer.responseObject(for: response(205, "text/html"), data: Data()))
        XCTAssertThrowsError(try serializer.responseObject(for: response(200, "text/html"), data: Data("<p>".utf8))) {
            XCTAssertEqual(($0 as NSError).code, URLError.cannotDecodeContentData.rawValue)
        }
    }

    func testEmptySpaceAnd204GiveNil() throws {
        let serializer = JSONResponseSerializer()
        XCTAssertNil(try serializer.responseObject(for: response(200), data: Data()))
        XCTAssertNil(try serializer.responseObject(for: response(200), data: Data(" ".utf8)))
        XCTAssertNil(try serializer.responseObject(for: response(204), data: Data("{}".utf8)))
    }

    func testInvalidJSONFails() {
        XCTAssertThrowsError(try JSONResponseSerializer().responseObject(for: response(200), data: Data("{nope".utf8)))
        {
            XCTAssertEqual(($0 as NSError).domain, SessionKitError.responseSerializationDomain)
        }
    }

    func testRemovesNullsRecursively() throws {
        let serializer = JSONResponseSerializer()
        serializer.removesKeysWithNullValues = true
        let data = Data(#"{"a":null,"b":{"c":null,"d":1},"e":[{"f":null,"g":2}]}"#.utf8)
        let object = try XCTUnwrap(serializer.responseObject(for: response(200), data: data) as? [String: Any])
        XCTAssertNil(object["a"])
        XCTAssertEqual((object["b"] as? [String: Any])?.keys.sorted(), ["d"])
        XCTAssertEqual(((object["e"] as? [[String: Any]])?.first)?.keys.sorted(), ["g"])
    }
}
