import Foundation
import NIOSSL
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What goes on the wire is what the caller asked for, once, against servers that misbehave byte by byte
/// (``RawFaultServer``). Each case checks the error, exactly one completion, and what the server received.
final class WireSafetyTests: RawServerTestCase {
    private func manager(timeout: TimeInterval = 5, transport: Transport = .curl) -> URLSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        let manager = URLSessionManager(sessionConfiguration: configuration)
        manager.transport = transport
        manager.responseSerializer = HTTPResponseSerializer()
        return manager
    }

    /// Runs `request` and returns its one outcome (failing the test on a second completion).
    private func run(
        _ manager: URLSessionManager, _ request: URLRequest, file: StaticString = #filePath,
        line: UInt = #line
    ) async throws -> (HTTPURLResponse?, Error?) {
        let completions = CallCounter()
        let outcome: (HTTPURLResponse?, Error?) = try await awaitCallback(timeout: 30, file: file, line: line) { done in
            manager.dataTask(
                with: request,
                completionHandler: { response, _, error in
                    completions.increment()
                    done((response as? HTTPURLResponse, error))
                }
            ).resume()
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(completions.count, 1, "exactly one completion", file: file, line: line)
        return outcome
    }

    private func post(_ url: URL, method: String = "POST", body: String = "payload") -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = Data(body.utf8)
        return request
    }

    private func code(_ error: Error?) -> Int? { (error as NSError?)?.code }

    // MARK: - At most once

    /// A retrier sees the failed attempt's own response: none for an attempt whose connection was reset, not the 503
    /// of the attempt before (a retry policy would otherwise retry a refusal, or reuse an old `Retry-After`).
    func testARetrierSeesTheFailedAttemptsOwnResponse() async throws {
        for transport in [Transport.curl, .foundation] {
            let server = try await start { request in
                request.index == 0 ? .respond(RawFaultServer.response(status: 503, body: "busy")) : .reset
            }
            let manager = HTTPSessionManager(sessionConfiguration: .ephemeral)
            manager.transport = transport
            let seen = LockedBox<[Int?]>([])
            manager.interceptor = Interceptor(retry: { request, _ in
                let count = seen.write { seen -> Int in
                    seen.append(request.response?.statusCode)
                    return seen.count
                }
                return count < 2 ? .retry : .doNotRetry
            })
            do {
                _ = try await manager.get(server.url("/\(transport)").absoluteString)
                XCTFail("the second attempt's connection was reset")
            } catch {}
            XCTAssertEqual(seen.wrappedValue, [503, nil], "\(transport)")
        }
    }

    func testANonIdempotentRequestIsNotSentAgainWhenItsReusedConnectionDies() async throws {
        for method in ["POST", "PATCH"] {
            // The second request on the first connection is read, then the connection is reset without an answer.
            let server = try await start {
                $0.connection == 0 && $0.indexOnConnection == 1 ? .reset : .respond(RawFaultServer.response())
            }
            let manager = manager()
            let (first, _) = try await run(manager, URLRequest(url: server.url("/warm")))
            XCTAssertEqual(first?.statusCode, 200)
            let (_, error) = try await run(manager, post(server.url("/once"), method: method))
            XCTAssertEqual(code(error), URLError.networkConnectionLost.rawValue, "\(String(describing: error))")
            XCTAssertTrue((error as NSError?)?.localizedDescription.contains("not sent again") == true)
            XCTAssertEqual(
                server.requests.filter { $0.target == "/once" }.count, 1, "\(method) reached the server once")
        }
    }

    func testAnIdempotentRequestIsSentAgainOnlyWhenNoResponseByteArrived() async throws {
        let server = try await start { request in
            switch (request.connection, request.indexOnConnection) {
            case (0, 1): return .reset  // no byte of an answer: a GET may go again on a new connection
            // A byte of an answer arrived: it may not go again.
            case (1, 1): return .respondAndReset(Data("HTTP/1.1 200 OK\r\nContent-Le".utf8))
            default: return .respond(RawFaultServer.response())
            }
        }
        let manager = manager()
        _ = try await run(manager, URLRequest(url: server.url("/warm")))
        let (retried, error) = try await run(manager, URLRequest(url: server.url("/again")))
        XCTAssertNil(error)
        XCTAssertEqual(retried?.statusCode, 200)
        XCTAssertEqual(server.requests.filter { $0.target == "/again" }.count, 2)
        let (_, cut) = try await run(manager, URLRequest(url: server.url("/cut")))
        XCTAssertNotNil(cut)
        XCTAssertEqual(server.requests.filter { $0.target == "/cut" }.count, 1, "not sent again after a response byte")
    }

    func testAnUploadsFileIsReadAgainWhenAnIdempotentRequestGoesAgainOnAFreshConnection() async throws {
        // The second request on each connection is read, then the connection is reset without an answer.
        let server = try await start { $0.indexOnConnection == 1 ? .reset : .respond(RawFaultServer.response()) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("wire-safety-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try body.write(to: file)
        for method in ["PUT", "POST"] {
            let manager = manager()
            let (first, _) = try await run(manager, URLRequest(url: server.url("/warm-\(method)")))
            XCTAssertEqual(first?.statusCode, 200)
            var request = URLRequest(url: server.url("/file-\(method)"))
            request.httpMethod = method
            let completions = CallCounter()
            let (response, error): (URLResponse?, Error?) = try await awaitCallback(timeout: 30) { done in
                manager.uploadTask(with: request, fromFile: file) { response, _, error in
                    completions.increment()
                    done((response, error))
                }.resume()
            }
            XCTAssertEqual(completions.count, 1)
            let sent = server.requests.filter { $0.target == "/file-\(method)" }
            if method == "PUT" {
                // Sent again on a new connection, the file read from its start (it used to fail: no rewind).
                XCTAssertNil(error, "\(String(describing: error))")
                XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
                XCTAssertEqual(sent.count, 2)
                XCTAssertEqual(sent.last?.body, body, "the whole file again")
            } else {
                XCTAssertEqual(code(error), URLError.networkConnectionLost.rawValue, "\(String(describing: error))")
                XCTAssertEqual(sent.count, 1, "a POST is not sent again")
            }
        }
    }

    func testADigestProtectedPostIsSentOnceWhenItsConnectionDiesAfterTheChallenge() async throws {
        // Every request without a Digest answer gets the challenge; the answered POST is read, then the connection is
        // reset before any response byte.
        let server = try await start { request in
            let head = String(decoding: request.bytes, as: UTF8.self).lowercased()
            if head.contains("\r\nauthorization: digest") { return .reset }
            return .respond(
                RawFaultServer.response(
                    status: 401, body: "",
                    headers: ["WWW-Authenticate: Digest realm=\"r\", nonce=\"abc\", qop=\"auth\", algorithm=MD5"]))
        }
        let manager = manager()
        manager.taskDidReceiveAuthenticationChallenge = { _, _, _ in
            (.useCredential, URLCredential(user: "user", password: "pass", persistence: .forSession))
        }
        let (_, error) = try await run(manager, post(server.url("/digest")))
        XCTAssertEqual(code(error), URLError.networkConnectionLost.rawValue, "\(String(describing: error))")
        let answered = server.requests.filter {
            String(decoding: $0.bytes, as: UTF8.self).lowercased().contains("\r\nauthorization: digest")
        }
        XCTAssertEqual(answered.count, 1, "the answered POST went on the wire once")
        XCTAssertEqual(answered.first?.body, Data("payload".utf8))
    }

    func testAnIdempotentRequestIsResentAtMostOnceOverAPoolOfDeadConnections() async throws {
        // Three overlapping warm-up requests leave three idle connections in the pool; each later request on a reused
        // connection is reset before any response byte, as by a server that closed its idle connections.
        let server = try await start { request in
            if request.target.hasPrefix("/warm") {
                return .respondAfter(milliseconds: 800, RawFaultServer.response())
            }
            return request.indexOnConnection == 0 ? .respond(RawFaultServer.response()) : .reset
        }
        let manager = manager()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                group.addTask { _ = try await self.run(manager, URLRequest(url: server.url("/warm\(index)"))) }
            }
            try await group.waitForAll()
        }
        let warmed = Set(server.requests.map(\.connection)).count
        XCTAssertGreaterThanOrEqual(warmed, 2, "the pool holds connections side by side")
        let (response, error) = try await run(manager, URLRequest(url: server.url("/dropped")))
        let sent = server.requests.filter { $0.target == "/dropped" }
        XCTAssertLessThanOrEqual(sent.count, 2, "sent, then sent again once at most (RFC 9112 9.3.1)")
        if let error {
            XCTAssertEqual(code(error), URLError.networkConnectionLost.rawValue, "\(error)")
        } else {
            XCTAssertEqual(response?.statusCode, 200, "answered on a new connection")
        }
    }

    // MARK: - No injection

    func testAMethodThatIsNotATokenFailsBeforeAnyIO() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        for transport in Transport.allCases {
            var request = URLRequest(url: server.url("/x"))
            request.httpMethod = "GET /x HTTP/1.1\r\nX-Evil: 1\r\n\r\nGET"
            let (_, error) = try await run(manager(transport: transport), request)
            XCTAssertEqual((error as NSError?)?.domain, SessionKitError.sessionDomain)
            XCTAssertEqual(
                code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(String(describing: error))")
            XCTAssertTrue((error as NSError?)?.localizedDescription.contains("method") == true)
        }
        XCTAssertTrue(server.requests.isEmpty, "nothing reached the server")
    }

    func testAHeaderNameThatIsNotATokenFailsNamingTheHeader() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        for name in ["X-A\r\nInjected", "Nön-ASCII", "X Space"] {
            var request = URLRequest(url: server.url("/x"))
            request.setValue("1", forHTTPHeaderField: name)
            let (_, error) = try await run(manager(), request)
            XCTAssertEqual(
                code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(name): \(String(describing: error))")
            XCTAssertTrue((error as NSError?)?.localizedDescription.contains("header name") == true)
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testAHeaderValueWithCRLFOrNULFailsNamingTheHeader() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        let manager = HTTPSessionManager(baseURL: server.url())
        manager.responseSerializer = HTTPResponseSerializer()
        for value in ["a\r\nX-Injected: 1", "nul\u{0}", "lf\nonly"] {
            do {
                _ = try await manager.get("/x", headers: ["X-Bad": value])
                XCTFail("the value \(value.debugDescription) was accepted")
            } catch {
                XCTAssertEqual(code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(error)")
                XCTAssertTrue((error as NSError).localizedDescription.contains("X-Bad"), "\(error)")
            }
        }
        manager.requestSerializer.setValue("a\r\nb", forHTTPHeaderField: "X-Default")
        do {
            _ = try await manager.get("/x")
            XCTFail("the serializer's bad header was accepted")
        } catch {
            XCTAssertTrue((error as NSError).localizedDescription.contains("X-Default"), "\(error)")
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testAConfigurationsAdditionalHeaderThatCannotGoOnTheWireFailsEveryTaskNamingIt() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-Config": "a\r\nX-Injected: 1"]
        let manager = HTTPSessionManager(baseURL: server.url(), sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        manager.responseSerializer = HTTPResponseSerializer()
        do {
            _ = try await manager.get("/x")
            XCTFail("the configuration's bad header was accepted")
        } catch {
            XCTAssertEqual(code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(error)")
            XCTAssertTrue((error as NSError).localizedDescription.contains("X-Config"), "\(error)")
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testARequestTheRedirectClosureReturnsIsCheckedBeforeItIsSent() async throws {
        let server = try await start { request in
            request.target == "/start"
                ? .respond(RawFaultServer.response(status: 307, headers: ["Location: /next"]))
                : .respond(RawFaultServer.response())
        }
        let manager = manager(transport: .curl)
        manager.taskWillPerformHTTPRedirection = { _, _, _, request in
            var request = request
            request.allHTTPHeaderFields = ["X Bad": "1"]
            return request
        }
        let (_, error) = try await run(manager, URLRequest(url: server.url("/start")))
        XCTAssertEqual(code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(String(describing: error))")
        XCTAssertEqual(server.requests.map(\.target), ["/start"], "the redirect's request was not sent")
    }

    func testAFieldASerializerSubclassAddsIsCheckedOnBothVerbForms() async throws {
        let server = try await start { _ in .respond(RawFaultServer.response()) }
        let manager = HTTPSessionManager(baseURL: server.url())
        manager.requestSerializer = FieldAddingSerializer()
        do {
            _ = try await manager.get("/x")
            XCTFail("the subclass's bad header was accepted")
        } catch {
            XCTAssertEqual(code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(error)")
        }
        let once = OnceBox<Error?>()
        manager.get(
            "/x", parameters: nil, headers: nil, progress: nil, success: { _, _ in once.resolve(nil) },
            failure: { _, error in once.resolve(error) })
        let error = try await once.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual(code(error), SessionKitError.Code.invalidRequestField.rawValue, "\(String(describing: error))")
        XCTAssertTrue(server.requests.isEmpty)
    }

    // MARK: - Malformed responses

    func testMalformedResponsesAreBadServerResponsesWithAReason() async throws {
        let cases: [(String, RawFaultServer.Action)] = [
            ("garbage status line", .respondAndClose(Data("garbage\r\n\r\n".utf8))),
            (
                "1 MiB header line",
                .respond(
                    Data(
                        ("HTTP/1.1 200 OK\r\nX-Huge: " + String(repeating: "a", count: 1 << 20)
                            + "\r\nContent-Length: 0\r\n\r\n").utf8))
            ),
            (
                "too many fields",
                .respond(
                    Data(
                        ("HTTP/1.1 200 OK\r\n" + (0..<1000).map { "X-F\($0): v\r\n" }.joined()
                            + "Content-Length: 0\r\n\r\n").utf8))
            ),
            (
                "invalid chunking",
                .respondAndClose(Data("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n".utf8))
            ),
        ]
        for (name, action) in cases {
            let server = try await start { _ in action }
            let (_, error) = try await run(manager(), URLRequest(url: server.url("/x")))
            XCTAssertEqual(code(error), URLError.badServerResponse.rawValue, "\(name): \(String(describing: error))")
            XCTAssertFalse((error as NSError?)?.localizedDescription.isEmpty ?? true, name)
            XCTAssertEqual(server.requests.count, 1, name)
        }
    }

    func testCutAndStalledResponses() async throws {
        let cases: [(String, RawFaultServer.Action, URLError.Code)] = [
            ("reset before the status line", .reset, .networkConnectionLost),
            (
                "short body", .respondAndClose(Data("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..".utf8)),
                .networkConnectionLost
            ),
            ("stall after the head", .stall(Data("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".utf8)), .timedOut),
        ]
        for (name, action, expected) in cases {
            let server = try await start { _ in action }
            let (_, error) = try await run(manager(timeout: 1), post(server.url("/x")))
            XCTAssertEqual(code(error), expected.rawValue, "\(name): \(String(describing: error))")
            XCTAssertEqual(server.requests.count, 1, "\(name): the POST was sent once")
        }
    }

    // MARK: - Bounded bodies

    /// `megabytes` MiB of zeros as gzip (about a thousandth of that), made by the system's gzip.
    private func gzipBomb(megabytes: Int) throws -> Data {
        try gzipped("head -c \(megabytes << 20) /dev/zero")
    }

    /// What the shell command `source` writes, compressed by the system's gzip.
    private func gzipped(_ source: String) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(source) | gzip -9"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
    }

    func testAGzipBombStopsAtTheDecompressionLimit() async throws {
        let bomb = try gzipBomb(megabytes: 256)
        let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: \(bomb.count)\r\n\r\n"
        let server = try await start { _ in .respond(Data(head.utf8) + bomb) }
        let manager = manager()
        let before = residentMiB()
        let (_, error) = try await run(manager, URLRequest(url: server.url("/bomb")))
        XCTAssertEqual(code(error), URLError.Code.dataLengthExceedsMaximum.rawValue, "\(String(describing: error))")
        XCTAssertTrue(
            (error as NSError?)?.localizedDescription.contains("ratio") == true, "\(String(describing: error))")
        XCTAssertLessThan(residentMiB() - before, 100, "the bomb did not inflate in memory")
        // Without the ratio bound, the in-memory bound still stops it.
        manager.responseBodyLimits.maximumDecompressionRatio = nil
        let (_, second) = try await run(manager, URLRequest(url: server.url("/bomb")))
        XCTAssertEqual(code(second), URLError.Code.dataLengthExceedsMaximum.rawValue, "\(String(describing: second))")
    }

    /// A chunked gzip body within the decompression ratio (about 72×) is read whole. libcurl counts a chunked read's
    /// wire bytes only after handing on what they decoded to, so its first 16 KiB, inflating past 1 MiB, were refused
    /// as a bomb.
    func testAChunkedCompressedBodyWithinTheRatioIsReadWhole() async throws {
        var payload = Data(count: 4 << 20)
        var seed: UInt64 = 1
        for index in stride(from: 0, to: payload.count, by: 200) {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            payload[index] = UInt8(truncatingIfNeeded: seed >> 33)
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-ratio-\(UUID().uuidString)")
        try payload.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let gzipped = try gzipped("cat '\(file.path)'")
        XCTAssertLessThan(gzipped.count * 100, payload.count * 2, "under the ratio, but more than 50×")
        var body = Data("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        for start in stride(from: 0, to: gzipped.count, by: 8192) {
            let chunk = gzipped[start..<min(start + 8192, gzipped.count)]
            body += Data("\(String(chunk.count, radix: 16))\r\n".utf8) + chunk + Data("\r\n".utf8)
        }
        body += Data("0\r\n\r\n".utf8)
        let server = try await start { _ in .respond(body) }
        let manager = manager()
        let (data, error): (Data?, Error?) = try await awaitCallback(timeout: 30) { done in
            manager.dataTask(
                with: URLRequest(url: server.url("/chunked-gzip")),
                completionHandler: { _, object, error in done((object as? Data, error)) }
            ).resume()
        }
        XCTAssertNil(error, "\(String(describing: error))")
        XCTAssertEqual(data, payload)
    }

    /// A `Content-Length` that is not one number fails the response (RFC 9110 8.6, RFC 9112 6.3): two different
    /// values, a list of them, trailing junk, a number too large; the same value twice is one.
    func testAContentLengthThatIsNotOneNumberFailsTheResponse() async throws {
        let manager = manager()
        let cases: [([String], Bool)] = [
            (["Content-Length: 5", "Content-Length: 100"], true),
            (["Content-Length: 5, 10"], true),
            (["Content-Length: 5abc"], true),
            (["Content-Length: 99999999999999999999"], true),
            (["Content-Length: 5", "Content-Length: 5"], false),
            (["Content-Length: 5, 5"], false),
        ]
        for (fields, fails) in cases {
            let head = "HTTP/1.1 200 OK\r\n" + fields.joined(separator: "\r\n") + "\r\n\r\n"
            let server = try await start { _ in .respondAndClose(Data((head + "hello").utf8)) }
            let (response, error) = try await run(manager, URLRequest(url: server.url("/length")))
            if fails {
                XCTAssertEqual(
                    (error as? URLError)?.code, .badServerResponse, "\(fields): \(String(describing: error))")
                XCTAssertNil(response, "\(fields)")
            } else {
                XCTAssertNil(error, "\(fields)")
                XCTAssertEqual(response?.statusCode, 200, "\(fields)")
            }
        }
    }

    func testAnEndlessBodyStopsAtTheInMemoryLimitOnBothTransportsAndKeepsNothing() async throws {
        let head = Data("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let chunk = Data(("10000\r\n" + String(repeating: "x", count: 0x10000) + "\r\n").utf8)
        let server = try await start { _ in .endless(head: head, chunk: chunk) }
        for transport in Transport.allCases {
            let manager = manager(timeout: 10, transport: transport)
            manager.responseBodyLimits.maximumInMemory = 8 << 20
            let completions = CallCounter()
            let outcome: (Any?, Error?) = try await awaitCallback(timeout: 60) { done in
                manager.dataTask(
                    with: URLRequest(url: server.url("/endless")),
                    completionHandler: { _, object, error in
                        completions.increment()
                        done((object, error))
                    }
                ).resume()
            }
            try await Task.sleep(nanoseconds: 100_000_000)
            XCTAssertEqual(completions.count, 1)
            XCTAssertEqual(
                code(outcome.1), URLError.Code.dataLengthExceedsMaximum.rawValue,
                "\(transport): \(String(describing: outcome.1))")
            XCTAssertTrue((outcome.1 as NSError?)?.localizedDescription.contains("in-memory limit") == true)
            XCTAssertNil(outcome.0, "no partial body")
        }
    }

    func testLimitsPerTaskForDownloadsAndStreams() async throws {
        let body = String(repeating: "y", count: 300_000)
        let server = try await start { _ in .respond(RawFaultServer.response(body: body)) }
        let manager = HTTPSessionManager(baseURL: server.url())
        manager.responseSerializer = HTTPResponseSerializer()
        manager.responseBodyLimits = ResponseBodyLimits(
            maximumInMemory: 100_000, maximumToFile: 100_000, maximumStreamed: 100_000)
        // One task may lift the manager's limit.
        let lifted: Error? = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/lifted")), completionHandler: { _, _, error in done(error) })
            manager.setResponseBodyLimits(ResponseBodyLimits(maximumInMemory: nil), for: task)
            task.resume()
        }
        XCTAssertNil(lifted)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("sk-limit-\(UUID().uuidString)")
        let download: (URL?, Error?) = try await awaitCallback { done in
            manager.downloadTask(
                with: URLRequest(url: server.url("/file")), destination: { _, _ in destination },
                completionHandler: { _, url, error in done((url, error)) }
            ).resume()
        }
        XCTAssertEqual(
            code(download.1), URLError.Code.dataLengthExceedsMaximum.rawValue, "\(String(describing: download.1))")
        XCTAssertNil(
            (download.1 as NSError?)?.userInfo[URLSessionDownloadTaskResumeData], "no resume data for a refused body")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
        do {
            let streamed = try await manager.stream("/stream")
            for try await _ in streamed.body {}
            XCTFail("the stream crossed its limit")
        } catch {
            XCTAssertEqual(code(error), URLError.Code.dataLengthExceedsMaximum.rawValue, "\(error)")
        }
    }

    // MARK: - TLS floor

    func testTLSOlderThan12IsRefusedByDefault() async throws {
        let old = try await LoopbackServer.start(tls: TestCertificates.localhost, maximumTLSVersion: .tlsv11)
        defer { Task { try? await old.shutdown() } }
        let manager = manager()
        let pin = try TestCertificates.derCertificate(at: TestCertificates.rootCAFile)
        manager.securityPolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pin])
        manager.securityPolicy.allowInvalidCertificates = true
        let (_, error) = try await run(manager, URLRequest(url: old.url("/get")))
        XCTAssertEqual(code(error), URLError.secureConnectionFailed.rawValue, "\(String(describing: error))")
        // OpenSSL's reason, not libcurl's bare "SSL connect error" (a badssl-style probe found nothing else said).
        let description = (error as NSError?)?.localizedDescription ?? ""
        XCTAssertTrue(description.hasPrefix("The TLS handshake failed: "), description)
        XCTAssertFalse(description.hasSuffix("SSL connect error."), description)
        XCTAssertTrue(old.requests.isEmpty)

        let current = try await LoopbackServer.start(tls: TestCertificates.localhost)
        defer { Task { try? await current.shutdown() } }
        manager.tlsMaximumSupportedProtocolVersion = .TLSv12
        let (response, okError) = try await run(manager, URLRequest(url: current.url("/get")))
        XCTAssertNil(okError)
        XCTAssertEqual(response?.statusCode, 200)
    }

    // MARK: - Soak

    func testTenThousandRequestsUnderRandomFaultsEachCompleteOnceAndNoPOSTTwice() async throws {
        let server = try await start { request in
            // Seeded by the request's own target, so that a run is repeatable.
            let seed = request.target.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
            switch seed % 10 {
            case 0: return .reset
            case 1: return .respondAndClose(RawFaultServer.response(body: "bye"))
            case 2: return .respondAndClose(Data("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort".utf8))
            default: return .respond(RawFaultServer.response())
            }
        }
        let manager = manager(timeout: 10)
        let total = 10_000
        let completions = LockedBox<[Int: Int]>([:])
        let all = OnceBox<Void>()
        let next = LockedBox(0)
        @Sendable func launch() {
            let index = next.write { value -> Int in
                defer { value += 1 }
                return value
            }
            guard index < total else { return }
            var request = URLRequest(url: server.url("/r\(index)"))
            if index % 2 == 0 {
                request.httpMethod = "POST"
                request.httpBody = Data("\(index)".utf8)
            }
            manager.dataTask(
                with: request,
                completionHandler: { _, _, _ in
                    let finished = completions.write { counts -> Int in
                        counts[index, default: 0] += 1
                        return counts.count
                    }
                    if finished == total { all.resolve(()) }
                    launch()
                }
            ).resume()
        }
        let before = residentMiB()
        for _ in 0..<64 { launch() }
        try await all.value(timeout: 300, file: #filePath, line: #line)
        try await Task.sleep(nanoseconds: 200_000_000)
        let counts = completions.wrappedValue
        XCTAssertEqual(counts.count, total)
        XCTAssertTrue(counts.values.allSatisfy { $0 == 1 }, "every task completed exactly once")
        var posts: [String: Int] = [:]
        for request in server.requests where request.method == "POST" { posts[request.target, default: 0] += 1 }
        XCTAssertEqual(posts.values.filter { $0 > 1 }.count, 0, "no POST reached the server twice")
        XCTAssertLessThan(residentMiB() - before, 64, "memory stays bounded")
    }

    private func residentMiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
        }
        return 0
    }
}

/// A request serializer whose subclass adds a field that is not a token after the checked default fields.
private final class FieldAddingSerializer: HTTPRequestSerializer, @unchecked Sendable {
    override func request(
        bySerializingRequest request: URLRequest, withParameters parameters: Any?
    ) throws
        -> URLRequest
    {
        var request = try super.request(bySerializingRequest: request, withParameters: parameters)
        request.setValue("1", forHTTPHeaderField: "X Bad")
        return request
    }
}
