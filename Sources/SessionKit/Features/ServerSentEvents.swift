import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A Server-Sent Events stream (`text/event-stream`), read as an async sequence of ``ServerSentEvent``s, reconnecting
/// as a browser's `EventSource` does; from ``URLSessionManager/events(for:)``.
///
/// ```swift
/// var events = manager.events(for: URLRequest(url: URL(string: "https://example.com/updates")!))
/// events.maximumEventSize = 64 << 10                 // optional: refuse events over 64 KiB
/// for try await event in events {
///     print(event.event ?? "message", event.id ?? "-", event.data)
/// }
/// // The loop ends when the server answers 204 No Content.
/// ```
///
/// - Each iterator is one connection at a time of its own: the request goes out when the first event is asked for,
///   with `Accept: text/event-stream` and `Cache-Control: no-cache, no-store` (no stored response answers it, and
///   none of its responses is stored, here or on the way: HTML's event source fetches in "no-store" mode), through the
///   manager's request pipeline (its interceptor's adapters, event monitors, security policy, cookies, redirects).
/// - **Reconnection.** When the stream ends or the connection drops, the iterator connects again after the
///   reconnection time — the stream's latest `retry` field, else ``reconnectionTime`` — plus up to 20 % of jitter,
///   sending `Last-Event-ID` with the last event ID, so that the server resumes after the last event delivered. An
///   event whose blank line had not arrived when the connection dropped is not delivered; the server sends it again.
///   Waits are capped at one hour.
/// - **Ends.** A 204 response ends the sequence without an error. Any other status but 200 (a 201 or 205 too, as the
///   WHATWG's processing model says) throws ``SessionKitError/Kind-swift.enum/unacceptableStatusCode(_:)``, a 200
///   that is not `text/event-stream` throws
///   ``SessionKitError/Kind-swift.enum/responseSerializationFailed(_:)`` with `.cannotDecodeContentData`; both carry
///   the response and up to 64 KiB of its body, and neither is retried.
/// - **Failures.** A transport error (refused connection, timeout, dropped connection) is retried by reconnecting. A
///   connection that brought no byte of the stream is a failure; after ``maximumReconnectionAttempts`` of them in a
///   row the sequence throws the last one's error (`URLError.zeroByteResource` for a stream that kept ending empty),
///   and each failure doubles the wait before the next attempt. A connection that brought bytes resets the count.
///   Cancellation, a TLS refusal, an adapter's error or a body limit of the manager end the sequence at once. Each
///   connection is subject to the request's `timeoutInterval` as an idle timeout (a stream silent for longer is
///   dropped and reconnected: send comments as a heartbeat) and to the configuration's resource timeout.
/// - **Cancellation.** Cancelling the Swift task that iterates, or dropping the iterator, closes the connection at
///   once; a read or a wait cut by cancellation throws `URLError.cancelled`.
/// - **Memory** is bounded by one event: an event past ``maximumEventSize`` throws
///   `URLError.dataLengthExceedsMaximum` and ends the sequence.
public struct ServerSentEvents: AsyncSequence, Sendable {
    // Sendable, checked by the compiler: the manager is Sendable, the rest are values.

    /// An event of the stream.
    public typealias Element = ServerSentEvent

    /// The most bytes held for one event (its data and type so far, and the line being read); past it the sequence
    /// throws `URLError.dataLengthExceedsMaximum`. Default 1 MiB.
    public var maximumEventSize = ServerSentEventParser.defaultMaximumEventSize
    /// The reconnection time in seconds until the stream sends a `retry` field. Default 3.
    public var reconnectionTime: TimeInterval = 3
    /// How many connections in a row may bring nothing (a transport error before any byte of the stream, or a stream
    /// that ended empty) before the sequence gives up and throws. Default 5.
    public var maximumReconnectionAttempts = 5

    private let manager: URLSessionManager
    private let request: URLRequest

    init(manager: URLSessionManager, request: URLRequest) {
        self.manager = manager
        self.request = request
    }

    /// An iterator with a connection of its own, made when its first event is asked for.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            manager: manager, request: request,
            parser: ServerSentEventParser(
                maximumEventSize: maximumEventSize,
                lastEventID: request.value(forHTTPHeaderField: "Last-Event-ID") ?? ""),
            lifecycle: EventStreamLifecycle(
                reconnectionTime: reconnectionTime, maximumReconnectionAttempts: maximumReconnectionAttempts))
    }

    // MARK: - AsyncIterator

    /// Reads the events of a ``ServerSentEvents`` stream, connecting and reconnecting as needed.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private let manager: URLSessionManager
        private let request: URLRequest
        private var parser: ServerSentEventParser
        private var lifecycle: EventStreamLifecycle
        /// The open connection's body. Dropping it cancels the request and closes the connection.
        private var body: StreamedBody.AsyncIterator?
        /// Events of the last chunk not yet returned.
        private var pending: [ServerSentEvent] = []
        private var pendingIndex = 0
        /// The error that ended the sequence, thrown once the events before it were returned.
        private var failure: Error?

        /// The largest part of a refused response's body kept in its error.
        private static let evidenceLimit = 64 << 10

        fileprivate init(
            manager: URLSessionManager, request: URLRequest, parser: ServerSentEventParser,
            lifecycle: EventStreamLifecycle
        ) {
            var request = request
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            // A stored response must never stand for a live stream, and a stream must never be stored: it would answer
            // a later GET of the URL, and the copy kept for storing would outgrow the one event the parser holds.
            request.setValue("no-cache, no-store", forHTTPHeaderField: "Cache-Control")
            request.cachePolicy = .reloadIgnoringLocalCacheData
            self.manager = manager
            self.request = request
            self.parser = parser
            self.lifecycle = lifecycle
        }

        /// The next event; nil once the server answered 204 (or the sequence ended before).
        ///
        /// - Throws: The error that ended the sequence (see ``ServerSentEvents``): `URLError.cancelled` when the
        ///   iterating task was cancelled, the refused response's ``SessionKitError``, `URLError.dataLengthExceedsMaximum`
        ///   for an oversized event, or the transport's error after too many failed connections in a row.
        public mutating func next() async throws -> ServerSentEvent? {
            // Each pass returns, throws, reads one chunk, or connects once after a bounded wait; the lifecycle gives up
            // after a bounded number of connections in a row that bring nothing. A live stream goes on for as long as
            // the server keeps it, as it should.
            while true {
                if pendingIndex < pending.count {
                    pendingIndex += 1
                    return pending[pendingIndex - 1]
                }
                pending.removeAll(keepingCapacity: true)
                pendingIndex = 0
                if let failure {
                    self.failure = nil
                    throw failure
                }
                switch lifecycle.state {
                case .finished:
                    return nil
                case .waiting(let delay):
                    try await connect(after: delay)
                case .connecting, .open:
                    try await read()
                }
            }
        }

        /// Waits `delay` seconds, then sends the request and judges its response head.
        private mutating func connect(after delay: TimeInterval) async throws {
            if delay > 0 {
                do {
                    try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
                } catch {
                    throw finishing(cancelled())
                }
            }
            if Task.isCancelled { throw finishing(cancelled()) }
            lifecycle.connecting()
            var request = self.request
            // Also on the first connection: an ID the caller set resumes a stream read before.
            request.setValue(parser.lastEventID.isEmpty ? nil : parser.lastEventID, forHTTPHeaderField: "Last-Event-ID")
            let streamed: StreamedResponse
            do {
                streamed = try await manager.bytes(for: request)
            } catch {
                return try connectionEnded(by: error)
            }
            let response = streamed.response
            switch lifecycle.responseArrived(
                status: response.statusCode, contentType: response.value(forHTTPHeaderField: "Content-Type"))
            {
            case .read:
                body = streamed.body.makeAsyncIterator()
            case .end:
                break  // the body is dropped unread, which closes the connection
            case .refuseStatus:
                let evidence = await Self.evidence(streamed.body)
                throw finishing(
                    SessionKitError.responseSerialization(
                        .badServerResponse,
                        "The event stream's server answered with status \(response.statusCode) "
                            + "(\(HTTPURLResponse.localizedString(forStatusCode: response.statusCode))).",
                        response: response, data: evidence))
            case .refuseContentType:
                let type = response.value(forHTTPHeaderField: "Content-Type") ?? "none"
                let evidence = await Self.evidence(streamed.body)
                throw finishing(
                    SessionKitError.responseSerialization(
                        .cannotDecodeContentData,
                        "The event stream's response has content type \(type), not text/event-stream.",
                        response: response, data: evidence))
            }
        }

        /// Reads the next chunk of the open connection and parses it.
        private mutating func read() async throws {
            guard var reader = body else {
                lifecycle.finish()
                return
            }
            let chunk: Data?
            do {
                chunk = try await reader.next()
            } catch {
                body = nil
                parser.endOfStream()
                return try connectionEnded(by: error)
            }
            guard let chunk else {
                body = nil
                parser.endOfStream()
                return try connectionEnded(by: nil)
            }
            body = reader
            if !chunk.isEmpty { lifecycle.receivedBytes() }
            do {
                try parser.parse(chunk, into: &pending)
            } catch {
                var userInfo = (error as NSError).userInfo
                userInfo[NSURLErrorFailingURLErrorKey] = request.url
                // The events the chunk completed before the oversized one are still returned; the connection closes
                // now.
                let events = pending
                failure = finishing(URLError(.dataLengthExceedsMaximum, userInfo: userInfo))
                pending = events
            }
            if let milliseconds = parser.reconnectionTime {
                lifecycle.reconnectionTime = TimeInterval(milliseconds) / 1000
            }
        }

        /// The connection ended, cleanly (`error` nil) or not: reconnects later, or throws what ends the sequence.
        private mutating func connectionEnded(by error: Error?) throws {
            if let error {
                if Task.isCancelled || error is CancellationError || (error as? URLError)?.code == .cancelled {
                    throw finishing(cancelled())
                }
                guard Self.isWorthRetrying(error) else { throw finishing(error) }
            }
            switch lifecycle.connectionEnded(jitter: Double.random(in: 0..<1)) {
            case .reconnect:
                return
            case .giveUp:
                throw finishing(
                    error
                        ?? URLError(
                            .zeroByteResource,
                            userInfo: [
                                NSLocalizedDescriptionKey:
                                    "The event stream ended without data \(lifecycle.consecutiveFailures) times "
                                    + "in a row.",
                                NSURLErrorFailingURLErrorKey: request.url as Any,
                            ]))
            }
        }

        /// Ends the sequence: closes the connection (by dropping its body) and returns `error` to throw.
        private mutating func finishing(_ error: Error) -> Error {
            body = nil
            pending.removeAll()
            pendingIndex = 0
            lifecycle.finish()
            return error
        }

        private func cancelled() -> URLError {
            URLError(.cancelled, userInfo: request.url.map { [NSURLErrorFailingURLErrorKey: $0] } ?? [:])
        }

        /// Whether reconnecting may mend `error`: a transport error, but not one that the same request would meet
        /// again (TLS, a bad URL, a limit, an authentication refusal) or an error SessionKit did not make.
        private static func isWorthRetrying(_ error: Error) -> Bool {
            guard let code = (error as? URLError)?.code else { return false }
            return !finalCodes.contains(code)
        }

        private static let finalCodes: Set<URLError.Code> = [
            .cancelled, .badURL, .unsupportedURL, .dataLengthExceedsMaximum, .httpTooManyRedirects,
            .redirectToNonExistentLocation, .userAuthenticationRequired, .userCancelledAuthentication,
            .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted,
            .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid, .clientCertificateRejected,
            .clientCertificateRequired, .appTransportSecurityRequiresSecureConnection, .requestBodyStreamExhausted,
            .fileDoesNotExist, .fileIsDirectory, .noPermissionsToReadFile,
        ]

        /// Up to ``evidenceLimit`` bytes of a refused response's body, for its error, read for one second at most:
        /// the body of a refused response may be a stream that never ends.
        private static func evidence(_ body: StreamedBody) async -> Data? {
            await withTaskGroup(of: Data?.self) { group in
                group.addTask {
                    var data = Data()
                    var iterator = body.makeAsyncIterator()
                    // Bounded by bytes and by chunks, and by the timer below.
                    for _ in 0..<256 {
                        guard data.count < evidenceLimit, let chunk = try? await iterator.next() else { break }
                        data.append(chunk.prefix(evidenceLimit - data.count))
                    }
                    return data.isEmpty ? nil : data
                }
                group.addTask {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()  // cancels the read, and with it the request, or the timer
                return first
            }
        }
    }
}
