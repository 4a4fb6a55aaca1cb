import Foundation

/// Reads WebSocket frames from a server's bytes (RFC 6455 5.2), as they arrive in pieces of any size, and refuses
/// what a client must not accept: a masked frame (5.1), reserved bits no negotiated extension gives a meaning (5.2),
/// an unknown opcode, a control frame over 125 bytes or fragmented (5.5), a length in the non-minimal or 64-bit
/// negative form, and a frame larger than the message limit (1009, refused from its header, before its payload is
/// buffered).
///
/// It holds at most one frame's header and payload plus the bytes of the last `append`; the bytes of a frame it
/// refuses are never handed on. I/O-free: ``frames(in:maximumPayloadLength:)`` runs it over a whole buffer.
struct WebSocketFrameParser: Sendable {
    /// The largest payload one frame may carry.
    let maximumPayloadLength: Int
    /// Whether RSV1 may be set on a data frame's first fragment (permessage-deflate negotiated).
    let allowsRSV1: Bool

    private var buffer = Data()
    /// Where the unread bytes of `buffer` start: consumed bytes are dropped in one go, not one frame at a time.
    private var offset = 0
    /// Set once a frame was refused: the connection is failed and nothing after it is read.
    private(set) var failure: WebSocketFailure?

    init(maximumPayloadLength: Int, allowsRSV1: Bool = false) {
        self.maximumPayloadLength = max(0, maximumPayloadLength)
        self.allowsRSV1 = allowsRSV1
    }

    /// The bytes received and not yet read as frames.
    var bufferedByteCount: Int { buffer.count - offset }

    /// Adds bytes received after those before.
    mutating func append(_ bytes: Data) {
        guard failure == nil else { return }
        if offset > 0 && offset == buffer.count {
            buffer = Data()
            offset = 0
        }
        buffer.append(bytes)
    }

    /// The next complete frame, nil while its bytes are still coming; throws (and stays failed) on a frame the
    /// protocol refuses.
    mutating func next() throws(WebSocketFailure) -> WebSocketFrame? {
        if let failure { throw failure }
        do {
            return try parseNext()
        } catch {
            failure = error
            buffer = Data()
            offset = 0
            throw error
        }
    }

    private mutating func parseNext() throws(WebSocketFailure) -> WebSocketFrame? {
        let available = buffer.count - offset
        guard available >= 2 else { return nil }
        let base = buffer.startIndex + offset
        let first = buffer[base]
        let second = buffer[base + 1]
        let fin = first & 0x80 != 0
        let rsv1 = first & 0x40 != 0
        if first & 0x30 != 0 { throw .protocolError("A frame has RSV2 or RSV3 set, which no extension negotiated.") }
        guard let opcode = WebSocketFrame.Opcode(rawValue: first & 0x0F) else {
            throw .protocolError("A frame has the unknown opcode \(first & 0x0F).")
        }
        if rsv1 && (!allowsRSV1 || opcode.isControl || opcode == .continuation) {
            throw .protocolError("A frame has RSV1 set, which no extension negotiated for it.")
        }
        if second & 0x80 != 0 { throw .protocolError("The server masked a frame; servers must not.") }
        var length = Int(second & 0x7F)
        var headerLength = 2
        if opcode.isControl {
            guard fin else { throw .protocolError("A control frame was fragmented.") }
            guard length <= 125 else { throw .protocolError("A control frame is longer than 125 bytes.") }
        }
        if length == 126 {
            guard available >= 4 else { return nil }
            length = Int(buffer[base + 2]) << 8 | Int(buffer[base + 3])
            guard length >= 126 else { throw .protocolError("A frame length is not in its minimal form.") }
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            var wide: UInt64 = 0
            for index in 2..<10 { wide = wide << 8 | UInt64(buffer[base + index]) }
            guard wide >> 63 == 0 else { throw .protocolError("A frame length has its most significant bit set.") }
            guard wide > 0xFFFF else { throw .protocolError("A frame length is not in its minimal form.") }
            guard wide <= UInt64(maximumPayloadLength) else {
                throw .tooBig("A frame of \(wide) bytes is over the limit of \(maximumPayloadLength).")
            }
            length = Int(wide)
            headerLength = 10
        }
        // The limit is the messages': a control frame (125 bytes at most, checked above) passes under any limit.
        guard opcode.isControl || length <= maximumPayloadLength else {
            throw .tooBig("A frame of \(length) bytes is over the limit of \(maximumPayloadLength).")
        }
        guard available - headerLength >= length else { return nil }
        let start = base + headerLength
        let payload = Data(buffer[start..<start + length])
        offset += headerLength + length
        if offset == buffer.count {
            buffer = Data()
            offset = 0
        } else if offset >= 64 * 1024 && offset * 2 >= buffer.count {
            buffer = Data(buffer[(buffer.startIndex + offset)...])
            offset = 0
        }
        return WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, payload: payload)
    }

    /// Every frame in `data` and the failure that stopped the reading, if one did: the one-call entry for a fuzzer.
    static func frames(
        in data: Data, maximumPayloadLength: Int = 1 << 20
    ) -> (frames: [WebSocketFrame], failure: WebSocketFailure?) {
        var parser = WebSocketFrameParser(maximumPayloadLength: maximumPayloadLength)
        parser.append(data)
        var frames: [WebSocketFrame] = []
        // Each frame takes two bytes at least: the loop ends within `data.count / 2 + 1` rounds.
        for _ in 0...(data.count / 2) {
            do {
                guard let frame = try parser.next() else { break }
                frames.append(frame)
            } catch {
                return (frames, error)
            }
        }
        return (frames, nil)
    }
}
