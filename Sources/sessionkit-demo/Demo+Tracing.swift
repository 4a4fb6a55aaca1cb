import Foundation
import InMemoryTracing
import SessionKit
import SessionKitTestSupport
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Demo {
    /// 12. A request's span tree: an operation of the caller's, and under it one client span per attempt (here a
    /// redirect followed, so two), with the trace context the server received.
    static func tracingStep(_ server: LoopbackServer) async throws {
        step(12, "traces: one client span per attempt, under the caller's span (in-memory tracer)")
        let tracer = InMemoryTracer()
        let manager = HTTPSessionManager(baseURL: server.url("/"))
        manager.tracer = tracer  // in a service: InstrumentationSystem.bootstrap(…) once, and nothing per manager
        // The span active in the caller's ServiceContext (withSpan binds it) is the parent of the request's spans.
        try await tracer.withSpan("load profile", context: .topLevel, ofKind: .internal) { _ in
            _ = try await manager.get("redirect/1")
        }
        // The spans end on the manager's delegate queue as each attempt ends, before the request returns.
        let spans = tracer.finishedSpans
        guard let root = spans.first(where: { $0.parentSpanID == nil }), spans.count == 3 else {
            throw DemoError("expected the caller's span and two client spans, got \(spans.count) spans")
        }
        func printTree(_ span: FinishedInMemorySpan, depth: Int) {
            var line = String(repeating: "   ", count: depth + 1) + "\(span.operationName) [\(span.kind)]"
            for key in ["url.full", "http.response.status_code", "http.request.resend_count"] {
                switch span.attributes.get(key) {
                case .string(let value)?: line += " \(key)=\(value)"
                case .int64(let value)?: line += " \(key)=\(value)"
                default: break
                }
            }
            print(line)
            for child in spans where child.parentSpanID == span.spanID { printTree(child, depth: depth + 1) }
        }
        printTree(root, depth: 0)
        let received = server.requests.suffix(2).map { $0.header(InMemoryTracer.spanIDKey) ?? "none" }
        print("   span ids the server received with the two requests: \(received.joined(separator: ", "))")
    }
}
