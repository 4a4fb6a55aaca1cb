import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// SessionKit's libcurl transport over plain HTTP: the behaviours it shares with the Foundation transport.
final class CurlTransportTests: LoopbackTestCase {
    func testVerbsHeadersAndJSON() async throws {
        let manager = makeManager(transport: .curl)
        let get = try await manager.get("/get", parameters: ["q": "a b"], headers: ["X-Test": "1"])
        XCTAssertEqual((get.object as? [String: Any])?["args"] as? [String: String], ["q": "a b"])
        XCTAssertEqual(server.requests.last?.header("X-Test"), "1")
        XCTAssertNotNil(server.requests.last?.header("User-Agent"))
        manager.requestSerializer = JSONRequestSerializer()
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            let result = try await manager.request(method, "/anything", parameters: ["n": 1])
            XCTAssertEqual((result.object as? [String: Any])?["method"] as? String, method)
        }
        XCTAssertEqual(
            String(decoding: try XCTUnwrap(server.requests.last(where: { $0.method == "POST" })).body, as: UTF8.self),
            #"{"n":1}"#)
        let head = try await manager.head("/get")
        XCTAssertEqual(head.statusCode, 200)
        XCTAssertTrue(head.data.isEmpty)
    }

    /// Easy handles are kept and reset between transfers (`CurlHandlePool`): a request on a kept handle carries
    /// nothing of the one before it, neither its method, its "no body" (HEAD), nor its fields. Round after round, the
    /// handles of earlier rounds come back.
    func testAKeptEasyHandleCarriesNothingIntoTheNextRequest() async throws {
        let manager = makeManager(transport: .curl)
        manager.responseSerializer = HTTPResponseSerializer()
        for round in 0..<4 {
            let deleted = try await manager.request("DELETE", "/anything", parameters: nil)
            XCTAssertEqual(server.requests.last?.method, "DELETE", "round \(round)")
            XCTAssertEqual(deleted.statusCode, 200)
            let got = try await manager.get("/anything", headers: ["X-Once": "\(round)"])
            XCTAssertEqual(server.requests.last?.method, "GET", "the last request's method stays with it")
            XCTAssertEqual(server.requests.last?.header("X-Once"), "\(round)")
            XCTAssertFalse(got.data.isEmpty)
            let head = try await manager.head("/get")
            XCTAssertTrue(head.data.isEmpty)
            let after = try await manager.get("/get")
            XCTAssertEqual(server.requests.last?.method, "GET")
            XCTAssertNil(server.requests.last?.header("X-Once"), "a field of an earlier request is not sent again")
            XCTAssertFalse(after.data.isEmpty, "a HEAD's no-body setting stays with the HEAD")
        }
    }

    func testStatusFailureGzipAndLargeBody() async throws {
        let manager = makeManager(transport: .curl)
        do {
            _ = try await manager.get("/status/503")
            XCTFail("a 503 must fail")
        } catch {
            XCTAssertEqual((error as NSError).code, URLError.badServerResponse.rawValue)
        }
        let gzip = try await manager.get("/gzip")
        XCTAssertEqual((gzip.object as? [String: Any])?["gzipped"] as? Bool, true)
        manager.responseSerializer = HTTPResponseSerializer()
        let bytes = try await manager.get("/stream-bytes/2000000?chunk_size=4096")
        XCTAssertEqual(bytes.data, ByteGenerator.bytes(count: 2_000_000))
    }

    func testUploadFromDataBecomesADataTaskWithBody() async throws {
        let manager = makeManager(transport: .curl)
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        let body = ByteGenerator.bytes(count: 300_000, seed: 5)
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(with: request, from: body, completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertNil(error)
        XCTAssertEqual(server.requests.last?.body, body)
    }

    /// Each hop of a redirect asks the cookie storage anew: a cookie the redirect response replaced or added goes on
    /// the next hop, also when the first hop carried cookies (it sent the old value).
    func testACookieARedirectSetsGoesOnTheNextHop() async throws {
        let manager = makeCurlManagerWithOwnCookies()
        func cookies(after path: String) async throws -> [String: String] {
            let object = try await manager.get(path).object
            return try XCTUnwrap((object as? [String: Any])?["cookies"] as? [String: String])
        }
        let first = try await cookies(after: "/cookies/set?a=1")
        XCTAssertEqual(first, ["a": "1"])
        let replaced = try await cookies(after: "/cookies/set?a=2")
        XCTAssertEqual(replaced, ["a": "2"], "the redirect's new value, not the one the first hop sent")
        let added = try await cookies(after: "/cookies/set?z=9")
        XCTAssertEqual(added, ["a": "2", "z": "9"])
        XCTAssertEqual(server.requests.last?.header("Cookie")?.contains("z=9"), true)
    }

    /// The curl transport speaks HTTP only: another scheme (which libcurl would run: a file read, gopher or dict to
    /// any host) is refused before anything is sent, and so is an HTTP URL without a host or with a port out of range.
    func testOnlyHTTPURLsWithAHostAreSent() async throws {
        let manager = URLSessionManager(sessionConfiguration: .ephemeral)
        manager.transport = .curl
        server.clearRequests()
        let cases: [(String, URLError.Code)] = [
            ("gopher://127.0.0.1:\(server.port)/_GET%20/gopher%20HTTP/1.0%0D%0A%0D%0A", .unsupportedURL),
            ("dict://127.0.0.1:\(server.port)/d", .unsupportedURL),
            ("file:///etc/hostname", .unsupportedURL),
            ("http:///get", .badURL),
            ("http://127.0.0.1:99999/get", .badURL),
            // A redirect's target is checked as the first request is (libcurl reads one to three slashes).
            ("http://127.0.0.1:\(server.port)/redirect-to?url=http:///get", .badURL),
            ("http://127.0.0.1:\(server.port)/redirect-to?url=https:/localhost/get", .badURL),
        ]
        for (string, code) in cases {
            let url = try XCTUnwrap(URL(string: string))
            let error: Error? = try await awaitCallback { done in
                manager.dataTask(with: URLRequest(url: url)) { _, _, error in done(error) }.resume()
            }
            XCTAssertEqual((error as? URLError)?.code, code, "\(string): \(String(describing: error))")
        }
        let reached = server.requests.map(\.path)
        XCTAssertEqual(reached, ["/redirect-to", "/redirect-to"], "nothing else reached the server")
    }

    func testConfigurationHeadersCookiesAndUploadProgress() async throws {
        let manager = makeCurlManagerWithOwnCookies { $0.httpAdditionalHeaders = ["X-Config": "yes"] }
        _ = try await manager.get("/headers")
        XCTAssertEqual(server.requests.last?.header("X-Config"), "yes")
        manager.responseSerializer = {
            let s = HTTPResponseSerializer(); s.acceptableStatusCodes = nil; return s
        }()
        _ = try await manager.get("/cookies/set", parameters: ["flavour": "oat"])
        _ = try await manager.get("/cookies")
        XCTAssertEqual(server.requests.last?.header("Cookie"), "flavour=oat", "a cookie set by the server is sent back")

        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        let last = LockedBox<Double>(0)
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(
                    with: request, from: Data(count: 2_000_000), progress: { last.wrappedValue = $0.fractionCompleted },
                    completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertNil(error)
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)
    }

    func testMaximumConnectionsPerHost() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 2
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        let total = 40
        let finished = CallCounter()
        let all = OnceBox<Void>()
        for _ in 0..<total {
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/delay/0.05")),
                    completionHandler: { _, _, _ in
                        finished.increment()
                        if finished.count == total { all.resolve(()) }
                    }))
        }
        try await all.value(timeout: 60, file: #filePath, line: #line)
        XCTAssertLessThanOrEqual(server.connectionCount, 2)
    }

    /// RFC 9110 15.4: only a POST answered by a 301 or 302, and anything but a GET or HEAD answered by a 303, becomes
    /// a GET without its body and the fields that describe it; a PUT, DELETE or PATCH answered by a 301 or 302 is sent
    /// again as itself, with its body (it was turned into a GET the caller never asked for).
    func testRedirectsChangeTheMethodOnlyWhereRFC9110AllowsIt() async throws {
        let manager = URLSessionManager(sessionConfiguration: .ephemeral)
        manager.transport = .curl
        let body = Data("the body".utf8)
        let cases: [(method: String, status: Int, sent: String, keepsBody: Bool)] = [
            ("PUT", 301, "PUT", true), ("DELETE", 302, "DELETE", true), ("PATCH", 301, "PATCH", true),
            ("POST", 301, "GET", false), ("POST", 302, "GET", false), ("POST", 307, "POST", true),
            ("PUT", 308, "PUT", true), ("PUT", 303, "GET", false), ("POST", 303, "GET", false),
        ]
        for (method, status, sent, keepsBody) in cases {
            server.clearRequests()
            var request = URLRequest(url: server.url("/redirect-to?url=/anything&status_code=\(status)"))
            request.httpMethod = method
            request.httpBody = body
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            request.setValue("en", forHTTPHeaderField: "Content-Language")
            let error: Error? = try await awaitCallback { done in
                manager.dataTask(with: request) { _, _, error in done(error) }.resume()
            }
            let label = "\(method) answered by \(status)"
            XCTAssertNil(error, label)
            let last = try XCTUnwrap(server.requests.last, label)
            XCTAssertEqual(last.path, "/anything", label)
            XCTAssertEqual(last.method, sent, label)
            XCTAssertEqual(last.body, keepsBody ? body : Data(), label)
            XCTAssertEqual(last.header("Content-Type"), keepsBody ? "text/plain" : nil, label)
            XCTAssertEqual(last.header("Content-Language"), keepsBody ? "en" : nil, label)
        }
    }

    /// A multipart body is read in place, as it is sent: a 307 or 308 (whose server read the whole body first, as
    /// the test server does) left it at its end, so the redirected POST declared its `Content-Length` and sent
    /// nothing, and the server waited for the body. It goes again from its first byte, and so does the same request
    /// sent by a second task. A body with a caller's stream, which cannot be read twice, fails the redirect.
    func testAMultipartBodyGoesWholeAgainAfterARedirectAndInASecondTask() async throws {
        let manager = URLSessionManager(sessionConfiguration: .ephemeral)
        manager.transport = .curl
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-multipart-\(UUID()).bin")
        try Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        func send(_ request: URLRequest) async throws -> (Int?, Error?) {
            try await awaitCallback { done in
                manager.dataTask(
                    with: request,
                    completionHandler: { response, _, error in
                        done(((response as? HTTPURLResponse)?.statusCode, error))
                    }
                ).resume()
            }
        }
        for status in [307, 308] {
            server.clearRequests()
            let request = try HTTPRequestSerializer().multipartFormRequest(
                withMethod: "POST",
                urlString: server.url("/redirect-to?url=/anything&status_code=\(status)").absoluteString,
                parameters: ["name": "value"]
            ) { form in
                try form.appendPart(withFileURL: file, name: "file")
                form.appendPart(withFormData: Data("after the file".utf8), name: "note")
            }
            let (code, error) = try await send(request)
            XCTAssertNil(error, "\(status)")
            XCTAssertEqual(code, 200, "\(status)")
            // The same request again, in a task of its own: its stream was read by the first task.
            let (again, againError) = try await send(request)
            XCTAssertNil(againError, "\(status), sent again")
            XCTAssertEqual(again, 200, "\(status), sent again")
            let requests = server.requests
            XCTAssertEqual(requests.map(\.path), ["/redirect-to", "/anything", "/redirect-to", "/anything"])
            let whole = try XCTUnwrap(requests.first?.body)
            XCTAssertGreaterThan(whole.count, 100_000)
            for sent in requests {
                XCTAssertEqual(sent.body, whole, "\(status): \(sent.uri) carries the whole body")
                XCTAssertEqual(sent.header("Content-Length"), String(whole.count))
            }
        }

        let stream = InputStream(data: Data(repeating: 0x61, count: 1000))
        let once = try HTTPRequestSerializer().multipartFormRequest(
            withMethod: "POST", urlString: server.url("/redirect-to?url=/anything&status_code=307").absoluteString,
            parameters: nil
        ) { form in
            form.appendPart(with: stream, name: "stream", fileName: "s.txt", length: 1000, mimeType: "text/plain")
        }
        let (_, error) = try await send(once)
        XCTAssertEqual((error as? URLError)?.code, .requestBodyStreamExhausted, "\(String(describing: error))")
    }

    /// A caller's body stream with a `Content-Length` it does not fill (or overfills) fails the task, saying so; the
    /// connection is not left for the next request to find out of step.
    func testABodyStreamThatDoesNotMatchItsContentLengthFailsTheTask() async throws {
        let manager = URLSessionManager(sessionConfiguration: .ephemeral)
        manager.transport = .curl
        for (count, expected) in [(10, "ended after 10 of its declared 100 bytes"), (150, "past its declared 100")] {
            var request = URLRequest(url: server.url("/post"))
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data(repeating: 0x62, count: count))
            request.setValue("100", forHTTPHeaderField: "Content-Length")
            let error: Error? = try await awaitCallback { done in
                manager.dataTask(with: request, completionHandler: { _, _, error in done(error) }).resume()
            }
            XCTAssertEqual((error as? URLError)?.code, .cannotDecodeRawData, "\(count): \(String(describing: error))")
            XCTAssertTrue(error?.localizedDescription.contains(expected) == true, "\(String(describing: error))")
            let next: Error? = try await awaitCallback { done in
                manager.dataTask(
                    with: URLRequest(url: server.url("/get")), completionHandler: { _, _, error in done(error) }
                )
                .resume()
            }
            XCTAssertNil(next)
        }
    }

    func testRedirectsFollowLimitCycleAndTheManagersClosure() async throws {
        let manager = makeManager(transport: .curl)
        let followed = try await manager.get("/redirect/3")
        XCTAssertEqual(followed.response.url?.path, "/get")
        XCTAssertEqual(server.requests.map(\.uri), ["/redirect/3", "/redirect/2", "/redirect/1", "/get"])
        for path in ["/redirect/20", "/redirect-loop"] {
            do {
                _ = try await manager.get(path)
                XCTFail("\(path) must fail")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .httpTooManyRedirects, "\(path): \(error)")
            }
        }
        let seen = LockedBox<[String]>([])
        manager.taskWillPerformHTTPRedirection = { _, _, _, request in
            seen.write { $0.append(request.url?.path ?? "") }
            return nil
        }
        manager.responseSerializer = {
            let s = HTTPResponseSerializer(); s.acceptableStatusCodes = nil; return s
        }()
        let stopped = try await manager.get("/redirect/2")
        XCTAssertEqual(stopped.statusCode, 302)
        XCTAssertEqual(seen.wrappedValue, ["/redirect/1"])
        // A refused redirect is the response with its body, as URLSession returns it.
        let refused = try await manager.get("/redirect-to?url=/get&body=moved")
        XCTAssertEqual(refused.statusCode, 302)
        XCTAssertEqual(String(decoding: refused.data, as: UTF8.self), "moved")
    }

    /// A redirect back to the same URL that sets a cookie is no cycle: the cookie changes the answer (a login's or a
    /// cookie check's round trip). The same redirect without a cookie still is one.
    func testARedirectToItselfThatSetsACookieIsFollowed() async throws {
        let manager = makeCurlManagerWithOwnCookies()
        let opened = try await manager.get("/cookie-gate")
        XCTAssertEqual(opened.statusCode, 200)
        XCTAssertEqual(server.requests.map(\.uri), ["/cookie-gate", "/cookie-gate"])
        XCTAssertEqual(server.requests.last?.header("Cookie"), "gate=open")
    }

    /// A redirect to a URL the transport would not load given directly fails as that URL would: `.unsupportedURL`.
    func testARedirectToAnotherSchemeIsAnUnsupportedURL() async throws {
        let manager = makeManager(transport: .curl)
        for target in ["file:///etc/passwd", "ftp://127.0.0.1/x", "data:text/plain,x"] {
            var components = URLComponents()
            components.queryItems = [URLQueryItem(name: "url", value: target)]
            do {
                _ = try await manager.get("/redirect-to?\(components.percentEncodedQuery ?? "")")
                XCTFail("\(target) was followed")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .unsupportedURL, "\(target): \(error)")
            }
        }
    }

    /// An empty `Location` is the request's own URL (RFC 3986 5.2: an empty reference resolves to its base): a POST
    /// answered by a 303 with it is a GET of the same URL.
    func testAnEmptyLocationIsTheSameURL() async throws {
        let manager = makeManager(transport: .curl)
        manager.responseSerializer = HTTPResponseSerializer()
        let path = "/redirect-to?url=&status_code=303"
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "POST"
        request.httpBody = Data("x".utf8)
        let (response, error): (URLResponse?, Error?) = try await awaitCallback { done in
            manager.dataTask(with: request) { response, _, error in done((response, error)) }.resume()
        }
        XCTAssertEqual((error as? URLError)?.code, .httpTooManyRedirects, "the server answers a 303 again")
        XCTAssertNil(response)
        XCTAssertEqual(server.requests.map(\.method).prefix(2), ["POST", "GET"])
        XCTAssertEqual(Set(server.requests.map(\.uri)), [path], "the same URL each time")
    }

    func testARedirectDecidedWhileTheTaskIsSuspendedWaitsForResumeAndIsNotLost() async throws {
        let manager = makeManager(transport: .curl)
        // The manager's redirect closure runs while the redirect is being decided: the caller suspends the task there.
        manager.taskWillPerformHTTPRedirection = { _, task, _, request in
            task.suspend()
            return request
        }
        let completions = LockedBox<[Int]>([])
        let finished = expectation(description: "completion")
        let task = manager.dataTask(with: URLRequest(url: server.url("/redirect/1"))) { response, _, error in
            completions.write { $0.append((response as? HTTPURLResponse)?.statusCode ?? -1) }
            XCTAssertNil(error)
            finished.fulfill()
        }
        task.resume()
        // The next attempt starts, held at its first body bytes: the server sees it, the task stays suspended.
        try await waitUntil("the redirect's request reaches the server") { server.requests.map(\.uri).contains("/get") }
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(task.state, .suspended)
        XCTAssertEqual(completions.wrappedValue, [], "a suspended task does not complete")
        task.resume()
        await fulfillment(of: [finished], timeout: 10)
        XCTAssertEqual(completions.wrappedValue, [200])
        XCTAssertEqual(task.currentRequest?.url?.path, "/get")
        XCTAssertEqual(server.requests.map(\.uri), ["/redirect/1", "/get"], "each request sent once")
    }

    func testRedirectToAnotherOriginDropsCredentials() async throws {
        let other = try await LoopbackServer.start()
        defer { Task { try? await other.shutdown() } }
        let manager = makeManager(transport: .curl)
        manager.requestSerializer.setAuthorizationHeaderField(username: "u", password: "p")
        _ = try await manager.get(
            "/redirect-to", parameters: ["url": other.url("/get").absoluteString],
            headers: ["Cookie": "secret=1"])
        XCTAssertNotNil(server.requests.last?.header("Authorization"))
        let arrived = try XCTUnwrap(other.requests.last)
        XCTAssertNil(arrived.header("Authorization"))
        XCTAssertNil(arrived.header("Cookie"))
    }

    func testDownloadIsStreamedToTheDestinationWithProgress() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("sk-curl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let last = LockedBox<Double>(0)
        let outcome: (URL?, Error?) = try await awaitCallback { done in
            manager.resume(
                manager.downloadTask(
                    with: URLRequest(url: server.url("/bytes/3000000?seed=4")),
                    progress: { last.wrappedValue = $0.fractionCompleted },
                    destination: { _, _ in destination },
                    completionHandler: { _, url, error in done((url, error)) }))
        }
        XCTAssertNil(outcome.1)
        XCTAssertEqual(outcome.0, destination)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: 3_000_000, seed: 4))
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)
        let failed: Error? = try await awaitCallback { done in
            manager.resume(
                manager.downloadTask(
                    with: URLRequest(url: server.url("/status/404")),
                    destination: { _, _ in destination.appendingPathExtension("404") },
                    completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertEqual((failed as NSError?)?.code, URLError.badServerResponse.rawValue)
        try? FileManager.default.removeItem(at: destination.appendingPathExtension("404"))
    }

    /// A caller's body stream whose `read` waits (as a socket's or a pipe's does, here until the test feeds it) holds
    /// back its own upload only: another request on the same engine completes meanwhile, and the upload goes once the
    /// stream gives its bytes and its end.
    func testACallersStreamThatWaitsHoldsBackNoOtherTransfer() async throws {
        let manager = makeManager(transport: .curl)
        let stream = WaitingInputStream()
        // Ending it ends the body: a transfer that waits in `read` is never left waiting when the test ends.
        defer { stream.end() }
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.httpBodyStream = stream
        let upload = OnceBox<Error?>()
        let task = manager.uploadTask(withStreamedRequest: request) { _, _, error in upload.resolve(error) }
        manager.resume(task)
        try await stream.firstRead.value(timeout: 10, file: #filePath, line: #line)
        let other: Error? = try await awaitCallback(timeout: 10) { done in
            manager.dataTask(with: URLRequest(url: server.url("/get"))) { _, _, error in done(error) }.resume()
        }
        XCTAssertNil(other)
        XCTAssertFalse(server.requests.contains { $0.path == "/post" }, "the upload waits for its stream")
        stream.feed(Data("hello".utf8))
        stream.end()
        let error = try await upload.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual(server.requests.last { $0.path == "/post" }?.body, Data("hello".utf8))
    }

    /// A server that closes the connection while a streamed upload waits for its stream's next bytes ends the task
    /// with `networkConnectionLost` then, once: not at the stream's next bytes, nor at the request's timeout (which
    /// reads `timedOut`). The task API's side of `HTTPCoreAPITests`' case for a writer. (A close the server makes with
    /// the body's first bytes unread is a reset, which libcurl may read itself: the same error.)
    func testAServerThatClosesWhileAStreamedUploadWaitsForItsStreamEndsTheTask() async throws {
        let raw = try await RawFaultServer.start(closesBeforeBody: true) { _ in .close }
        defer { Task { try? await raw.shutdown() } }
        let manager = makeManager(timeout: 20, transport: .curl)
        let stream = WaitingInputStream()
        defer { stream.end() }  // the pump's read is never left waiting when the test ends
        stream.feed(Data("first".utf8))
        var request = URLRequest(url: raw.url("/upload"))
        request.httpMethod = "POST"
        request.httpBodyStream = stream
        let completions = LockedBox(0)
        let error: Error? = try await awaitCallback(timeout: 30) { done in
            manager.resume(
                manager.uploadTask(withStreamedRequest: request) { _, _, error in
                    completions.write { $0 += 1 }
                    done(error)
                })
        }
        XCTAssertEqual((error as? URLError)?.code, .networkConnectionLost, "\(String(describing: error))")
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(completions.wrappedValue, 1, "one completion")
        XCTAssertTrue(raw.requests.isEmpty, "no request was read whole")
    }

    func testFileStreamAndMultipartUploadsWithExactLength() async throws {
        let manager = makeManager(transport: .curl)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-curl-up-\(UUID().uuidString)")
        let body = ByteGenerator.bytes(count: 700_000, seed: 8)
        try body.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var request = URLRequest(url: server.url("/post"))
        request.httpMethod = "POST"
        let last = LockedBox<Double>(0)
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(
                    with: request, fromFile: file, progress: { last.wrappedValue = $0.fractionCompleted },
                    completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertNil(error)
        XCTAssertEqual(server.requests.last?.body, body)
        XCTAssertEqual(server.requests.last?.header("Content-Length"), String(body.count))
        XCTAssertEqual(last.wrappedValue, 1.0, accuracy: 0.0001)

        var streamed = request
        streamed.httpBodyStream = InputStream(data: body)
        let streamError: Error? = try await awaitCallback { done in
            manager.resume(
                manager.uploadTask(withStreamedRequest: streamed, completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertNil(streamError)
        XCTAssertEqual(server.requests.last?.body, body)

        let object: Any? = try await awaitCallback { done in
            manager.post(
                "/post", parameters: ["k": "v"], headers: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: file, name: "file")
                }, progress: nil, success: { _, object in done(object) },
                failure: { _, error in
                    XCTFail("\(error)"); done(nil)
                })
        }
        let files = try XCTUnwrap((object as? [String: Any])?["files"] as? [String: Any])
        XCTAssertEqual(files["file.length"] as? Int, body.count)
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(
            recorded.header("Content-Length"), String(recorded.bodyLength), "multipart goes with its exact length")
        XCTAssertNil(recorded.header("Transfer-Encoding"))
    }

    func testTimingsArriveBeforeTheCompletionAndShowReuse() async throws {
        let manager = makeManager(transport: .curl)
        let collected = LockedBox<[TransferTimings]>([])
        manager.taskDidFinishCollectingTimings = { _, _, timings in collected.write { $0.append(timings) } }
        for _ in 0..<2 {
            let seenBeforeCompletion: Int = try await awaitCallback { done in
                manager.resume(
                    manager.dataTask(
                        with: URLRequest(url: server.url("/bytes/5000")),
                        completionHandler: { _, _, _ in
                            done(collected.wrappedValue.count)
                        }))
            }
            XCTAssertEqual(seenBeforeCompletion, collected.wrappedValue.count)
        }
        let timings = collected.wrappedValue
        XCTAssertEqual(timings.count, 2)
        XCTAssertTrue(timings[0].newConnection)
        XCTAssertFalse(timings[1].newConnection, "the second request reuses the connection")
        XCTAssertEqual(timings[0].bytesReceived, 5000)
        XCTAssertGreaterThan(timings[0].total, 0)
        XCTAssertLessThanOrEqual(timings[0].firstByte, timings[0].total)
    }

    func testProxyFromTheConfiguration() async throws {
        // The loopback server plays the proxy: it receives the request in absolute form.
        let origin = try await LoopbackServer.start()
        defer { Task { try? await origin.shutdown() } }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = [
            "HTTPEnable": true, "HTTPProxy": "127.0.0.1", "HTTPPort": server.port,
        ]
        let manager = HTTPSessionManager(sessionConfiguration: configuration)
        manager.transport = .curl
        manager.responseSerializer = {
            let s = HTTPResponseSerializer(); s.acceptableStatusCodes = nil; return s
        }()
        _ = try await manager.get(origin.url("/get?via=proxy").absoluteString)
        XCTAssertEqual(server.requests.last?.uri, origin.url("/get?via=proxy").absoluteString, "sent to the proxy")
        XCTAssertTrue(origin.requests.isEmpty, "not to the origin")
    }

    private func download(
        _ manager: HTTPSessionManager, resumeData: Data? = nil, path: String = "",
        to destination: URL
    ) async throws -> (URL?, Error?) {
        try await awaitCallback { done in
            let completion: (URLResponse?, URL?, Error?) -> Void = { _, url, error in done((url, error)) }
            let task =
                resumeData.map {
                    manager.downloadTask(
                        withResumeData: $0, destination: { _, _ in destination }, completionHandler: completion)
                }
                ?? manager.downloadTask(
                    with: URLRequest(url: server.url(path)), destination: { _, _ in destination },
                    completionHandler: completion)
            manager.resume(task)
        }
    }

    func testDownloadCutByTheNetworkResumesWithRangeAndIfRange() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let total = 3_000_000
        let cut = try await download(manager, path: "/bytes/\(total)?seed=6&drop_after=1000000", to: destination)
        var error = try XCTUnwrap(cut.1 as NSError?)
        // The server cuts the first response after 1,000,000 body bytes; the resume brings the rest.
        var resumes = 0
        while let resumeData = error.userInfo[URLSessionDownloadTaskResumeData] as? Data, resumes < 5 {
            resumes += 1
            let resumed = try await download(manager, resumeData: resumeData, to: destination)
            guard let next = resumed.1 as NSError? else { break }
            error = next
        }
        XCTAssertEqual(resumes, 1)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: total, seed: 6))
        let ranges = server.requests.compactMap { $0.header("Range") }
        XCTAssertEqual(ranges, ["bytes=1000000-"])
        XCTAssertEqual(server.requests.last?.header("If-Range"), "\"bytes-\(total)-6\"")
    }

    func testDownloadResumedFromResumeDataReportsItsOffsetAndTotalBeforeItsBytes() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let total: Int64 = 3_000_000
        let events = LockedBox<[String]>([])
        manager.downloadTaskDidResume = { _, task, offset, expected in
            events.write { $0.append("resume \(task.taskIdentifier) at \(offset) of \(expected)") }
        }
        manager.downloadTaskDidWriteData = { _, _, _, _, _ in
            events.write { if $0.last != "data" { $0.append("data") } }
        }
        let cut = try await download(manager, path: "/bytes/\(total)?seed=6&drop_after=1000000", to: destination)
        let resumeData = try XCTUnwrap((cut.1 as NSError?)?.userInfo[URLSessionDownloadTaskResumeData] as? Data)
        XCTAssertEqual(events.wrappedValue, ["data"], "a download that starts afresh does not resume")
        events.write { $0.removeAll() }

        let progress = LockedBox<[Int64]>([])
        let resumed: (URLSessionTask, Error?) = try await awaitCallback { done in
            let box = LockedBox<URLSessionTask?>(nil)
            let task = manager.downloadTask(
                withResumeData: resumeData,
                progress: { step in progress.write { $0.append(step.totalUnitCount) } },
                destination: { _, _ in destination },
                completionHandler: { _, _, error in box.wrappedValue.map { done(($0, error)) } })
            box.wrappedValue = task
            manager.resume(task)
        }
        XCTAssertNil(resumed.1)
        // As URLSession's `didResumeAtOffset`: once, with the bytes kept and the whole entity's size, before any byte.
        XCTAssertEqual(events.wrappedValue, ["resume \(resumed.0.taskIdentifier) at 1000000 of \(total)", "data"])
        XCTAssertEqual(progress.wrappedValue.first, total, "the task's own progress counts the whole entity too")
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: Int(total), seed: 6))
    }

    func testRestartedDownloadReportsResumingAtZero() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let resumes = LockedBox<[[Int64]]>([])
        manager.downloadTaskDidResume = { _, _, offset, expected in resumes.write { $0.append([offset, expected]) } }
        let cut = try await download(manager, path: "/bytes/500000?seed=7&drop_after=400000", to: destination)
        var resumeData = try XCTUnwrap((cut.1 as NSError?)?.userInfo[URLSessionDownloadTaskResumeData] as? Data)
        // Another validator: the server's If-Range check fails and it sends the whole entity with 200.
        let range = try XCTUnwrap(resumeData.range(of: Data("bytes-500000".utf8)))
        resumeData.replaceSubrange(range, with: Data("bytes-999999".utf8))
        let restarted = try await download(manager, resumeData: resumeData, to: destination)
        XCTAssertNil(restarted.1)
        // URLSession's rule: an offset of 0 when the bytes on disk could not be reused.
        XCTAssertEqual(resumes.wrappedValue, [[0, 500_000]])
    }

    func testChangedEntityRestartsTheDownloadAndBadResumeDataFails() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let cut = try await download(manager, path: "/bytes/500000?seed=7&drop_after=400000", to: destination)
        var resumeData = try XCTUnwrap((cut.1 as NSError?)?.userInfo[URLSessionDownloadTaskResumeData] as? Data)
        // Another validator: the server's If-Range check fails and it sends the whole entity with 200.
        let range = try XCTUnwrap(resumeData.range(of: Data("bytes-500000".utf8)))
        resumeData.replaceSubrange(range, with: Data("bytes-999999".utf8))
        let restarted = try await download(manager, resumeData: resumeData, to: destination)
        XCTAssertNil(restarted.1)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: 500_000, seed: 7))

        let bad = try await download(manager, resumeData: Data("not resume data".utf8), to: destination)
        XCTAssertEqual((bad.1 as NSError?)?.code, SessionKitError.Code.resumeDataUnavailable.rawValue)
    }

    func testCancelProducingResumeData() async throws {
        let manager = makeManager(transport: .curl)
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sk-resume-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let total = 200_000_000
        let resumeData: Data? = try await awaitCallback { done in
            let started = OnceBox<Void>()
            let task = manager.downloadTask(
                with: URLRequest(url: server.url("/bytes/\(total)?seed=9")),
                progress: { _ in started.resolve(()) },
                destination: { _, _ in destination }, completionHandler: nil)
            manager.resume(task)
            Task {
                try? await started.value(timeout: 10, file: #filePath, line: #line)
                manager.cancel(task, producingResumeData: { done($0) })
            }
        }
        let data = try XCTUnwrap(resumeData, "a download cancelled midway has resume data")
        let resumed = try await download(manager, resumeData: data, to: destination)
        XCTAssertNil(resumed.1)
        let size = try XCTUnwrap(
            (try FileManager.default.attributesOfItem(atPath: destination.path)[.size]) as? NSNumber)
        XCTAssertEqual(size.intValue, total)

        XCTAssertEqual(server.requests.last?.header("Range")?.hasPrefix("bytes="), true)
    }

    func testEqualPoliciesShareConnectionsAndOthersDoNot() async throws {
        let first = makeManager(transport: .curl)
        let second = makeManager(transport: .curl)
        _ = try await first.get("/get")
        _ = try await second.get("/get")
        XCTAssertEqual(server.connectionCount, 1, "two default policies decide alike: one pool")
        let other = makeManager(transport: .curl)
        other.securityPolicy.validatesDomainName = false
        _ = try await other.get("/get")
        XCTAssertEqual(server.connectionCount, 2, "a policy that decides differently never reuses those connections")
    }

    func testCancelTimeoutAndFaults() async throws {
        let manager = makeManager(timeout: 1, transport: .curl)
        let cancelled: Error? = try await awaitCallback { done in
            let task = manager.dataTask(
                with: URLRequest(url: server.url("/delay/5")), completionHandler: { _, _, error in done(error) })
            manager.resume(task)
            DispatchQueue(label: "test.cancel").asyncAfter(deadline: .now() + 0.2) { task.cancel() }
        }
        XCTAssertEqual((cancelled as? URLError)?.code, .cancelled)
        for (path, code) in [
            ("/fault/never-answer", URLError.Code.timedOut), ("/fault/reset", .networkConnectionLost),
            ("/fault/short-body", .networkConnectionLost),
        ] {
            let box = OnceBox<Error?>()
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url(path)), completionHandler: { _, _, error in box.resolve(error) }))
            let error = try await box.value(timeout: 30, file: #filePath, line: #line)
            XCTAssertEqual((error as? URLError)?.code, code, "\(path): \(String(describing: error))")
            try await Task.sleep(nanoseconds: 100_000_000)
            XCTAssertEqual(box.deliveries, 1)
        }
    }

    func testTimelineIsReadableFromTheResult() async throws {
        let manager = makeManager(transport: .curl)
        let result = try await manager.get("/redirect/1")
        XCTAssertEqual(result.timings.count, 2, "one transfer per redirect step")
        let timeline = try XCTUnwrap(result.timeline)
        XCTAssertGreaterThan(timeline.total, 0)
        // On a reused connection libcurl reports no connect time (0); every step still precedes the first byte.
        XCTAssertLessThanOrEqual(timeline.nameLookup, timeline.firstByte)
        XCTAssertLessThanOrEqual(timeline.connect, timeline.firstByte)
        let first = try XCTUnwrap(result.timings.first)
        XCTAssertTrue(first.newConnection)
        XCTAssertLessThanOrEqual(first.nameLookup, first.connect)
        XCTAssertLessThanOrEqual(timeline.firstByte, timeline.total)
        XCTAssertGreaterThan(timeline.bytesReceived, 0)
        XCTAssertFalse(timeline.newConnection, "the redirect's target came over the kept-alive connection")
    }

    func testALoadingDownloadIsPausedAndResumedInLibcurl() async throws {
        let manager = makeManager(timeout: 1, transport: .curl)  // a pause longer than the idle timeout is not idle
        let size = 48 << 20
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("sk-pause-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let received = LockedBox<Int64>(0)
        let done = OnceBox<Error?>()
        let task = manager.downloadTask(
            with: URLRequest(url: server.url("/bytes/\(size)")),
            progress: { progress in
                received.write { $0 = progress.completedUnitCount }
            }, destination: { _, _ in destination }, completionHandler: { _, _, error in done.resolve(error) })
        manager.resume(task)
        while received.wrappedValue == 0 { try await Task.sleep(nanoseconds: 5_000_000) }
        XCTAssertTrue(manager.suspend(task), "a loading task on the curl transport pauses")
        XCTAssertFalse(manager.suspend(task), "already paused")
        try await Task.sleep(nanoseconds: 300_000_000)  // what was on its way arrives
        let whilePaused = received.wrappedValue
        try await Task.sleep(nanoseconds: 1_500_000_000)
        XCTAssertEqual(received.wrappedValue, whilePaused, "no byte while paused, and no idle timeout")
        XCTAssertLessThan(whilePaused, Int64(size))
        XCTAssertEqual(task.state, .suspended, "a paused task says so")
        manager.resume(task)
        let error = try await done.value(timeout: 60, file: #filePath, line: #line)
        XCTAssertNil(error)
        XCTAssertEqual(try Data(contentsOf: destination), ByteGenerator.bytes(count: size, seed: 42))
    }

    func testResourceTimeoutEndsTheWholeTask() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30  // the idle timeout would wait longer than the server
        configuration.timeoutIntervalForResource = 1
        let manager = URLSessionManager(sessionConfiguration: configuration)
        manager.transport = .curl
        // The body drips over 4 s: never idle for long, but longer than the resource timeout.
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/drip?numbytes=8&duration=4")),
                    completionHandler: { _, _, error in done(error) }))
        }
        XCTAssertEqual((error as? URLError)?.code, .timedOut, "\(String(describing: error))")
    }

    func testManyConcurrentRequestsEachCompleteOnce() async throws {
        let manager = makeManager(timeout: 60, transport: .curl)
        let total = 1_000
        let finished = CallCounter()
        let failures = CallCounter()
        let all = OnceBox<Void>()
        for index in 0..<total {
            manager.resume(
                manager.dataTask(
                    with: URLRequest(url: server.url("/get?i=\(index)")),
                    completionHandler: { _, object, error in
                        if error != nil
                            || ((object as? [String: Any])?["args"] as? [String: String])?["i"] != String(index)
                        {
                            failures.increment()
                        }
                        finished.increment()
                        if finished.count == total { all.resolve(()) }
                    }))
        }
        try await all.value(timeout: 120, file: #filePath, line: #line)
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(finished.count, total)
        XCTAssertEqual(failures.count, 0)
        XCTAssertLessThan(server.connectionCount, total, "connections are reused")
    }
}

/// The curl transport over TLS: the policy decides in the handshake, and a refused server receives no request.
final class CurlPinningTests: XCTestCase {
    private var server: LoopbackServer!

    override func setUp() async throws {
        try await super.setUp()
        server = try await LoopbackServer.start(tls: TestCertificates.localhost)
    }

    override func tearDown() async throws {
        try await server?.shutdown()
        try await super.tearDown()
    }

    private func manager(_ policy: SecurityPolicy) -> HTTPSessionManager {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = .curl
        manager.securityPolicy = policy
        return manager
    }

    private func der(_ name: String) throws -> Data {
        try TestCertificates.derCertificate(at: TestCertificates.directory.appendingPathComponent("\(name).pem"))
    }

    func testPinnedRootCertificatePasses() async throws {
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der("root-ca")])
        policy.allowInvalidCertificates = true  // the test root is not a system root: the pin is the trust
        let result = try await manager(policy).get("/get")
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(server.requests.first?.isTLS, true)
    }

    func testPublicKeyHashPinPasses() async throws {
        let leaf = try Certificate.certificates(fromPEM: try Data(contentsOf: TestCertificates.localhost.chainFile))[0]
        let policy = SecurityPolicy(pinnedPublicKeyHashes: [
            "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", leaf.publicKeyPin,
        ])
        policy.allowInvalidCertificates = true
        let result = try await manager(policy).get("/get")
        XCTAssertEqual(result.statusCode, 200)
    }

    /// A kept handle that carried a transfer one policy accepted gets the next transfer's policy in its handshake:
    /// the other manager's policy, which refuses the server, still refuses it, round after round.
    func testAPolicyRefusesTheServerAfterAnotherPolicyAcceptedItOnAKeptHandle() async throws {
        let trusting = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der("root-ca")])
        trusting.allowInvalidCertificates = true
        let refusing = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
        refusing.allowInvalidCertificates = true
        for _ in 0..<3 {
            let accepted = try await manager(trusting).get("/get")
            XCTAssertEqual(accepted.statusCode, 200)
            do {
                _ = try await manager(refusing).get("/get")
                XCTFail("the refusing policy must fail the handshake")
            } catch {
                XCTAssertEqual((error as NSError).code, URLError.serverCertificateUntrusted.rawValue)
            }
        }
    }

    func testWrongPinsSendNoRequestBytes() async throws {
        let wrongCertificate = SecurityPolicy(
            pinningMode: .certificate, pinnedCertificates: [try der("untrusted-root")])
        wrongCertificate.allowInvalidCertificates = true
        let wrongKey = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
        wrongKey.allowInvalidCertificates = true
        let untrustedRoot = SecurityPolicy.default  // the system store does not know the test root
        let cases: [(SecurityPolicy, URLError.Code)] = [
            (wrongCertificate, .serverCertificateUntrusted), (wrongKey, .serverCertificateUntrusted),
            (untrustedRoot, .serverCertificateHasUnknownRoot),
        ]
        for (policy, code) in cases {
            do {
                _ = try await manager(policy).get("/get", headers: ["Cookie": "secret=1"])
                XCTFail("a failed policy must refuse the server")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, code, "\(error)")
                XCTAssertNotNil((error as? URLError)?.failingURL)
            }
        }
        XCTAssertTrue(server.requests.isEmpty, "a refused handshake sends no request: no headers, no cookies, no body")
    }

    func testRedirectFromHTTPSToHTTPIsRefused() async throws {
        let plain = try await LoopbackServer.start()
        defer { Task { try? await plain.shutdown() } }
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [try der("root-ca")])
        policy.allowInvalidCertificates = true
        do {
            _ = try await manager(policy).get("/redirect-to", parameters: ["url": plain.url("/get").absoluteString])
            XCTFail("must refuse")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .appTransportSecurityRequiresSecureConnection, "\(error)")
        }
        XCTAssertTrue(plain.requests.isEmpty)
    }

    func testFoundationTransportRefusesAPolicyItCannotEnforce() async throws {
        let policy = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
        let manager = manager(policy)
        manager.transport = .foundation
        do {
            _ = try await manager.get("/get")
            XCTFail("must refuse")
        } catch {
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.policyNotEnforceable.rawValue)
        }
        XCTAssertTrue(server.requests.isEmpty)
    }

    func testPinningPolicyRefusesPlainHTTP() async throws {
        let plain = try await LoopbackServer.start()
        defer { Task { try? await plain.shutdown() } }
        let manager = HTTPSessionManager(baseURL: plain.baseURL)
        manager.transport = .curl
        manager.securityPolicy = SecurityPolicy(pinnedPublicKeyHashes: [
            "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        ])
        do {
            _ = try await manager.get("/get")
            XCTFail("must refuse")
        } catch {
            XCTAssertEqual((error as NSError).code, SessionKitError.Code.policyNotEnforceable.rawValue)
        }
        XCTAssertTrue(plain.requests.isEmpty)
    }
}

/// An `InputStream` whose `read` waits until the test gives it bytes or its end, as a socket's or a pipe's does.
private final class WaitingInputStream: InputStream, @unchecked Sendable {
    // @unchecked Sendable: every field is guarded by `condition`.
    private let condition = NSCondition()
    private var pending = Data()
    private var ended = false
    private var status: Stream.Status = .notOpen
    /// Resolved when a reader first waits in `read`.
    let firstRead = OnceBox<Void>()

    init() {
        super.init(data: Data())
    }

    func feed(_ data: Data) {
        condition.lock()
        pending.append(data)
        condition.broadcast()
        condition.unlock()
    }

    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    override func open() {
        condition.lock()
        status = .open
        condition.unlock()
    }

    override func close() {
        condition.lock()
        status = .closed
        condition.unlock()
    }

    override var streamStatus: Stream.Status {
        condition.lock()
        defer { condition.unlock() }
        return status
    }

    override var streamError: Error? { nil }

    override var hasBytesAvailable: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !pending.isEmpty || !ended
    }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        firstRead.resolve(())
        condition.lock()
        defer { condition.unlock() }
        while pending.isEmpty && !ended { condition.wait() }
        let count = min(maxLength, pending.count)
        pending.copyBytes(to: buffer, count: count)
        pending.removeFirst(count)
        return count
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
}
