import Foundation
import HTTPTypes
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP core API (`data(for:)`, `upload(for:…)`, `perform(_:body:_:)`, `response(for:body:)`): HTTPTypes in and
/// out, against the loopback server, on both transports; full duplex and trailers on the curl transport, over HTTP/1.1
/// and HTTP/2.
final class HTTPCoreAPITests: LoopbackTestCase {
    private func request(
        _ method: HTTPRequest.Method = .get, _ path: String, on server: LoopbackServer? = nil, scheme: String = "http",
        fields: HTTPFields = [:]
    ) -> HTTPRequest {
        let server = server ?? self.server!
        let host = scheme == "https" ? "localhost" : "127.0.0.1"
        return HTTPRequest(
            method: method, scheme: scheme, authority: "\(host):\(server.port)", path: path, headerFields: fields)
    }

    private func json(_ data: Data) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// A curl manager speaking HTTP/2 to `server` (TLS, the test root pinned).
    private func http2Manager() throws -> URLSessionManager {
        try makeRootCAPinnedManager()
    }

    // MARK: - Buffered

    func testDataForAnHTTPRequestReturnsTheBodyAndAnHTTPResponse() async throws {
        let manager = makeManager()
        var fields = HTTPFields()
        fields[HTTPField.Name("X-Test")!] = "core"
        fields.append(HTTPField(name: .cookie, value: "a=1"))
        fields.append(HTTPField(name: .cookie, value: "b=2"))
        let (data, response) = try await manager.data(for: request(.get, "/get?x=1", fields: fields))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(response.headerFields[.contentType], "application/json")
        let echoed = try json(data)
        XCTAssertEqual((echoed["headers"] as? [String: String])?["X-Test"], "core")
        XCTAssertEqual((echoed["args"] as? [String: String])?["x"], "1")
        let cookie = server.requests.last?.headers.first { $0.name.lowercased() == "cookie" }?.value
        XCTAssertEqual(cookie, "a=1; b=2", "repeated Cookie fields joined as RFC 9110 says")
        let (_, missing) = try await manager.data(for: request(.get, "/status/404"))
        XCTAssertEqual(missing.status.code, 404, "a status is a response, not an error")
    }

    func testRepeatedResponseFieldsStayRepeatedAsOnTheWire() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl,
            "URLSession on Linux hands over the head as a dictionary: repeated lines arrive joined")
        let manager = makeManager()
        let path = "/response-headers?Set-Cookie=a%3D1&Set-Cookie=b%3D2&X-Order=first&X-Order=second"
        let (_, response) = try await manager.data(for: request(.get, path))
        XCTAssertEqual(
            response.headerFields[values: .setCookie], ["a=1", "b=2"], "two Set-Cookie lines are two fields (RFC 6265)")
        XCTAssertEqual(response.headerFields[values: HTTPField.Name("X-Order")!], ["first", "second"])
        let streamed = try await manager.perform(request(.get, path)) { response, body in
            for try await _ in body {}
            return response.headerFields[values: .setCookie]
        }
        XCTAssertEqual(streamed, ["a=1", "b=2"], "the same through perform")
    }

    func testUploadFromDataAndFromFile() async throws {
        let manager = makeManager()
        let text: HTTPFields = [.contentType: "text/plain"]
        let (data, response) = try await manager.upload(
            for: request(.post, "/post", fields: text), from: Data("in memory".utf8))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(try json(data)["data"] as? String, "in memory")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-core-\(UUID())")
        try Data("from a file".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (fileData, _) = try await manager.upload(for: request(.put, "/put", fields: text), fromFile: file)
        XCTAssertEqual(try json(fileData)["data"] as? String, "from a file")
        // Without a Content-Type, a POST goes with none (as swift-http-types' URLSession.upload(for:from:) sends it),
        // not libcurl's or FoundationNetworking's default form type; so does perform's body.
        let (_, plain) = try await manager.upload(for: request(.post, "/post"), from: Data("raw".utf8))
        XCTAssertEqual(plain.status, .ok)
        XCTAssertEqual(server.requests.last?.bodyLength, 3)
        XCTAssertNil(server.requests.last?.header("Content-Type"), "upload(for:from:)")
        let raw = HTTPRequestBody.data(Data("raw".utf8))
        let status = try await manager.perform(request(.post, "/post"), body: raw) { response, body in
            for try await _ in body {}
            return response.status
        }
        XCTAssertEqual(status, .ok)
        XCTAssertNil(server.requests.last?.header("Content-Type"), "perform(_:body: .data)")
    }

    func testARequestWithoutAnAuthorityFailsWithBadURL() async throws {
        let manager = makeManager()
        let noAuthority = HTTPRequest(method: .get, scheme: "http", authority: nil, path: "/get")
        do {
            _ = try await manager.data(for: noAuthority)
            XCTFail("sent without an authority")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .badURL, "\(error)")
        }
    }

    func testEventMonitorsSeeHTTPCoreRequests() async throws {
        let manager = makeManager()
        let monitor = RecordingCoreMonitor()
        manager.eventMonitors = [monitor]
        _ = try await manager.data(for: request(.get, "/get"))
        try await manager.perform(request(.get, "/bytes/10")) { _, body in
            for try await _ in body {}
        }
        // A streamed request finishes once its task completed, just after the body's end: a bounded wait.
        for _ in 0..<250 where monitor.finished.wrappedValue.count < 2 { try await Task.sleep(nanoseconds: 20_000_000) }
        monitor.queue.sync {}  // the monitor's events are delivered on its queue
        XCTAssertEqual(monitor.finished.wrappedValue.count, 2, "each HTTP core request, created and finished")
    }

    // MARK: - Streamed

    func testPerformStreamsTheResponseBody() async throws {
        let manager = makeManager()
        let (status, count) = try await manager.perform(request(.get, "/stream-bytes/200000?chunk_size=10000")) {
            response, body in
            var count = 0
            var chunks = 0
            for try await chunk in body {
                count += chunk.count
                chunks += 1
            }
            XCTAssertGreaterThan(chunks, 1, "read as it arrives")
            return (response.status.code, count)
        }
        XCTAssertEqual(status, 200)
        XCTAssertEqual(count, 200_000)
    }

    func testStreamedRequestBodyIsSentWithAndWithoutALength() async throws {
        let manager = makeManager()
        for length: Int64? in [nil, 12] {
            let body = HTTPRequestBody.stream(length: length) { writer in
                try await writer.write(Data("hello ".utf8))
                try await writer.write(Data("world!".utf8))
                return nil
            }
            let post = request(.post, "/post", fields: [.contentType: "text/plain"])
            let echoed = try await manager.perform(post, body: body) { _, body in
                var data = Data()
                for try await chunk in body { data += chunk }
                return data
            }
            XCTAssertEqual(try json(echoed)["data"] as? String, "hello world!", "length \(String(describing: length))")
        }
    }

    /// A streamed body is exactly its declared length: one that ends short, or is written past it, fails with
    /// `cannotDecodeRawData` saying so, instead of sending a `Content-Length` the bytes do not match (the server
    /// would wait for the rest, or read the excess as the connection's next request). The manager's next request
    /// goes through at once: no connection was left out of step.
    func testAStreamedBodyThatDoesNotMatchItsLengthFails() async throws {
        let manager = makeManager()
        let cases: [(written: Int, expected: String)] = [
            (10, "ended after 10 of its declared 100 bytes"), (0, "ended after 0 of its declared 100 bytes"),
            (150, "written past its declared 100 bytes"),
        ]
        for (written, expected) in cases {
            let body = HTTPRequestBody.stream(length: 100) { writer in
                try await writer.write(Data(repeating: 0x61, count: written))
                return nil
            }
            do {
                try await manager.perform(request(.post, "/post"), body: body) { _, body in
                    for try await _ in body {}
                }
                XCTFail("\(written) bytes were sent as 100")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .cannotDecodeRawData, "\(written): \(error)")
                XCTAssertTrue(
                    (error as? URLError)?.localizedDescription.contains(expected) == true, "\(written): \(error)")
            }
            let (_, response) = try await manager.data(for: request(.get, "/get"))
            XCTAssertEqual(response.status, .ok)
        }
        XCTAssertFalse(
            server.requests.contains { $0.path == "/post" && $0.body.count != 100 }, "no body of another length arrived"
        )
    }

    func testAWriterErrorFailsTheRequestWithThatError() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "the Foundation transport collects the body first")
        struct Refused: Error {}
        let manager = makeManager()
        let body = HTTPRequestBody.stream { writer in
            try await writer.write(Data("partial".utf8))
            throw Refused()
        }
        do {
            try await manager.perform(request(.post, "/post"), body: body) { _, body in
                for try await _ in body {}
            }
            XCTFail("the writer's failure was not reported")
        } catch {
            XCTAssertTrue(error is Refused || (error as? URLError)?.code == .cancelled, "\(error)")
        }
    }

    func testStreamedBodyIsNeverSentTwiceByA307() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "the Foundation transport collects the body first")
        let manager = makeManager()
        let body = HTTPRequestBody.stream { writer in
            try await writer.write(Data("once".utf8))
            return nil
        }
        do {
            try await manager.perform(request(.post, "/redirect-to?url=/post&status_code=307"), body: body) { _, _ in }
            XCTFail("a 307 was followed with a streamed body")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .requestBodyStreamExhausted, "\(error)")
        }
        XCTAssertEqual(server.requests.filter { $0.path == "/post" }.count, 0, "nothing else was sent in its place")
    }

    // MARK: - A response handed on: response(for:body:)

    func testResponseForReturnsABodyThatIsReadAfterTheCallReturned() async throws {
        let manager = makeManager()
        let (response, body) = try await manager.response(for: request(.get, "/stream-bytes/200000?chunk_size=10000"))
        XCTAssertEqual(response.status, .ok)
        var received = Data()
        var chunks = 0
        for try await chunk in body {
            received += chunk
            chunks += 1
        }
        XCTAssertGreaterThan(chunks, 1, "read as it arrives")
        XCTAssertEqual(received, ByteGenerator.bytes(count: 200_000))
        let (_, echoBody) = try await manager.response(
            for: request(.post, "/post", fields: [.contentType: "text/plain"]), body: .data(Data("sent".utf8)))
        var echoed = Data()
        for try await chunk in echoBody { echoed += chunk }
        XCTAssertEqual(try json(echoed)["data"] as? String, "sent")
    }

    func testDroppingAnUnreadResponseBodyCancelsTheRequest() async throws {
        let manager = makeManager()
        let id = "core-drop-\(UUID())"
        let (response, _) = try await manager.response(for: request(.get, "/openapi/stream/\(id)"))  // body dropped
        XCTAssertEqual(response.status, .ok)
        for _ in 0..<500 where server.openAPIStream(id)?.connectionClosed != true {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        XCTAssertEqual(server.openAPIStream(id)?.connectionClosed, true, "the server saw the connection close")
    }

    func testAStreamedRequestBodyIsStillWrittenAfterResponseForReturned() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "full duplex is the curl transport's")
        let manager = makeManager()
        let returned = AsyncStream<Void>.makeStream()
        let body = HTTPRequestBody.stream { writer in
            try await writer.write(Data("first;".utf8))
            for await _ in returned.stream { break }  // the rest only once `response(for:)` returned
            try await writer.write(Data("second;".utf8))
            return nil
        }
        // `/duplex` answers at once and echoes the body as it arrives.
        let (response, echo) = try await manager.response(for: request(.post, "/duplex"), body: body)
        XCTAssertEqual(response.status, .ok)
        returned.continuation.yield()
        returned.continuation.finish()
        var received = Data()
        for try await chunk in echo { received += chunk }
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "first;second;", "the writer ran until the end")
    }

    func testAStreamedRequestIsRetriedWhileNoResponseHeadArrived() async throws {
        let manager = makeManager()
        manager.interceptor = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01, jitters: false)
        do {
            // Reset before any status line, every time: each attempt fails before its head.
            _ = try await manager.response(for: request(.get, "/fault/reset"))
            XCTFail("a reset connection gave a response")
        } catch {
            XCTAssertNotNil(error as? URLError, "\(error)")
        }
        XCTAssertEqual(server.requests.filter { $0.path == "/fault/reset" }.count, 3, "the first attempt and 2 retries")
        // Once the head arrived, a failure is the reader's: `/fault/close-mid-body` is not sent again.
        let (_, body) = try await manager.response(for: request(.get, "/fault/close-mid-body"))
        do {
            for try await _ in body {}
            XCTFail("a body cut short ended without an error")
        } catch {}
        XCTAssertEqual(server.requests.filter { $0.path == "/fault/close-mid-body" }.count, 1)
    }

    // MARK: - Full duplex and trailers (curl transport)

    /// Writes `count` chunks, each only once the previous one came back: possible only if the response is read while
    /// the request body is still being written.
    private func duplexRoundTrip(
        _ manager: URLSessionManager, _ request: HTTPRequest, count: Int,
        trailers: HTTPFields? = [HTTPField.Name("X-Sum")!: "sum"]
    ) async throws -> (Data, HTTPFields?) {
        let echoed = AsyncStream<Int>.makeStream()
        let body = HTTPRequestBody.stream { writer in
            var iterator = echoed.stream.makeAsyncIterator()
            for index in 0..<count {
                try await writer.write(Data("chunk-\(index);".utf8))
                guard await iterator.next() != nil else { break }  // the echo of this chunk arrived
            }
            return trailers.map { fields in
                var fields = fields
                fields[HTTPField.Name("X-Sum")!] = "\(count)"
                return fields
            }
        }
        return try await manager.perform(request, body: body) { response, body in
            XCTAssertEqual(response.status, .ok)
            var received = Data()
            var expected = 0
            for try await chunk in body {
                received += chunk
                // Each complete chunk echoed lets the writer send the next.
                while String(decoding: received, as: UTF8.self).contains("chunk-\(expected);") {
                    echoed.continuation.yield(expected)
                    expected += 1
                }
            }
            echoed.continuation.finish()
            return (received, try await body.trailers)
        }
    }

    func testFullDuplexEchoInterleavesChunkByChunkWithTrailersBothWaysOverHTTP1() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "full duplex is the curl transport's")
        let manager = makeManager()
        let (received, trailers) = try await duplexRoundTrip(manager, request(.post, "/duplex"), count: 20)
        XCTAssertEqual(String(decoding: received, as: UTF8.self), (0..<20).map { "chunk-\($0);" }.joined())
        XCTAssertEqual(trailers?[HTTPField.Name("x-echo-x-sum")!], "20", "the request's trailers reached the server")
        XCTAssertEqual(trailers?[HTTPField.Name("x-received-bytes")!], "\(received.count)")
    }

    func testFullDuplexEchoInterleavesChunkByChunkOverHTTP2() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "full duplex is the curl transport's")
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await tls.shutdown() } }
        let manager = try http2Manager()
        let (received, trailers) = try await duplexRoundTrip(
            manager, request(.post, "/duplex", on: tls, scheme: "https"), count: 20, trailers: nil)
        XCTAssertEqual(String(decoding: received, as: UTF8.self), (0..<20).map { "chunk-\($0);" }.joined())
        XCTAssertEqual(trailers?[HTTPField.Name("x-received-bytes")!], "\(received.count)", "the response's trailers")
        XCTAssertEqual(tls.requests.last?.httpVersion, "HTTP/2.0")
    }

    func testRequestTrailersOverHTTP2FailInsteadOfBeingDropped() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "full duplex is the curl transport's")
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await tls.shutdown() } }
        do {
            _ = try await duplexRoundTrip(
                try http2Manager(), request(.post, "/duplex", on: tls, scheme: "https"), count: 2)
            XCTFail("request trailers were dropped without an error")
        } catch {
            let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
            XCTAssertEqual(underlying?.code, SessionKitError.Code.requestTrailersNotSent.rawValue, "\(error)")
        }
        // The body was cut short (the stream reset), not ended: the server never saw the request complete.
        XCTAssertFalse(tls.requests.contains { $0.path == "/duplex" }, "the server saw a request without its trailers")
    }

    /// Trailers the request cannot carry fail it instead of being dropped: a body with a length goes with
    /// `Content-Length` (no chunked framing for trailers to follow), and URLSession on Linux sends none (refused before
    /// anything is sent). The same body without trailers goes.
    func testRequestTrailersThatCannotBeSentFailTheRequest() async throws {
        func body(trailers: HTTPFields?) -> HTTPRequestBody {
            .stream(length: 5) { writer in
                try await writer.write(Data("hello".utf8))
                return trailers
            }
        }
        let manager = makeManager()
        let post = request(.post, "/post", fields: [.contentType: "text/plain"])
        do {
            _ = try await manager.perform(
                post, body: body(trailers: [HTTPField.Name("X-Sum")!: "5"])
            ) { _, body in
                for try await _ in body {}
            }
            XCTFail("request trailers were dropped without an error")
        } catch {
            let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
            XCTAssertEqual(underlying?.domain, SessionKitError.sessionDomain, "\(error)")
            XCTAssertEqual(underlying?.code, SessionKitError.Code.requestTrailersNotSent.rawValue, "\(error)")
            let reason = error.localizedDescription
            if LoopbackTestCase.testTransport == .curl {
                XCTAssertTrue(reason.contains("Content-Length"), reason)
            } else {
                XCTAssertTrue(reason.contains("URLSession"), reason)
                XCTAssertFalse(server.requests.contains { $0.path == "/post" }, "refused before anything was sent")
            }
        }
        for trailers in [nil, HTTPFields()] {
            let (data, response) = try await manager.perform(post, body: body(trailers: trailers)) {
                response, body in
                var data = Data()
                for try await chunk in body { data += chunk }
                return (data, response)
            }
            XCTAssertEqual(response.status, .ok)
            XCTAssertEqual(try json(data)["data"] as? String, "hello")
        }
    }

    func testResponseTrailersAreReadOverHTTP1AndHTTP2() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "URLSession on Linux drops trailers")
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await tls.shutdown() } }
        let cases: [(URLSessionManager, HTTPRequest)] = [
            (makeManager(), request(.get, "/trailers")),
            (try http2Manager(), request(.get, "/trailers", on: tls, scheme: "https")),
        ]
        for (manager, request) in cases {
            let (body, trailers) = try await manager.perform(request) { _, body in
                var data = Data()
                for try await chunk in body { data += chunk }
                return (data, try await body.trailers)
            }
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "payload")
            XCTAssertEqual(trailers?[HTTPField.Name("x-checksum")!], "7", "\(request)")
            XCTAssertEqual(trailers?[HTTPField.Name("x-count")!], "1")
        }
        let (_, none) = try await makeManager().perform(request(.get, "/bytes/5")) { _, body in
            for try await _ in body {}
            return ((), try await body.trailers)
        }
        XCTAssertNil(none, "no trailers: nil")
    }

    /// A server that closes the connection while a streamed request body waits for its writer (libcurl has paused the
    /// upload, and stops watching a connection whose reading side ended) ends the request with
    /// `networkConnectionLost` then, sent once: not at the writer's next bytes, nor at the request's timeout (which
    /// reads `timedOut`), for a writer that waits on something else first. Over HTTP/1.1, with and without a length.
    func testAServerThatClosesWhileAStreamedBodyWaitsForItsWriterEndsTheRequest() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "the Foundation transport collects the body first")
        let raw = try await RawFaultServer.start(closesBeforeBody: true) { _ in .close }
        defer { Task { try? await raw.shutdown() } }
        let manager = makeManager(timeout: 20)
        let upload = HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1:\(raw.port)", path: "/upload")
        for length: Int64? in [nil, 100] {
            let writerSawTheEnd = LockedBox<Error?>(nil)
            let body = HTTPRequestBody.stream(length: length) { writer in
                try await writer.write(Data("first".utf8))
                // Waits for something the server does not give; the request's end is what stops it.
                do {
                    try await Task.sleep(nanoseconds: 60_000_000_000)
                } catch {
                    writerSawTheEnd.write { $0 = error }
                    throw error
                }
                return nil
            }
            do {
                try await manager.perform(upload, body: body) { _, body in
                    for try await _ in body {}
                }
                XCTFail("a request whose connection closed before its head succeeded")
            } catch {
                XCTAssertEqual(
                    (error as? URLError)?.code, .networkConnectionLost, "length \(String(describing: length)): \(error)"
                )
            }
            XCTAssertTrue(writerSawTheEnd.wrappedValue is CancellationError, "the writer was stopped")
        }
        XCTAssertEqual(raw.requests.count, 0, "no request was read whole")
    }
}

/// Counts the requests an event monitor saw finish.
private final class RecordingCoreMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: `finished` is a lock-protected box.
    let queue = DispatchQueue(label: "test.core-monitor")
    let finished = LockedBox<[Error?]>([])

    func requestDidFinish(_ request: SessionRequest, error: Error?) {
        finished.write { $0.append(error) }
    }
}
