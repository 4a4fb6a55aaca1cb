import Foundation
public import Metrics
public import Tracing

/// Traces and metrics of every request, with the server ecosystem's APIs (swift-distributed-tracing, swift-metrics).
extension URLSessionManager {
    /// The tracer each attempt of every request of this manager starts its client span with; nil turns tracing off
    /// (no spans, no trace context on the wire).
    ///
    /// Default: `InstrumentationSystem.tracer` as it was when the manager was created, so bootstrap the tracing
    /// backend (swift-otel, for example) before creating managers. One span per attempt (each redirect and retry is
    /// one), named after the method, a child of the span active in the caller's `ServiceContext`, lasting until the
    /// response body ended, with OpenTelemetry's stable HTTP client attributes; the attempt's request carries the
    /// span's trace context as the tracer propagates it (W3C `traceparent` and `tracestate` with swift-otel).
    /// Not archived or copied: a decoded or copied manager has the default.
    ///
    /// ```swift
    /// InstrumentationSystem.bootstrap(otelTracer)   // once, at startup
    /// let manager = URLSessionManager()              // traces every request
    /// try await withSpan("checkout") { _ in
    ///     _ = try await manager.data(for: request)   // a client span under "checkout"
    /// }
    /// ```
    public var tracer: (any Tracer)? {
        get { telemetry.read { $0.tracer } }
        set { telemetry.write { $0.tracer = newValue } }
    }

    /// The factory of the OpenTelemetry HTTP client metrics of this manager's requests and connections
    /// (`http.client.request.duration`, `http.client.active_requests`, `http.client.open_connections`,
    /// `http.client.connection.duration`, `http.client.request.body.size`, `http.client.response.body.size`); nil turns
    /// metrics off.
    ///
    /// Default: `MetricsSystem.factory` as it was when the manager was created (bootstrap first). Not archived or
    /// copied.
    ///
    /// ```swift
    /// MetricsSystem.bootstrap(prometheusFactory)      // once, at startup
    /// let manager = URLSessionManager()
    /// ```
    public var metricsFactory: (any MetricsFactory)? {
        get { telemetry.read { $0.metricsFactory } }
        set { telemetry.write { $0.metricsFactory = newValue } }
    }
}
