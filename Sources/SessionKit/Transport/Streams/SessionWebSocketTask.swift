import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A WebSocket connection (RFC 6455): SessionKit's `URLSessionWebSocketTask`, with its names, which works on Linux
/// where Foundation's does not (the distribution's libcurl has no WebSocket support). Made by
/// ``URLSessionManager/webSocketTask(with:protocols:)`` or ``URLSessionManager/webSocketTask(with:)``.
///
/// It runs on the stream connection of ``SessionStreamTask`` (libcurl in connect-only mode) whatever the manager's
/// ``URLSessionManager/transport``: `ws://` over TCP, `wss://` over TLS from the start, with the manager's
/// ``SecurityPolicy`` deciding in the TLS handshake, so that a refused chain fails the task before the upgrade
/// request (and its cookies and `Authorization`) is sent. The opening handshake is checked strictly, frames are
/// checked as RFC 6455 requires of a client (a violation fails the connection with close code 1002, 1007 or 1009,
/// and a message it rejects is never delivered), pings are answered, and the close handshake runs both ways.
///
/// Each handler is called exactly once, on the manager's delegate queue. Receives, sends and pings queued before the
/// connection opens wait for it. The task completes (``URLSessionManager/taskDidComplete``) once: after the close
/// handshake (no error), when the connection fails, or when it is cancelled.
///
/// ```swift
/// let task = manager.webSocketTask(with: URL(string: "wss://echo.example.com/chat")!, protocols: ["chat"])
/// task.resume()
/// try await task.send(.string("hello"))
/// if case .string(let reply) = try await task.receive() { print(reply) }
/// task.cancel(with: .normalClosure, reason: nil)
/// ```
open class SessionWebSocketTask: URLSessionTask, @unchecked Sendable {
    // @unchecked Sendable: all state is in the driver (a lock-protected lifecycle); `driver` is immutable.

    /// A message sent or received: binary data or text.
    public enum Message: Sendable, Equatable {
        /// A binary message.
        case data(Data)
        /// A text message (UTF-8 on the wire).
        case string(String)
    }

    let driver: WebSocketDriver

    init(driver: WebSocketDriver) {
        self.driver = driver
        super.init()
        driver.task = self
    }

    /// The task's identifier, unique in its manager.
    open override var taskIdentifier: Int { driver.stream.taskIdentifier }
    /// The upgrade request as the caller made it.
    open override var originalRequest: URLRequest? { driver.request }
    /// The upgrade request as the caller made it.
    open override var currentRequest: URLRequest? { driver.request }
    /// The server's `101 Switching Protocols` once the connection opened; its refusal (a 401, a 200, a 101 with a wrong
    /// accept key) when the upgrade failed with `.badServerResponse`.
    open override var response: URLResponse? { driver.response }
    /// Suspended until resumed, running while connected, completed once its completion was delivered.
    open override var state: URLSessionTask.State { driver.taskState }
    /// Why the task ended, if it ended with an error.
    open override var error: Error? { driver.error }
    /// Bytes received on the connection so far (the handshake's and the frames').
    open override var countOfBytesReceived: Int64 { driver.countOfBytesReceived }
    /// Bytes sent on the connection so far (the handshake's and the frames').
    open override var countOfBytesSent: Int64 { driver.countOfBytesSent }
    /// Opens the connection and runs the opening handshake.
    open override func resume() { driver.resume() }
    /// Holds the connection's I/O (queued operations wait).
    open override func suspend() { driver.suspend() }
    /// Ends the task at once, without a close handshake: every pending receive, send and ping completes with
    /// `URLError.cancelled`, and the connection closes.
    open override func cancel() { driver.cancel() }

    /// The largest message accepted, in bytes (default 1 MiB). A larger one fails the connection with close code
    /// 1009 (``closeCode`` `.messageTooBig`) as soon as its frame header says so, before its bytes are buffered. Set
    /// it before `resume()`.
    public var maximumMessageSize: Int {
        get { driver.maximumMessageSize }
        set { driver.maximumMessageSize = newValue }
    }

    /// Whether the upgrade request offers permessage-deflate (RFC 7692), default true. When the server accepts it,
    /// text and binary messages are compressed both ways (``isCompressed``); a compressed message is inflated in
    /// bounded steps and fails the connection with 1009 as soon as it inflates past ``maximumMessageSize``. Set it to
    /// false before `resume()` to send `Sec-WebSocket-Extensions` no offer (a server that then answers with an
    /// extension fails the handshake); later changes do nothing.
    ///
    /// ```swift
    /// let task = manager.webSocketTask(with: URL(string: "wss://feed.example.com/ticks")!)
    /// task.isCompressionEnabled = false  // already-compressed payloads: save the CPU
    /// task.resume()
    /// ```
    public var isCompressionEnabled: Bool {
        get { driver.offersCompression }
        set { driver.offersCompression = newValue }
    }

    /// Whether the server accepted permessage-deflate in the opening handshake: messages are compressed both ways.
    public var isCompressed: Bool { driver.isCompressed }

    /// The subprotocol the server chose among those offered, once the connection opened.
    public var negotiatedProtocol: String? { driver.negotiatedProtocol }

    /// The close code of the close handshake: the peer's when it closed first, the one sent when this side closed or
    /// failed the connection (`.protocolError`, `.invalidFramePayloadData`, `.messageTooBig`), `.abnormalClosure`
    /// when the connection ended without one; `.invalid` while open, and for codes without a `CloseCode` case.
    public var closeCode: URLSessionWebSocketTask.CloseCode { driver.closeCode }

    /// The close frame's reason, as for ``closeCode``; nil when there was none.
    public var closeReason: Data? { driver.closeReason }

    /// The close code as a number, as for ``closeCode``, whatever its value: also the codes `CloseCode` has no case
    /// for (1012–1014, and an application's 3000–4999), which ``closeCode`` reads as `.invalid`. Nil while open.
    public var rawCloseCode: Int? { driver.rawCloseCode }

    /// Sends `message` after the messages sent before.
    ///
    /// - Parameters:
    ///   - message: The text or binary message.
    ///   - completionHandler: Called once on the delegate queue: nil once the message was handed to the socket, or
    ///     why it was not sent (the connection closed or failed, the task was cancelled).
    public func send(_ message: Message, completionHandler: @escaping @Sendable (Error?) -> Void) {
        driver.send(message, handler: completionHandler)
    }

    /// Receives the next whole message, after the receives queued before.
    ///
    /// - Parameter completionHandler: Called once on the delegate queue with the message, or the error that ended
    ///   the connection (`URLError.cancelled` when the task was cancelled or closed by ``cancel(with:reason:)``).
    public func receive(completionHandler: @escaping @Sendable (Result<Message, Error>) -> Void) {
        driver.receive(handler: completionHandler)
    }

    /// Sends a ping; the handler runs once the server's pong arrives (nil), or with the error that ended the
    /// connection first.
    ///
    /// - Parameter pongReceiveHandler: Called once on the delegate queue.
    public func sendPing(pongReceiveHandler: @escaping @Sendable (Error?) -> Void) {
        driver.sendPing(handler: pongReceiveHandler)
    }

    /// Starts the close handshake: a close frame with `closeCode` and `reason` (cut to 123 bytes), then waits for
    /// the server's (at most the configuration's request timeout, 10 s at most) and closes the connection. Pending
    /// receives fail with `URLError.cancelled`; the task completes without an error. Before the connection opened,
    /// the task is cancelled.
    ///
    /// - Parameters:
    ///   - closeCode: The code to send; `.invalid` and the codes reserved for reports (`.noStatusReceived`,
    ///     `.abnormalClosure`, `.tlsHandshakeFailure`) are sent as `.normalClosure`.
    ///   - reason: UTF-8 text for the peer, or nil.
    public func cancel(with closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
        driver.close(code: closeCode.rawValue, reason: reason)
    }

    /// ``cancel(with:reason:)`` with a close code given as a number: one `CloseCode` has no case for, such as an
    /// application's 3000–4999 (RFC 6455 7.4.2). A code no endpoint may send (below 1000, 1004–1006, 1015, 1016–2999,
    /// 5000 and above) is sent as 1000.
    ///
    /// - Parameters:
    ///   - rawCloseCode: The code to send.
    ///   - reason: UTF-8 text for the peer, or nil.
    public func cancel(withRawCloseCode rawCloseCode: Int, reason: Data?) {
        driver.close(code: rawCloseCode, reason: reason)
    }
}

// MARK: - Async forms

/// The WebSocket operations as `async` calls. Cancelling the Swift task that awaits one cancels the WebSocket task
/// (as URLSession's async methods cancel their task).
extension SessionWebSocketTask {
    /// Sends `message` after the messages sent before.
    ///
    /// - Parameter message: The text or binary message.
    /// - Throws: Why it was not sent (`URLError.cancelled`, `.networkConnectionLost`, a TLS refusal…).
    public func send(_ message: Message) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                send(message) { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Receives the next whole message.
    ///
    /// - Returns: The message.
    /// - Throws: The error that ended the connection.
    public func receive() async throws -> Message {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Message, Error>) in
                receive { continuation.resume(with: $0) }
            }
        } onCancel: {
            cancel()
        }
    }
}

// MARK: - TransportDrivenTask

extension SessionWebSocketTask: TransportDrivenTask {
    func transportResume() { driver.resume() }
    func transportSuspend() -> Bool { driver.suspend() }
    func transportSetClientIdentity(_ identity: ClientIdentity?) {
        _ = driver.stream.driver.clientIdentity.set(identity)
    }
}
