import Foundation
import SessionKit
import SessionKitTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `events(for:)` against the loopback server's `/event-stream`: reconnection with `Last-Event-ID` without losing or
/// repeating an event, the server's `retry`, the ends (204, another content type, an error status), cancellation and
/// the size limit. Transport-neutral.
final class ServerSentEventsTests: LoopbackTestCase {
    /// Every event of `events` until the sequence ends, the reading task cancelled (and the test failed) after
    /// `timeout` seconds.
    private func collect(
        _ events: ServerSentEvents, timeout: TimeInterval = 20, file: StaticString = #filePath, line: UInt = #line
    ) async throws -> [ServerSentEvent] {
        let reader = Task { () -> [ServerSentEvent] in
            var received: [ServerSentEvent] = []
            for try await event in events {
                received.append(event)
                if received.count > 1000 { break }  // a runaway stream fails below instead of running on
            }
            return received
        }
        let watchdog = Task {
            try await Task.sleep(nanoseconds: UInt64(timeout * 1_000_000_000))
            XCTFail("the event stream did not end within \(timeout) s", file: file, line: line)
            reader.cancel()
        }
        defer { watchdog.cancel() }
        return try await reader.value
    }

    /// Waits up to 5 s for the server to see every `/event-stream?key=key` response closed.
    private func assertStreamsClose(
        key: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for _ in 0..<500 where server.openEventStreams(key: key) > 0 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertEqual(server.openEventStreams(key: key), 0, "the connection is still open", file: file, line: line)
    }

    private var streamRequests: [RecordedRequest] { server.requests.filter { $0.path == "/event-stream" } }

    private func request(_ query: String) -> URLRequest {
        URLRequest(url: server.url("/event-stream?\(query)"))
    }

    // MARK: - Reconnection

    func testReconnectsWithLastEventIDAndNeitherLosesNorRepeatsAnEvent() async throws {
        let manager = makeManager()
        // Three events per connection, then the connection drops in the middle of the chunked body.
        let events = try await collect(manager.events(for: request("total=7&per=3&retry=50&end=drop")))
        XCTAssertEqual(events, (1...7).map { ServerSentEvent(id: "\($0)", event: "tick", data: "event \($0)") })
        let sent = streamRequests
        XCTAssertEqual(sent.map { $0.header("Last-Event-ID") }, [nil, "3", "6", "7"], "the last one is answered 204")
        for request in sent {
            XCTAssertEqual(request.header("Accept"), "text/event-stream")
            XCTAssertEqual(request.header("Cache-Control"), "no-cache, no-store")
        }
    }

    /// A stream is never stored in the HTTP cache (HTML fetches an event source in "no-store" mode): an ordinary GET of
    /// the URL afterwards reaches the server, though the stream's response said it could be kept for ten minutes.
    func testAStreamIsNeverStoredInTheHTTPCache() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: nil)
        let manager = HTTPSessionManager(baseURL: server.baseURL, sessionConfiguration: configuration)
        manager.transport = LoopbackTestCase.testTransport
        manager.responseSerializer = HTTPResponseSerializer()
        let query = "total=2&retry=10&end=finish&cache=max-age%3D600"
        let events = try await collect(manager.events(for: request(query)))
        XCTAssertEqual(events.map(\.id), ["1", "2"])
        let streamed = streamRequests.count
        let again = try await manager.perform(request(query))
        XCTAssertEqual(again.statusCode, 200)
        XCTAssertTrue(String(decoding: again.data, as: UTF8.self).contains("data: event 1"))
        XCTAssertEqual(streamRequests.count, streamed + 1, "no stored stream answered the GET")
    }

    func testAStreamThatEndsCleanlyIsReconnectedToo() async throws {
        let manager = makeManager()
        let events = try await collect(manager.events(for: request("total=4&per=2&retry=20&end=finish")))
        XCTAssertEqual(events.map(\.id), ["1", "2", "3", "4"])
        XCTAssertEqual(streamRequests.map { $0.header("Last-Event-ID") }, [nil, "2", "4"])
    }

    func testTheServersRetryFieldSetsTheReconnectionDelay() async throws {
        let manager = makeManager()
        var stream = manager.events(for: request("total=2&per=1&retry=400&end=finish"))
        stream.reconnectionTime = 30  // replaced by the server's 400 ms
        let events = try await collect(stream)
        XCTAssertEqual(events.map(\.id), ["1", "2"])
        let sent = streamRequests
        XCTAssertEqual(sent.count, 3)
        guard sent.count == 3 else { return }
        let gap = sent[1].receivedAt.timeIntervalSince(sent[0].receivedAt)
        XCTAssertGreaterThanOrEqual(gap, 0.4, "waited the server's retry")
        XCTAssertLessThan(gap, 0.4 * 1.2 + 2, "and not the 30 s default")
    }

    func testALastEventIDOnTheRequestResumesAStreamReadBefore() async throws {
        let manager = makeManager()
        var first = request("total=7&retry=20&end=finish")
        first.setValue("5", forHTTPHeaderField: "Last-Event-ID")
        let events = try await collect(manager.events(for: first))
        XCTAssertEqual(events.map(\.id), ["6", "7"])
        XCTAssertEqual(streamRequests.map { $0.header("Last-Event-ID") }, ["5", "7"])
    }

    func testTheManagersAdapterAppliesToEveryConnection() async throws {
        let manager = makeManager()
        let adapted = CallCounter()
        manager.interceptor = Interceptor(adapt: { request, _ in
            adapted.increment()
            var request = request
            request.setValue("Bearer sse", forHTTPHeaderField: "Authorization")
            return request
        })
        let events = try await collect(manager.events(for: request("total=3&per=1&retry=20&end=drop")))
        XCTAssertEqual(events.map(\.id), ["1", "2", "3"])
        XCTAssertEqual(streamRequests.map { $0.header("Authorization") }, Array(repeating: "Bearer sse", count: 4))
        XCTAssertEqual(adapted.count, 4)
    }

    func testConnectionsThatBringNothingAreRetriedABoundedNumberOfTimes() async throws {
        let manager = makeManager()
        // The server resets every connection before a status line.
        var stream = manager.events(for: URLRequest(url: server.url("/fault/reset")))
        stream.reconnectionTime = 0.02
        stream.maximumReconnectionAttempts = 2
        do {
            let events = try await collect(stream)
            XCTFail("gave no error after \(events.count) events")
        } catch {
            let code = (error as? URLError)?.code
            XCTAssertNotNil(code, "the transport's error: \(error)")
            XCTAssertNotEqual(code, .cancelled, "\(error)")
        }
        XCTAssertEqual(server.requests.count, 3, "the first attempt and two reconnections")
    }

    // MARK: - Ends

    func testA204EndsTheSequenceWithoutError() async throws {
        let manager = makeManager()
        let events = try await collect(manager.events(for: request("status=204")))
        XCTAssertEqual(events, [])
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertEqual(streamRequests.count, 1, "no reconnection after a 204")
    }

    func testAnotherContentTypeEndsTheSequenceWithAnError() async throws {
        let manager = makeManager()
        do {
            let events = try await collect(manager.events(for: request("type=text/plain&retry=20&end=hold")))
            XCTFail("text/plain is not an event stream; got \(events)")
        } catch {
            let failure = SessionKitError(error)
            XCTAssertEqual(failure.kind, .responseSerializationFailed(.cannotDecodeContentData), "\(error)")
            XCTAssertEqual(failure.statusCode, 200)
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        XCTAssertEqual(streamRequests.count, 1, "no reconnection")
    }

    func testAnErrorStatusEndsTheSequenceWithItsResponse() async throws {
        let manager = makeManager()
        do {
            let events = try await collect(manager.events(for: request("status=500")))
            XCTFail("a 500 is not an event stream; got \(events)")
        } catch {
            let failure = SessionKitError(error)
            XCTAssertEqual(failure.kind, .unacceptableStatusCode(500), "\(error)")
            XCTAssertEqual(failure.body.map { String(decoding: $0, as: UTF8.self) }, "no events here\n")
        }
        XCTAssertEqual(streamRequests.count, 1, "no reconnection")
    }

    // MARK: - Cancellation and limits

    func testCancellingTheReadingTaskClosesTheConnectionAtOnce() async throws {
        let manager = makeManager()
        let key = UUID().uuidString
        let events = manager.events(for: request("total=1&end=hold&key=\(key)"))
        let firstEvent = OnceBox<ServerSentEvent>()
        let reader = Task { () -> Int in
            var count = 0
            for try await event in events {
                count += 1
                firstEvent.resolve(event)  // then the next read waits on a silent connection
            }
            return count
        }
        let first = try await firstEvent.value(timeout: 10, file: #filePath, line: #line)
        XCTAssertEqual(first.id, "1")
        XCTAssertEqual(server.openEventStreams(key: key), 1)
        let cancelled = Date()
        reader.cancel()
        do {
            let count = try await reader.value
            XCTFail("a cancelled reader ended normally after \(count) events")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cancelled, "\(error)")
        }
        try await assertStreamsClose(key: key)
        XCTAssertLessThan(Date().timeIntervalSince(cancelled), 2, "closed at once, not at a timeout")
        XCTAssertEqual(streamRequests.count, 1, "no reconnection after cancellation")
    }

    func testDroppingTheIteratorClosesTheConnection() async throws {
        let manager = makeManager()
        let key = UUID().uuidString
        let events = manager.events(for: request("total=3&end=hold&key=\(key)"))
        let first = try await Task { () -> ServerSentEvent? in
            var iterator = events.makeAsyncIterator()
            return try await iterator.next()
        }.value
        XCTAssertEqual(first?.id, "1")
        try await assertStreamsClose(key: key)
    }

    func testAnEventPastTheMaximumSizeEndsTheSequenceWithAnError() async throws {
        let manager = makeManager()
        let key = UUID().uuidString
        var stream = manager.events(for: request("total=3&size=5000&end=hold&key=\(key)"))
        stream.maximumEventSize = 1024
        do {
            let events = try await collect(stream)
            XCTFail("5000-byte events pass a 1 KiB limit; got \(events.count)")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .dataLengthExceedsMaximum, "\(error)")
        }
        try await assertStreamsClose(key: key)
        XCTAssertEqual(streamRequests.count, 1, "no reconnection")
    }

    func testEventsBeforeAnOversizedOneAreStillDelivered() async throws {
        let manager = makeManager()
        let key = UUID().uuidString
        var stream = manager.events(for: request("total=3&size=5000&big=2&end=hold&key=\(key)"))
        stream.maximumEventSize = 1024
        var received: [String?] = []
        do {
            for try await event in stream { received.append(event.id) }
            XCTFail("event 2 passes a 1 KiB limit")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .dataLengthExceedsMaximum, "\(error)")
        }
        XCTAssertEqual(received, ["1"])
        try await assertStreamsClose(key: key)
    }
}
