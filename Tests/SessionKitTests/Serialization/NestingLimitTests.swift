import Foundation
import SessionKit
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Deeply nested input gives a clear error, never a stack overflow, even on a thread with a 512 KiB stack: every
/// case runs on such a thread, with input 100,000 levels deep, and one just under the limit still succeeds.
final class NestingLimitTests: XCTestCase {
    /// How deep the hostile inputs nest.
    private static let hostileDepth = 100_000
    private static let limit = HTTPRequestSerializer.maximumNestingDepth

    /// What a serializer call ended with, in a form that crosses threads.
    private struct Outcome: Sendable, CustomStringConvertible {
        var domain: String?
        var code: Int?
        var reason = ""
        var carriesResponseAndData = false
        var succeeded: Bool { domain == nil }
        var description: String { succeeded ? "success" : "\(domain ?? "") \(code ?? 0): \(reason)" }
    }

    /// Runs `body` on a thread of its own with a 512 KiB stack, as a caller's small worker thread would, and waits
    /// for it without blocking any other thread.
    private func onSmallStack(_ body: @escaping @Sendable () throws -> Void) async -> Outcome {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                var outcome = Outcome()
                do {
                    try body()
                } catch {
                    let nsError = error as NSError
                    outcome.domain = nsError.domain
                    outcome.code = nsError.code
                    outcome.reason = "\(error)"
                    outcome.carriesResponseAndData =
                        nsError.userInfo[SessionKitError.failingURLResponseKey] != nil
                        && nsError.userInfo[SessionKitError.failingURLResponseDataKey] != nil
                }
                continuation.resume(returning: outcome)
            }
            thread.stackSize = 512 * 1024
            thread.start()
        }
    }

    // MARK: - Deep values, built and taken apart without recursion

    /// `depth` arrays, one inside the other, around `1`.
    private static func nestedArrays(_ depth: Int) -> Any {
        var value: Any = 1
        for _ in 0..<depth { value = [value] }
        return value
    }

    /// `depth` dictionaries, one inside the other under the key `a`, around `1`.
    private static func nestedDictionaries(_ depth: Int) -> Any {
        var value: Any = 1
        for _ in 0..<depth { value = ["a": value] }
        return value
    }

    /// Releases a deep value one level at a time (releasing it at once recurses as deep as it nests).
    private static func dismantle(_ value: inout Any) {
        while true {
            if let array = value as? [Any], let inner = array.last {
                value = inner
            } else if let dictionary = value as? [String: Any], let inner = dictionary.first?.value {
                value = inner
            } else {
                return
            }
        }
    }

    private static func response(_ type: String) -> HTTPURLResponse? {
        URL(string: "http://h/x").flatMap {
            HTTPURLResponse(url: $0, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": type])
        }
    }

    private func assertRefused(_ outcome: Outcome, domain: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(outcome.domain, domain, "\(outcome)", file: file, line: line)
        XCTAssertTrue(outcome.reason.contains("nested more deeply than"), "\(outcome)", file: file, line: line)
    }

    // MARK: - Request serializers

    func testQueryStringOfDeepDictionaries() async {
        let deep = await onSmallStack {
            var parameters = Self.nestedDictionaries(Self.hostileDepth)
            defer { Self.dismantle(&parameters) }
            _ = try HTTPRequestSerializer().request(withMethod: "GET", urlString: "http://h/x", parameters: parameters)
        }
        assertRefused(deep, domain: SessionKitError.requestSerializationDomain)
        XCTAssertEqual(deep.code, URLError.cannotDecodeRawData.rawValue)

        let form = await onSmallStack {
            var parameters = Self.nestedArrays(Self.hostileDepth)
            defer { Self.dismantle(&parameters) }
            _ = try HTTPRequestSerializer().request(
                withMethod: "POST", urlString: "http://h/x", parameters: ["a": parameters])
        }
        assertRefused(form, domain: SessionKitError.requestSerializationDomain)

        let multipart = await onSmallStack {
            var parameters = Self.nestedDictionaries(Self.hostileDepth)
            defer { Self.dismantle(&parameters) }
            _ = try HTTPRequestSerializer().multipartFormRequest(
                withMethod: "POST", urlString: "http://h/x", parameters: ["a": parameters], constructingBodyWith: nil)
        }
        assertRefused(multipart, domain: SessionKitError.requestSerializationDomain)

        let underLimit = await onSmallStack {
            let request = try HTTPRequestSerializer().request(
                withMethod: "GET", urlString: "http://h/x", parameters: Self.nestedDictionaries(Self.limit))
            let query = request.url?.query ?? ""
            guard query.hasSuffix("=1"), query.components(separatedBy: "%5Ba%5D").count == Self.limit else {
                throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "unexpected query"])
            }
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    func testJSONRequestOfDeepArrays() async {
        let deep = await onSmallStack {
            var parameters = Self.nestedArrays(Self.hostileDepth)
            defer { Self.dismantle(&parameters) }
            _ = try JSONRequestSerializer().request(withMethod: "POST", urlString: "http://h/x", parameters: parameters)
        }
        assertRefused(deep, domain: SessionKitError.requestSerializationDomain)
        XCTAssertEqual(deep.code, URLError.cannotDecodeContentData.rawValue)

        let underLimit = await onSmallStack {
            let request = try JSONRequestSerializer().request(
                withMethod: "POST", urlString: "http://h/x", parameters: Self.nestedArrays(Self.limit))
            let expected = String(repeating: "[", count: Self.limit) + "1" + String(repeating: "]", count: Self.limit)
            guard request.httpBody == Data(expected.utf8) else {
                throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "unexpected body"])
            }
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    func testPropertyListRequestOfDeepArrays() async {
        let deep = await onSmallStack {
            var parameters = Self.nestedArrays(Self.hostileDepth)
            defer { Self.dismantle(&parameters) }
            _ = try PropertyListRequestSerializer().request(
                withMethod: "POST", urlString: "http://h/x", parameters: parameters)
        }
        assertRefused(deep, domain: SessionKitError.requestSerializationDomain)
        XCTAssertEqual(deep.code, URLError.cannotDecodeContentData.rawValue)

        let underLimit = await onSmallStack {
            let request = try PropertyListRequestSerializer().request(
                withMethod: "POST", urlString: "http://h/x", parameters: Self.nestedArrays(Self.limit))
            guard (request.httpBody?.count ?? 0) > Self.limit * 14 else {
                throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "no body"])
            }
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    func testLimitsAreTheSame() {
        XCTAssertEqual(HTTPRequestSerializer.maximumNestingDepth, 500)
        XCTAssertEqual(HTTPResponseSerializer.maximumNestingDepth, 500)
    }

    /// An `Encodable` parameter nested too deeply (a linked list of 100,000 nodes) is refused before it is encoded.
    func testEncodableParametersNestedTooDeeply() async {
        final class Node: Encodable, @unchecked Sendable {
            let next: Node?
            init(next: Node?) { self.next = next }
        }
        let deep = await onSmallStack {
            var head: Node? = nil
            for _ in 0..<Self.hostileDepth { head = Node(next: head) }
            defer {
                // Released one node at a time.
                while let node = head { head = node.next }
            }
            _ = try JSONRequestSerializer().request(withMethod: "POST", urlString: "http://h/x", parameters: head)
        }
        assertRefused(deep, domain: SessionKitError.requestSerializationDomain)
    }

    // MARK: - Response serializers

    func testJSONResponseOfDeepArrays() async {
        for removesNulls in [false, true] {
            let deep = await onSmallStack {
                let serializer = JSONResponseSerializer()
                serializer.removesKeysWithNullValues = removesNulls
                let body = Data(repeating: UInt8(ascii: "["), count: Self.hostileDepth)
                _ = try serializer.responseObject(for: Self.response("application/json"), data: body)
            }
            assertRefused(deep, domain: SessionKitError.responseSerializationDomain)
            XCTAssertEqual(deep.code, URLError.cannotDecodeContentData.rawValue)
            XCTAssertTrue(deep.carriesResponseAndData, "\(deep)")

            let underLimit = await onSmallStack {
                let serializer = JSONResponseSerializer()
                serializer.removesKeysWithNullValues = removesNulls
                let text =
                    String(repeating: "[null,{\"a\":", count: Self.limit / 2) + "1"
                    + String(repeating: "}]", count: Self.limit / 2)
                var object =
                    try serializer.responseObject(for: Self.response("application/json"), data: Data(text.utf8)) as Any
                Self.dismantle(&object)
                guard object as? Int == 1 else {
                    throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "unexpected object"])
                }
            }
            XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
        }
    }

    func testDecodableResponseOfDeepArrays() async {
        struct Deep: Decodable {
            init(from decoder: Decoder) throws {
                var container = try decoder.unkeyedContainer()
                while !container.isAtEnd { _ = try container.decode(Deep.self) }
            }
        }
        let deep = await onSmallStack {
            let body = Data(repeating: UInt8(ascii: "["), count: Self.hostileDepth)
            _ = try DecodableResponseSerializer(Deep.self).responseObject(
                for: Self.response("application/json"), data: body)
        }
        assertRefused(deep, domain: SessionKitError.responseSerializationDomain)
        XCTAssertTrue(deep.carriesResponseAndData, "\(deep)")

        let underLimit = await onSmallStack {
            let text = String(repeating: "[", count: Self.limit) + String(repeating: "]", count: Self.limit)
            _ = try DecodableResponseSerializer(Deep.self).responseObject(
                for: Self.response("application/json"), data: Data(text.utf8))
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    func testPropertyListResponseOfDeepArrays() async {
        let xml = await onSmallStack {
            let body = Data(
                (String(repeating: "<array>", count: Self.hostileDepth)
                    + String(repeating: "</array>", count: Self.hostileDepth)).utf8)
            _ = try PropertyListResponseSerializer().responseObject(
                for: Self.response("application/x-plist"), data: body)
        }
        assertRefused(xml, domain: SessionKitError.responseSerializationDomain)
        XCTAssertTrue(xml.carriesResponseAndData, "\(xml)")

        let binary = await onSmallStack {
            _ = try PropertyListResponseSerializer().responseObject(
                for: Self.response("application/x-plist"), data: Self.deepBinaryPropertyList(Self.hostileDepth))
        }
        assertRefused(binary, domain: SessionKitError.responseSerializationDomain)

        let underLimit = await onSmallStack {
            let text =
                String(repeating: "<dict><key>a</key><array>", count: Self.limit / 2) + "<true/>"
                + String(repeating: "</array></dict>", count: Self.limit / 2)
            var object =
                try PropertyListResponseSerializer().responseObject(
                    for: Self.response("application/x-plist"), data: Data(text.utf8)) as Any
            Self.dismantle(&object)
            var binary =
                try PropertyListResponseSerializer().responseObject(
                    for: Self.response("application/x-plist"), data: Self.deepBinaryPropertyList(Self.limit)) as Any
            Self.dismantle(&binary)
            guard object as? Bool == true, binary as? Bool == true else {
                throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "unexpected object"])
            }
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    /// The XML serializer counts the elements' depth before it hands over a parser: past the limit, the body is
    /// refused (the parser would hold every open element); within it, the parser parses.
    func testXMLResponseOfDeepElements() async {
        @Sendable func document(_ depth: Int, open: String = "<a>", close: String = "</a>") -> Data {
            Data((String(repeating: open, count: depth) + String(repeating: close, count: depth)).utf8)
        }
        let deep = await onSmallStack {
            _ = try XMLParserResponseSerializer().responseObject(
                for: Self.response("application/xml"), data: document(Self.hostileDepth))
        }
        assertRefused(deep, domain: SessionKitError.responseSerializationDomain)
        XCTAssertTrue(deep.carriesResponseAndData, "\(deep)")
        let justPast = await onSmallStack {
            _ = try XMLParserResponseSerializer().responseObject(
                for: Self.response("application/xml"), data: document(Self.limit + 1, open: "<a x='>/'>"))
        }
        assertRefused(justPast, domain: SessionKitError.responseSerializationDomain)

        let underLimit = await onSmallStack {
            // What counts nothing: empty elements, comments, CDATA, processing instructions, a `>` or `/` in a value.
            let noise = "<b/><!-- <c> --><![CDATA[<d>]]><?pi <e>?><f g=\"/>\" h='>'/>"
            let body = document(Self.limit, open: "<a k=\"v>\">" + noise, close: noise + "</a>")
            let parser =
                try XMLParserResponseSerializer().responseObject(for: Self.response("application/xml"), data: body)
                as? XMLParser
            // With a delegate, as a caller parses: without one, Foundation's parser stops near 256 levels.
            let delegate = IgnoringXMLDelegate()
            parser?.delegate = delegate
            guard let parser, parser.parse() else {
                throw NSError(
                    domain: "test", code: 1,
                    userInfo: [NSLocalizedDescriptionKey: "no parse: \(String(describing: parser?.parserError))"])
            }
        }
        XCTAssertTrue(underLimit.succeeded, "\(underLimit)")
    }

    // MARK: - Archives

    func testArchiveOfDeepArrays() async {
        let deep = await onSmallStack {
            _ = try SecureArchive.unarchive(
                HTTPRequestSerializer.self, from: Self.deepBinaryPropertyList(Self.hostileDepth))
        }
        XCTAssertNotNil(deep.domain, "\(deep)")
        XCTAssertTrue(deep.reason.contains("nested more deeply than"), "\(deep)")
    }

    /// A binary property list of `depth` one-element arrays around `true`: object `i` is an array holding object
    /// `i + 1`, the last is `true`.
    private static func deepBinaryPropertyList(_ depth: Int) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for index in 0..<depth {
            offsets.append(bytes.count)
            bytes.append(0xA1)  // an array of one reference
            let next = UInt32(index + 1)
            bytes += [UInt8(next >> 24), UInt8(next >> 16 & 0xFF), UInt8(next >> 8 & 0xFF), UInt8(next & 0xFF)]
        }
        offsets.append(bytes.count)
        bytes.append(0x09)  // true
        let tableOffset = bytes.count
        for offset in offsets {
            let value = UInt32(offset)
            bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
        func bigEndian64(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8(value >> ($0 * 8) & 0xFF) } }
        bytes += [0, 0, 0, 0, 0, 0, 4, 4] + bigEndian64(offsets.count) + bigEndian64(0) + bigEndian64(tableOffset)
        return Data(bytes)
    }
}

/// A delegate that takes every event and keeps nothing.
private final class IgnoringXMLDelegate: NSObject, XMLParserDelegate {}
