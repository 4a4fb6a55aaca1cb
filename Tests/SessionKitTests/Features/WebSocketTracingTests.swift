import Foundation
import InMemoryTracing
import SessionKit
import SessionKitTestSupport
import Tracing
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The span of a WebSocket connection: one client span from the handshake to the close, whose trace context the
/// handshake carries (WebSocket tasks run on libcurl whatever the manager's transport).
final class WebSocketTracingTests: WebSocketTestCase {
    func testConnectionIsOneSpanFromTheHandshakeToTheCloseAndTheHandshakeCarriesItsTraceparent() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        let tracer = W3CInMemoryTracer()
        manager.tracer = tracer
        let task = manager.webSocketTask(with: server.url("/echo"))
        task.resume()
        try await task.send(.string("hello"))
        _ = try await task.receive()
        XCTAssertTrue(tracer.finishedSpans.isEmpty, "the span lasts while the connection is open")
        task.cancel(with: .normalClosure, reason: nil)
        _ = await completions.completion(of: task)
        let span = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(tracer.finishedSpans.count, 1)
        XCTAssertEqual(span.operationName, "GET")
        XCTAssertEqual(span.kind, .client)
        XCTAssertEqual(span.attributes.get("url.scheme"), "ws")
        XCTAssertEqual(span.attributes.get("http.response.status_code"), 101)
        let traceparent = server.seen.upgrades.first?.headers.first { $0.0.lowercased() == "traceparent" }?.1
        XCTAssertEqual(traceparent, W3CInMemoryTracer.traceparent(traceID: span.traceID, spanID: span.spanID))
    }

    func testNoTracerNoTraceparentOnTheHandshake() async throws {
        let server = try await startServer()
        let (manager, completions) = makeManager()
        manager.tracer = nil
        let task = manager.webSocketTask(with: server.url("/echo"))
        task.resume()
        try await task.send(.string("hello"))
        _ = try await task.receive()
        task.cancel(with: .normalClosure, reason: nil)
        _ = await completions.completion(of: task)
        XCTAssertEqual(server.seen.upgrades.count, 1)
        XCTAssertFalse(server.seen.upgrades[0].headers.contains { $0.0.lowercased() == "traceparent" })
    }
}
