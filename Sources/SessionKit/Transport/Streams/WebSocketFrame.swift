import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One WebSocket frame (RFC 6455 5.2), without its mask: what the parser reads from a server and what a client
/// encodes, masked with a fresh key, for the wire.
struct WebSocketFrame: Sendable, Equatable {
    /// The frame's opcode: the four data and control kinds RFC 6455 defines (every other value fails the connection).
    enum Opcode: UInt8, Sendable {
        case continuation = 0x0
        case text = 0x1
        case binary = 0x2
        case close = 0x8
        case ping = 0x9
        case pong = 0xA

        /// Close, ping and pong: at most 125 payload bytes, never fragmented, allowed between a message's fragments.
        var isControl: Bool { rawValue & 0x8 != 0 }
    }

    /// Whether this is the last fragment of its message.
    var fin: Bool
    /// RSV1: "compressed" under permessage-deflate; no extension here gives it a meaning.
    var rsv1 = false
    var opcode: Opcode
    var payload: Data

    init(fin: Bool = true, rsv1: Bool = false, opcode: Opcode, payload: Data = Data()) {
        self.fin = fin
        self.rsv1 = rsv1
        self.opcode = opcode
        self.payload = payload
    }

    /// A close frame's payload: the code (two bytes, network order) then the reason, cut to fit 125 bytes on a
    /// UTF-8 boundary (a reason cut inside a code point would be invalid UTF-8 to the peer).
    static func close(code: UInt16, reason: Data = Data()) -> WebSocketFrame {
        var reason = reason.prefix(123)
        if !UTF8Validator.isValid(Data(reason)) {
            // Drop the cut code point's leading bytes; a reason that is not UTF-8 at all is dropped whole.
            while !reason.isEmpty && !UTF8Validator.isValid(Data(reason)) && reason.count > 119 {
                reason = reason.dropLast()
            }
            if !UTF8Validator.isValid(Data(reason)) { reason = Data() }
        }
        var payload = Data([UInt8(code >> 8), UInt8(code & 0xFF)])
        payload.append(contentsOf: reason)
        return WebSocketFrame(opcode: .close, payload: payload)
    }

    /// The frame as a client sends it (RFC 6455 5.3): masked with `maskKey`, which must be fresh and unpredictable
    /// for each frame so that a script on the page cannot choose the bytes an intermediary sees.
    func encoded(maskKey: UInt32) -> Data {
        let count = payload.count
        var out = Data(capacity: count + 14)
        out.append((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode.rawValue)
        if count < 126 {
            out.append(0x80 | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(0x80 | 126)
            out.append(UInt8(count >> 8))
            out.append(UInt8(count & 0xFF))
        } else {
            out.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: count >> shift)) }
        }
        let key = [
            UInt8(maskKey >> 24), UInt8((maskKey >> 16) & 0xFF), UInt8((maskKey >> 8) & 0xFF), UInt8(maskKey & 0xFF),
        ]
        out.append(contentsOf: key)
        let start = out.count
        out.append(payload)
        // Eight bytes at a time: the key repeats every four, so a word of it twice masks eight.
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { for index in 0..<8 { $0[index] = key[index & 3] } }
        out.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            let words = count / 8
            for index in 0..<words {
                let address = base + start + index * 8
                address.storeBytes(of: address.loadUnaligned(as: UInt64.self) ^ word, as: UInt64.self)
            }
            for index in (words * 8)..<count { buffer[start + index] ^= key[index & 3] }
        }
        return out
    }
}

/// Why a WebSocket connection fails (RFC 6455 7.1.7): the close code sent to the peer and a sentence for the user.
struct WebSocketFailure: Error, Sendable, Equatable {
    /// The status code of the close frame that fails the connection (1002, 1007, 1009, …).
    let code: UInt16
    let reason: String

    static func protocolError(_ reason: String) -> WebSocketFailure { WebSocketFailure(code: 1002, reason: reason) }
    static func invalidPayload(_ reason: String) -> WebSocketFailure { WebSocketFailure(code: 1007, reason: reason) }
    static func tooBig(_ reason: String) -> WebSocketFailure { WebSocketFailure(code: 1009, reason: reason) }
}
