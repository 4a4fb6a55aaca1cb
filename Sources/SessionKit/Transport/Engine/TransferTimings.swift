import Foundation

/// When the steps of one transfer happened, measured by libcurl on the curl transport: seconds from the start of
/// the transfer (URLSession on Linux never delivers `URLSessionTaskMetrics`).
public struct TransferTimings: Sendable, Equatable {
    /// Name resolution done.
    public let nameLookup: TimeInterval
    /// TCP connection established.
    public let connect: TimeInterval
    /// TLS handshake done (0 for plain HTTP or a reused connection).
    public let tlsHandshake: TimeInterval
    /// The first byte of the response arrived.
    public let firstByte: TimeInterval
    /// The transfer ended.
    public let total: TimeInterval
    /// Bytes of the response body received.
    public let bytesReceived: Int64
    /// Bytes of the request body sent.
    public let bytesSent: Int64
    /// Whether the transfer used a new connection (false: a kept-alive one was reused).
    public let newConnection: Bool
}
