import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The lifecycle of one WebSocket connection (``SessionWebSocketTask``), as a value: the opening handshake, the open
/// connection with its queued receives, sends and pings, and the closing handshake in either direction. Each event
/// returns the ``Action``s its driver performs; no I/O happens here.
///
/// `idle → (adapting →) handshaking → open → closing → closed`, where `adapting` means the manager's adapters are
/// preparing the upgrade request (no connection yet), `closing` means our close frame went out and the peer's is
/// awaited, and `closed` is terminal: every send, receive and ping queued when it is reached gets its one completion,
/// and the task its one ``Action/finish(_:)``. An event that makes no sense in a phase (bytes before the connection,
/// a second resume, a timeout of a close that completed) changes nothing.
struct WebSocketLifecycle {
    /// Where the connection is.
    enum Phase: Equatable {
        case idle
        /// The manager's request adapters are preparing the upgrade request; nothing is connected yet.
        case adapting
        case handshaking
        case open
        /// Our close frame was sent; the peer's is awaited (bounded by a timeout).
        case closing
        case closed
    }

    /// What a stream write carried, so that its completion reaches the right waiter.
    enum WriteTag: Equatable {
        case handshake
        case message(id: Int)
        case ping(id: Int)
        /// A pong of `bytes` bytes on the wire: nobody waits for it, but reading waits while too many are unsent.
        case pong(bytes: Int)
        /// A close frame: nobody waits for it.
        case control
    }

    /// What the driver does, in order.
    enum Action: Equatable {
        /// Run the manager's request adapters on the upgrade request, then ``adapted(_:)`` or
        /// ``adaptationFailed(_:)``.
        case adapt
        /// Open the stream and write the upgrade request.
        case connect(request: Data)
        /// Read from the stream once more; `timeout` seconds (0: none).
        case read(timeout: TimeInterval)
        /// Mask `frame` with a fresh key and write it after the writes before.
        case write(WebSocketFrame, WriteTag)
        /// The handshake succeeded.
        case opened(WebSocketHandshake.Accepted)
        case deliver(receive: Int, Result<SessionWebSocketTask.Message, URLError>)
        case completeSend(id: Int, URLError?)
        case completePing(id: Int, URLError?)
        /// Wait this many seconds for the peer's close frame, then ``closeTimedOut()``.
        case scheduleCloseTimeout(TimeInterval)
        /// Close the connection once the writes before are sent (the close frame last).
        case shutdown
        /// Close the connection now, dropping what is not sent.
        case abort
        /// The peer's close frame arrived (the close handshake completed): its code (1005 when it had none) and
        /// reason; once, before ``finish(_:)``.
        case closed(code: UInt16, reason: Data?)
        /// The task completes, once.
        case finish(URLError?)
    }

    private(set) var phase: Phase = .idle
    /// The close code of the close handshake: the peer's when it closed first, ours when we did (cancel or failure).
    private(set) var closeCode: UInt16?
    private(set) var closeReason: Data?
    /// The error the task ended with, if it ended with one.
    private(set) var error: URLError?
    /// The handshake's answer, once the connection opened.
    private(set) var accepted: WebSocketHandshake.Accepted?
    /// The server's answer to the upgrade when it was refused (a 401, a 200, a 101 with a wrong accept key): the
    /// task's `response`, as URLSession keeps it, so that a caller tells one refusal from another.
    private(set) var refusedResponse: HTTPURLResponse?
    /// The largest message accepted; set before the connection opens (later changes apply from the next connection).
    var maximumMessageSize: Int

    private var handshake: WebSocketHandshake
    private let handshakeTimeout: TimeInterval
    private let closeTimeout: TimeInterval
    private var head = Data()
    private var reader: WebSocketMessageReader
    /// Whole messages nobody asked for yet, and their bytes.
    private var inbox: [SessionWebSocketTask.Message] = []
    private var inboxBytes = 0
    private var receives: [Int] = []
    /// Sends written to the stream and not completed.
    private var sends: Set<Int> = []
    /// Pings sent, with the number their payload carries, oldest first.
    private var pings: [(id: Int, number: UInt64)] = []
    private var lastPingNumber: UInt64 = 0
    /// Frames queued before the connection opened, sent once it does.
    private var queued: [(WebSocketFrame, WriteTag)] = []
    private var readInFlight = false
    /// Bytes of pongs written to the stream and not sent yet: a peer that pings and never reads would otherwise
    /// have us queue pongs without end.
    private var pongBytesUnsent = 0
    private var closeSent = false
    /// Our compression context, when permessage-deflate was negotiated and allows a window zlib can compress with.
    private var deflater: RawDeflateStream?
    /// Whether our context is reset after each message (`client_no_context_takeover`).
    private var resetsDeflater = false

    /// - Parameters:
    ///   - handshake: The upgrade request and its check.
    ///   - maximumMessageSize: The largest message (and frame) accepted.
    ///   - handshakeTimeout: Seconds the server may take to answer the upgrade (0: none).
    ///   - closeTimeout: Seconds the peer may take to answer our close frame.
    init(
        handshake: WebSocketHandshake, maximumMessageSize: Int = 1 << 20, handshakeTimeout: TimeInterval = 0,
        closeTimeout: TimeInterval = 10
    ) {
        self.handshake = handshake
        self.maximumMessageSize = maximumMessageSize
        self.handshakeTimeout = handshakeTimeout
        self.closeTimeout = closeTimeout
        reader = WebSocketMessageReader(maximumMessageSize: maximumMessageSize)
    }

    /// Whether the upgrade request offers permessage-deflate; set before the connection opens.
    var offersCompression: Bool {
        get { handshake.offersDeflate }
        set { if phase == .idle || phase == .adapting { handshake.offersDeflate = newValue } }
    }

    /// Bytes received and held: whole messages not received yet, and the frame or message arriving.
    var bufferedByteCount: Int { inboxBytes + reader.bufferedByteCount + head.count }

    /// Reading pauses while this many bytes of whole messages wait for `receive`: memory stays bounded however fast
    /// the peer sends and however slowly the caller receives.
    private var inboxLimit: Int { max(maximumMessageSize, 64 * 1024) }

    /// Reading pauses while this many bytes of pongs wait to be sent (RFC 6455 5.5.3 lets an endpoint answer only
    /// the latest of several pings; here the peer's next pings wait in its own buffers until ours drain).
    static let pongBacklogLimit = 64 * 1024

    // MARK: - Calls of the task

    /// Starts the opening handshake, or first the adaptation of its request when `adapts`; nothing when it started
    /// already.
    mutating func resume(adapts: Bool = false) -> [Action] {
        guard phase == .idle else { return [] }
        if adapts {
            phase = .adapting
            return [.adapt]
        }
        return startHandshake()
    }

    /// The adapters made `adapted` of the upgrade request: the opening handshake starts with it (whether it offers
    /// compression stays as set on the task).
    mutating func adapted(_ adapted: WebSocketHandshake) -> [Action] {
        guard phase == .adapting else { return [] }
        var adapted = adapted
        adapted.offersDeflate = handshake.offersDeflate
        handshake = adapted
        return startHandshake()
    }

    /// An adapter refused the upgrade request: the task ends with `error`, nothing was connected.
    mutating func adaptationFailed(_ error: URLError) -> [Action] {
        guard phase == .adapting else { return [] }
        return end(error, then: [])
    }

    private mutating func startHandshake() -> [Action] {
        phase = .handshaking
        reader = WebSocketMessageReader(maximumMessageSize: maximumMessageSize)
        readInFlight = true
        return [.connect(request: handshake.requestBytes), .read(timeout: handshakeTimeout)]
    }

    mutating func send(_ message: SessionWebSocketTask.Message, id: Int) -> [Action] {
        let frame: WebSocketFrame
        switch message {
        case .data(let data): frame = WebSocketFrame(opcode: .binary, payload: data)
        case .string(let text): frame = WebSocketFrame(opcode: .text, payload: Data(text.utf8))
        }
        return enqueue(frame, .message(id: id)) { [.completeSend(id: id, $0)] }
    }

    mutating func receive(id: Int) -> [Action] {
        if !inbox.isEmpty {
            let message = inbox.removeFirst()
            inboxBytes -= Self.size(of: message)
            var actions: [Action] = [.deliver(receive: id, .success(message))]
            readIfNeeded(into: &actions)
            return actions
        }
        if phase == .closed || closeSent {
            return [.deliver(receive: id, .failure(notConnected))]
        }
        receives.append(id)
        return []
    }

    mutating func sendPing(id: Int) -> [Action] {
        guard phase != .closing, phase != .closed else { return [.completePing(id: id, notConnected)] }
        lastPingNumber += 1
        pings.append((id, lastPingNumber))
        var payload = Data(count: 8)
        for index in 0..<8 { payload[index] = UInt8(truncatingIfNeeded: lastPingNumber >> (56 - 8 * UInt64(index))) }
        return enqueue(WebSocketFrame(opcode: .ping, payload: payload), .ping(id: id)) { [.completePing(id: id, $0)] }
    }

    /// Starts the closing handshake with `code` and `reason` (RFC 6455 7.1.2); pending receives fail with
    /// `.cancelled`. Before the connection opened, the task just ends.
    mutating func close(code: UInt16, reason: Data?) -> [Action] {
        switch phase {
        case .idle, .adapting, .handshaking:
            closeCode = code
            closeReason = reason
            return cancel()
        case .open:
            closeCode = code
            closeReason = reason
            closeSent = true
            phase = .closing
            var actions: [Action] = [.write(.close(code: code, reason: reason ?? Data()), .control)]
            actions += failReceives(Self.error(.cancelled, "The WebSocket task was closed."))
            actions.append(.scheduleCloseTimeout(closeTimeout))
            // The peer's close frame is read even when unreceived messages filled the inbox (RFC 6455 7.1.1: the
            // server closes the connection first).
            readIfNeeded(into: &actions)
            return actions
        case .closing, .closed:
            return []
        }
    }

    /// Ends the task at once: every pending operation fails with `.cancelled`, and the connection closes without a
    /// close frame.
    mutating func cancel() -> [Action] {
        guard phase != .closed else { return [] }
        // Nothing to close before the connection started (while idle or adapting).
        return end(
            Self.error(.cancelled, "The WebSocket task was cancelled."),
            then: phase == .idle || phase == .adapting ? [] : [.abort])
    }

    // MARK: - Events of the stream

    /// A read of the stream completed with `data`, the end of stream, or an error.
    mutating func received(_ data: Data?, atEOF: Bool, error: URLError?) -> [Action] {
        readInFlight = false
        guard phase != .idle, phase != .adapting, phase != .closed else { return [] }
        if let error {
            if phase == .handshaking { return end(error, then: [.abort]) }
            return connectionLost(error)
        }
        var actions: [Action] = []
        if let data, !data.isEmpty {
            actions += phase == .handshaking ? readHead(data) : readFrames(data)
        }
        guard phase != .closed else { return actions }
        if atEOF {
            if phase == .handshaking {
                return actions
                    + end(
                        Self.error(
                            .badServerResponse, "The server closed the connection before answering the upgrade."),
                        then: [.abort])
            }
            return actions + connectionLost(nil)
        }
        readIfNeeded(into: &actions)
        return actions
    }

    /// A write of the stream completed.
    mutating func written(_ tag: WriteTag, error: URLError?) -> [Action] {
        switch tag {
        case .handshake:
            guard let error, phase == .handshaking else { return [] }
            return end(error, then: [.abort])
        case .message(let id):
            guard sends.remove(id) != nil else { return [] }
            return [.completeSend(id: id, error)]
        case .ping(let id):
            guard let error, let index = pings.firstIndex(where: { $0.id == id }) else { return [] }
            pings.remove(at: index)
            return [.completePing(id: id, error)]
        case .pong(let bytes):
            pongBytesUnsent -= bytes
            var actions: [Action] = []
            readIfNeeded(into: &actions)
            return actions
        case .control:
            return []
        }
    }

    /// The peer did not answer our close frame in time: the connection closes anyway.
    mutating func closeTimedOut() -> [Action] {
        guard phase == .closing else { return [] }
        return end(nil, then: [.abort])
    }

    // MARK: - Transitions

    private var notConnected: URLError {
        if let error { return error }
        let code = closeCode.map { " (close code \($0))" } ?? ""
        return Self.error(.networkConnectionLost, "The WebSocket connection is closed\(code).")
    }

    /// Queues `frame` until the connection opens, writes it while it is open, or fails it through `failure`.
    private mutating func enqueue(
        _ frame: WebSocketFrame, _ tag: WriteTag, failure: (URLError) -> [Action]
    ) -> [Action] {
        switch phase {
        case .idle, .adapting, .handshaking:
            queued.append((frame, tag))
            if case .message(let id) = tag { sends.insert(id) }
            return []
        case .open:
            if case .message(let id) = tag { sends.insert(id) }
            return [.write(compressed(frame), tag)]
        case .closing, .closed:
            return failure(notConnected)
        }
    }

    /// A data frame as it goes out: compressed when permessage-deflate was negotiated (RSV1 set, the flush's
    /// `00 00 ff ff` removed), in the order frames are written, so that the peer's context follows ours.
    private func compressed(_ frame: WebSocketFrame) -> WebSocketFrame {
        guard let deflater, !frame.opcode.isControl else { return frame }
        defer { if resetsDeflater { deflater.reset() } }
        guard let payload = deflater.compress(frame.payload) else {
            // A fresh context is always safe for the peer; this message goes uncompressed.
            deflater.reset()
            return frame
        }
        return WebSocketFrame(fin: frame.fin, rsv1: true, opcode: frame.opcode, payload: payload)
    }

    private mutating func readHead(_ data: Data) -> [Action] {
        head.append(data)
        guard let length = WebSocketHandshake.headLength(in: head) else {
            guard head.count <= WebSocketHandshake.maximumHeadLength else {
                return end(
                    Self.error(.badServerResponse, "The server's answer to the upgrade is too long."), then: [.abort])
            }
            return []
        }
        switch handshake.accept(head: head.prefix(length)) {
        case .failure(let error):
            refusedResponse = error.userInfo[WebSocketHandshake.responseKey] as? HTTPURLResponse
            return end(error, then: [.abort])
        case .success(let accepted):
            let rest = Data(head.dropFirst(length))
            head = Data()
            self.accepted = accepted
            phase = .open
            if let deflate = accepted.deflate {
                reader = WebSocketMessageReader(maximumMessageSize: maximumMessageSize, deflate: deflate)
                // zlib's raw deflate has no 256-byte window: under `client_max_window_bits=8` messages go
                // uncompressed, which RFC 7692 allows for any message.
                deflater = RawDeflateStream(.compress, windowBits: deflate.clientMaxWindowBits)
                resetsDeflater = deflate.clientNoContextTakeover
            }
            var actions: [Action] = [.opened(accepted)]
            for (frame, tag) in queued { actions.append(.write(compressed(frame), tag)) }
            queued.removeAll()
            if !rest.isEmpty { actions += readFrames(rest) }
            return actions
        }
    }

    private mutating func readFrames(_ data: Data) -> [Action] {
        var actions: [Action] = []
        for event in reader.read(data) {
            switch event {
            case .text(let text):
                actions += arrived(.string(text))
            case .binary(let data):
                actions += arrived(.data(data))
            case .ping(let payload):
                guard !closeSent else { break }
                // A client frame: 2 bytes of header and 4 of mask before a control payload (at most 125 bytes).
                let bytes = 6 + payload.count
                pongBytesUnsent += bytes
                actions.append(.write(WebSocketFrame(opcode: .pong, payload: payload), .pong(bytes: bytes)))
            case .pong(let payload):
                actions += ponged(payload)
            case .close(let code, let reason):
                return actions + peerClosed(code: code, reason: reason)
            }
        }
        if let failure = reader.failure { actions += fail(failure) }
        return actions
    }

    private mutating func arrived(_ message: SessionWebSocketTask.Message) -> [Action] {
        // After our close frame the caller wants nothing more; RFC 6455 lets the peer's data still come.
        guard !closeSent else { return [] }
        if !receives.isEmpty { return [.deliver(receive: receives.removeFirst(), .success(message))] }
        inbox.append(message)
        inboxBytes += Self.size(of: message)
        return []
    }

    /// A pong answers the ping whose number it carries and every ping before it (a peer may answer only the last of
    /// several); an unsolicited pong (RFC 6455 5.5.3: a heartbeat, whatever its payload) answers none, even one whose
    /// payload reads as a larger number.
    private mutating func ponged(_ payload: Data) -> [Action] {
        guard payload.count == 8 else { return [] }
        let number = payload.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard pings.contains(where: { $0.number == number }) else { return [] }
        var actions: [Action] = []
        while let first = pings.first, first.number <= number {
            pings.removeFirst()
            actions.append(.completePing(id: first.id, nil))
        }
        return actions
    }

    /// The peer's close frame: answered with ours (its code echoed) unless we sent one, then the connection closes.
    private mutating func peerClosed(code: UInt16?, reason: Data) -> [Action] {
        var actions: [Action] = []
        if !closeSent {
            closeCode = code ?? 1005
            closeReason = reason.isEmpty ? nil : reason
            closeSent = true
            let reply = code.map { WebSocketFrame.close(code: $0) } ?? WebSocketFrame(opcode: .close)
            actions.append(.write(reply, .control))
        }
        return actions
            + end(nil, then: [.shutdown, .closed(code: code ?? 1005, reason: reason.isEmpty ? nil : reason)])
    }

    /// Fails the connection (RFC 6455 7.1.7): our close frame with the failure's code, then the connection closes.
    private mutating func fail(_ failure: WebSocketFailure) -> [Action] {
        var actions: [Action] = []
        if !closeSent {
            closeCode = failure.code
            closeReason = Data(failure.reason.utf8)
            closeSent = true
            actions.append(.write(.close(code: failure.code, reason: Data(failure.reason.utf8)), .control))
        }
        let code: URLError.Code = failure.code == 1009 ? .dataLengthExceedsMaximum : .badServerResponse
        let error = Self.error(
            code, "The WebSocket connection failed with close code \(failure.code): \(failure.reason)")
        return actions + end(error, then: [.shutdown])
    }

    /// The stream ended or broke without a close handshake: after our close frame that is the peer's way to close;
    /// otherwise an abnormal closure (1006).
    private mutating func connectionLost(_ error: URLError?) -> [Action] {
        if phase == .closing { return end(nil, then: [.abort]) }
        closeCode = 1006
        let lost =
            error ?? Self.error(.networkConnectionLost, "The server closed the connection without a close frame.")
        return end(lost, then: [.abort])
    }

    /// Ends the task once: every pending operation fails, then `then`, then the task's finish.
    private mutating func end(_ error: URLError?, then last: [Action]) -> [Action] {
        guard phase != .closed else { return [] }
        let failure = error ?? notConnected
        phase = .closed
        self.error = error
        // Queued sends and pings are in `sends` and `pings` too: each gets its one completion from these.
        var actions = failReceives(failure)
        actions += sends.sorted().map { .completeSend(id: $0, failure) }
        actions += pings.map { .completePing(id: $0.id, failure) }
        queued.removeAll()
        sends.removeAll()
        pings.removeAll()
        head = Data()
        return actions + last + [.finish(error)]
    }

    private mutating func failReceives(_ error: URLError) -> [Action] {
        defer { receives.removeAll() }
        return receives.map { .deliver(receive: $0, .failure(error)) }
    }

    /// Asks for the next read unless one is in flight, or unreceived messages fill the inbox (after our close frame,
    /// what arrives is dropped: the inbox no longer grows), or unsent pongs pile up.
    private mutating func readIfNeeded(into actions: inout [Action]) {
        guard !readInFlight, phase == .handshaking || phase == .open || phase == .closing,
            inboxBytes < inboxLimit || closeSent, pongBytesUnsent < Self.pongBacklogLimit
        else { return }
        readInFlight = true
        actions.append(.read(timeout: phase == .handshaking ? handshakeTimeout : 0))
    }

    private static func size(of message: SessionWebSocketTask.Message) -> Int {
        switch message {
        case .data(let data): return data.count
        case .string(let text): return text.utf8.count
        }
    }

    /// A `URLError` with a sentence for the user.
    static func error(_ code: URLError.Code, _ description: String) -> URLError {
        URLError(code, userInfo: [NSLocalizedDescriptionKey: description])
    }
}
