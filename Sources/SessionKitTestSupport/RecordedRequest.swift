import Foundation

/// One request the loopback server received, as it arrived.
public struct RecordedRequest: Sendable {
    /// The method, e.g. `GET`.
    public let method: String
    /// The request target as sent, path and query.
    public let uri: String
    /// The header fields in arrival order.
    public let headers: [(name: String, value: String)]
    /// The body (only its first ``LoopbackServer/recordedBodyLimit`` bytes are kept).
    public let body: Data
    /// The full length of the body.
    public let bodyLength: Int
    /// Whether the request came over TLS.
    public let isTLS: Bool
    /// The protocol version it came in, e.g. `HTTP/1.1` or `HTTP/2.0`.
    public var httpVersion: String = "HTTP/1.1"
    /// When the server had read the whole request.
    public var receivedAt = Date()
    /// The client's IP address as the server saw it (nil on a Unix socket).
    public var peerAddress: String?

    /// The path without its query.
    public var path: String { String(uri.split(separator: "?", maxSplits: 1).first ?? "") }

    /// The W3C trace context the request carried (`traceparent`), if any.
    public var traceparent: String? { header("traceparent") }

    /// The first value of header `name`, matched without regard to case.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}
