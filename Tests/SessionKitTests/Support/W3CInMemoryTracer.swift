import Foundation
import InMemoryTracing
import Tracing

/// swift-distributed-tracing's `InMemoryTracer`, propagating its span context as a W3C `traceparent` as an
/// OpenTelemetry tracer does (the in-memory tracer's own fields are `in-memory-trace-id` and `in-memory-span-id`):
/// hex trace and span identifiers, `00-TRACE-SPAN-01`.
final class W3CInMemoryTracer: Tracer {
    typealias Span = InMemorySpan

    /// The tracer that records the spans.
    let recorder = InMemoryTracer(idGenerator: W3CInMemoryTracer.hexIdentifiers())

    var finishedSpans: [FinishedInMemorySpan] { recorder.finishedSpans }
    var activeSpans: [InMemorySpan] { recorder.activeSpans }

    /// The `traceparent` a span's context propagates as.
    static func traceparent(traceID: String, spanID: String) -> String { "00-\(traceID)-\(spanID)-01" }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        recorder.startSpan(
            operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID,
            line: line)
    }

    func activeSpan(identifiedBy context: ServiceContext) -> InMemorySpan? {
        recorder.activeSpan(identifiedBy: context)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
    ) where Carrier == Inject.Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject(
            Self.traceparent(traceID: span.traceID, spanID: span.spanID), forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    ) where Carrier == Extract.Carrier {}

    /// 32 and 16 hex digits, counting up.
    private static func hexIdentifiers() -> InMemoryTracer.IDGenerator {
        let counter = IdentifierCounter()
        return InMemoryTracer.IDGenerator(
            nextTraceID: { String(format: "%032x", counter.next()) },
            nextSpanID: { String(format: "%016x", counter.next()) })
    }
}

/// A counter shared by threads.
private final class IdentifierCounter: @unchecked Sendable {
    // @unchecked Sendable: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value = 0

    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
