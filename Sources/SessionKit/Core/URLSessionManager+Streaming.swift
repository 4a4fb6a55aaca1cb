import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response whose body arrives in chunks as it is read, from ``URLSessionManager/bytes(for:interceptor:)``.
public struct StreamedResponse: Sendable {
    // Sendable, checked by the compiler: `response` is never mutated after it arrived; `body` is Sendable.

    /// The response head.
    public let response: HTTPURLResponse
    /// The body, chunk by chunk, in order; it throws the transport's error, if any, after the last chunk that
    /// arrived. Reading slowly slows the transfer down (on the curl transport the transfer pauses while 2 MiB wait);
    /// cancelling the reading Swift task cancels the request and makes the read throw `URLError.cancelled` (before
    /// the first read, during one or between two), and dropping the body unread cancels the request.
    public let body: StreamedBody
}

extension URLSessionManager {
    /// Sends `request` (adapted by the interceptors, retried by their retriers only while no response head arrived)
    /// and returns as soon as the response head arrived, with the body to read as an async sequence of chunks: what
    /// `URLSession.bytes(for:)` does on Apple platforms, which Linux lacks. The status is not validated: check
    /// ``StreamedResponse/response``.
    ///
    /// ```swift
    /// let streamed = try await manager.bytes(for: URLRequest(url: url))
    /// for try await chunk in streamed.body { try handle.write(contentsOf: chunk) }
    /// ```
    /// - Throws: An adapter's error, or the transport error that ended the request before a response head.
    public func bytes(
        for request: URLRequest, interceptor: (any RequestInterceptor)? = nil
    ) async throws -> StreamedResponse {
        let (head, body) = try await streamed(request, interceptor: interceptor)
        guard let response = head.httpResponse else {
            // Dropping `body` unread cancels the request.
            throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: request.url as Any])
        }
        return StreamedResponse(response: response, body: body)
    }

    /// ``bytes(for:interceptor:)``, sent as an upload of `upload` when there is one, and the head as received
    /// (its `HTTPURLResponse` built only if the caller asks); `completed` runs once the request completed (its last
    /// attempt ended, the body may still wait to be read), failed or was cancelled.
    func streamed(
        _ request: URLRequest, interceptor: (any RequestInterceptor)? = nil, upload: UploadBody? = nil,
        completed: @escaping @Sendable () -> Void = {}
    ) async throws -> (ReceivedResponse, StreamedBody) {
        let sink = DataStreamSink()
        let pipeline = Task {
            defer { completed() }
            do {
                return try await runPipeline(
                    request, interceptor: interceptor,
                    responseSerializer: UnvalidatedResponseSerializer(), streamSink: sink, upload: upload,
                    announcesTasks: false)
            } catch {
                sink.finish(error)  // an adapter's refusal ends the request before any task could
                throw error
            }
        }
        let head: ReceivedResponse
        do {
            head = try await withTaskCancellationHandler {
                try await sink.response()
            } onCancel: {
                pipeline.cancel()
            }
        } catch {
            pipeline.cancel()
            // An adapter's refusal is the pipeline's error, not the sink's.
            if case .failure(let pipelineError) = await pipeline.result { throw pipelineError }
            throw error
        }
        let body = StreamedBody(sink: sink, url: request.url, cancelRequest: { pipeline.cancel() })
        return (head, body)
    }

    /// Creates (not resumed) a data task whose body is handed to `chunk`, in order, on a serial queue of the task's
    /// own, instead of being kept in memory; `completion` runs once on the ``completionQueue`` after the last chunk
    /// was handled. A `chunk` closure that takes its time slows the transfer down (on the curl transport the
    /// transfer pauses while 2 MiB wait) instead of piling the body up.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - chunk: Called with each piece of the body as it arrives.
    ///   - completion: Called once with the response and the error, if any (the status is not validated).
    public func streamTask(
        with request: URLRequest,
        chunk: @escaping @Sendable (Data) -> Void,
        completion: @escaping @Sendable (URLResponse?, Error?) -> Void
    ) -> URLSessionDataTask {
        let sink = DataStreamSink()
        let queue = DispatchQueue(label: "com.sessionkit.stream")
        let task = makeTask(.data(request), responseSerializer: UnvalidatedResponseSerializer(), streamSink: sink) {
            outcome in
            // After every chunk queued before the end was handled.
            queue.async { [self] in
                let response = outcome.response
                let error = outcome.error
                onCompletionQueue { completion(response, error) }
            }
        }
        sink.deliver(on: queue, chunk: chunk)
        return task as? URLSessionDataTask ?? RefusalSession.shared.dataTask()  // a data source makes a data task
    }
}

/// Leaves a streamed response's status to the caller and reads no body.
struct UnvalidatedResponseSerializer: URLResponseSerialization {
    func responseObject(for response: URLResponse?, data: Data?) throws -> Any? { nil }
}
