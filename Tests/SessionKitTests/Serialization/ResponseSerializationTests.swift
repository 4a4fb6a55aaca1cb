import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The XML, property-list, compound and Decodable serializers, and the validation rules they share; pure.
final class ResponseSerializerKindsTests: XCTestCase {
    private func response(_ status: Int, _ type: String? = "application/json") -> HTTPURLResponse {
        HTTPURLResponse(
            url: URL(string: "http://h/x")!, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: type.map { ["Content-Type": $0] } ?? [:])!
    }

    func testContentTypeRules() {
        let serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = ["application/json"]
        XCTAssertNoThrow(
            try serializer.validate(response: response(200, "application/json; charset=utf-8"), data: Data("x".utf8)))
        XCTAssertNoThrow(try serializer.validate(response: response(200, "APPLICATION/JSON"), data: Data("x".utf8)))
        XCTAssertThrowsError(try serializer.validate(response: response(200, "text/plain"), data: Data("x".utf8))) {
            let error = $0 as NSError
            XCTAssertEqual(error.code, URLError.cannotDecodeContentData.rawValue)
            XCTAssertTrue(error.localizedDescription.contains("text/plain"), error.localizedDescription)
        }
        XCTAssertThrowsError(try serializer.validate(response: response(200, nil), data: Data("x".utf8)))
        serializer.acceptableContentTypes = nil
        XCTAssertNoThrow(try serializer.validate(response: response(200, "anything/else"), data: Data("x".utf8)))
    }

    func testStatusAndTypeFailuresChain() {
        let serializer = JSONResponseSerializer()
        XCTAssertThrowsError(try serializer.validate(response: response(500, "text/html"), data: Data("<p>".utf8))) {
            let error = $0 as NSError
            XCTAssertEqual(error.code, URLError.badServerResponse.rawValue)
            XCTAssertTrue(error.localizedDescription.contains("500"), error.localizedDescription)
            let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError
            XCTAssertEqual(underlying?.code, URLError.cannotDecodeContentData.rawValue)
        }
    }

    func testCustomStatusCodesAndNilAcceptsAll() {
        let serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes = IndexSet([200, 304])
        XCTAssertNoThrow(try serializer.validate(response: response(304), data: nil))
        XCTAssertThrowsError(try serializer.validate(response: response(201), data: nil))
        serializer.acceptableStatusCodes = nil
        XCTAssertNoThrow(try serializer.validate(response: response(599), data: nil))
    }

    func testNonHTTPResponsePassesValidation() throws {
        let plain = URLResponse(
            url: URL(string: "file:///x")!, mimeType: "text/plain", expectedContentLength: 1, textEncodingName: nil)
        XCTAssertEqual(
            try HTTPResponseSerializer().responseObject(for: plain, data: Data("x".utf8)) as? Data, Data("x".utf8))
    }

    func testInvalidJSONWrapsTheValidationError() {
        XCTAssertThrowsError(try JSONResponseSerializer().responseObject(for: response(500), data: Data("{oops".utf8)))
        {
            let error = $0 as NSError
            XCTAssertEqual(error.code, URLError.cannotDecodeContentData.rawValue)
            XCTAssertEqual(
                (error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code, URLError.badServerResponse.rawValue)
        }
    }

    /// RFC 8259 allows no comma before `]` or `}`; Foundation's parser on Linux accepts one (JSONTestSuite's
    /// `n_array_extra_comma`, `n_object_trailing_comma`), Apple's refuses it. A comma inside a string is text.
    func testJSONWithATrailingCommaIsRefused() throws {
        for text in ["[1,]", "[\"\",]", "{\"id\":0,}", "{\"a\":[1, 2 ,\n ]}"] {
            XCTAssertThrowsError(
                try JSONResponseSerializer().responseObject(for: response(200), data: Data(text.utf8)), text)
            XCTAssertThrowsError(
                try DecodableResponseSerializer([Int].self).responseObject(for: response(200), data: Data(text.utf8)),
                text)
        }
        let fine = try JSONResponseSerializer().responseObject(
            for: response(200), data: Data("[\"a,]\", {\"b\": \",}\"}]".utf8))
        XCTAssertEqual((fine as? [Any])?.count, 2)
    }

    /// A body in UTF-16 is scanned as its characters: U+2200's bytes hold a `"` that must not hide the nesting.
    func testTheNestingOfUTF16JSONIsCounted() {
        let text = "[\"\u{2200}\"," + String(repeating: "[", count: 505) + String(repeating: "]", count: 505) + "]"
        let data = text.data(using: .utf16LittleEndian) ?? Data()
        XCTAssertThrowsError(try JSONResponseSerializer().responseObject(for: response(200), data: data)) {
            XCTAssertTrue(($0 as NSError).localizedDescription.contains("nested more deeply"), "\($0)")
        }
    }

    func testJSONReadingOptionsAllowFragments() throws {
        XCTAssertThrowsError(try JSONResponseSerializer().responseObject(for: response(200), data: Data("42".utf8)))
        let fragments = JSONResponseSerializer(readingOptions: [.fragmentsAllowed])
        XCTAssertEqual(try fragments.responseObject(for: response(200), data: Data("42".utf8)) as? Int, 42)
    }

    func testJSONAcceptsItsThreeContentTypes() throws {
        for type in ["application/json", "text/json", "text/javascript"] {
            XCTAssertNotNil(
                try JSONResponseSerializer().responseObject(for: response(200, type), data: Data("{}".utf8)))
        }
    }

    func testHugeJSONBody() throws {
        let count = 200_000
        let data = Data(("[" + (0..<count).map { "{\"i\":\($0)}" }.joined(separator: ",") + "]").utf8)
        let array = try XCTUnwrap(
            JSONResponseSerializer().responseObject(for: response(200), data: data) as? [[String: Int]])
        XCTAssertEqual(array.count, count)
        XCTAssertEqual(array.last?["i"], count - 1)
    }

    func testNestedNullsInArraysOfArrays() throws {
        let serializer = JSONResponseSerializer()
        serializer.removesKeysWithNullValues = true
        let data = Data(#"[[{"a":null,"b":[{"c":null,"d":[null]}]}]]"#.utf8)
        let object = try XCTUnwrap(serializer.responseObject(for: response(200), data: data) as? [[[String: Any]]])
        let inner = try XCTUnwrap(object.first?.first)
        XCTAssertNil(inner["a"])
        let b = try XCTUnwrap(inner["b"] as? [[String: Any]])
        XCTAssertNil(b.first?["c"])
        XCTAssertEqual((b.first?["d"] as? [Any])?.count, 0, "nulls inside arrays go too, as in AFNetworking")
    }

    func testXMLSerializerReturnsAParser() throws {
        let xml = Data("<?xml version=\"1.0\"?><a><b>text</b></a>".utf8)
        let parser = try XCTUnwrap(
            XMLParserResponseSerializer().responseObject(for: response(200, "text/xml"), data: xml) as? XMLParser)
        final class Names: NSObject, XMLParserDelegate {
            var names: [String] = []
            func parser(
                _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]
            ) { names.append(name) }
        }
        let delegate = Names()
        parser.delegate = delegate
        XCTAssertTrue(parser.parse())
        XCTAssertEqual(delegate.names, ["a", "b"])
        XCTAssertNil(
            try XMLParserResponseSerializer().responseObject(for: response(200, "application/xml"), data: Data()))
        XCTAssertThrowsError(
            try XMLParserResponseSerializer().responseObject(for: response(200, "application/json"), data: xml))
    }

    func testXMLInADeclaredEncodingIsConvertedAndBrokenBytesAreRefused() throws {
        let latin1 = Data("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>caf\u{e9}</a>".data(using: .isoLatin1)!)
        let parser = try XCTUnwrap(
            XMLParserResponseSerializer().responseObject(for: response(200, "text/xml"), data: latin1) as? XMLParser)
        final class Text: NSObject, XMLParserDelegate {
            var text = ""
            func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
        }
        let delegate = Text()
        parser.delegate = delegate
        XCTAssertTrue(parser.parse())
        XCTAssertEqual(delegate.text, "caf\u{e9}")
        // Found by the fuzzer: a broken declaration and a name that is not UTF-8 crash XMLParser on Linux.
        let broken =
            Data("<?xml version=\"1.0\" encoding=\\UTF-8\"?><plist><array><".utf8) + Data([0xE2])
            + Data("nteger>1</integer></array></plist>".utf8)
        XCTAssertThrowsError(
            try XMLParserResponseSerializer().responseObject(for: response(200, "text/xml"), data: broken)
        ) {
            XCTAssertEqual(($0 as NSError).code, URLError.cannotDecodeContentData.rawValue)
        }
    }

    func testXMLConstructsThatCrashXMLParserAreRefused() throws {
        let cases = [
            "<?xml version=\"1.0\"?><a><?x?></a>",  // a processing instruction without data
            "<?x?><a/>",
            "<!DOCTYPE a [<!NOTATION n SYSTEM \"x\">]><a/>",  // an internal DTD subset
            // … behind a `>` inside a quoted literal (a probe's input: the subset reached XMLParser, which crashed).
            "<?xml version=\"1.0\"?><!DOCTYPE a SYSTEM \"x>\" [<!ATTLIST a b CDATA #IMPLIED>]><a>t</a>",
            "<!DOCTYPE a PUBLIC 'p>\"' \"s>\" [<!NOTATION n PUBLIC \"p\">]><a/>",
            "<!doctype a system 'x>'[<!ENTITY e SYSTEM \"s\">]><a/>",
        ]
        for text in cases {
            XCTAssertThrowsError(
                try XMLParserResponseSerializer().responseObject(for: response(200, "text/xml"), data: Data(text.utf8)),
                text)
        }
        let plistDoctype =
            "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\"><plist><true/></plist>"
        XCTAssertEqual(
            try PropertyListResponseSerializer().responseObject(
                for: response(200, "application/x-plist"), data: Data(plistDoctype.utf8)) as? Bool, true)
        // A `[` inside a literal is the literal's, not a subset.
        let bracketInLiteral = "<!DOCTYPE a SYSTEM \"x[1].dtd\"><a>t</a>"
        XCTAssertNotNil(
            try XMLParserResponseSerializer().responseObject(
                for: response(200, "text/xml"), data: Data(bracketInLiteral.utf8)))
        let stylesheet = "<?xml version=\"1.0\"?><?xml-stylesheet href=\"s.xsl\"?><rss/>"
        XCTAssertNotNil(
            try XMLParserResponseSerializer().responseObject(
                for: response(200, "text/xml"), data: Data(stylesheet.utf8)))
    }

    /// The XML depth limit counts elements only: what looks like a tag inside a value, a comment, a CDATA section, a
    /// processing instruction or a declaration neither deepens nor closes anything, and a stray end tag grants no
    /// extra depth.
    func testXMLDepthCountsElementsOnly() throws {
        let limit = HTTPResponseSerializer.maximumNestingDepth
        func parses(_ text: String) throws -> Bool {
            do {
                return try XMLParserResponseSerializer().responseObject(
                    for: response(200, "text/xml"), data: Data(text.utf8)) is XMLParser
            } catch {
                XCTAssertEqual((error as NSError).code, URLError.cannotDecodeContentData.rawValue)
                return false
            }
        }
        let open = String(repeating: "<a>", count: limit)
        let close = String(repeating: "</a>", count: limit)
        let inner = String(repeating: "<a>", count: limit - 1)
        let innerClose = String(repeating: "</a>", count: limit - 1)
        for noise in ["<b/>", "<!-- <c> -->", "<![CDATA[<d>]]>", "<?pi <e>?>", "<f g=\"/>\" h='>'/>"] {
            XCTAssertTrue(try parses("<r>" + noise + inner + noise + innerClose + noise + "</r>"), noise)
        }
        for prolog in ["<!-- <c> -->", "<?pi <e>?>", "<!DOCTYPE r SYSTEM \"<y>\">"] {
            XCTAssertTrue(try parses(prolog + open + close), prolog)
        }
        XCTAssertTrue(try parses("<r>" + inner + innerClose + inner + innerClose + "</r>"), "siblings do not add up")
        XCTAssertFalse(try parses(open + "<a>" + "</a>" + close), "one past the limit")
        XCTAssertFalse(
            try parses(String(repeating: "<a x=\"</a>\">", count: limit + 1)),
            "an end tag inside a value closes nothing")
        XCTAssertFalse(
            try parses(String(repeating: "</a>", count: 10) + open + "<a>"), "a stray end tag grants no depth")
        XCTAssertFalse(try parses(open + "<!-- --></a>" + "<a><a>"), "a comment ends where it ends")
    }

    func testPropertyListSerializerReadsXMLAndBinary() throws {
        let value: [String: Any] = ["a": [1, 2], "b": "text"]
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let data = try PropertyListSerialization.data(fromPropertyList: value, format: format, options: 0)
            let object = try PropertyListResponseSerializer().responseObject(
                for: response(200, "application/x-plist"), data: data)
            XCTAssertEqual((object as? [String: Any])?["b"] as? String, "text")
        }
        XCTAssertThrowsError(
            try PropertyListResponseSerializer().responseObject(
                for: response(200, "application/x-plist"), data: Data("not a plist".utf8))
        ) {
            XCTAssertEqual(($0 as NSError).code, URLError.cannotDecodeContentData.rawValue)
        }
        XCTAssertNil(
            try PropertyListResponseSerializer().responseObject(for: response(200, "application/x-plist"), data: Data())
        )
    }

    func testCompoundFirstSuccessWins() throws {
        let compound = CompoundResponseSerializer(responseSerializers: [
            JSONResponseSerializer(), XMLParserResponseSerializer(),
        ])
        XCTAssertTrue(
            try compound.responseObject(for: response(200, "application/json"), data: Data("{}".utf8)) is [String: Any])
        XCTAssertTrue(try compound.responseObject(for: response(200, "text/xml"), data: Data("<a/>".utf8)) is XMLParser)
        // Nobody takes text/html: the base behaviour returns the data (any content type is accepted by default).
        XCTAssertEqual(
            try compound.responseObject(for: response(200, "text/html"), data: Data("<p>".utf8)) as? Data,
            Data("<p>".utf8))
        XCTAssertThrowsError(try compound.responseObject(for: response(404, "text/html"), data: Data("<p>".utf8)))
        // A component that decodes a body whose status it refuses: its object comes with the status error.
        XCTAssertThrowsError(
            try compound.responseObject(for: response(404, "application/json"), data: Data(#"{"e":1}"#.utf8))
        ) { error in
            let object = (error as NSError).userInfo[SessionKitError.failingResponseObjectKey]
            XCTAssertEqual((object as? [String: Any])?["e"] as? Int, 1, "the decoded document, not the bytes")
            XCTAssertEqual((error as NSError).code, NSURLErrorBadServerResponse)
        }
    }

    func testDecodableFailureNamesKeyPathAndReason() {
        struct Item: Decodable { let id: Int }
        struct Page: Decodable { let items: [Item] }
        let serializer = DecodableResponseSerializer(Page.self)
        XCTAssertThrowsError(
            try serializer.responseObject(for: response(200), data: Data(#"{"items":[{"id":1},{"id":"x"}]}"#.utf8))
        ) {
            let message = ($0 as NSError).localizedDescription
            XCTAssertTrue(message.contains("items[1].id"), message)
            XCTAssertTrue(message.contains("expected Int"), message)
        }
        XCTAssertThrowsError(try serializer.responseObject(for: response(200), data: Data(#"{"items":[{}]}"#.utf8))) {
            XCTAssertTrue(($0 as NSError).localizedDescription.contains("items[0].id"))
        }
        XCTAssertThrowsError(try serializer.responseObject(for: response(422), data: Data(#"{"items":[]}"#.utf8))) {
            XCTAssertEqual(($0 as NSError).code, URLError.badServerResponse.rawValue, "validation first")
        }
    }
}

/// The serializers through a manager, against the loopback server.
final class ResponseSerializationEndToEndTests: LoopbackTestCase {
    func testFiftyMegabyteJSONBody() async throws {
        let manager = makeManager(timeout: 120)
        let result = try await manager.get("/large-json/\(50 << 20)")
        XCTAssertGreaterThanOrEqual(result.data.count, 50 << 20)
        let array = try XCTUnwrap(result.object as? [[String: Any]])
        XCTAssertEqual(array.first?["name"] as? String, "item 0")
        XCTAssertEqual(array.last?["id"] as? Int, array.count - 1)
    }

    func testFailureClosureGetsTheServerErrorDocument() async throws {
        let manager = makeManager()
        let error: Error = try await awaitCallback { done in
            manager.get(
                "/status/500", parameters: nil, headers: nil, progress: nil,
                success: { _, _ in XCTFail("a 500 must fail") }, failure: { _, error in done(error) })
        }
        let nsError = error as NSError
        XCTAssertEqual((nsError.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)?.statusCode, 500)
        XCTAssertNotNil(nsError.userInfo[SessionKitError.failingURLResponseDataKey])
    }

    func testXMLAndPropertyListAndCompoundThroughTheManager() async throws {
        let manager = makeManager()
        manager.responseSerializer = XMLParserResponseSerializer()
        let xml = try await manager.get("/xml")
        XCTAssertTrue(xml.object is XMLParser)
        manager.responseSerializer = PropertyListResponseSerializer()
        let binary = try await manager.get("/plist", parameters: ["format": "binary"])
        XCTAssertEqual((binary.object as? [String: Any])?["name"] as? String, "SessionKit")
        manager.responseSerializer = CompoundResponseSerializer(responseSerializers: [
            JSONResponseSerializer(), XMLParserResponseSerializer(), PropertyListResponseSerializer(),
        ])
        let (json, xmlAgain, plist) = (
            try await manager.get("/json"), try await manager.get("/xml"), try await manager.get("/plist")
        )
        XCTAssertTrue(json.object is [String: Any])
        XCTAssertTrue(xmlAgain.object is XMLParser)
        XCTAssertTrue(plist.object is [String: Any])
    }

    func testUnacceptableContentTypeThroughTheManager() async throws {
        let manager = makeManager()
        do {
            _ = try await manager.get("/xml")
            XCTFail("JSON serializer must refuse XML")
        } catch {
            XCTAssertEqual((error as NSError).code, URLError.cannotDecodeContentData.rawValue)
            XCTAssertTrue((error as NSError).localizedDescription.contains("application/xml"))
        }
    }
}
