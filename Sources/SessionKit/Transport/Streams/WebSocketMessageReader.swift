import Foundation

/// Turns a server's frames into what the connection acts on (RFC 6455 5.4–5.5): whole messages, pings, pongs and
/// the close frame; control frames may come between a message's fragments.
///
/// Refused, failing the connection with the code RFC 6455 names: a continuation with no message started, a new
/// message before the last one's final fragment (1002); text that is not UTF-8, checked fragment by fragment as it
/// arrives so that a code point split across fragments is judged whole (1007); a message over the limit (1009); a
/// close frame with a one-byte payload, a code no endpoint may send, or a reason that is not UTF-8 (1002, 1007).
/// A message is handed on only once its last fragment arrived and passed: the bytes of a refused one never are.
///
/// With permessage-deflate negotiated (RFC 7692), a message whose first frame has RSV1 set is inflated fragment by
/// fragment as it arrives (`00 00 ff ff` appended to the last), with the server's window, its context kept or reset
/// after each message as negotiated; it is refused with 1009 as soon as it inflates past the limit, having held no
/// more than the limit, and with 1007 when it is not DEFLATE data. RSV1 anywhere else is refused (1002).
struct WebSocketMessageReader: Sendable {
    /// What a frame means to the connection.
    enum Event: Sendable, Equatable {
        case text(String)
        case binary(Data)
        case ping(Data)
        case pong(Data)
        /// The peer's close frame: its code (nil when it sent none, 1005) and reason.
        case close(code: UInt16?, reason: Data)
    }

    let maximumMessageSize: Int
    private var parser: WebSocketFrameParser
    /// The message whose fragments are arriving: its kind, whether it is compressed, and its bytes so far
    /// (inflated).
    private var partial: (isText: Bool, compressed: Bool, data: Data)?
    /// The server's compression context, when permessage-deflate was negotiated.
    private let inflater: RawDeflateStream?
    /// Whether the server resets its context after each message (`server_no_context_takeover`).
    private let resetsInflater: Bool
    private var utf8 = UTF8Validator()
    private(set) var failure: WebSocketFailure?

    /// - Parameters:
    ///   - maximumMessageSize: The largest message accepted (inflated, when compressed), and the largest frame.
    ///   - deflate: permessage-deflate's parameters, when the handshake negotiated it.
    init(maximumMessageSize: Int, deflate: WebSocketDeflateParameters? = nil) {
        self.maximumMessageSize = max(0, maximumMessageSize)
        inflater = deflate.flatMap { RawDeflateStream(.decompress, windowBits: $0.serverMaxWindowBits) }
        resetsInflater = deflate?.serverNoContextTakeover ?? false
        parser = WebSocketFrameParser(maximumPayloadLength: self.maximumMessageSize, allowsRSV1: inflater != nil)
    }

    /// Bytes held for a message or frame not yet complete.
    var bufferedByteCount: Int { parser.bufferedByteCount + (partial?.data.count ?? 0) }

    /// Reads `bytes`: the events they complete, in order, and stops at the first refused frame (the events before
    /// it stand; ``failure`` says why).
    mutating func read(_ bytes: Data) -> [Event] {
        guard failure == nil else { return [] }
        parser.append(bytes)
        var events: [Event] = []
        // A frame takes two bytes at least, so the buffer holds fewer frames than this.
        for _ in 0...(parser.bufferedByteCount / 2) {
            do {
                guard let frame = try parser.next() else { break }
                if let event = try handle(frame) { events.append(event) }
            } catch {
                fail(error)
                break
            }
        }
        return events
    }

    private mutating func fail(_ error: WebSocketFailure) {
        failure = error
        partial = nil
    }

    private mutating func handle(_ frame: WebSocketFrame) throws(WebSocketFailure) -> Event? {
        switch frame.opcode {
        case .ping:
            return .ping(frame.payload)
        case .pong:
            return .pong(frame.payload)
        case .close:
            return try Self.close(frame.payload)
        case .text, .binary:
            guard partial == nil else {
                throw .protocolError("A new message started before the last fragment of the one before.")
            }
            partial = (frame.opcode == .text, frame.rsv1, Data())
            utf8 = UTF8Validator()
            return try appendFragment(frame)
        case .continuation:
            guard partial != nil else { throw .protocolError("A continuation frame came with no message started.") }
            return try appendFragment(frame)
        }
    }

    private mutating func appendFragment(_ frame: WebSocketFrame) throws(WebSocketFailure) -> Event? {
        // Its flags and length only: a copy of the message would share (and so keep) its buffer.
        guard let (isText, compressed, received) = partial.map({ ($0.isText, $0.compressed, $0.data.count) }) else {
            return nil
        }
        var payload = frame.payload
        if compressed, let inflater {
            if frame.fin { payload.append(contentsOf: [0x00, 0x00, 0xFF, 0xFF]) }
            payload = try inflater.decompress(payload, limit: maximumMessageSize - received)
            if frame.fin && resetsInflater { inflater.reset() }
        }
        guard payload.count <= maximumMessageSize - received else {
            throw .tooBig("A message is over the limit of \(maximumMessageSize) bytes.")
        }
        if isText {
            guard utf8.consume(payload), !frame.fin || utf8.isComplete else {
                throw .invalidPayload("A text message is not valid UTF-8.")
            }
        }
        // Appended in place: appending to a copy would copy everything received so far at each fragment (4 MiB in
        // 64-byte fragments took 54 s, Autobahn 9.3.1).
        partial?.data.append(payload)
        guard frame.fin, let whole = partial else { return nil }
        partial = nil
        // Validated above: the decoding replaces nothing.
        return whole.isText ? .text(String(decoding: whole.data, as: UTF8.self)) : .binary(whole.data)
    }

    /// The peer's close frame, checked (RFC 6455 5.5.1, 7.4).
    private static func close(_ payload: Data) throws(WebSocketFailure) -> Event {
        guard !payload.isEmpty else { return .close(code: nil, reason: Data()) }
        guard payload.count >= 2 else { throw .protocolError("A close frame has a one-byte payload.") }
        let code = UInt16(payload[payload.startIndex]) << 8 | UInt16(payload[payload.startIndex + 1])
        guard isSendable(code) else { throw .protocolError("A close frame has the code \(code), which no peer sends.") }
        let reason = Data(payload.dropFirst(2))
        guard UTF8Validator.isValid(reason) else { throw .invalidPayload("A close frame's reason is not UTF-8.") }
        return .close(code: code, reason: reason)
    }

    /// Whether an endpoint may put `code` in a close frame (RFC 6455 7.4.1–7.4.2, and the IANA registry's 1012–1014).
    static func isSendable(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }
}
