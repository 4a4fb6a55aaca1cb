import Foundation
public import HTTPTypes

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP core API: swift-http-types' `HTTPRequest` in, `HTTPResponse` out, no `URLSessionTask` to hold. The
/// manager's interceptors, event monitors, retry policy, redirects, challenges, HTTP cache, cookies, security policy
/// and body limits apply as to every other call.
extension URLSessionManager {
    /// Sends `request` and returns the whole body and the response, as swift-http-types' `URLSession.data(for:)` does.
    /// The status is not validated: a 404 is a response.
    ///
    /// ```swift
    /// let request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/items")
    /// let (data, response) = try await manager.data(for: request)
    /// ```
    /// - Throws: A `URLError` (`.badURL` without a scheme and authority), an adapter's or a retrier's error.
    public func data(for request: HTTPRequest) async throws -> (Data, HTTPResponse) {
        try await buffered(try HTTPTypesBridge.urlRequest(from: request), upload: nil)
    }

    /// Sends `request` with `body` and returns the whole response body and the response.
    ///
    /// - Throws: As ``data(for:)``.
    public func upload(for request: HTTPRequest, from body: Data) async throws -> (Data, HTTPResponse) {
        // An upload task, as swift-http-types' `URLSession.upload(for:from:)` sends it (no default `Content-Type`); the
        // body is the request's until then, for the adapters and monitors.
        var urlRequest = try HTTPTypesBridge.urlRequest(from: request)
        urlRequest.httpBody = body
        return try await buffered(urlRequest, upload: .httpBody)
    }

    /// Sends `request` with the contents of the file at `fileURL` (read as it is sent, with its size as
    /// `Content-Length`) and returns the whole response body and the response.
    ///
    /// - Throws: As ``data(for:)``; `URLError.fileDoesNotExist` when the file cannot be read.
    public func upload(for request: HTTPRequest, fromFile fileURL: URL) async throws -> (Data, HTTPResponse) {
        try await buffered(try HTTPTypesBridge.urlRequest(from: request), upload: .file(fileURL))
    }

    /// Sends `request` with `body` and hands the response to `responseHandler` as soon as its head arrived, with its
    /// body to read as it comes; returns what the handler returns.
    ///
    /// Full duplex: a streamed request body (``HTTPRequestBody/stream(length:_:)``) may still be being written while
    /// the handler reads the response (on the curl transport). Trailers go both ways: the stream's closure returns the
    /// request's, ``HTTPResponseBody/trailers`` gives the response's. When the handler returns, a body it did not read
    /// to its end is cancelled, and so is a request body still being written.
    ///
    /// ```swift
    /// let body = HTTPRequestBody.stream { writer in
    ///     for line in lines { try await writer.write(Data(line.utf8)) }
    ///     return nil
    /// }
    /// let echoed = try await manager.perform(request, body: body) { response, body in
    ///     var received = Data()
    ///     for try await chunk in body { received += chunk }
    ///     return received
    /// }
    /// ```
    /// - Parameters:
    ///   - request: The request.
    ///   - body: Its body, if any.
    ///   - responseHandler: Reads the response; its error is rethrown.
    /// - Throws: The transport's error before the head, an adapter's error, the streamed body's writer's error, or the
    ///   handler's.
    public func perform<Return: Sendable>(
        _ request: HTTPRequest, body: HTTPRequestBody? = nil,
        _ responseHandler: @Sendable (HTTPResponse, HTTPResponseBody) async throws -> Return
    ) async throws -> Return {
        let exchange = try await start(request, body: body)
        // The handler returned (or threw): a body it did not read is dropped, and a writer still writing stops.
        defer { exchange.end() }
        return try await responseHandler(exchange.response, exchange.body)
    }

    /// Sends `request` with `body` and returns as soon as the response head arrived, with the body to read after the
    /// call returned, as it comes: what an OpenAPI `ClientTransport` (or any caller that hands a response on) needs.
    ///
    /// The body lives until it is read to its end or dropped: dropping it unread (or cancelling the task that reads
    /// it) cancels the request. A streamed request body (``HTTPRequestBody/stream(length:_:)``) is written until the
    /// request completes, so the response may be read while it is still being written (full duplex, curl transport).
    ///
    /// ```swift
    /// let (response, body) = try await manager.response(for: request)
    /// guard response.status == .ok else { throw Refused(response) }
    /// for try await chunk in body { try handle.write(contentsOf: chunk) }
    /// ```
    /// - Parameters:
    ///   - request: The request.
    ///   - body: Its body, if any.
    /// - Returns: The response head, and its body to read.
    /// - Throws: As ``perform(_:body:_:)``, before the head.
    public func response(
        for request: HTTPRequest, body: HTTPRequestBody? = nil
    ) async throws -> (HTTPResponse, HTTPResponseBody) {
        let exchange = try await start(request, body: body)
        return (exchange.response, exchange.body)
    }

    /// A request of the HTTP core API whose response head arrived.
    private struct Exchange: Sendable {
        /// The response head.
        let response: HTTPResponse
        /// The response body, to read.
        let body: HTTPResponseBody
        /// Stops a streamed request body's writer (it fails with `CancellationError`); idempotent.
        let end: @Sendable () -> Void
    }

    /// Sends `request` with `body` through the pipeline and returns once the response head arrived. A streamed body's
    /// writer runs in a task of its own until ``Exchange/end`` is called or the request completed, whichever is
    /// first; the request is cancelled when the body is dropped unread.
    private func start(_ request: HTTPRequest, body: HTTPRequestBody?) async throws -> Exchange {
        var urlRequest = try HTTPTypesBridge.urlRequest(from: request)
        var upload: UploadBody?
        var writer: Task<Void, Error>?
        var pipe: RequestBodyPipe?
        switch body?.source {
        case nil:
            break
        case .data(let data)?:
            urlRequest.httpBody = data
            upload = .httpBody
        case .file(let url)?:
            upload = .file(url)
        case .stream(let length, let write)?:
            if let length { urlRequest.setValue(String(length), forHTTPHeaderField: "Content-Length") }
            if !taskTransports[transport].streamsRequestBodies {
                // The transport cannot read a body as it is written (URLSession on Linux): it is collected first.
                let collector = RequestBodyPipe(length: length, capacity: .max)
                if let trailers = try await write(HTTPBodyWriter(pipe: collector)), !trailers.isEmpty {
                    // Refused before anything is sent, rather than sent without them.
                    throw SessionKitError.trailersNotSent(
                        "The request body's trailers could not be sent: URLSession on Linux sends no request trailers "
                            + "(the curl transport sends them after a chunked HTTP/1.1 body).", url: urlRequest.url)
                }
                urlRequest.httpBody = try collector.collected()
                upload = .httpBody
            } else {
                let streamed = RequestBodyPipe(length: length)
                urlRequest.httpBodyStream = PipeInputStream(pipe: streamed)
                pipe = streamed
                writer = Task {
                    do {
                        let trailers = try await write(HTTPBodyWriter(pipe: streamed))
                        streamed.finish(trailers: trailers.map(HTTPTypesBridge.lines(from:)) ?? [])
                    } catch {
                        streamed.fail(error)
                        throw error
                    }
                }
            }
        }
        let end: @Sendable () -> Void = { [pipe, writer] in
            pipe?.fail(CancellationError())
            writer?.cancel()
        }
        let head: ReceivedResponse
        let body: StreamedBody
        do {
            (head, body) = try await self.streamed(urlRequest, upload: upload, completed: end)
        } catch {
            pipe?.fail(error)
            writer?.cancel()
            // The writer's own failure is what ended the request: report it, not the transport's consequence.
            if let writer, case .failure(let writerError) = await writer.result, !(writerError is CancellationError) {
                throw writerError
            }
            throw error
        }
        let response: HTTPResponse
        do {
            response = try HTTPTypesBridge.response(from: head, url: urlRequest.url)
        } catch {
            end()
            throw error
        }
        return Exchange(response: response, body: HTTPResponseBody(body: body), end: end)
    }

    /// Runs `request` through the pipeline with its body kept in memory (within the in-memory limit).
    private func buffered(_ request: URLRequest, upload: UploadBody?) async throws -> (Data, HTTPResponse) {
        let (outcome, _) = try await runPipeline(
            request, interceptor: nil, responseSerializer: UnvalidatedResponseSerializer(), upload: upload,
            announcesTasks: false)
        guard let response = outcome.received else {
            throw URLError(.badServerResponse, userInfo: [NSURLErrorFailingURLErrorKey: request.url as Any])
        }
        return (outcome.data, try HTTPTypesBridge.response(from: response, url: request.url))
    }
}
