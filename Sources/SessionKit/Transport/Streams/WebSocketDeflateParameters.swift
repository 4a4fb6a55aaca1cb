import Foundation

/// The permessage-deflate extension (RFC 7692) as negotiated in the opening handshake, I/O-free: what the client
/// offers, and the strict check of the server's `Sec-WebSocket-Extensions` answer.
///
/// The offer is `permessage-deflate; client_max_window_bits`: the server may compress with any window and may cap
/// ours. The answer must accept that offer and nothing else: one `permessage-deflate` element, with only the
/// parameters RFC 7692 lets a server answer this offer with, each at most once — `server_no_context_takeover` and
/// `client_no_context_takeover` without a value, `server_max_window_bits` and `client_max_window_bits` with a
/// window of 8 to 15 bits. Any other extension, parameter or value fails the handshake.
struct WebSocketDeflateParameters: Sendable, Equatable {
    /// The `Sec-WebSocket-Extensions` value the client sends.
    static let offer = "permessage-deflate; client_max_window_bits"

    /// The server resets its compression context after each message: the client's inflater must too.
    var serverNoContextTakeover = false
    /// The client must reset its compression context after each message.
    var clientNoContextTakeover = false
    /// The server's LZ77 window (bits): what the client inflates with.
    var serverMaxWindowBits = 15
    /// The largest LZ77 window (bits) the client may compress with.
    var clientMaxWindowBits = 15

    /// Checks the values of the server's `Sec-WebSocket-Extensions` fields: nil when it accepted no extension, the
    /// negotiated parameters, or why the answer is refused.
    static func negotiate(_ values: [String]) -> Result<WebSocketDeflateParameters?, NegotiationError> {
        let elements = values.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map {
            $0.trimmingCharacters(in: WebSocketHandshake.optionalWhitespace)
        }.filter { !$0.isEmpty }
        guard !elements.isEmpty else { return .success(nil) }
        guard elements.count == 1 else {
            return .failure(NegotiationError("The server accepted \(elements.count) extensions; one was offered."))
        }
        var parts = elements[0].split(separator: ";", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: WebSocketHandshake.optionalWhitespace)
        }
        let name = parts.removeFirst()
        guard name.asciiLowercased == "permessage-deflate" else {
            return .failure(NegotiationError("The server chose the extension \(name), which was not offered."))
        }
        var parameters = WebSocketDeflateParameters()
        var seen: Set<String> = []
        for part in parts {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = pair[0].trimmingCharacters(in: WebSocketHandshake.optionalWhitespace).asciiLowercased
            let hasValue = pair.count == 2
            let value = hasValue ? unquoted(pair[1].trimmingCharacters(in: WebSocketHandshake.optionalWhitespace)) : nil
            guard seen.insert(key).inserted else {
                return .failure(NegotiationError("The server's permessage-deflate repeats the parameter \(key)."))
            }
            switch key {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard !hasValue else {
                    return .failure(NegotiationError("The server's permessage-deflate gives \(key) a value."))
                }
                if key == "server_no_context_takeover" {
                    parameters.serverNoContextTakeover = true
                } else {
                    parameters.clientNoContextTakeover = true
                }
            case "server_max_window_bits", "client_max_window_bits":
                guard let value, let bits = windowBits(value) else {
                    return .failure(
                        NegotiationError("The server's permessage-deflate has \(part): a window of 8 to 15 bits."))
                }
                if key == "server_max_window_bits" {
                    parameters.serverMaxWindowBits = bits
                } else {
                    parameters.clientMaxWindowBits = bits
                }
            default:
                return .failure(
                    NegotiationError(
                        "The server's permessage-deflate has the parameter \(part), which was not offered."))
            }
        }
        return .success(parameters)
    }

    /// The value of a quoted-string (RFC 7692 allows one for the window sizes), or the token as it is; nil for a
    /// quoted string that is not closed.
    private static func unquoted(_ value: String) -> String? {
        guard value.hasPrefix("\"") else { return value }
        guard value.count >= 2, value.hasSuffix("\"") else { return nil }
        return String(value.dropFirst().dropLast())
    }

    /// A window size in bits: 8 to 15 in decimal without leading zeros.
    private static func windowBits(_ value: String) -> Int? {
        guard !value.isEmpty, value.count <= 2, value.allSatisfy({ $0.isASCII && $0.isNumber }),
            !value.hasPrefix("0"), let bits = Int(value), (8...15).contains(bits)
        else { return nil }
        return bits
    }

    /// Why an answer is refused: a sentence for the user.
    struct NegotiationError: Error, Sendable, Equatable {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
