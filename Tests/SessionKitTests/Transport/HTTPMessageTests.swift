import Foundation
import HTTPTypes
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HTTP/1.1 messages as RFC 9112 and RFC 9110 allow them, sent byte by byte by ``RawFaultServer``: status lines
/// without a reason phrase, empty field values, codings SessionKit does not decode. Transport-neutral: `make test` runs
/// them on both transports.
final class HTTPMessageTests: RawServerTestCase {
    private func manager(baseURL: URL? = nil) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 5
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: baseURL, sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        manager.responseSerializer = HTTPResponseSerializer()
        return manager
    }

    /// The closure form's one outcome (failing the test on a second completion).
    private func run(
        _ manager: URLSessionManager, _ request: URLRequest, file: StaticString = #filePath, line: UInt = #line
    ) async throws -> (HTTPURLResponse?, Data?, Error?) {
        let completions = CallCounter()
        let outcome: (HTTPURLResponse?, Data?, Error?) = try await awaitCallback(file: file, line: line) { done in
            manager.dataTask(with: request) { response, object, error in
                completions.increment()
                done((response as? HTTPURLResponse, object as? Data, error))
            }.resume()
        }
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(completions.count, 1, "exactly one completion", file: file, line: line)
        return outcome
    }

    // MARK: - Status lines (RFC 9112 4)

    func testStatusLineWithoutAReasonPhraseIsAResponse() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession on Linux fails a status line without a reason phrase (\"Failed writing header\", -1)")
        let heads = [
            "HTTP/1.1 200\r\n", "HTTP/1.1 200 \r\n", "HTTP/1.1 201 Created\r\n", "HTTP/1.0 200\r\n",
            "HTTP/1.1 299 \r\n",
        ]
        for head in heads {
            let status = Int(head.dropFirst(9).prefix(3)) ?? 0
            let server = try await start { _ in
                .respondAndClose(Data((head + "Content-Length: 2\r\nConnection: close\r\n\r\nok").utf8))
            }
            let manager = manager(baseURL: server.url())
            // The closure form: a response, never "neither a response nor an error".
            let (response, data, error) = try await run(manager, URLRequest(url: server.url("/closure")))
            XCTAssertNil(error, "\(head.debugDescription): \(String(describing: error))")
            XCTAssertEqual(response?.statusCode, status, head.debugDescription)
            XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, "ok", head.debugDescription)
            // The async form.
            let result = try await manager.get("/async")
            XCTAssertEqual(result.statusCode, status, head.debugDescription)
            XCTAssertEqual(String(decoding: result.data, as: UTF8.self), "ok")
        }
    }

    /// Interim responses (RFC 9110 15.2: `103 Early Hints`, an unasked `100 Continue`, several in a row) are not the
    /// response: the final one is, with its own fields only, through the task API and the HTTP core API.
    func testInterimResponsesBeforeTheFinalOneAreSkipped() async throws {
        let interim =
            "HTTP/1.1 100 Continue\r\n\r\n"
            + "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX-Early: 1\r\n\r\n"
            + "HTTP/1.1 103 Early Hints\r\nLink: </app.js>; rel=preload\r\n\r\n"
        let server = try await start { _ in
            .respondAndClose(
                Data(
                    (interim + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Final: 1\r\nConnection: close\r\n\r\nok").utf8
                ))
        }
        let manager = manager(baseURL: server.url())
        let (response, data, error) = try await run(manager, URLRequest(url: server.url("/hints")))
        XCTAssertNil(error, "\(String(describing: error))")
        XCTAssertEqual(response?.statusCode, 200)
        XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, "ok")
        XCTAssertEqual(response?.value(forHTTPHeaderField: "X-Final"), "1")
        XCTAssertNil(response?.value(forHTTPHeaderField: "X-Early"), "an interim response's fields are not the final's")
        XCTAssertNil(response?.value(forHTTPHeaderField: "Link"))
        let (body, head) = try await manager.data(
            for: HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/hints-core"))
        XCTAssertEqual(head.status.code, 200)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "ok")
        XCTAssertNil(head.headerFields[HTTPField.Name("X-Early")!])
        XCTAssertEqual(head.headerFields[HTTPField.Name("X-Final")!], "1")
    }

    func testStatusLineThatIsNotHTTPFailsWithBadServerResponseOnce() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession reads these status lines with libcurl's own rules, which SessionKit does not see")
        for head in ["HTTP/1.1 2000 OK\r\n", "HTTP/1.1 099 Low\r\n", "HTTP/1.1 20 OK\r\n", "HTTP/1.1 2OO OK\r\n"] {
            let server = try await start { _ in
                .respondAndClose(Data((head + "Content-Length: 2\r\n\r\nok").utf8))
            }
            let (response, _, error) = try await run(manager(), URLRequest(url: server.url("/bad")))
            XCTAssertEqual(
                (error as NSError?)?.code, URLError.badServerResponse.rawValue,
                "\(head.debugDescription): \(String(describing: error)) \(String(describing: response))")
            XCTAssertFalse((error as NSError?)?.localizedDescription.isEmpty ?? true, "the error says why")
        }
    }

    func testFoldedFieldIsOneValueAndAFieldNameThatIsNotATokenFailsTheResponse() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession reads response heads with rules SessionKit does not see")
        let server = try await start { request in
            let line = request.target == "/folded" ? "X-Folded: first\r\n  second" : "Bad Name: x"
            return .respondAndClose(Data("HTTP/1.1 200 OK\r\n\(line)\r\nContent-Length: 2\r\n\r\nok".utf8))
        }
        let (folded, _, error) = try await run(manager(), URLRequest(url: server.url("/folded")))
        XCTAssertNil(error, "\(String(describing: error))")
        XCTAssertEqual(folded?.value(forHTTPHeaderField: "X-Folded"), "first second", "RFC 9112 5.2")
        let (response, _, refusal) = try await run(manager(), URLRequest(url: server.url("/bad-name")))
        XCTAssertNil(response)
        XCTAssertEqual(
            (refusal as NSError?)?.code, URLError.badServerResponse.rawValue, "\(String(describing: refusal))")
        XCTAssertTrue((refusal as NSError?)?.localizedDescription.contains("not a token") == true)
    }

    // MARK: - Empty field values (RFC 9110 5.5)

    func testEmptyHeaderValueIsSentThroughEveryAPI() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        let manager = manager(baseURL: server.url())
        var request = URLRequest(url: server.url("/task"))
        request.setValue("", forHTTPHeaderField: "X-Empty")
        _ = try await run(manager, request)
        _ = try await manager.get("/verb", headers: ["X-Empty": ""])
        manager.requestSerializer.setValue("", forHTTPHeaderField: "X-Empty")
        _ = try await manager.get("/serializer")
        for target in ["/task", "/verb", "/serializer"] {
            let received = try XCTUnwrap(server.requests.first { $0.target == target }, target)
            let head = String(decoding: received.bytes, as: UTF8.self).lowercased()
            XCTAssertTrue(head.contains("\r\nx-empty:\r\n") || head.contains("\r\nx-empty: \r\n"), "\(target): \(head)")
        }
    }

    // MARK: - Codings SessionKit does not decode (RFC 9110 8.4, RFC 9112 6.1)

    func testUnknownContentEncodingIsDeliveredAsItCameWithTheField() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession on Linux fails a content coding its libcurl does not decode (-1), and SessionKit cannot reach it"
        )
        let body = "\u{1}\u{2}opaque bytes"
        let server = try await start { _ in
            .respond(RawFaultServer.response(body: body, headers: ["Content-Encoding: x-sessionkit-unknown"]))
        }
        let (response, data, error) = try await run(manager(), URLRequest(url: server.url("/coded")))
        XCTAssertNil(error, "\(String(describing: error))")
        XCTAssertEqual(response?.statusCode, 200)
        XCTAssertEqual(response?.value(forHTTPHeaderField: "Content-Encoding"), "x-sessionkit-unknown")
        XCTAssertEqual(data, Data(body.utf8), "the bytes as they came")
    }

    func testUnknownTransferEncodingIsReadToCloseAndKept() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession's libcurl fails a transfer coding it does not know, and SessionKit cannot reach its handle")
        let body = "raw until the connection closes"
        let server = try await start { _ in
            .respondAndClose(Data("HTTP/1.1 200 OK\r\nTransfer-Encoding: x-sessionkit-unknown\r\n\r\n\(body)".utf8))
        }
        let (response, data, error) = try await run(manager(), URLRequest(url: server.url("/coded")))
        XCTAssertNil(error, "\(String(describing: error))")
        XCTAssertEqual(response?.value(forHTTPHeaderField: "Transfer-Encoding"), "x-sessionkit-unknown")
        XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, body)
    }
}
