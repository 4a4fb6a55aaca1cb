#if OpenAPI  // the package's `OpenAPI` trait: `swift build --build-tests --traits OpenAPI`
    import Foundation
    import InMemoryTracing
    import MetricsTestKit
    import SessionKit
    import SessionKitTestSupport
    import Tracing
    import XCTest

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// A generated client's calls through `SessionKitTransport` are traced and measured as every other request of the
    /// manager: one client span per attempt with its trace context on the wire, and the HTTP client metrics.
    final class SessionKitTransportObservabilityTests: OpenAPITestCase {
        func testAGeneratedCallHasAClientSpanItsTraceContextAndItsMetrics() async throws {
            let manager = makeManager()
            let tracer = InMemoryTracer()
            let metrics = TestMetrics()
            manager.tracer = tracer
            manager.metricsFactory = metrics
            _ = try await client(manager).getItem(path: .init(itemID: 3)).ok
            for _ in 0..<200 where tracer.finishedSpans.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
            let span = try XCTUnwrap(tracer.finishedSpans.first, "the call's span ended")
            XCTAssertEqual(tracer.finishedSpans.count, 1)
            XCTAssertEqual(span.operationName, "GET")
            XCTAssertEqual(span.kind, .client)
            XCTAssertEqual(span.attributes.get("http.response.status_code"), 200)
            XCTAssertEqual(
                span.attributes.get("url.full"), .string(server.url("/openapi/items/3").absoluteString))
            XCTAssertEqual(
                server.requests.last?.header("in-memory-span-id"), span.spanID,
                "the span's context went out with the request")
            let durations = metrics.timers(label: "http.client.request.duration")
            XCTAssertEqual(durations.count, 1)
            XCTAssertTrue(durations.first?.dimensions.contains { $0 == ("http.response.status_code", "200") } ?? false)
        }
    }
#endif
