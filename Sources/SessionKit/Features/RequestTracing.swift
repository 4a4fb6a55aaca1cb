import Foundation
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client span of one attempt of a request, with OpenTelemetry's stable HTTP client attributes, and the trace
/// context it puts on the wire.
///
/// An attempt is one request on the wire: the first one, each redirect the task follows, each retry of the pipeline.
/// Its span is named after the method, is a child of the span active in the caller's `ServiceContext`, starts when
/// the attempt's request is finalised and ends when its response body ended (or the attempt failed).
struct RequestTracing: Sendable {
    /// The tracer spans are started with.
    let tracer: any Tracer

    /// The attributes an attempt's span starts with, as its ``AttemptDescription`` gives them.
    static func startAttributes(of attempt: AttemptDescription, resendCount: Int) -> SpanAttributes {
        var attributes = SpanAttributes()
        attributes["http.request.method"] = attempt.method
        if let original = attempt.originalMethod { attributes["http.request.method_original"] = original }
        attributes["server.address"] = attempt.host
        attributes["server.port"] = attempt.port
        attributes["url.scheme"] = attempt.scheme
        attributes["url.full"] = attempt.fullURL
        if resendCount > 0 { attributes["http.request.resend_count"] = resendCount }
        return attributes
    }

    /// Starts the span of `attempt` as a child of `parent`, and puts its trace context (W3C `traceparent` and
    /// `tracestate` with an OpenTelemetry tracer, whatever the bootstrapped instrument propagates otherwise) into
    /// `request`'s header fields, replacing any the request had.
    func startSpan(
        of attempt: AttemptDescription, resendCount: Int, parent: ServiceContext, request: inout URLRequest
    ) -> any Span {
        let span = tracer.startSpan(
            attempt.method == "_OTHER" ? "HTTP" : attempt.method, context: parent, ofKind: .client)
        if span.isRecording {
            span.attributes.merge(Self.startAttributes(of: attempt, resendCount: resendCount))
        }
        tracer.inject(span.context, into: &request, using: URLRequestInjector())
        return span
    }

    /// Ends `span` with the attempt's outcome: its status code, protocol version, and the error type and an error
    /// status for a failure or a status of 400 or more.
    static func end(_ span: any Span, outcome: AttemptOutcome) {
        if span.isRecording {
            if let status = outcome.statusCode { span.attributes["http.response.status_code"] = status }
            if let version = outcome.protocolVersion { span.attributes["network.protocol.version"] = version }
            if let errorType = outcome.errorType {
                span.attributes["error.type"] = errorType
                if let error = outcome.error { span.recordError(error) }
                span.setStatus(SpanStatus(code: .error))
            }
        }
        span.end()
    }
}

/// Writes a tracer's propagation fields into a `URLRequest`'s header fields.
struct URLRequestInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}
