import Foundation
import HTTPTypes
@testable import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response head handed on as read (`ReceivedResponse`): its `HTTPURLResponse` is built only when a caller asks,
/// and what is read without it agrees with what Foundation computes.
final class ReceivedResponseTests: LoopbackTestCase {
    private let url = URL(string: "http://127.0.0.1/x")!

    private func head(_ lines: [(String, String)], status: Int = 200) -> ReceivedResponse {
        ReceivedResponse(CurlTransfer.ResponseHead(url: url, statusCode: status, httpVersion: "HTTP/1.1", lines: lines))
    }

    func testTheAnnouncedLengthIsFoundationsWithoutBuildingTheResponse() {
        let heads: [[(String, String)]] = [
            [("Content-Length", "5")],
            [("content-length", "12"), ("Content-Type", "text/plain")],
            [("Content-Length", "5"), ("CONTENT-LENGTH", "5")],  // joined "5, 5": no number for Foundation either
            [("Content-Length", "x")],
            [("Content-Length", "+7")],
            [],
        ]
        for lines in heads {
            let unbuilt = head(lines)
            let expected = unbuilt.expectedContentLength
            XCTAssertFalse(unbuilt.isBuilt, "reading the length builds nothing")
            XCTAssertEqual(expected, unbuilt.urlResponse.expectedContentLength, "\(lines)")
        }
    }

    func testTheResponseIsBuiltOnceFromTheLines() throws {
        let received = head([
            ("Content-Type", "text/html; charset=ISO-8859-4"), ("x-trace", "1"), ("Set-Cookie", "a=1"),
        ])
        XCTAssertTrue(received.hasField("content-type"))
        XCTAssertFalse(received.hasField("Location"))
        XCTAssertFalse(received.isBuilt)
        let response = try XCTUnwrap(received.httpResponse)
        XCTAssertTrue(received.urlResponse === response, "one object for every caller")
        XCTAssertEqual(response.mimeType, "text/html")
        XCTAssertEqual(response.textEncodingName, "iso-8859-4")
        XCTAssertEqual(response.value(forHTTPHeaderField: "X-Trace"), "1")
        XCTAssertEqual(received.fieldLines?.map(\.0), ["Content-Type", "x-trace", "Set-Cookie"], "the lines as read")
    }

    func testTheHTTPCoreAPIBuildsNoHTTPURLResponseUntilTheTaskIsAsked() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl, "URLSession builds its own response; the curl transport defers it")
        let manager = makeManager()
        let monitor = TaskCapturingMonitor()
        manager.eventMonitors = [monitor]
        let request = HTTPRequest(
            method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/response-headers?X-Seen=yes")
        let (_, response) = try await manager.data(for: request)
        XCTAssertEqual(response.headerFields[HTTPField.Name("X-Seen")!], "yes")
        monitor.queue.sync {}
        let task = try XCTUnwrap(monitor.tasks.wrappedValue.last)
        let received = try XCTUnwrap(ReceivedResponse.of(task))
        XCTAssertFalse(received.isBuilt, "the HTTP core API read its HTTPResponse from the lines")
        let built = try XCTUnwrap(task.response as? HTTPURLResponse, "a caller that asks gets Foundation's response")
        XCTAssertEqual(built.value(forHTTPHeaderField: "x-seen"), "yes")
        XCTAssertTrue(received.isBuilt)
        XCTAssertTrue(task.response === built, "built once")
    }

    // MARK: - Serializers that decide by the status alone

    /// The closure verb's task, its serialized object, and whether its response was built before the caller asked.
    private func closureGET(
        _ path: String, serializer: HTTPResponseSerializer
    ) async throws -> (task: URLSessionDataTask?, object: Any?, error: Error?, builtBeforeAsked: Bool) {
        let manager = makeManager()
        manager.responseSerializer = serializer
        return try await awaitCallback { done in
            manager.get(
                path, parameters: nil, headers: nil, progress: nil,
                success: { task, object in
                    done((task, object, nil, (task as? CurlTask)?.driver.receivedResponse?.isBuilt ?? true))
                },
                failure: { task, error in
                    done((task, nil, error, (task as? CurlTask)?.driver.receivedResponse?.isBuilt ?? true))
                })
        }
    }

    func testAStatusThatPassesBuildsNoHTTPURLResponseForTheDefaultSerializer() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl, "URLSession builds its own response; the curl transport defers it")
        let result = try await closureGET("bytes/64", serializer: HTTPResponseSerializer())
        XCTAssertNil(result.error)
        XCTAssertEqual((result.object as? Data)?.count, 64, "the body, as the serializer returns it")
        XCTAssertFalse(result.builtBeforeAsked, "the status alone decided: no HTTPURLResponse was built for it")
        let response = try XCTUnwrap(result.task?.response as? HTTPURLResponse, "built when the caller asks")
        XCTAssertEqual(response.statusCode, 200)
    }

    func testAFailedStatusStillCarriesTheBuiltResponseAndBody() async throws {
        let result = try await closureGET("status/418", serializer: HTTPResponseSerializer())
        let error = try XCTUnwrap(result.error as NSError?)
        XCTAssertEqual(error.domain, SessionKitError.responseSerializationDomain)
        XCTAssertEqual(error.code, URLError.badServerResponse.rawValue)
        let response = try XCTUnwrap(error.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)
        XCTAssertEqual(response.statusCode, 418)
    }

    func testAContentTypeCheckAndASubclassStillReadTheWholeResponse() async throws {
        let checking = HTTPResponseSerializer()
        checking.acceptableContentTypes = ["text/plain"]
        let refused = try await closureGET("bytes/8", serializer: checking)  // application/octet-stream
        XCTAssertEqual((refused.error as NSError?)?.code, URLError.cannotDecodeContentData.rawValue)

        let subclass = MarkingSerializer()
        let marked = try await closureGET("bytes/8", serializer: subclass)
        XCTAssertEqual(marked.object as? String, "subclass saw 200", "a subclass's responseObject(for:data:) runs")
    }

    func testTheJSONSerializerDecodesAPassingResponseWithoutBuildingIt() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl, "URLSession builds its own response; the curl transport defers it")
        let result = try await closureGET("json", serializer: JSONResponseSerializer())
        XCTAssertNil(result.error)
        XCTAssertNotNil(result.object as? [String: Any], "the document, decoded")
        XCTAssertFalse(result.builtBeforeAsked, "status and content type read from the head")
    }

    func testTheJSONSerializersFailuresStillCarryTheResponse() async throws {
        let wrongType = try await closureGET("xml", serializer: JSONResponseSerializer())
        let error = try XCTUnwrap(wrongType.error as NSError?)
        XCTAssertEqual(error.code, URLError.cannotDecodeContentData.rawValue)
        let response = try XCTUnwrap(error.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)
        XCTAssertEqual(response.mimeType, "application/xml")

        let failedStatus = try await closureGET("status/500", serializer: JSONResponseSerializer())
        let statusError = try XCTUnwrap(failedStatus.error as NSError?)
        XCTAssertEqual(statusError.code, URLError.badServerResponse.rawValue)
        XCTAssertEqual(
            (statusError.userInfo[SessionKitError.failingURLResponseKey] as? HTTPURLResponse)?.statusCode, 500)
    }

    func testTheMIMETypeReadFromTheLinesIsFoundations() throws {
        let simple = [
            "application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8",
            "text/html;level=1", "application/vnd.api+json", "text/plain;", "image/svg+xml",
        ]
        for value in simple {
            let read = MIMEType.ofContentType([("content-type", value)])
            let foundation = try XCTUnwrap(head([("Content-Type", value)]).httpResponse).mimeType?.lowercased()
            XCTAssertEqual(read, .some(foundation), value)
        }
        for value in [
            "application/json, text/plain", "\"text\"/plain", "text", "/json", "a/b/c", "", "text /plain",
            "text/html ; level=1",
        ] {
            XCTAssertEqual(MIMEType.ofContentType([("Content-Type", value)]), nil, "left to Foundation: \(value)")
        }
        XCTAssertEqual(MIMEType.ofContentType([]), .some(nil), "no field: no MIME type, as Foundation says")
        XCTAssertNil(head([]).httpResponse?.mimeType)
        XCTAssertEqual(
            MIMEType.ofContentType([("Content-Type", "text/plain"), ("content-type", "text/html")]), nil,
            "a repeated field is joined by Foundation: left to it")
    }

    func testTheAsyncVerbsResultBuildsItsResponseOnlyWhenRead() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport != .curl, "URLSession builds its own response; the curl transport defers it")
        let manager = makeManager()
        manager.responseSerializer = HTTPResponseSerializer()
        let monitor = TaskCapturingMonitor()
        manager.eventMonitors = [monitor]
        let result = try await manager.get("response-headers", parameters: ["X-Seen": "yes"])
        XCTAssertEqual(result.statusCode, 200)
        let task = try XCTUnwrap(monitor.tasks.wrappedValue.last)
        let received = try XCTUnwrap(ReceivedResponse.of(task))
        XCTAssertFalse(received.isBuilt, "the status code is read without Foundation's response")
        XCTAssertEqual(result.response.value(forHTTPHeaderField: "X-Seen"), "yes")
        XCTAssertTrue(received.isBuilt)
        XCTAssertTrue(result.response === task.response, "one object for the result and the task")
    }

    func testTheHTTPCoreAPIPostsNoTaskNotificationWhileTheTaskAPIDoes() async throws {
        let manager = makeManager()
        let port = server.port
        let posted = LockedBox<[String]>([])
        let announced = OnceBox<Void>()
        let observers = [Notification.Name.sessionKitTaskDidResume, .sessionKitTaskDidComplete].map { name in
            NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
                guard let task = note.object as? URLSessionTask, task.originalRequest?.url?.port == port else { return }
                let path = task.originalRequest?.url?.path ?? ""
                posted.write { $0.append("\(note.name.rawValue) \(path)") }
                if note.name == .sessionKitTaskDidComplete, path == "/get" { announced.resolve(()) }
            }
        }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let request = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(port)", path: "/anything")
        _ = try await manager.data(for: request)
        // A task-API request afterwards: its notification comes on the same serial completion queue, after any the
        // HTTP core API's request would have posted.
        manager.resume(manager.dataTask(with: URLRequest(url: server.url("/get"))))
        try await announced.value(timeout: 30, file: #filePath, line: #line)
        XCTAssertEqual(
            posted.wrappedValue,
            [Notification.Name.sessionKitTaskDidResume, .sessionKitTaskDidComplete].map { "\($0.rawValue) /get" },
            "only the task a caller holds is announced")
    }

    /// Field lines become `HTTPFields` by their exact bytes: a common name keeps its spelling, and a name that only
    /// Unicode equivalence makes equal to a common one (a Kelvin sign for the K of Keep-Alive) is not a token, so it
    /// is dropped, as any name that is not a token.
    func testFieldLinesBecomeHTTPFieldsByTheirExactBytes() {
        let fields = HTTPTypesBridge.fields(from: [
            ("\u{212A}eep-Alive", "timeout=5"), ("Keep-Alive", "timeout=6"), ("content-type", "text/plain"),
            ("X-Custom", "1"),
        ])
        XCTAssertEqual(fields.map(\.name.rawName), ["Keep-Alive", "content-type", "X-Custom"])
        XCTAssertEqual(fields.map(\.value), ["timeout=6", "text/plain", "1"])
    }
}

/// A subclass that decides by itself: the manager must call its `responseObject(for:data:)`.
private final class MarkingSerializer: HTTPResponseSerializer, @unchecked Sendable {
    override func responseObject(for response: URLResponse?, data: Data?) throws -> Any? {
        "subclass saw \((response as? HTTPURLResponse)?.statusCode ?? 0)"
    }
}

private final class TaskCapturingMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: `tasks` is a lock-protected box.
    let queue = DispatchQueue(label: "test.task-capturing-monitor")
    let tasks = LockedBox<[URLSessionTask]>([])

    func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) {
        tasks.write { $0.append(task) }
    }
}
