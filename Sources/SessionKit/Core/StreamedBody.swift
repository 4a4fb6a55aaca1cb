import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The body of a ``StreamedResponse``: its chunks, in order, as they are read.
///
/// Reading slowly slows the transfer down (on the curl transport the transfer pauses while 2 MiB wait). Cancelling
/// the Swift task that reads cancels the request, and the read throws `URLError.cancelled` whenever the cancellation
/// lands: before the first read, during one, or between two. A loop over the body therefore ends without an error
/// only when the whole body arrived. Dropping the body unread cancels the request too.
///
/// ```swift
/// let streamed = try await manager.bytes(for: URLRequest(url: url))
/// for try await chunk in streamed.body { try handle.write(contentsOf: chunk) }
/// ```
public struct StreamedBody: AsyncSequence, Sendable {
    // Sendable, checked by the compiler: the only field is a Sendable reference.

    /// A chunk of the body.
    public typealias Element = Data

    /// Reads the chunks of a ``StreamedBody``, one at a time.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let reader: StreamReader
        /// Set once the body ended or a read threw: an iterator returns nil afterwards, as async iterators do.
        private var ended = false

        fileprivate init(reader: StreamReader) {
            self.reader = reader
        }

        /// The next chunk; nil at the end of the body.
        ///
        /// - Throws: The transport error that cut the body (after the chunks that arrived before it), or
        ///   `URLError.cancelled` when the reading Swift task was cancelled.
        public mutating func next() async throws -> Data? {
            guard !ended else { return nil }
            do {
                let chunk = try await reader.next()
                if chunk == nil { ended = true }
                return chunk
            } catch {
                ended = true
                throw error
            }
        }
    }

    fileprivate let reader: StreamReader

    /// The body whose chunks wait in `sink`; `cancelRequest` runs when the body is dropped unread.
    init(sink: DataStreamSink, url: URL?, cancelRequest: @escaping @Sendable () -> Void) {
        reader = StreamReader(sink: sink, url: url, cancelRequest: cancelRequest)
    }

    /// The response's trailers once the body ended (nil without any); throws the request's error.
    func trailers() async throws -> [(String, String)]? {
        try await reader.trailers()
    }

    /// An iterator over the body. Iterators made from one body share it: each chunk goes to one of them.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: reader)
    }
}

/// The reading end of a streamed body, shared by the body and its iterators; when the last of them goes, the
/// request is cancelled (a body dropped before its end).
private final class StreamReader: Sendable {
    // Sendable, checked by the compiler: every field is an immutable Sendable value.
    private let sink: DataStreamSink
    private let url: URL?
    private let cancelRequest: @Sendable () -> Void

    init(sink: DataStreamSink, url: URL?, cancelRequest: @escaping @Sendable () -> Void) {
        self.sink = sink
        self.url = url
        self.cancelRequest = cancelRequest
    }

    func next() async throws -> Data? {
        // A task cancelled before this read must not look like a body that ended: Swift's
        // `AsyncThrowingStream` returns nil here, and a caller took the short body for the whole one. A read
        // cancelled while it waits is the sink's (it cancels the task, which ends with `URLError.cancelled`).
        if Task.isCancelled {
            sink.cancelTask()
            throw URLError(.cancelled, userInfo: url.map { [NSURLErrorFailingURLErrorKey: $0] } ?? [:])
        }
        return try await sink.next()
    }

    func trailers() async throws -> [(String, String)]? {
        try await sink.trailers()
    }

    deinit {
        cancelRequest()  // cancels the pipeline, and with it the running task
    }
}
