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
}

private final class TaskCapturingMonitor: EventMonitor, @unchecked Sendable {
    // @unchecked Sendable: `tasks` is a lock-protected box.
    let queue = DispatchQueue(label: "test.task-capturing-monitor")
    let tasks = LockedBox<[URLSessionTask]>([])

    func request(_ request: SessionRequest, didCreateTask task: URLSessionTask) {
        tasks.write { $0.append(task) }
    }
}
