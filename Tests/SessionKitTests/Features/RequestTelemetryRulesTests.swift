import Foundation
import InMemoryTracing
import Metrics
import MetricsTestKit
import Tracing
import XCTest

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The rules of the attempts' attributes and of the off switches, without I/O.
final class RequestTelemetryRulesTests: XCTestCase {
    private func describe(_ url: String, method: String = "GET") throws -> AttemptDescription {
        var request = URLRequest(url: try XCTUnwrap(URL(string: url)))
        request.httpMethod = method
        return try XCTUnwrap(AttemptDescription(request))
    }

    func testMethodsOutsideTheKnownSetAreOtherWithTheOriginalKept() throws {
        XCTAssertEqual(try describe("http://a.example/x", method: "PATCH").method, "PATCH")
        let other = try describe("http://a.example/x", method: "PURGE")
        XCTAssertEqual(other.method, "_OTHER")
        XCTAssertEqual(other.originalMethod, "PURGE")
        XCTAssertEqual(
            RequestTracing.startAttributes(of: other, resendCount: 0).get("http.request.method_original"), "PURGE")
    }

    func testPortsDefaultToTheSchemes() throws {
        XCTAssertEqual(try describe("http://a.example/x").port, 80)
        XCTAssertEqual(try describe("https://a.example/x").port, 443)
        XCTAssertEqual(try describe("wss://a.example/x").port, 443)
        XCTAssertEqual(try describe("https://a.example:8443/x").port, 8443)
        XCTAssertNil(AttemptDescription(URLRequest(url: URL(fileURLWithPath: "/tmp/x"))), "no host, no attempt")
    }

    func testFullURLDropsCredentialsAndRedactsSignaturesOnly() throws {
        XCTAssertEqual(
            try describe("https://ada:pw@a.example/x?AWSAccessKeyId=K&Signature=S&page=2#top").fullURL,
            "https://a.example/x?AWSAccessKeyId=REDACTED&Signature=REDACTED&page=2#top")
        XCTAssertEqual(try describe("https://a.example/x?q=1").fullURL, "https://a.example/x?q=1")
        XCTAssertEqual(try describe("https://a.example/x").fullURL, "https://a.example/x")
    }

    func testResendCountOnlyOnResentRequests() throws {
        let attempt = try describe("https://a.example/x")
        XCTAssertNil(RequestTracing.startAttributes(of: attempt, resendCount: 0).get("http.request.resend_count"))
        XCTAssertEqual(RequestTracing.startAttributes(of: attempt, resendCount: 2).get("http.request.resend_count"), 2)
    }

    func testOutcomeErrorTypeAndProtocolVersion() {
        XCTAssertEqual(AttemptOutcome(statusCode: 503).errorType, "503")
        XCTAssertNil(AttemptOutcome(statusCode: 302).errorType)
        XCTAssertEqual(AttemptOutcome(error: URLError(.timedOut)).errorType, "timed_out")
        XCTAssertEqual(AttemptOutcome(statusCode: 200, error: URLError(.cancelled)).errorType, "cancelled")
        XCTAssertEqual(AttemptOutcome(error: CancellationError()).errorType, "Swift.CancellationError")
        XCTAssertEqual(AttemptOutcome.protocolVersion(fromStatusLineVersion: "HTTP/1.1"), "1.1")
        XCTAssertEqual(AttemptOutcome.protocolVersion(fromStatusLineVersion: "HTTP/2"), "2")
        XCTAssertNil(AttemptOutcome.protocolVersion(fromStatusLineVersion: "ICY"))
    }

    func testNoOpTracerAndFactoryAreOffAndEitherRealOneIsOn() {
        XCTAssertNil(RequestTelemetry(tracer: NoOpTracer(), metricsFactory: NOOPMetricsHandler.instance).active)
        XCTAssertNil(RequestTelemetry(tracer: nil, metricsFactory: nil).active)
        var telemetry = RequestTelemetry(tracer: nil, metricsFactory: nil)
        telemetry.tracer = InMemoryTracer()
        XCTAssertNotNil(telemetry.active?.tracing)
        XCTAssertNil(telemetry.active?.metrics)
        telemetry.tracer = nil
        telemetry.metricsFactory = TestMetrics()
        XCTAssertNil(telemetry.active?.tracing)
        XCTAssertNotNil(telemetry.active?.metrics)
        telemetry.metricsFactory = nil
        XCTAssertNil(telemetry.active)
    }
}
