import Foundation
import HTTPTypes
import InMemoryTracing
import Metrics
import MetricsTestKit
import SessionKit
import SessionKitTestSupport
import Tracing
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Spans and metrics of every API against the loopback server, on the transport of `SESSIONKIT_TEST_TRANSPORT`, with
/// swift-distributed-tracing's in-memory tracer and swift-metrics' `TestMetrics` set on the manager (the process-wide
/// systems are bootstrapped once per process at most, so the tests never bootstrap them).
final class ObservabilityTests: LoopbackTestCase {
    private var tracer: W3CInMemoryTracer!
    private var metrics: TestMetrics!

    override func setUp() async throws {
        try await super.setUp()
        tracer = W3CInMemoryTracer()
        metrics = TestMetrics()
    }

    /// A manager on the loopback server with this test's tracer and metrics.
    private func observedManager(timeout: TimeInterval = 10) -> HTTPSessionManager {
        let manager = makeManager(timeout: timeout)
        manager.tracer = tracer
        manager.metricsFactory = metrics
        return manager
    }

    private func attribute(_ span: FinishedInMemorySpan, _ key: String) -> SpanAttribute? {
        span.attributes.get(key)
    }

    private func traceparent(of span: FinishedInMemorySpan) -> String {
        W3CInMemoryTracer.traceparent(traceID: span.traceID, spanID: span.spanID)
    }

    /// Waits (bounded) until the tracer finished `count` spans: a span ends on the delegate queue, just before the
    /// completion that the test awaited is scheduled, so it is there by then; the wait only covers the async verbs.
    private func finishedSpans(_ count: Int) async throws -> [FinishedInMemorySpan] {
        for _ in 0..<200 where tracer.finishedSpans.count < count {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return tracer.finishedSpans
    }

    // MARK: - Spans

    func testTaskAPIRequestHasOneClientSpanWithTheStableAttributesAndSendsItsTraceparent() async throws {
        let manager = observedManager()
        let url = server.url("/get?a=1")
        let error: Error? = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: URLRequest(url: url)) { _, _, error in done(error) })
        }
        XCTAssertNil(error)
        let spans = tracer.finishedSpans
        XCTAssertEqual(spans.count, 1)
        let span = try XCTUnwrap(spans.first)
        XCTAssertEqual(span.operationName, "GET")
        XCTAssertEqual(span.kind, .client)
        XCTAssertNil(span.parentSpanID)
        XCTAssertEqual(attribute(span, "http.request.method"), "GET")
        XCTAssertEqual(attribute(span, "server.address"), "127.0.0.1")
        XCTAssertEqual(attribute(span, "server.port"), .int64(Int64(server.port)))
        XCTAssertEqual(attribute(span, "url.scheme"), "http")
        XCTAssertEqual(attribute(span, "url.full"), .string(url.absoluteString))
        XCTAssertEqual(attribute(span, "http.response.status_code"), 200)
        XCTAssertNil(attribute(span, "error.type"))
        XCTAssertNil(attribute(span, "http.request.resend_count"))
        XCTAssertNotEqual(span.status?.code, .error)
        if LoopbackTestCase.testTransport == .curl {
            XCTAssertEqual(attribute(span, "network.protocol.version"), "1.1")
        }
        XCTAssertEqual(server.requests.last?.traceparent, traceparent(of: span))
    }

    func testCallersActiveSpanIsTheParentOnAsyncAndClosureAPIs() async throws {
        let manager = observedManager()
        let parent = tracer.startSpan("checkout")
        try await ServiceContext.withValue(parent.context) {
            _ = try await manager.get("get")
        }
        let closureError: Error? = try await awaitCallback { done in
            ServiceContext.withValue(parent.context) {
                manager.resume(
                    manager.dataTask(with: URLRequest(url: self.server.url("/get"))) { _, _, error in done(error) })
            }
        }
        XCTAssertNil(closureError)
        parent.end()
        let children = try await finishedSpans(3).filter { $0.operationName == "GET" }
        XCTAssertEqual(children.count, 2)
        for child in children {
            XCTAssertEqual(child.parentSpanID, parent.spanID)
            XCTAssertEqual(child.traceID, parent.traceID)
        }
        XCTAssertEqual(Set(server.requests.compactMap(\.traceparent)), Set(children.map(traceparent(of:))))
    }

    func testEachRedirectIsASpanOfItsOwnWithItsOwnTraceparent() async throws {
        let manager = observedManager()
        _ = try await manager.get("redirect/2")
        let spans = try await finishedSpans(3)
        XCTAssertEqual(spans.count, 3)
        XCTAssertEqual(spans.map { attribute($0, "http.response.status_code") }, [302, 302, 200])
        XCTAssertEqual(spans.map { attribute($0, "http.request.resend_count") }, [nil, 1, 2])
        XCTAssertEqual(
            spans.map { attribute($0, "url.full") },
            [server.url("/redirect/2"), server.url("/redirect/1"), server.url("/get")].map {
                .string($0.absoluteString)
            }
        )
        XCTAssertEqual(server.requests.map(\.traceparent), spans.map(traceparent(of:)))
    }

    func testRetryIsANewSpanWithItsResendCountAndTheFailedAttemptIsAnErrorSpan() async throws {
        let manager = observedManager()
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01, jitters: false)
        let key = UUID().uuidString
        let result = try await manager.get("flaky/\(key)?failures=1&status=503")
        XCTAssertEqual(result.retryCount, 1)
        let spans = try await finishedSpans(2)
        XCTAssertEqual(spans.count, 2)
        XCTAssertEqual(spans.map { attribute($0, "http.response.status_code") }, [503, 200])
        XCTAssertEqual(spans.map { attribute($0, "http.request.resend_count") }, [nil, 1])
        XCTAssertEqual(spans.first?.status?.code, .error)
        XCTAssertEqual(attribute(spans[0], "error.type"), "503")
        XCTAssertNotEqual(spans.last?.status?.code, .error)
        XCTAssertEqual(server.requests.map(\.traceparent), spans.map(traceparent(of:)))
    }

    func testARetryOfATaskAPIRequestIsANewSpanOnTheSameTask() async throws {
        try XCTSkipIf(LoopbackTestCase.testTransport != .curl, "the task API is retried on the curl transport only")
        let manager = observedManager()
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01, jitters: false)
        let url = server.url("/flaky/\(UUID().uuidString)?failures=1&status=503")
        let error: Error? = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: URLRequest(url: url)) { _, _, error in done(error) })
        }
        XCTAssertNil(error)
        let spans = try await finishedSpans(2)
        XCTAssertEqual(spans.count, 2)
        XCTAssertEqual(spans.map { attribute($0, "http.response.status_code") }, [503, 200])
        XCTAssertEqual(spans.map { attribute($0, "http.request.resend_count") }, [nil, 1])
        XCTAssertEqual(spans.first?.status?.code, .error)
        XCTAssertEqual(server.requests.map(\.traceparent), spans.map(traceparent(of:)), "each attempt its own context")
    }

    func testConnectionRefusedIsAnErrorSpanWithItsErrorType() async throws {
        let port = server.port
        try await server.shutdown()
        defer { server = nil }
        let manager = observedManager(timeout: 5)
        let error: Error? = try await awaitCallback { done in
            manager.resume(
                manager.dataTask(with: URLRequest(url: URL(string: "http://127.0.0.1:\(port)/get")!)) { _, _, error in
                    done(error)
                })
        }
        XCTAssertEqual((error as? URLError)?.code, .cannotConnectToHost)
        let span = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(span.status?.code, .error)
        XCTAssertEqual(attribute(span, "error.type"), "cannot_connect_to_host")
        XCTAssertNil(attribute(span, "http.response.status_code"))
        XCTAssertEqual(span.errors.count, 1)
        let timers = metrics.timers(label: "http.client.request.duration")
        XCTAssertEqual(timers.count, 1)
        XCTAssertTrue(timers[0].dimensions.contains { $0 == ("error.type", "cannot_connect_to_host") })
        try XCTAssertEqual(
            metrics.expectMeter("http.client.active_requests", Self.requestDimensions(port: port)).lastValue, 0)
        server = try await LoopbackServer.start()
    }

    func testClientErrorStatusIsAnErrorSpan() async throws {
        let manager = observedManager()
        let (_, response) = try await manager.data(
            for: HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/status/404"))
        XCTAssertEqual(response.status.code, 404)
        let spans = try await finishedSpans(1)
        let span = try XCTUnwrap(spans.first)
        XCTAssertEqual(span.status?.code, .error)
        XCTAssertEqual(attribute(span, "error.type"), "404")
        XCTAssertEqual(attribute(span, "http.response.status_code"), 404)
        XCTAssertEqual(server.requests.last?.traceparent, traceparent(of: span))
    }

    func testFullURLHasNoCredentialsAndRedactedSignatures() async throws {
        let manager = observedManager()
        var components = URLComponents(url: server.url("/get"), resolvingAgainstBaseURL: false)!
        components.user = "ada"
        components.password = "s3cret"
        components.query = "sig=abc&X-Goog-Signature=def&page=2"
        let url = try XCTUnwrap(components.url)
        let _: Error? = try await awaitCallback { done in
            manager.resume(manager.dataTask(with: URLRequest(url: url)) { _, _, error in done(error) })
        }
        let span = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(
            attribute(span, "url.full"),
            .string("http://127.0.0.1:\(server.port)/get?sig=REDACTED&X-Goog-Signature=REDACTED&page=2"))
    }

    func testStreamedBodySpanLastsUntilTheBodyEnded() async throws {
        let manager = observedManager()
        let request = HTTPRequest(
            method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)",
            path: "/drip?numbytes=4&duration=0.8")
        let tracer = self.tracer!
        let (finishedAtHead, activeAtHead, bytes) = try await manager.perform(request) { response, body in
            let finishedAtHead = tracer.finishedSpans.count
            let activeAtHead = tracer.activeSpans.count
            var received = 0
            for try await chunk in body { received += chunk.count }
            return (finishedAtHead, activeAtHead, received)
        }
        XCTAssertEqual(bytes, 4)
        XCTAssertEqual(finishedAtHead, 0, "the span ended with the head")
        XCTAssertEqual(activeAtHead, 1)
        let span = try XCTUnwrap(tracer.finishedSpans.first)
        XCTAssertEqual(attribute(span, "http.response.status_code"), 200)
        XCTAssertEqual(tracer.finishedSpans.count, 1)
    }

    func testStreamedResponseBodySpanEndsAfterTheLastChunk() async throws {
        let manager = observedManager()
        let streamed = try await manager.bytes(for: URLRequest(url: server.url("/drip?numbytes=3&duration=0.6")))
        XCTAssertEqual(tracer.finishedSpans.count, 0)
        var received = 0
        for try await chunk in streamed.body { received += chunk.count }
        XCTAssertEqual(received, 3)
        XCTAssertEqual(tracer.finishedSpans.count, 1)
    }

    func testHTTP2AttemptRecordsItsProtocolVersionAndItsConnection() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport == .foundation,
            "URLSession on Linux tells neither the protocol version nor its connections")
        let tls = try await LoopbackServer.start(tls: TestCertificates.localhost, http2: true)
        defer { Task { try? await tls.shutdown() } }
        let manager = try makeRootCAPinnedManager()
        manager.tracer = tracer
        manager.metricsFactory = metrics
        let authority = "localhost:\(tls.port)"
        let (_, response) = try await manager.data(
            for: HTTPRequest(method: .get, scheme: "https", authority: authority, path: "/get"))
        XCTAssertEqual(response.status.code, 200)
        let spans = try await finishedSpans(1)
        let span = try XCTUnwrap(spans.first)
        XCTAssertEqual(attribute(span, "network.protocol.version"), "2")
        XCTAssertEqual(attribute(span, "url.scheme"), "https")
        XCTAssertEqual(attribute(span, "server.port"), .int64(Int64(tls.port)))
        XCTAssertEqual(tls.requests.last?.traceparent, traceparent(of: span))
        let active = try metrics.expectMeter(
            "http.client.open_connections",
            [
                ("url.scheme", "https"), ("server.address", "localhost"), ("server.port", String(tls.port)),
                ("http.connection.state", "active"),
            ])
        XCTAssertEqual(active.values, [1, 0])
    }

    // MARK: - Metrics

    private static func requestDimensions(port: Int, method: String = "GET") -> [(String, String)] {
        [
            ("http.request.method", method), ("url.scheme", "http"), ("server.address", "127.0.0.1"),
            ("server.port", String(port)),
        ]
    }

    func testMetricsOfEachAttemptHaveTheLowCardinalityAttributesAndActiveRequestsReturnToZero() async throws {
        let manager = observedManager()
        _ = try await manager.post("post", parameters: ["name": "Ada"])
        let (_, response) = try await manager.data(
            for: HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/status/404"))
        XCTAssertEqual(response.status.code, 404)
        _ = try await finishedSpans(2)
        let timers = metrics.timers(label: "http.client.request.duration")
        XCTAssertEqual(timers.count, 2)
        var post = Self.requestDimensions(port: server.port, method: "POST")
        post.append(("http.response.status_code", "200"))
        var notFound = Self.requestDimensions(port: server.port)
        notFound.append(contentsOf: [("http.response.status_code", "404"), ("error.type", "404")])
        if LoopbackTestCase.testTransport == .curl {
            post.append(("network.protocol.version", "1.1"))
            notFound.append(("network.protocol.version", "1.1"))
        }
        let postTimer = try metrics.expectTimer("http.client.request.duration", post)
        XCTAssertEqual(postTimer.values.count, 1)
        XCTAssertEqual(try metrics.expectTimer("http.client.request.duration", notFound).values.count, 1)
        let sentBody = try XCTUnwrap(server.requests.first { $0.method == "POST" }?.bodyLength)
        XCTAssertEqual(try metrics.expectRecorder("http.client.request.body.size", post).values, [Double(sentBody)])
        XCTAssertEqual(try metrics.expectRecorder("http.client.response.body.size", notFound).values.count, 1)
        for method in ["POST", "GET"] {
            let meter = try metrics.expectMeter(
                "http.client.active_requests", Self.requestDimensions(port: server.port, method: method))
            XCTAssertEqual(meter.values, [1, 0], method)
        }
        let labels = Set(metrics.timers.flatMap { $0.dimensions.map(\.0) })
        XCTAssertEqual(
            labels.subtracting([
                "http.request.method", "url.scheme", "server.address", "server.port", "http.response.status_code",
                "error.type", "network.protocol.version",
            ]), [])
    }

    func testRedirectAndRetryAttemptsAreMeasuredEach() async throws {
        let manager = observedManager()
        manager.interceptor = RetryPolicy(exponentialBackoffScale: 0.01, jitters: false)
        _ = try await manager.get("redirect/1")
        _ = try await manager.get("flaky/\(UUID().uuidString)?failures=1&status=503")
        _ = try await finishedSpans(4)
        let statuses = metrics.timers(label: "http.client.request.duration").flatMap { timer in
            Array(
                repeating: timer.dimensions.first { $0.0 == "http.response.status_code" }?.1 ?? "",
                count: timer.values.count)
        }
        XCTAssertEqual(statuses.sorted(), ["200", "200", "302", "503"])
        let meter = try metrics.expectMeter("http.client.active_requests", Self.requestDimensions(port: server.port))
        XCTAssertEqual(meter.lastValue, 0)
    }

    // MARK: - Connections (curl transport)

    private func connectionMeter(_ state: String) throws -> TestMeter {
        try metrics.expectMeter(
            "http.client.open_connections",
            [
                ("url.scheme", "http"), ("server.address", "127.0.0.1"), ("server.port", String(server.port)),
                ("http.connection.state", state),
            ])
    }

    func testKeptAliveConnectionIsActiveDuringEachRequestAndIdleBetween() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport == .foundation,
            "URLSession on Linux does not show its connections: no open_connections on the Foundation transport")
        let manager = observedManager()
        _ = try await manager.get("get")
        _ = try await manager.get("get")
        XCTAssertEqual(server.connectionCount, 1)
        XCTAssertEqual(try connectionMeter("active").values, [1, 0, 1, 0])
        XCTAssertEqual(try connectionMeter("idle").values, [1, 0, 1])
        XCTAssertTrue(metrics.timers(label: "http.client.connection.duration").isEmpty, "the connection is open")
    }

    func testClosedConnectionIsNoLongerOpenAndItsDurationIsRecorded() async throws {
        try XCTSkipIf(
            LoopbackTestCase.testTransport == .foundation,
            "URLSession on Linux does not show its connections: no connection metrics on the Foundation transport")
        let manager = observedManager()
        _ = try await manager.get("get", headers: ["Connection": "close"])
        XCTAssertEqual(try connectionMeter("active").values, [1, 0])
        XCTAssertTrue(metrics.meters(label: "http.client.open_connections").allSatisfy { $0.lastValue == 0 })
        let duration = try metrics.expectTimer(
            "http.client.connection.duration",
            [("url.scheme", "http"), ("server.address", "127.0.0.1"), ("server.port", String(server.port))])
        XCTAssertEqual(duration.values.count, 1)
    }

    // MARK: - Off switches

    func testNilTracerSendsNoTraceparentAndRecordsNoSpan() async throws {
        let manager = observedManager()
        manager.tracer = nil
        XCTAssertNil(manager.tracer)
        _ = try await manager.get("get")
        XCTAssertNil(server.requests.last?.traceparent)
        XCTAssertTrue(tracer.finishedSpans.isEmpty)
        XCTAssertTrue(tracer.activeSpans.isEmpty)
        XCTAssertEqual(metrics.timers(label: "http.client.request.duration").count, 1, "metrics stay on")
    }

    func testNilMetricsFactoryRecordsNoMetrics() async throws {
        let manager = observedManager()
        manager.metricsFactory = nil
        XCTAssertNil(manager.metricsFactory)
        _ = try await manager.get("get")
        _ = try await finishedSpans(1)
        XCTAssertTrue(metrics.timers.isEmpty)
        XCTAssertTrue(metrics.meters.isEmpty)
        XCTAssertTrue(metrics.recorders.isEmpty)
        XCTAssertNotNil(server.requests.last?.traceparent, "tracing stays on")
    }

    func testDefaultsAreTheBootstrappedSystemsAndNoOpsSendNothing() async throws {
        let manager = makeManager()
        XCTAssertTrue(manager.tracer is NoOpTracer, "nothing is bootstrapped in the test process")
        XCTAssertTrue(manager.metricsFactory is NOOPMetricsHandler)
        _ = try await manager.get("get")
        XCTAssertNil(server.requests.last?.traceparent)
    }

    func testArchivedManagerDoesNotCarryTheTracerAndStillRoundTrips() throws {
        let manager = observedManager()
        let data = try SecureArchive.archive(manager)
        let decoded = try SecureArchive.unarchive(HTTPSessionManager.self, from: data)
        XCTAssertTrue(decoded.tracer is NoOpTracer)
        XCTAssertTrue(decoded.metricsFactory is NOOPMetricsHandler)
        XCTAssertEqual(decoded.baseURL, manager.baseURL)
    }
}
