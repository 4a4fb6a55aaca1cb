import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The verbs, base URL resolution, headers and async forms of `HTTPSessionManager`, end to end.
final class HTTPSessionManagerTests: LoopbackTestCase {
    private func send(
        _ manager: HTTPSessionManager,
        _ start: (@escaping (URLSessionDataTask, Any?) -> Void, @escaping (URLSessionDataTask?, Error) -> Void) ->
            URLSessionDataTask?
    ) async throws -> (task: URLSessionDataTask?, object: Any?, error: Error?) {
        try await awaitCallback { done in
            _ = start({ task, object in done((task, object, nil)) }, { task, error in done((task, nil, error)) })
        }
    }

    func testGetSendsParametersInQueryAndDecodesJSON() async throws {
        let manager = makeManager()
        let result = try await send(manager) { success, failure in
            manager.get(
                "/get", parameters: ["q": "swift linux", "page": 2], headers: ["X-Test": "1"], progress: nil,
                success: success, failure: failure)
        }
        XCTAssertNil(result.error)
        let document = try echo(result.object)
        XCTAssertEqual(document["args"] as? [String: String], ["q": "swift linux", "page": "2"])
        XCTAssertEqual((document["headers"] as? [String: String])?["X-Test"], "1")
        XCTAssertEqual(server.requests.last?.uri, "/get?page=2&q=swift%20linux")
        XCTAssertEqual((result.task?.response as? HTTPURLResponse)?.statusCode, 200)
    }

    func testPostSendsFormBody() async throws {
        let manager = makeManager()
        let result = try await send(manager) { success, failure in
            manager.post(
                "/post", parameters: ["name": "Ada", "tags": ["a", "b"]], headers: nil, progress: nil,
                success: success, failure: failure)
        }
        let document = try echo(result.object)
        let form = try XCTUnwrap(document["form"] as? [String: Any])
        XCTAssertEqual(form["name"] as? String, "Ada")
        XCTAssertEqual(form["tags[]"] as? [String], ["a", "b"])
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(recorded.header("Content-Type"), "application/x-www-form-urlencoded")
        XCTAssertEqual(String(decoding: recorded.body, as: UTF8.self), "name=Ada&tags%5B%5D=a&tags%5B%5D=b")
    }

    func testJSONPostPutPatchSendJSONBodies() async throws {
        let manager = makeManager()
        manager.requestSerializer = JSONRequestSerializer()
        for method in ["POST", "PUT", "PATCH"] {
            let result = try await manager.request(method, "/anything", parameters: ["n": 1, "ok": true])
            let document = try echo(result.object)
            XCTAssertEqual(document["method"] as? String, method)
            let json = try XCTUnwrap(document["json"] as? [String: Any])
            XCTAssertEqual(json["n"] as? Int, 1)
            XCTAssertEqual(server.requests.last?.header("Content-Type"), "application/json")
        }
    }

    func testPutPatchDeleteClosureForms() async throws {
        let manager = makeManager()
        let put = try await send(manager) { s, f in
            manager.put("/put", parameters: ["a": "1"], headers: nil, success: s, failure: f)
        }
        XCTAssertEqual(try echo(put.object)["method"] as? String, "PUT")
        let patch = try await send(manager) { s, f in
            manager.patch("/patch", parameters: ["a": "1"], headers: nil, success: s, failure: f)
        }
        XCTAssertEqual(try echo(patch.object)["method"] as? String, "PATCH")
        let delete = try await send(manager) { s, f in
            manager.delete("/delete", parameters: ["id": 7], headers: nil, success: s, failure: f)
        }
        XCTAssertEqual(try echo(delete.object)["args"] as? [String: String], ["id": "7"])
        XCTAssertEqual(server.requests.last?.uri, "/delete?id=7")
        XCTAssertEqual(server.requests.last?.bodyLength, 0)
    }

    func testHeadSucceedsWithTaskOnly() async throws {
        let manager = makeManager()
        let task: URLSessionDataTask? = try await awaitCallback { done in
            manager.head(
                "/get", parameters: nil, headers: nil, success: { task in done(task) },
                failure: { task, error in
                    XCTFail("\(error)"); done(task)
                })
        }
        XCTAssertEqual((task?.response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(server.requests.last?.method, "HEAD")
    }

    func testPerRequestHeadersWinOverSerializerHeaders() async throws {
        let manager = makeManager()
        manager.requestSerializer.setValue("serializer", forHTTPHeaderField: "X-Who")
        manager.requestSerializer.setValue("kept", forHTTPHeaderField: "X-Other")
        _ = try await manager.get("/headers", headers: ["X-Who": "call"])
        let recorded = try XCTUnwrap(server.requests.last)
        XCTAssertEqual(recorded.header("X-Who"), "call")
        XCTAssertEqual(recorded.header("X-Other"), "kept")
        XCTAssertNotNil(recorded.header("User-Agent"))
    }

    func testBasicAuthorizationHeader() async throws {
        let manager = makeManager()
        manager.requestSerializer.setAuthorizationHeaderField(username: "user", password: "pass")
        let result = try await manager.get("/basic-auth/user/pass")
        XCTAssertEqual((result.object as? [String: Any])?["authenticated"] as? Bool, true)
    }

    func testRequestThatCannotBeBuiltReturnsNilAndFailsOnCompletionQueue() async throws {
        let manager = makeManager()
        let queue = DispatchQueue(label: "test.completion")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        manager.completionQueue = queue
        manager.requestSerializer = JSONRequestSerializer()
        let counter = CallCounter()
        let (returned, onQueue, error): (URLSessionDataTask?, Bool, Error) = try await awaitCallback { done in
            var returned: URLSessionDataTask?? = .none
            returned = manager.post(
                "/post", parameters: ["date": Date()], headers: nil, progress: nil,
                success: { _, _ in XCTFail("must not succeed") },
                failure: { task, error in
                    counter.increment()
                    XCTAssertNil(task)
                    done((returned ?? nil, DispatchQueue.getSpecific(key: key) == 7, error))
                })
        }
        XCTAssertNil(returned)
        XCTAssertTrue(onQueue)
        XCTAssertEqual((error as NSError).domain, SessionKitError.requestSerializationDomain)
        XCTAssertEqual(counter.count, 1)
        XCTAssertTrue(server.requests.isEmpty, "nothing may be sent for a request that could not be built")
    }

    func testDataTaskWithHTTPMethodIsNotResumed() async throws {
        let manager = makeManager()
        let task = try XCTUnwrap(
            manager.dataTask(
                withHTTPMethod: "GET", urlString: "/get", parameters: nil, headers: nil,
                uploadProgress: nil, downloadProgress: nil, success: nil, failure: nil))
        XCTAssertEqual(task.state, .suspended)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(server.requestCount, 0)
        task.cancel()
    }

    func testMultipartPostSendsFormPartsAndFiles() async throws {
        let manager = makeManager()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sk-\(UUID().uuidString).txt")
        try Data("file body".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let progressCounter = CallCounter()
        let result = try await send(manager) { success, failure in
            manager.post(
                "/post", parameters: ["title": "cat"], headers: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: file, name: "attachment")
                    form.appendPart(
                        withFileData: Data([0, 1, 2]), name: "blob", fileName: "b.bin",
                        mimeType: "application/octet-stream")
                    form.appendPart(withFormData: Data("1".utf8), name: "version")
                }, progress: { _ in progressCounter.increment() }, success: success, failure: failure)
        }
        XCTAssertNil(result.error)
        let document = try echo(result.object)
        XCTAssertEqual(document["form"] as? [String: String], ["title": "cat", "version": "1"])
        let files = try XCTUnwrap(document["files"] as? [String: Any])
        XCTAssertEqual(files["attachment"] as? String, "file body")
        XCTAssertEqual(files["attachment.filename"] as? String, file.lastPathComponent)
        XCTAssertEqual(files["attachment.content-type"] as? String, "text/plain")
        XCTAssertEqual(files["blob.length"] as? Int, 3)
        XCTAssertGreaterThan(progressCounter.count, 0)
    }

    func testMultipartWithUnreadableFileFailsWithoutTask() async throws {
        let manager = makeManager()
        let (task, error): (URLSessionDataTask?, Error) = try await awaitCallback { done in
            let returned = manager.post(
                "/post", parameters: nil, headers: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: URL(fileURLWithPath: "/nonexistent/file.txt"), name: "f")
                }, progress: nil, success: nil, failure: { task, error in done((task, error)) })
            XCTAssertNil(returned)
        }
        XCTAssertNil(task)
        XCTAssertEqual((error as NSError).domain, SessionKitError.requestSerializationDomain)
    }

    // MARK: - Async forms

    func testAsyncGetReturnsObjectResponseAndData() async throws {
        let manager = makeManager()
        let result = try await manager.get("/get", parameters: ["a": "b"])
        XCTAssertEqual(result.statusCode, 200)
        XCTAssertEqual((result.object as? [String: Any])?["args"] as? [String: String], ["a": "b"])
        XCTAssertEqual(
            try JSONSerialization.jsonObject(with: result.data) as? NSDictionary, result.object as? NSDictionary)
    }

    func testAsyncDecodableForm() async throws {
        struct Echo: Decodable { let args: [String: String]; let method: String }
        let manager = makeManager()
        let value = try await manager.get("/get", parameters: ["x": "1"], as: Echo.self)
        XCTAssertEqual(value.args, ["x": "1"])
        XCTAssertEqual(value.method, "GET")
    }

    func testAsyncDecodableFailureNamesTheKeyPath() async throws {
        struct Wrong: Decodable { let args: [String: Int] }
        let manager = makeManager()
        do {
            _ = try await manager.get("/get", parameters: ["x": "not a number"], as: Wrong.self)
            XCTFail("decoding must fail")
        } catch {
            let nsError = error as NSError
            XCTAssertEqual(nsError.domain, SessionKitError.responseSerializationDomain)
            XCTAssertTrue(nsError.localizedDescription.contains("args.x"), nsError.localizedDescription)
        }
    }

    func testAsyncStatusFailureCarriesResponseAndBody() async throws {
        let manager = makeManager()
        do {
            _ = try await manager.get("/status/404")
            XCTFail("a 404 must fail")
        } catch {
            let nsError = error as NSError
            XCTAssertEqual(nsError.domain, SessionKitError.responseSerializationDomain)
            XCTAssertEqual(nsError.code, URLError.badServerResponse.rawValue)
            XCTAssertEqual(
                (nsError.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)?.statusCode, 404)
            XCTAssertNotNil(nsError.userInfo[SessionKitError.failingURLResponseDataKey])
        }
    }

    func testCancellingTheSwiftTaskCancelsTheRequest() async throws {
        let manager = makeManager()
        let request = Task { try await manager.get("/delay/5") }
        try await Task.sleep(nanoseconds: 200_000_000)
        request.cancel()
        let started = Date()
        do {
            _ = try await request.value
            XCTFail("a cancelled request must throw")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "cancellation must not wait for the response")
        XCTAssertTrue(manager.tasks.isEmpty)
    }

    // MARK: - Base URL

    func testBaseURLGetsTrailingSlashOnlyWithAPath() {
        XCTAssertEqual(HTTPSessionManager(baseURL: URL(string: "http://a/v1")).baseURL?.absoluteString, "http://a/v1/")
        XCTAssertEqual(HTTPSessionManager(baseURL: URL(string: "http://a/v1/")).baseURL?.absoluteString, "http://a/v1/")
        XCTAssertEqual(HTTPSessionManager(baseURL: URL(string: "http://a")).baseURL?.absoluteString, "http://a")
        XCTAssertNil(HTTPSessionManager().baseURL)
    }

    func testRelativePathsResolveAgainstTheBaseURL() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        let manager = HTTPSessionManager(baseURL: server.url("/v1"), sessionConfiguration: configuration)
        manager.responseSerializer = { () -> HTTPResponseSerializer in
            let serializer = HTTPResponseSerializer()
            serializer.acceptableStatusCodes = nil  // the unknown paths answer 404; only the URI matters here
            return serializer
        }()
        let cases: [(String, String)] = [
            ("foo", "/v1/foo"), ("foo?bar=baz", "/v1/foo?bar=baz"), ("/foo", "/foo"), ("/foo/", "/foo/"),
            ("foo/", "/v1/foo/"), (server.url("/absolute").absoluteString, "/absolute"),
        ]
        for (path, expected) in cases {
            _ = try await manager.get(path)
            XCTAssertEqual(server.requests.last?.uri, expected, "for \(path)")
        }
    }
}
