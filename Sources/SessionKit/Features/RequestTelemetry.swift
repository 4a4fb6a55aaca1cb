import Foundation
import Metrics
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A manager's observability: its tracer and metrics factory as set, and what of them is worth any work.
///
/// Resolved once whenever ``URLSessionManager/tracer`` or ``URLSessionManager/metricsFactory`` is set: a no-op tracer
/// (`NoOpTracer`, what `InstrumentationSystem` gives when nothing was bootstrapped) and the no-op metrics factory
/// count as off, so that a request of a manager with neither pays one read of ``active`` and nothing else.
struct RequestTelemetry: Sendable {
    /// The tracer as set (``URLSessionManager/tracer``).
    var tracer: (any Tracer)? {
        didSet { resolve() }
    }
    /// The metrics factory as set (``URLSessionManager/metricsFactory``).
    var metricsFactory: (any MetricsFactory)? {
        didSet { resolve() }
    }
    /// What requests use: nil when neither traces nor metrics would record anything.
    private(set) var active: Active?

    /// The parts that record.
    struct Active: Sendable {
        let tracing: RequestTracing?
        let metrics: HTTPClientMetrics?
    }

    /// The bootstrapped systems' tracer and factory, read now.
    init(
        tracer: (any Tracer)? = InstrumentationSystem.tracer,
        metricsFactory: (any MetricsFactory)? = MetricsSystem.factory
    ) {
        self.tracer = tracer
        self.metricsFactory = metricsFactory
        resolve()
    }

    /// Recomputes ``active`` after a change.
    private mutating func resolve() {
        let tracing = tracer.flatMap { $0 is NoOpTracer ? nil : RequestTracing(tracer: $0) }
        let metrics = metricsFactory.flatMap { $0 is NOOPMetricsHandler ? nil : HTTPClientMetrics(factory: $0) }
        active = tracing == nil && metrics == nil ? nil : Active(tracing: tracing, metrics: metrics)
    }
}

extension RequestTelemetry.Active {
    /// Starts the observation of the task about to be created for `request`: the first attempt's span (its trace
    /// context put into `request`) and metrics. `resendCount` is the retries of the pipeline before this task.
    /// Nil when the request has no URL with a host (it fails before any I/O).
    func begin(_ request: inout URLRequest, resendCount: Int, delegateQueue: DispatchQueue) -> TaskTelemetry? {
        guard let attempt = AttemptDescription(request) else { return nil }
        return TaskTelemetry(
            tracing: tracing, metrics: metrics, parent: ServiceContext.current ?? .topLevel,
            delegateQueue: delegateQueue,
            first: attempt, resendCount: resendCount, request: &request)
    }

    /// Starts the span of the WebSocket connection that `request` opens (its trace context put into the handshake);
    /// its metrics are not HTTP requests' and are not recorded. Nil without tracing or without a URL with a host.
    func beginConnection(_ request: inout URLRequest, delegateQueue: DispatchQueue) -> TaskTelemetry? {
        guard let tracing, let attempt = AttemptDescription(request) else { return nil }
        return TaskTelemetry(
            tracing: tracing, metrics: nil, parent: ServiceContext.current ?? .topLevel, delegateQueue: delegateQueue,
            first: attempt, resendCount: 0, request: &request)
    }
}
